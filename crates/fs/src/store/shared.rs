//! Shared extents: stored bytes that more than one extent item names, because a
//! `copy_file_range` gave the copy the source's extents instead of writing them again. The
//! table holds, for each such address, its length and how many items name it; an address
//! named by a single item has no record, so a store that never shared looks as it always did.
//!
//! Dropping an item that names shared bytes only takes one reference: the bytes are freed
//! with the last one, by the same commit. A write into a shared extent writes a new extent
//! (every write does: extents are copy-on-write), so the other files keep theirs.
//!
//! Mirrors the reference counts of btrfs's extent tree (an EXTENT_ITEM's refs, one
//! EXTENT_DATA_REF per file extent that points at it, added by btrfs_clone's
//! btrfs_inc_extent_ref and dropped by btrfs_drop_extents' btrfs_free_extent). It differs in
//! keeping only the count: the compactor, which must find every item naming an address it
//! moves, scans the extent items of the segments it picks instead of following
//! back-references. The store's format version says what a binary must understand: a store
//! that ever shared an extent is version [`VERSION_SHARED`], which binaries from before
//! sharing refuse (they would free shared bytes with their first reference).

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};

use crate::error::FsError;
use crate::store::records::{stored, Stored};
use crate::store::table_if_made;

/// Address of stored bytes named by two or more extent items → (length, references).
pub const SHARED: TableDefinition<u64, (u64, u64)> = TableDefinition::new("shared");
/// The format version of a store that has shared an extent.
pub const VERSION_SHARED: u64 = 3;

/// One more item names the `len` stored bytes at `at` (which one item named before, or
/// several).
pub fn add_ref(txn: &WriteTransaction, at: u64, len: u64) -> Result<(), FsError> {
    let mut t = txn.open_table(SHARED)?;
    let refs = t.get(at)?.map_or(1, |g| g.value().1);
    t.insert(at, (len, refs.saturating_add(1)))?;
    drop(t);
    crate::store::format::raise(txn, VERSION_SHARED)
}

/// An item naming the stored bytes at `at` goes: true when other items still name them (the
/// bytes stay), false when it was the only one (the caller frees them).
pub fn drop_ref(txn: &WriteTransaction, at: u64) -> Result<bool, FsError> {
    let mut t = txn.open_table(SHARED)?;
    let Some((len, refs)) = t.get(at)?.map(|g| g.value()) else {
        return Ok(false);
    };
    match refs {
        0..=2 => t.remove(at)?,
        _ => t.insert(at, (len, refs - 1))?,
    };
    Ok(true)
}

/// How many items name the stored bytes at `at`, by the record: 1 when it has none.
pub fn refs(txn: &WriteTransaction, at: u64) -> Result<u64, FsError> {
    Ok(txn.open_table(SHARED)?.get(at)?.map_or(1, |g| g.value().1))
}

/// The compactor copied the stored bytes at `old` to `new`: their record follows them.
pub fn moved(txn: &WriteTransaction, old: u64, new: u64) -> Result<(), FsError> {
    let mut t = txn.open_table(SHARED)?;
    let rec = t.remove(old)?.map(|g| g.value());
    if let Some(rec) = rec {
        t.insert(new, rec)?;
    }
    Ok(())
}

/// Whether the store has a record (what [`crate::store::Store`] checks when it opens).
pub fn any(txn: &ReadTransaction) -> Result<bool, FsError> {
    match table_if_made(txn, SHARED)? {
        Some(t) => Ok(t.first()?.is_some()),
        None => Ok(false),
    }
}

/// Whether more than one item names the stored bytes at `at`, as of `txn`.
pub fn is_shared(txn: &ReadTransaction, at: u64) -> Result<bool, FsError> {
    match table_if_made(txn, SHARED)? {
        Some(t) => Ok(t.get(at)?.is_some()),
        None => Ok(false),
    }
}

/// Every record as stored: address → (length, references). Empty for a store that never
/// shared (it has no table).
pub fn all(txn: &ReadTransaction) -> Result<BTreeMap<u64, (u64, u64)>, FsError> {
    let Some(t) = table_if_made(txn, SHARED)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for r in t.iter()? {
        let (k, v) = r?;
        out.insert(k.value(), v.value());
    }
    Ok(out)
}

/// Make the table what the extent items say (fsck --repair): a record for each address two
/// or more items name, with its length and their number, and none else. Before anything else
/// in a repair removes an item, so a reference the table lost never frees bytes another item
/// still names. The changes made, in words.
pub fn rebuild(txn: &crate::store::Txn<'_>) -> Result<Vec<String>, FsError> {
    // Address → (length, items naming it).
    let mut named: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for r in txn.open_table(crate::store::EXTENTS)?.iter()? {
        if let Ok(Stored::External(at, len)) = stored(r?.1.value()) {
            named.entry(at).or_insert((len, 0)).1 += 1;
        }
    }
    let mut t = txn.open_table(SHARED)?;
    let mut have = BTreeMap::new();
    for r in t.iter()? {
        let (k, v) = r?;
        have.insert(k.value(), v.value());
    }
    let mut changes = Vec::new();
    for (&at, &(len, refs)) in &have {
        let items = named.get(&at).map_or(0, |n| n.1);
        if named.get(&at) != Some(&(len, refs)) || items < 2 {
            t.remove(at)?;
            changes.push(format!(
                "removed the reference record of the stored extent at {at} ({refs} references \
                 to {len} bytes): {items} extent item(s) name it"
            ));
        }
    }
    named.retain(|_, (_, refs)| *refs > 1);
    for (&at, &rec) in &named {
        if have.get(&at) != Some(&rec) {
            t.insert(at, rec)?;
            changes.push(format!(
                "recorded {} references to the {} bytes stored at {at}, the extent items that \
                 name them",
                rec.1, rec.0
            ));
        }
    }
    drop(t);
    if !named.is_empty() {
        txn.store
            .may_share
            .store(true, std::sync::atomic::Ordering::SeqCst);
        crate::store::format::raise(txn, VERSION_SHARED)?;
    }
    Ok(changes)
}
