//! The data's rules, which a repair cannot fix (the bytes are what they are): every extent
//! lies within its file's size, passes its checksum and decodes to its length (with its
//! dictionary, which must exist and digest), and no two extents share bytes of the data file.
//! A store whose extents are in a bucket (`mkfs --data`) gets the object store's side too, as
//! `btrfs check --check-data-csum` reads every data block: each segment object an extent
//! names is fetched once and verified whole (trailer, index, every extent's crc32), and each
//! extent's (offset, length) must be one of that segment's index entries.
//!
//! Mirrors `btrfs check`'s extent and csum passes. The stored-bytes counters, which a repair
//! can set, are [`super::names`]' rules; the shared extents' reference records, checked here,
//! a repair rebuilds from the items (`store::shared::rebuild`).

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable};

use super::names::Namespace;
use super::FsckReport;
use crate::error::FsError;
use crate::store::records::{stored, Stored};
use crate::store::{DataSpec, EXTENTS};
use crate::volume::Volume;
use wring_objstore::segment::Entry;
use wring_objstore::{Addr, ObjStore};

/// Check the dictionaries and every extent of `ns`'s inodes, adding to `report`.
pub(super) fn check(
    vol: &Volume,
    txn: &ReadTransaction,
    ns: &Namespace,
    report: &mut FsckReport,
) -> Result<(), FsError> {
    // Every dictionary digests (the extents that name one are decoded with it below).
    for (key, bytes) in crate::store::dicts::all(txn)? {
        report.dicts += 1;
        if let Err(e) = crate::store::dicts::record(key, &bytes) {
            report.problems.push(e.to_string());
        }
    }
    let mut placed = Vec::new();
    for r in txn.open_table(EXTENTS)?.iter()? {
        let (k, v) = r?;
        let (ino, idx) = k.value();
        report.extents += 1;
        if let Ok(Stored::External(at, len)) = stored(v.value()) {
            placed.push((at, len, ino, idx));
        }
        // Extents of inodes that do not exist are the namespace's rule (a repair drops them).
        if let Some(problem) = ns.inodes.get(&ino).and_then(|i| {
            let offset = idx.checked_mul(i.extent_size as u64);
            extent_problem(vol, (ino, idx, offset), (i.size, i.extent_size), v.value())
        }) {
            report.problems.push(problem);
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
        let ((a, alen, aino, aidx), (b, blen, bino, bidx)) = (w[0], w[1]);
        // Items that name the same bytes share them: the reference counts say if they may.
        if (a, alen) != (b, blen) && a.checked_add(alen).is_none_or(|end| end > b) {
            report.problems.push(format!(
                "extent {aidx} of inode {aino} and extent {bidx} of inode {bino} share bytes \
                 of the data file at {b}"
            ));
        }
    }
    check_shared(&crate::store::shared::all(txn)?, &placed, report);
    Ok(())
}

/// Every stored extent that several items name has a record with its length and their
/// number, and every record names such an extent. `placed` holds (address, length, inode,
/// extent index), sorted.
fn check_shared(
    records: &BTreeMap<u64, (u64, u64)>,
    placed: &[(u64, u64, u64, u64)],
    report: &mut FsckReport,
) {
    let mut named: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for &(at, len, ..) in placed {
        let e = named.entry(at).or_insert((len, 0));
        e.1 += 1;
    }
    for (&at, &(len, refs)) in &named {
        let want = (refs > 1).then_some((len, refs));
        let have = records.get(&at).copied();
        if have != want {
            report.problems.push(format!(
                "the stored extent at {at} ({len} bytes) is named by {refs} extent item(s), \
                 but its reference record says {}",
                have.map_or("nothing (unshared)".into(), |(l, r)| format!(
                    "{r} references to {l} bytes"
                ))
            ));
        }
    }
    for (&at, &(len, refs)) in records {
        if !named.contains_key(&at) {
            report.problems.push(format!(
                "a reference record names a stored extent at {at} ({len} bytes, {refs} \
                 references) that no extent item names"
            ));
        }
    }
    report.shared += records.len() as u64;
}

/// What is wrong with extent `idx` of `ino` (at `offset`, if the index does not overflow),
/// a file of `size` bytes cut into `extent_size`-byte extents: it must decode, to at most an
/// extent, within the size.
fn extent_problem(
    vol: &Volume,
    (ino, idx, offset): (u64, u64, Option<u64>),
    (size, extent_size): (u64, u32),
    item: &[u8],
) -> Option<String> {
    let Some(offset) = offset else {
        return Some(format!(
            "inode {ino}: extent index {idx} lies beyond any file size"
        ));
    };
    let e = extent_size as u64;
    match vol.decode_extent(ino, idx, offset, item) {
        Ok(d) if e != 0 && d.len() as u64 > e => Some(format!(
            "{}: offset {offset}: extent header gives {} bytes, more than the file's \
             {e}-byte extents",
            vol.path_of(ino),
            d.len()
        )),
        Ok(d)
            if e == 0
                || offset.saturating_add(d.len() as u64) > size.max(offset) && offset >= size =>
        {
            Some(format!(
                "inode {ino}: extent at offset {offset} lies beyond the size {size}"
            ))
        }
        Ok(d) if offset.saturating_add(d.len() as u64) > size => Some(format!(
            "inode {ino}: extent at offset {offset} runs past the size {size}"
        )),
        Ok(_) => None,
        Err(e) => Some(format!("{}: offset {offset}: {e}", vol.path_of(ino))),
    }
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
