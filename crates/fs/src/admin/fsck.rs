//! `wring fsck DIR`: check a store that is not mounted and report what is wrong.
//!
//! Mirrors `btrfs check` in read-only mode: the database's own integrity (redb's checksummed
//! pages), then every cross-reference — directory entries point at inodes of the right kind,
//! link counts match the names, every extent belongs to a file, lies within its size, passes
//! its checksum and decodes to its length (with its dictionary, which must exist and digest),
//! no two extents share bytes of the data file, and the stored-bytes counters add up. Like `btrfs check`, it writes nothing: the store is
//! opened with [`Store::open_for_check`].
//!
//! A store whose extents are in a bucket (`mkfs --data`) gets the object store's side of
//! that check too, as `btrfs check --check-data-csum` reads every data block: each segment
//! object an extent names is fetched once and verified whole (trailer, index, every extent's
//! crc32), and each extent's (offset, length) must be one of that segment's index entries.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use redb::ReadableTable;

use crate::error::FsError;
use crate::store::records::{stored, Inode, Kind, Stored};
use crate::store::{self, Access, DataSpec, DIRENTS, EXTENTS, INODES, ORPHANS, SYMLINKS};
use crate::volume::Volume;
use wring_objstore::segment::Entry;
use wring_objstore::{Addr, ObjStore};

/// What fsck found.
#[derive(Debug, Default)]
pub struct FsckReport {
    /// Inodes checked.
    pub inodes: u64,
    /// Extents checked.
    pub extents: u64,
    /// Dictionaries checked.
    pub dicts: u64,
    /// Problems, one line each.
    pub problems: Vec<String>,
    /// Things worth knowing that are not problems, one line each.
    pub notes: Vec<String>,
}

/// Check the store in `dir` (which must not be mounted) without changing it.
pub fn fsck(dir: &Path) -> Result<FsckReport, FsError> {
    fsck_with(dir, &Access::default())
}

/// [`fsck`] with the credentials a store whose extents are in a bucket needs.
pub fn fsck_with(dir: &Path, access: &Access) -> Result<FsckReport, FsError> {
    let mut report = FsckReport::default();
    let mut vol = Volume::open_for_check_with(dir, access)?;
    if vol.store().repaired() {
        report
            .notes
            .push("the store was not closed cleanly: checked what the next mount recovers".into());
    }
    if !vol.check_integrity()? {
        report
            .problems
            .push("database pages failed redb's integrity check".into());
    }
    check(&vol, &mut report)?;
    Ok(report)
}

