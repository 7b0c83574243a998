//! compsize's report for a file or a tree (type, perc, disk usage, uncompressed, referenced),
//! plus the per-level breakdown compsize cannot give because btrfs does not record levels.
//!
//! Mirrors compsize (btrfs-progs' companion tool) on the TOTAL and per-type rows, and sees what
//! compsize run by the same user would: only files it may read, under directories it may list
//! and search (root sees everything).
//!
//! On a store whose extents are in a bucket, one more line: the bytes these files keep in
//! segment objects against their size, and what the whole bucket holds (live and dead).
//!
//! The same figures print as JSON for `wring stat --json` (byte counts named `…_bytes`).
//!
//! Also statfs: what `df` shows of the mount (btrfs_statfs), the blocks the extents really
//! store against what the store's filesystem has left.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::error::FsError;
use crate::store::records::{stored, stored_len, Encoding, Inode, Kind, Stored};
use crate::store::{self, DIRENTS, EXTENTS, INODES, XATTRS};
use crate::volume::names::acl::{self, Acl};
use crate::volume::Caller;
use crate::volume::Volume;

/// Bytes of one row. JSON (`wring stat --json`) names the byte counts `…_bytes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Stored bytes.
    #[serde(rename = "disk_bytes")]
    pub disk: u64,
    /// Decoded bytes.
    #[serde(rename = "uncompressed_bytes")]
    pub uncompressed: u64,
    /// Bytes files refer to: a shared extent counts once per item that names it (compsize's
    /// "Referenced"), where disk usage and uncompressed count it once.
    #[serde(rename = "referenced_bytes")]
    pub referenced: u64,
    /// Extents (a shared one once).
    pub extents: u64,
    /// Extent items, each reference to a shared extent counted.
    pub refs: u64,
}

impl Usage {
    /// One extent item: `disk` stored bytes decoding to `ram`; `first` when no item added
    /// before named the same stored bytes.
    fn add(&mut self, disk: u64, ram: u64, first: bool) {
        if first {
            self.disk += disk;
            self.uncompressed += ram;
            self.extents += 1;
        }
        self.referenced += ram;
        self.refs += 1;
    }
}

/// What the files of a report keep in the bucket, and what the bucket holds in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BucketUsage {
    /// Stored bytes of these files' extents kept in segment objects (not inline).
    #[serde(rename = "files_bytes")]
    pub files: u64,
    /// Bytes of every segment object in the bucket.
    #[serde(rename = "bucket_bytes")]
    pub bucket: u64,
    /// Segment objects in the bucket.
    pub segments: u64,
    /// Live extent bytes of the whole filesystem.
    #[serde(rename = "live_bytes")]
    pub live: u64,
    /// Bytes in the bucket no extent uses (compaction reclaims them).
    #[serde(rename = "dead_bytes")]
    pub dead: u64,
    /// Bytes of segments held in the local cache.
    #[serde(rename = "cache_bytes")]
    pub cache: u64,
    /// Bytes not in the bucket yet (the open segment and the upload queue).
    #[serde(rename = "pending_bytes")]
    pub pending: u64,
    /// Uploads running now.
    #[serde(rename = "uploads_in_flight")]
    pub uploads: u64,
}

/// The report: its text (compsize's table, then `raw:` lines) and its JSON (`wring stat
/// --json`) both come from these figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Regular files seen.
    pub files: u64,
    /// Every extent.
    pub total: Usage,
    /// Extents whose stored bytes are kept in their item (compsize's "inline").
    #[serde(rename = "inline_extents")]
    pub inline: u64,
    /// Per type (`none`, `zstd`, `zlib`, `lzo`, …).
    pub by_type: BTreeMap<String, Usage>,
    /// Per algorithm and level (`zstd:3`).
    pub by_level: BTreeMap<String, Usage>,
    /// Extents compressed with each of the store's dictionaries, by id (`dict=auto`).
    pub by_dict: BTreeMap<u8, Usage>,
    /// On a store whose extents are in a bucket.
    pub bucket: Option<BucketUsage>,
}

impl Report {
    /// The JSON form (`wring stat --json`).
    pub fn json(&self) -> String {
        // Numbers and maps keyed by strings or small integers: nothing here can fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

pub(crate) fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n}B")
    } else {
        format!("{v:.1}{}", U[i])
    }
}

