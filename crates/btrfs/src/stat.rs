//! A compsize-style report of how files are stored: per compression type, the disk usage, the
//! uncompressed size and the referenced size, plus what compsize does not show — extent
//! counts per algorithm and a histogram of per-extent compression ratios.
//!
//! Mirrors compsize (btrfs-compsize, also merged into btrfs-progs as `btrfs filesystem du`'s
//! cousin): every `EXTENT_DATA` item of every file, read with tree search
//! ([`crate::search`]); a data extent's disk and uncompressed bytes count once however many
//! items reference it (compsize keys them by disk_bytenr), referenced bytes count per item;
//! inline items count their stored bytes as disk usage; holes count nothing; preallocated
//! extents are a type of their own ("prealloc").

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::path::PathBuf;

use crate::error::BtrfsError;
use crate::search::{file_extent_items, DiskCompression, FileExtentItem, ItemKind};
use crate::walk::{walk, Found};
use std::os::unix::fs::MetadataExt;

/// A row's type: a compression type, or preallocated space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Data stored with this compression (none included).
    Data(DiskCompression),
    /// `BTRFS_FILE_EXTENT_PREALLOC`.
    Prealloc,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Data(c) => write!(f, "{c}"),
            Kind::Prealloc => f.write_str("prealloc"),
        }
    }
}

/// compsize's three columns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes on disk ("Disk Usage").
    pub disk: u64,
    /// Bytes once decompressed ("Uncompressed").
    pub uncompressed: u64,
    /// File bytes that refer to them ("Referenced").
    pub referenced: u64,
}

impl Usage {
    fn add(&mut self, other: Usage) {
        self.disk += other.disk;
        self.uncompressed += other.uncompressed;
        self.referenced += other.referenced;
    }

    /// compsize's "Perc": disk * 100 / uncompressed, truncated.
    pub fn percent(&self) -> u64 {
        (self.disk * 100)
            .checked_div(self.uncompressed)
            .unwrap_or(0)
    }

    /// uncompressed / disk.
    pub fn ratio(&self) -> f64 {
        if self.disk == 0 {
            0.0
        } else {
            self.uncompressed as f64 / self.disk as f64
        }
    }
}

/// Buckets of the ratio histogram: disk/uncompressed in tenths, the last for ≥ 100%.
pub const HISTOGRAM_BUCKETS: usize = 11;

/// The accumulated report.
#[derive(Debug, Clone, Default)]
pub struct StatReport {
    /// Files looked at.
    pub files: u64,
    /// Distinct regular (and prealloc) data extents.
    pub extents: u64,
    /// Items referencing them.
    pub refs: u64,
    /// Inline items.
    pub inline: u64,
    /// Usage per type.
    pub by_kind: BTreeMap<Kind, Usage>,
    /// Distinct extents per type (inline items count as extents of their type here).
    pub extents_by_kind: BTreeMap<Kind, u64>,
    /// Distinct non-prealloc extents by disk/uncompressed percentage, in 10% buckets.
    pub histogram: [u64; HISTOGRAM_BUCKETS],
    seen: HashSet<u64>,
}

impl StatReport {
    /// Account one file's items.
    pub fn add_file(&mut self, items: &[FileExtentItem]) {
        self.files += 1;
        for item in items {
            self.add_item(item);
        }
    }

    fn add_item(&mut self, item: &FileExtentItem) {
        let kind = match item.kind {
            ItemKind::Prealloc => Kind::Prealloc,
            _ => Kind::Data(item.compression),
        };
        match item.kind {
            ItemKind::Inline { len } => {
                self.inline += 1;
                *self.extents_by_kind.entry(kind).or_default() += 1;
                self.by_kind.entry(kind).or_default().add(Usage {
                    disk: len,
                    uncompressed: item.ram_bytes,
                    referenced: item.ram_bytes,
                });
            }
            ItemKind::Regular | ItemKind::Prealloc | ItemKind::Unknown(_) => {
                if item.disk_bytenr == 0 {
                    return; // a hole
                }
                let mut usage = Usage {
                    referenced: item.num_bytes,
                    ..Usage::default()
                };
                if self.seen.insert(item.disk_bytenr) {
                    usage.disk = item.disk_num_bytes;
                    usage.uncompressed = item.ram_bytes;
                    self.extents += 1;
                    *self.extents_by_kind.entry(kind).or_default() += 1;
                    if kind != Kind::Prealloc && item.ram_bytes > 0 {
                        let tenth = (item.disk_num_bytes * 10 / item.ram_bytes) as usize;
                        self.histogram[tenth.min(HISTOGRAM_BUCKETS - 1)] += 1;
                    }
                }
                self.refs += 1;
                self.by_kind.entry(kind).or_default().add(usage);
            }
        }
    }

    /// The TOTAL row.
    pub fn total(&self) -> Usage {
        let mut t = Usage::default();
        for u in self.by_kind.values() {
            t.add(*u);
        }
        t
    }