/// Check the cross-references of an open volume, adding to `report`.
pub(crate) fn check(vol: &Volume, report: &mut FsckReport) -> Result<(), FsError> {
    let txn = vol.store().read()?;
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
            // An orphan (a directory too, removed while open) has no links.
            _ if names == 0 && orphans.contains(ino) => 0,
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
    // Every dictionary digests (the extents that name one are decoded with it below).
    for (key, bytes) in crate::store::dicts::all(&txn)? {
        report.dicts += 1;
        if let Err(e) = crate::store::dicts::record(key, &bytes) {
            report.problems.push(e);
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
        used = used.saturating_add(stored);
        let Some(i) = inodes.get(&ino) else {
            report
                .problems
                .push(format!("extent {idx} of missing inode {ino}"));
            continue;
        };
        let d = disk.entry(ino).or_default();
        *d = d.saturating_add(stored);
        let e = i.extent_size as u64;
        let Some(offset) = idx.checked_mul(e) else {
            report.problems.push(format!(
                "inode {ino}: extent index {idx} lies beyond any file size"
            ));
            continue;
        };
        match vol.decode_extent(ino, idx, offset, v.value()) {
            Ok(d) if e != 0 && d.len() as u64 > e => report.problems.push(format!(
                "{}: offset {offset}: extent header gives {} bytes, more than the file's \
                 {e}-byte extents",
                vol.path_of(ino),
                d.len()
            )),
            Ok(d)
                if e == 0
                    || offset.saturating_add(d.len() as u64) > i.size.max(offset)
                        && offset >= i.size =>
            {
                report.problems.push(format!(
                    "inode {ino}: extent at offset {offset} lies beyond the size {}",
                    i.size
                ))
            }
            Ok(d) if offset.saturating_add(d.len() as u64) > i.size => {
                report.problems.push(format!(
                    "inode {ino}: extent at offset {offset} runs past the size {}",
                    i.size
                ))
            }
            Ok(_) => {}
            Err(e) => report
                .problems
                .push(format!("{}: offset {offset}: {e}", vol.path_of(ino))),
        }
    }
    placed.sort_unstable();
    if let Some(objects) = vol.store().objects() {
        let url = match vol.store().data_spec() {
            DataSpec::Objects(o) => o.url.clone(),
            DataSpec::Local => String::new(),
        };
        check_objects(vol, objects, &url, &placed, report);
    }
    for w in placed.windows(2) {
        let ((a, alen, aino, aidx), (b, _, bino, bidx)) = (w[0], w[1]);
        if a.checked_add(alen).is_none_or(|end| end > b) {
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
    let next_ino = store::counter(&txn, "next_ino")?;
    let top = inodes.keys().copied().max().unwrap_or(store::ROOT);
    if next_ino <= top {
        report.problems.push(format!(
            "the next inode number {next_ino} is not above the largest inode {top}"
        ));
    }
    let counted = store::counter(&txn, "used")?;
    if counted != used {
        report.problems.push(format!(
            "store counts {counted} stored bytes, extents hold {used}"
        ));
    }
    Ok(())
}

/// The object name of segment `seg` of the filesystem at `url` (s3://BUCKET/PREFIX).
fn object_name(url: &str, seg: u32) -> String {
    format!("{}/seg/{seg:016x}", url.trim_end_matches('/'))
}

/// Every segment the extents name, fetched and verified once; every extent found in its
/// segment's index. `placed` holds (address, length, inode, extent index).
fn check_objects(
    vol: &Volume,
    objects: &ObjStore,
    url: &str,
    placed: &[(u64, u64, u64, u64)],
    report: &mut FsckReport,
) {
    let mut by_segment: BTreeMap<u32, Vec<(Addr, u64, u64, u64)>> = BTreeMap::new();
    for &(at, len, ino, idx) in placed {
        let addr = Addr::from_raw(at);
        by_segment
            .entry(addr.segment())
            .or_default()
            .push((addr, len, ino, idx));
    }
    let mut segments = 0u64;
    for (seg, extents) in by_segment {
        segments += 1;
        let object = object_name(url, seg);
        let entries = match objects.verify_segment(seg) {
            Ok(entries) => entries,
            Err(e) => {
                for (addr, len, ino, idx) in extents {
                    report.problems.push(format!(
                        "{} (inode {ino}) extent {idx}: {len} bytes at {addr} in {object}: {e}",
                        vol.path_of(ino)
                    ));
                }
                continue;
            }
        };
        for (addr, len, ino, idx) in extents {
            if !in_index(&entries, addr, len) {
                report.problems.push(format!(
                    "{} (inode {ino}) extent {idx}: {object} has no extent of {len} bytes at \
                     offset {} in its index",
                    vol.path_of(ino),
                    addr.offset()
                ));
            }
        }
    }
    report
        .notes
        .push(format!("verified {segments} segment object(s) in {url}"));
}

/// Whether a segment's index (sorted by offset) has an entry of exactly `len` bytes at `addr`.
fn in_index(entries: &[Entry], addr: Addr, len: u64) -> bool {
    entries
        .binary_search_by_key(&addr.offset(), |e| e.offset)
        .is_ok_and(|i| u64::from(entries[i].len) == len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, DATA_FILE, DB_FILE, ROOT};
    use crate::volume::NewInode;
    use crate::Options;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wring-fsck-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn write_file(vol: &Volume, name: &str, len: usize) {
        let new = NewInode::file(0o644);
        let (ino, _) = vol.create(ROOT, name.as_bytes(), new).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 253) as u8).collect();
        vol.write(ino, 0, &data, None).unwrap();
    }

    fn files(dir: &Path) -> [Vec<u8>; 2] {
        [DB_FILE, DATA_FILE].map(|f| std::fs::read(dir.join(f)).unwrap())
    }

    #[test]
    fn fsck_changes_nothing_even_after_a_crash_and_refuses_a_mounted_store() {
        let (dir, crashed) = (scratch("live"), scratch("crashed"));
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::parse("max_extent=16K").unwrap()).unwrap();
        write_file(&vol, "a", 100_000);
        vol.sync().unwrap();
        // Not durable: its bytes make the data file longer than the last durable commit needs.
        write_file(&vol, "b", 50_000);
        // The files as a crash would leave them: the database not closed.
        std::fs::create_dir_all(&crashed).unwrap();
        for f in [DB_FILE, DATA_FILE] {
            std::fs::copy(dir.join(f), crashed.join(f)).unwrap();
        }
        assert!(fsck(&dir).is_err(), "fsck must refuse a mounted store");
        drop(vol);

        let before = files(&crashed);
        let r = fsck(&crashed).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.inodes, 2, "the root and 'a', as a mount recovers them");
        assert!(files(&crashed) == before, "fsck changed the store");
        // A mount cuts the data file after what the recovered commit refers to.
        drop(Volume::open(&crashed, Options::default()).unwrap());
        assert!(files(&crashed)[1].len() < before[1].len());

        let r = fsck(&dir).unwrap();
        assert!(r.problems.is_empty() && r.notes.is_empty(), "{r:?}");
        assert_eq!(r.inodes, 3);
        for d in [dir, crashed] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    /// A store whose data file is gone does not mount with an empty one in its place.
    #[test]
    fn a_missing_data_file_is_not_recreated_under_stored_extents() {
        let dir = scratch("no-data");
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        write_file(&vol, "a", 100_000);
        vol.sync().unwrap();
        drop(vol);
        std::fs::remove_file(dir.join(DATA_FILE)).unwrap();
        let e = Volume::open(&dir, Options::default()).err().unwrap();
        assert!(e.to_string().contains(DATA_FILE), "{e}");
        assert!(!dir.join(DATA_FILE).exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A damaged next-inode counter is reported by fsck, and a create refuses it (EUCLEAN)
    /// instead of handing out a number in use (it used to restart at the root's).
    #[test]
    fn a_damaged_next_inode_counter_is_reported_and_not_used() {
        let dir = scratch("next-ino");
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        write_file(&vol, "a", 10);
        let txn = vol.store().write().unwrap();
        txn.open_table(store::META)
            .unwrap()
            .remove("next_ino")
            .unwrap();
        vol.store().commit(txn, true).unwrap();
        let new = NewInode::file(0o644);
        let e = vol.create(ROOT, b"b", new).unwrap_err();
        assert_eq!(e.errno(), libc::EUCLEAN);
        drop(vol);
        let r = fsck(&dir).unwrap();
        assert!(
            r.problems.iter().any(|p| p.contains("next inode number")),
            "{r:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