fn row(f: &mut fmt::Formatter<'_>, name: &str, u: &Usage) -> fmt::Result {
    let perc = match u.uncompressed {
        0 => 0,
        n => (u.disk * 100).div_ceil(n),
    };
    writeln!(
        f,
        "{name:<10} {perc:>3}% {:>12} {:>12} {:>12}",
        human(u.disk),
        human(u.uncompressed),
        human(u.referenced)
    )
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Processed {} files, {} regular extents ({} refs), {} inline.",
            self.files,
            self.total.extents - self.inline,
            self.total.refs - self.inline,
            self.inline
        )?;
        writeln!(f, "Type       Perc     Disk Usage Uncompressed Referenced")?;
        row(f, "TOTAL", &self.total)?;
        for (k, u) in &self.by_type {
            row(f, k, u)?;
        }
        writeln!(f, "Level      Perc     Disk Usage Uncompressed Referenced")?;
        for (k, u) in &self.by_level {
            row(f, k, u)?;
        }
        if !self.by_dict.is_empty() {
            writeln!(f, "Dictionary Perc     Disk Usage Uncompressed Referenced")?;
            for (id, u) in &self.by_dict {
                row(f, &format!("dict {id}"), u)?;
            }
        }
        writeln!(
            f,
            "raw: disk={} uncompressed={} referenced={} extents={} refs={}",
            self.total.disk,
            self.total.uncompressed,
            self.total.referenced,
            self.total.extents,
            self.total.refs
        )?;
        if let Some(b) = &self.bucket {
            let perc = match self.total.uncompressed {
                0 => 0,
                n => (b.files * 100).div_ceil(n),
            };
            writeln!(
                f,
                "Bucket     {perc:>3}% {:>12} {:>12}   (these files' extents in segment \
                 objects against their size; the whole bucket: {} in {} segments, {} live, \
                 {} dead; {} cached here, {} waiting in {} uploads)",
                human(b.files),
                human(self.total.uncompressed),
                human(b.bucket),
                b.segments,
                human(b.live),
                human(b.dead),
                human(b.cache),
                human(b.pending),
                b.uploads
            )?;
            writeln!(
                f,
                "raw bucket: files={} bucket={} segments={} live={} dead={} cache={} \
                 pending={} uploads_in_flight={}",
                b.files, b.bucket, b.segments, b.live, b.dead, b.cache, b.pending, b.uploads
            )?;
        }
        Ok(())
    }
}

/// Who asks for a report that is not root: a user and the groups it is in.
pub(crate) struct Viewer {
    uid: u32,
    groups: Vec<u32>,
}

impl Viewer {
    pub(crate) fn of(caller: Caller) -> Viewer {
        Viewer {
            uid: caller.uid,
            groups: caller.groups(),
        }
    }

    /// generic_permission() without capabilities: whether the viewer gets every bit of `want`
    /// (rwx) on `inode`, by its access ACL when it has one, else by its mode.
    pub(crate) fn may(&self, inode: &Inode, acl: Option<Acl>, want: u16) -> bool {
        let in_group = |g: u32| self.groups.contains(&g);
        if let Some(acl) = acl {
            return acl.permits(self.uid, in_group, (inode.uid, inode.gid), want);
        }
        let shift = if inode.uid == self.uid {
            6
        } else if in_group(inode.gid) {
            3
        } else {
            0
        };
        (inode.perm >> shift) as u16 & want == want
    }
}

const MAY_READ: u16 = 0o4;
const MAY_EXEC: u16 = 0o1;

impl Volume {
    /// The report for `ino` (a file, or every file under a directory), as root sees it: every
    /// file, once all writeback is done.
    pub fn stat_report(&self, ino: u64) -> Result<Report, FsError> {
        // Report what is stored: write back what is still dirty first.
        self.wait_writeback(None);
        let files = self.files_under(ino, None)?;
        self.report(&files)
    }

    /// The report for `ino` as `caller` may see it, as compsize run by that user would: root
    /// sees every file; anyone else only the files it may read under directories it may list
    /// and search, and waits only for their writeback (as its fsync of them would).
    pub fn stat_report_for(&self, ino: u64, caller: Caller) -> Result<Report, FsError> {
        if caller.uid == 0 {
            return self.stat_report(ino);
        }
        let files = self.files_under(ino, Some(&Viewer::of(caller)))?;
        for &f in &files {
            self.wait_writeback(Some(f));
        }
        self.report(&files)
    }

