//! The store's format version, in one place: what each version added, the check that refuses
//! a store newer than this binary, and the upgrade a writable open makes once.
//!
//! | version | what it added | who raises it |
//! |---|---|---|
//! | 1 | every store before versions mattered | |
//! | 2 | dictionaries ([`super::dicts`]) | the first dictionary stored |
//! | 3 | shared extents ([`super::shared`]) | the first shared extent |
//! | 4 | each inode's `bytes`, which `st_blocks` reports ([`super::records::Inode::bytes`]) | mkfs; the first writable open of an older store |
//!
//! A binary refuses a version above [`VERSION`] with a plain message, so an older wring never
//! frees a shared extent's bytes with its first reference, or reads an inode item longer than
//! it knows as damaged. Mirrors btrfs's incompat feature bits (a kernel refuses a filesystem
//! with a bit it does not know) with one number: every feature here implies the ones before.
//! The upgrade to 4 mirrors a btrfs conversion done at mount (free space tree, block group
//! tree): one transaction, before the mount answers anything, never on a read-only mount,
//! which shows an older store's inodes with `bytes` taken from their stored bytes.

use redb::{Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable};

use super::records::{covered_within, ExtentHeader, Inode, INODE_LEN_V3, VERSION_BYTES};
use super::{counter, EXTENTS, INODES, META};
use crate::error::FsError;

/// The newest format version this binary reads and writes.
pub const VERSION: u64 = VERSION_BYTES;
/// Inode items upgraded per pass: the memory an upgrade holds is bounded by it.
const UPGRADE_BATCH: usize = 4096;

/// Refuse a store of a format newer than this binary's.
pub fn check_version(txn: &ReadTransaction) -> Result<(), FsError> {
    let v = counter(txn, "version")?;
    if v > VERSION {
        return Err(FsError::Refused {
            why: format!(
                "this store has format version {v}, and this wring reads versions up to \
                 {VERSION}: it was made or changed by a newer wring; use that one"
            ),
            errno: libc::EPROTONOSUPPORT,
        });
    }
    Ok(())
}

/// Raise `meta`'s version to `v` unless it is there already (a feature's first use).
pub(crate) fn raise(txn: &redb::WriteTransaction, v: u64) -> Result<(), FsError> {
    let mut meta = txn.open_table(META)?;
    if meta.get("version")?.map_or(1, |g| g.value()) < v {
        meta.insert("version", v)?;
    }
    Ok(())
}

/// Bring a store opened for writing up to [`VERSION`]: an older one's inode items get the
/// bytes their extents cover, in one durable transaction. Returns how many it upgraded.
pub(crate) fn upgrade(db: &Database) -> Result<u64, FsError> {
    if counter(&db.begin_read()?, "version")? >= VERSION_BYTES {
        return Ok(0);
    }
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    let (mut from, mut n) = (Some(0), 0);
    while let Some(at) = from {
        let (done, next) = upgrade_inodes(&txn, at)?;
        n += done;
        from = next;
    }
    raise(&txn, VERSION_BYTES)?;
    txn.commit()?;
    if n > 0 {
        log::info!("upgraded the store to format version {VERSION_BYTES}: {n} inode items");
    }
    Ok(n)
}

/// Upgrade up to [`UPGRADE_BATCH`] inode items from inode `from` on: how many items it
/// rewrote, and the inode to go on from (`None` past the last). An item that does not decode
/// is left for fsck.
fn upgrade_inodes(txn: &redb::WriteTransaction, from: u64) -> Result<(u64, Option<u64>), FsError> {
    let mut old: Vec<(u64, Inode)> = Vec::new();
    let mut last = None;
    {
        let inodes = txn.open_table(INODES)?;
        for r in inodes.range(from..)?.take(UPGRADE_BATCH) {
            let (k, v) = r?;
            last = Some(k.value());
            if v.value().len() == INODE_LEN_V3 {
                if let Ok(i) = Inode::decode(v.value()) {
                    old.push((k.value(), i));
                }
            }
        }
    }
    let Some(last) = last else {
        return Ok((0, None));
    };
    let extents = txn.open_table(EXTENTS)?;
    let mut inodes = txn.open_table(INODES)?;
    for (ino, mut i) in old.iter().cloned() {
        i.bytes = 0;
        for r in extents.range((ino, 0)..=(ino, u64::MAX))? {
            let h = ExtentHeader::decode(r?.1.value());
            i.bytes += h.map_or(0, |h| covered_within(h.ram_len, i.extent_size));
        }
        inodes.insert(ino, i.to_bytes().as_slice())?;
    }
    Ok((old.len() as u64, last.checked_add(1)))
}