    /// The report as text: compsize's table (sizes in compsize's units, or bytes), then extent
    /// counts and the ratio histogram.
    pub fn render(&self, bytes: bool) -> String {
        let size = |x: u64| {
            if bytes {
                x.to_string()
            } else {
                human_bytes(x)
            }
        };
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Processed {} file{}, {} regular extents ({} refs), {} inline.",
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.extents,
            self.refs,
            self.inline
        );
        let _ = writeln!(
            s,
            "{:<10} {:<8} {:<12} {:<12} {:<12} {:>8}",
            "Type", "Perc", "Disk Usage", "Uncompressed", "Referenced", "Extents"
        );
        let total = self.total();
        let row = |s: &mut String, name: &str, u: &Usage, n: u64| {
            let _ = writeln!(
                s,
                "{:<10} {:<8} {:<12} {:<12} {:<12} {:>8}",
                name,
                format!("{:3}%", u.percent()),
                size(u.disk),
                size(u.uncompressed),
                size(u.referenced),
                n
            );
        };
        row(
            &mut s,
            "TOTAL",
            &total,
            self.extents_by_kind.values().sum::<u64>(),
        );
        for (kind, u) in &self.by_kind {
            if u.uncompressed == 0 {
                continue;
            }
            let n = self.extents_by_kind.get(kind).copied().unwrap_or(0);
            row(&mut s, &kind.to_string(), u, n);
        }
        let max = self.histogram.iter().copied().max().unwrap_or(0);
        if max > 0 {
            let _ = writeln!(s, "\nExtents by disk/uncompressed size:");
            for (i, &n) in self.histogram.iter().enumerate() {
                let label = if i + 1 == HISTOGRAM_BUCKETS {
                    "  100%    ".to_string()
                } else {
                    format!("{:3}-{:3}% ", i * 10, i * 10 + 9)
                };
                let bar = "#".repeat(((n * 40).div_ceil(max)) as usize);
                let _ = writeln!(s, "  {label} {n:>8} {bar}");
            }
        }
        s
    }
}

/// compsize's human_bytes(): a unit step only from 10 KiB up, one decimal between 1 and 10
/// units.
pub fn human_bytes(mut x: u64) -> String {
    const UNITS: &[u8] = b"BKMGTPE";
    let mut u = 0;
    while x >= 10240 {
        u += 1;
        x >>= 10;
    }
    if x >= 1024 {
        format!(
            " {}.{}{}",
            x >> 10,
            x * 10 / 1024 % 10,
            UNITS[u + 1] as char
        )
    } else {
        format!("{:4}{}", x, UNITS[u] as char)
    }
}

/// The items of one open file.
pub fn file_items(file: &File) -> Result<Vec<FileExtentItem>, BtrfsError> {
    let ino = file
        .metadata()
        .map_err(|e| BtrfsError::io(crate::error::Op::Open, 0, e))?
        .ino();
    file_extent_items(file, ino)
}

/// Report on every regular file under `paths` (on one btrfs each); also returns what the walk
/// passed over and files that could not be read.
pub fn stat_paths(paths: &[PathBuf]) -> Result<(StatReport, Vec<(PathBuf, String)>), BtrfsError> {
    let mut report = StatReport::default();
    let mut passed = Vec::new();
    for found in walk(paths)? {
        match found {
            Found::File(path, _) => {
                let items = File::open(&path)
                    .map_err(|source| BtrfsError::Path {
                        path: path.clone(),
                        source,
                    })
                    .and_then(|f| file_items(&f));
                match items {
                    Ok(items) => report.add_file(&items),
                    Err(e @ BtrfsError::NeedsCapSysAdmin { .. }) => return Err(e),
                    Err(e) => passed.push((path, e.to_string())),
                }
            }
            Found::Passed(path, why) => passed.push((path, why.to_string())),
        }
    }
    Ok((report, passed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(file_offset: u64, bytenr: u64, disk: u64, ram: u64, num: u64, c: u8) -> FileExtentItem {
        FileExtentItem {
            file_offset,
            generation: 1,
            ram_bytes: ram,
            compression: DiskCompression::from_raw(c),
            encryption: 0,
            kind: ItemKind::Regular,
            disk_bytenr: bytenr,
            disk_num_bytes: disk,
            offset: 0,
            num_bytes: num,
        }
    }

    #[test]
    fn shared_extents_count_once_and_holes_not_at_all() {
        let mut r = StatReport::default();
        r.add_file(&[
            reg(0, 1 << 20, 8192, 131072, 131072, 3),
            reg(131072, 0, 0, 65536, 65536, 0), // hole
            reg(196608, 1 << 21, 65536, 65536, 65536, 0),
        ]);
        r.add_file(&[reg(0, 1 << 20, 8192, 131072, 65536, 3)]); // reflink of part
        let t = r.total();
        assert_eq!(t.disk, 8192 + 65536);
        assert_eq!(t.uncompressed, 131072 + 65536);
        assert_eq!(t.referenced, 131072 + 65536 + 65536);
        assert_eq!((r.files, r.extents, r.refs, r.inline), (2, 2, 3, 0));
        assert_eq!(r.histogram[0], 1); // 8192/131072 = 6%
        assert_eq!(r.histogram[HISTOGRAM_BUCKETS - 1], 1);
        let text = r.render(true);
        assert!(text.contains("TOTAL"), "{text}");
        assert!(text.contains("zstd"), "{text}");
    }

    #[test]
    fn human_bytes_follows_compsize() {
        assert_eq!(human_bytes(0), "   0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1024), " 1.0K");
        assert_eq!(human_bytes(10240), "  10K");
        assert_eq!(human_bytes(5 << 20), " 5.0M");
    }
}