    /// The regular files at or under `ino` that `viewer` (everyone when `None`) may see.
    fn files_under(&self, ino: u64, viewer: Option<&Viewer>) -> Result<Vec<u64>, FsError> {
        // The walk reads directories from one snapshot: delayed entries are written first.
        self.store.flush()?;
        let (txn, delayed) = self.store.snapshot()?;
        let inodes = txn.open_table(INODES)?;
        let dirents = txn.open_table(DIRENTS)?;
        let xattrs = txn.open_table(XATTRS)?;
        let may = |cur: u64, inode: &Inode, want: u16| -> Result<bool, FsError> {
            let Some(v) = viewer else {
                return Ok(true);
            };
            let acl = xattrs.get((cur, acl::ACCESS))?;
            let acl = acl.and_then(|a| Acl::parse(a.value()).ok());
            Ok(v.may(inode, acl, want))
        };
        let mut files = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![ino];
        while let Some(cur) = stack.pop() {
            if !seen.insert(cur) {
                continue;
            }
            // A delayed chmod/chown (see crate::volume::delayed) decides who may look, as it does
            // for every other caller.
            let inode = match delayed.get(&cur) {
                Some(i) => i.clone(),
                None => store::get_inode(&inodes, cur)?,
            };
            match inode.kind {
                Kind::Dir if may(cur, &inode, MAY_READ | MAY_EXEC)? => {
                    for r in dirents.range((cur, &[][..])..(cur + 1, &[][..]))? {
                        stack.push(r?.1.value().0);
                    }
                }
                Kind::File if may(cur, &inode, MAY_READ)? => files.push(cur),
                _ => {}
            }
        }
        Ok(files)
    }

    /// The report on `files` as the last commit has them (one removed meanwhile is left out).
    fn report(&self, files: &[u64]) -> Result<Report, FsError> {
        let txn = self.store.read()?;
        let inodes = txn.open_table(INODES)?;
        let extents = txn.open_table(EXTENTS)?;
        let mut report = Report::default();
        let mut in_bucket = 0u64;
        let mut seen = std::collections::HashSet::new();
        for &cur in files {
            if inodes.get(cur)?.is_none() {
                continue;
            }
            report.files += 1;
            for r in extents.range((cur, 0)..=(cur, u64::MAX))? {
                let (_, v) = r?;
                let v = v.value();
                let h = Volume::header(cur, 0, v)?;
                let disk = stored_len(v);
                let first = match stored(v) {
                    Ok(Stored::Inline(_)) => {
                        report.inline += 1;
                        true
                    }
                    Ok(Stored::External(at, len)) => {
                        let first = seen.insert(at);
                        if first {
                            in_bucket += len;
                        }
                        first
                    }
                    Err(_) => true,
                };
                let ram = h.ram_len as u64;
                let (ty, level) = match h.encoding {
                    Encoding::Raw => ("none".to_string(), "none".to_string()),
                    Encoding::Compressed(a, l) if a.has_levels() => {
                        (a.name().to_string(), format!("{a}:{l}"))
                    }
                    Encoding::Compressed(a, _) => (a.name().to_string(), a.name().to_string()),
                };
                report.total.add(disk, ram, first);
                report.by_type.entry(ty).or_default().add(disk, ram, first);
                report
                    .by_level
                    .entry(level)
                    .or_default()
                    .add(disk, ram, first);
                if h.dict != 0 {
                    report
                        .by_dict
                        .entry(h.dict)
                        .or_default()
                        .add(disk, ram, first);
                }
            }
        }
        if let Some(objects) = self.store.objects() {
            let st = objects.stats();
            report.bucket = Some(BucketUsage {
                files: in_bucket,
                bucket: st.bucket_bytes,
                segments: st.bucket_segments,
                live: st.live_bytes,
                dead: st.dead_bytes,
                cache: st.cache_bytes,
                pending: st.pending_bytes,
                uploads: st.uploads_in_flight,
            });
        }
        Ok(report)
    }
}

