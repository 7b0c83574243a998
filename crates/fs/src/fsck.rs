//! `wring fsck DIR`: check a store that is not mounted and report what is wrong.
//!
//! Mirrors `btrfs check` in read-only mode: the database's own integrity (redb's checksummed
//! pages), then every cross-reference — directory entries point at inodes of the right kind,
//! link counts match the names, every extent belongs to a file, lies within its size, passes
//! its checksum and decodes to its length, no two extents share bytes of the data file, and
//! the stored-bytes counters add up.

use std::collections::HashMap;
use std::path::Path;

use redb::ReadableTable;

use crate::error::FsError;
use crate::options::Options;
use crate::store::records::{stored, Inode, Kind, Stored};
use crate::store::{self, Store, DIRENTS, EXTENTS, INODES, ORPHANS, SYMLINKS};
use crate::volume::Volume;

/// What fsck found.
#[derive(Debug, Default)]
pub struct FsckReport {
    /// Inodes checked.
    pub inodes: u64,
    /// Extents checked.
    pub extents: u64,
    /// Problems, one line each.
    pub problems: Vec<String>,
}

/// Check the store in `dir` (which must not be mounted).
pub fn fsck(dir: &Path) -> Result<FsckReport, FsError> {
    let mut report = FsckReport::default();
    {
        let mut s = Store::open(dir)?;
        if !s.check_integrity()? {
            report
                .problems
                .push("database pages failed redb's integrity check (repaired)".into());
        }
    }
    let vol = Volume::open(dir, Options::default())?;
    let txn = vol.store.read()?;
    let inodes_t = txn.open_table(INODES)?;
    let mut inodes: HashMap<u64, Inode> = HashMap::new();
    for r in inodes_t.iter()? {
        let (k, v) = r?;
        match Inode::from_bytes(v.value()) {
            Some(i) => {
                inodes.insert(k.value(), i);
            }
            None => report
                .problems
                .push(format!("inode {}: damaged inode item", k.value())),
        }
    }
    report.inodes = inodes.len() as u64;
    if !inodes
        .get(&store::ROOT)
        .is_some_and(|i| i.kind == Kind::Dir)
    {
        report.problems.push("root directory is missing".into());
    }
    let mut links: HashMap<u64, u32> = HashMap::new();
    let mut subdirs: HashMap<u64, u32> = HashMap::new();
    let mut dir_parent: HashMap<u64, u64> = HashMap::new();
    for r in txn.open_table(DIRENTS)?.iter()? {
        let (k, v) = r?;
        let (parent, name) = k.value();
        let (ino, kind) = v.value();
        let name = String::from_utf8_lossy(name);
        match (inodes.get(&parent), inodes.get(&ino)) {
            (None, _) => report
                .problems
                .push(format!("entry '{name}' in missing directory {parent}")),
            (Some(p), _) if p.kind != Kind::Dir => report
                .problems
                .push(format!("entry '{name}' in non-directory {parent}")),
            (_, None) => report.problems.push(format!(
                "entry '{name}' in {parent} points at missing inode {ino}"
            )),
            (_, Some(i)) if i.kind as u8 != kind => report
                .problems
                .push(format!("entry '{name}' in {parent}: kind mismatch")),
            (_, Some(i)) => {
                *links.entry(ino).or_default() += 1;
                if i.kind == Kind::Dir {
                    *subdirs.entry(parent).or_default() += 1;
                    dir_parent.insert(ino, parent);
                }
            }
        }
    }
    for (dir, parent) in &dir_parent {
        // Stores made before parents were recorded have none: `..` then shows the root.
        let recorded = store::parent_of(&txn, *dir)?;
        if recorded != *parent && recorded != store::ROOT {
            report.problems.push(format!(
                "directory {dir}: `..` records {recorded}, its name is in {parent}"
            ));
        }
    }
    let orphans: Vec<u64> = txn
        .open_table(ORPHANS)?
        .iter()?
        .map(|r| r.map(|(k, _)| k.value()))
        .collect::<Result<_, _>>()?;
    for (ino, i) in &inodes {
        let names = links.get(ino).copied().unwrap_or(0);
        let expect = match i.kind {
            Kind::Dir => 2 + subdirs.get(ino).copied().unwrap_or(0),
            _ => names,
        };
        if *ino != store::ROOT && names == 0 && !orphans.contains(ino) {
            report
                .problems
                .push(format!("inode {ino}: no name refers to it"));
        } else if i.nlink != expect && !(i.kind == Kind::Dir && names > 1) {
            report.problems.push(format!(
                "inode {ino}: link count {} but {} expected",
                i.nlink, expect
            ));
        }
        if i.kind == Kind::Dir && *ino != store::ROOT && names > 1 {
            report
                .problems
                .push(format!("directory {ino} has {names} names"));
        }
    }
    let links_t = txn.open_table(SYMLINKS)?;
    for (ino, i) in &inodes {
        if i.kind == Kind::Symlink && links_t.get(*ino)?.is_none() {
            report
                .problems
                .push(format!("symlink {ino}: target missing"));
        }
    }
    let mut disk: HashMap<u64, u64> = HashMap::new();
    let mut used = 0u64;
    let mut placed = Vec::new();
    for r in txn.open_table(EXTENTS)?.iter()? {
        let (k, v) = r?;
        let (ino, idx) = k.value();
        report.extents += 1;
        let where_ = stored(v.value());
        if let Some(Stored::External(at, len)) = where_ {
            placed.push((at, len, ino, idx));
        }
        let stored = where_.map_or(0, |s| s.len());
        used += stored;
        let Some(i) = inodes.get(&ino) else {
            report
                .problems
                .push(format!("extent {idx} of missing inode {ino}"));
            continue;
        };
        *disk.entry(ino).or_default() += stored;
        let e = i.extent_size as u64;
        let offset = idx * e;
        match vol.decode_extent(ino, idx, offset, v.value()) {
            Ok(d) if e == 0 || offset + d.len() as u64 > i.size.max(offset) && offset >= i.size => {
                report.problems.push(format!(
                    "inode {ino}: extent at offset {offset} lies beyond the size {}",
                    i.size
                ))
            }
            Ok(d) if offset + d.len() as u64 > i.size => report.problems.push(format!(
                "inode {ino}: extent at offset {offset} runs past the size {}",
                i.size
            )),
            Ok(_) => {}
            Err(e) => report
                .problems
                .push(format!("{}: offset {offset}: {e}", vol.path_of(ino))),
        }
    }
    placed.sort_unstable();
    for w in placed.windows(2) {
        let ((a, alen, aino, aidx), (b, _, bino, bidx)) = (w[0], w[1]);
        if a + alen > b {
            report.problems.push(format!(
                "extent {aidx} of inode {aino} and extent {bidx} of inode {bino} share bytes \
                 of the data file at {b}"
            ));
        }
    }
    for (ino, i) in &inodes {
        let d = disk.get(ino).copied().unwrap_or(0);
        if i.disk != d {
            report.problems.push(format!(
                "inode {ino}: records {} stored bytes, extents hold {d}",
                i.disk
            ));
        }
    }
    let counted = store::counter(&txn, "used")?;
    if counted != used {
        report.problems.push(format!(
            "store counts {counted} stored bytes, extents hold {used}"
        ));
    }
    Ok(report)
}