impl Volume {
    /// (total blocks, free blocks, inodes) in 4 KiB blocks: used is what the extents really
    /// store; free is what the store directory's filesystem has left.
    pub fn statfs(&self) -> Result<(u64, u64, u64), FsError> {
        let (used, inodes) = self.store_usage()?;
        // Net of reservations, the global reserve and what the next commit gives back (as
        // btrfs's df shows free space net of its reservations).
        let free = self.store.space_report().available;
        let used_blocks = used.div_ceil(4096);
        Ok((used_blocks + free / 4096, free / 4096, inodes))
    }

    /// (bytes the extents store, inodes) as the last commit counted them.
    pub fn store_usage(&self) -> Result<(u64, u64), FsError> {
        // Files removed and forgotten by the kernel: their space shows at once.
        self.purge_forgotten();
        // Delayed creates count once written.
        self.store.flush()?;
        let txn = self.store.read()?;
        let used = store::counter(&txn, "used")?;
        let inodes = store::counter(&txn, "inodes")? + 1;
        Ok((used, inodes))
    }
}

#[cfg(test)]
mod tests {
    use super::{Viewer, MAY_EXEC, MAY_READ};
    use crate::store::records::{Inode, Kind};
    use crate::store::{Store, ROOT};
    use crate::volume::names::acl::Acl;
    use crate::volume::NewInode;
    use crate::{Options, Volume};

    /// An ACL's xattr form from (tag, perm, id) entries.
    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        let mut b = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&perm.to_le_bytes());
            b.extend_from_slice(&id.to_le_bytes());
        }
        Acl::parse(&b).unwrap()
    }

    /// posix_acl_permission's order: owner, named user (masked), then the groups (masked; a
    /// matching group that denies leaves "other" out), then other; without an ACL, the mode.
    #[test]
    fn viewers_get_what_modes_and_acls_grant() {
        let dir = Inode::new(Kind::Dir, 0o755, 0, 0);
        let rx = MAY_READ | MAY_EXEC;
        let (nobody, member) = (
            Viewer {
                uid: 65534,
                groups: vec![65534],
            },
            Viewer {
                uid: 65534,
                groups: vec![65534, 7],
            },
        );
        assert!(nobody.may(&dir, None, rx));
        assert!(!nobody.may(&Inode::new(Kind::Dir, 0o750, 0, 0), None, rx));
        assert!(member.may(&Inode::new(Kind::Dir, 0o750, 0, 7), None, rx));
        // user:65534:--- denies what "other" would give.
        let named = acl(&[
            (0x01, 7, 0),
            (0x02, 0, 65534),
            (0x04, 5, 0),
            (0x10, 5, 0),
            (0x20, 5, 0),
        ]);
        assert!(!nobody.may(&dir, Some(named), rx));
        // user:65534:r-x masked to r--.
        let masked = acl(&[
            (0x01, 7, 0),
            (0x02, 5, 65534),
            (0x04, 5, 0),
            (0x10, 4, 0),
            (0x20, 0, 0),
        ]);
        assert!(!nobody.may(&dir, Some(masked.clone()), rx));
        assert!(nobody.may(&dir, Some(masked), MAY_READ));
        // group:7:--- found, so "other" (r-x) does not apply to a member; it does to nobody.
        let group = acl(&[
            (0x01, 7, 0),
            (0x04, 0, 0),
            (0x08, 0, 7),
            (0x10, 5, 0),
            (0x20, 5, 0),
        ]);
        assert!(!member.may(&dir, Some(group.clone()), rx));
        assert!(nobody.may(&dir, Some(group), rx));
    }

    /// Extents small enough to live in their item are counted as compsize's "inline", the
    /// others as regular extents.
    #[test]
    fn inline_and_regular_extents_are_counted_apart() {
        let dir = std::env::temp_dir().join(format!("wring-stat-inline-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        let (small, _) = vol.create(ROOT, b"small", NewInode::file(0o644)).unwrap();
        vol.write(small, 0, b"a few bytes", None).unwrap();
        let (big, _) = vol.create(ROOT, b"big", NewInode::file(0o644)).unwrap();
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        vol.write(big, 0, &data, None).unwrap();
        let r = vol.stat_report(ROOT).unwrap();
        assert_eq!((r.files, r.inline, r.total.extents), (2, 1, 4));
        let text = r.to_string();
        assert!(
            text.starts_with("Processed 2 files, 3 regular extents (3 refs), 1 inline."),
            "{text}"
        );
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
