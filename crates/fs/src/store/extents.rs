//! The extent items of a write transaction: inserting an extent's item with its stored bytes
//! (in the item, or in the data backend that the item then points at), replacing or removing
//! one and giving up the bytes it stored, and counting the stored bytes as they change.
//!
//! Mirrors the file extent items of fs/btrfs: inode.c's insert_reserved_file_extent, file.c's
//! btrfs_drop_extents and file-item.c's checksums. The code that writes items sits here, below
//! the volume, which decides what the extents hold. Differs in keeping an extent's checksum in
//! its item (btrfs keeps csums in their own tree) and in small extents' bytes living in the
//! item itself (btrfs's inline extents are only ever the first).

use std::sync::atomic::Ordering;

use redb::Table;

use super::records::{
    covered, external_item_of, stored, ExtentHeader, Inode, RecordError, Stored, INLINE_MAX,
};
use super::{add_counter, shared, Txn, EXTENTS};
use crate::error::FsError;

/// The extents table of a write transaction.
pub type ExtentTable<'t> = Table<'t, (u64, u64), &'static [u8]>;

/// Encoded extents to put, by extent index: a header and the stored bytes, `None` for a hole.
pub type Extents = Vec<(u64, Option<(ExtentHeader, Vec<u8>)>)>;

/// What putting, dropping or replacing extent items changed: in stored bytes, `held`, those
/// the file's items name (its `disk`, compsize's per-file view), and `used`, those the store
/// keeps (shared bytes count once: they go with their last reference); and `bytes`, those of
/// the file the items cover (its `bytes`, `st_blocks`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delta {
    /// Change in the bytes the file's items name.
    pub held: i64,
    /// Change in the bytes the store keeps.
    pub used: i64,
    /// Change in the bytes of the file the items cover.
    pub bytes: i64,
}

impl std::ops::AddAssign for Delta {
    fn add_assign(&mut self, o: Delta) {
        self.held += o.held;
        self.used += o.used;
        self.bytes += o.bytes;
    }
}

impl Delta {
    /// A new item of `stored` bytes the store keeps, covering `ram_len` bytes of its file.
    fn new_item(stored: usize, ram_len: u32) -> Delta {
        let n = stored as i64;
        Delta {
            held: n,
            used: n,
            bytes: covered(ram_len) as i64,
        }
    }

    /// Apply to the record of the file whose items changed: its stored and covered bytes.
    pub fn apply(self, inode: &mut Inode) {
        inode.disk = inode.disk.saturating_add_signed(self.held);
        inode.bytes = inode.bytes.saturating_add_signed(self.bytes);
    }
}

/// A damaged item to share as `key` (inode, extent index): EIO, logged with what is wrong.
fn corrupt(key: (u64, u64), e: &RecordError) -> FsError {
    log::error!(
        "inode {} extent {}: cannot share a damaged item: {e}",
        key.0,
        key.1
    );
    FsError::Errno(libc::EIO)
}

/// The bytes of its file the item `item` covers (0 when it is damaged).
fn covered_by(item: &[u8]) -> i64 {
    ExtentHeader::decode(item).map_or(0, |h| covered(h.ram_len) as i64)
}

impl Txn<'_> {
    /// Insert encoded extents of `ino`, replacing what was there, each with a new sequence
    /// number; returns what that changed for the file ([`Delta::apply`]).
    pub fn put_extents(&self, ino: u64, encoded: Extents) -> Result<Delta, FsError> {
        let mut delta = Delta::default();
        let mut seq = self.next_counter("seq")?;
        let mut extents = self.open_table(EXTENTS)?;
        for (idx, enc) in encoded {
            delta += self.remove_item(&mut extents, (ino, idx))?;
            if let Some((mut h, data)) = enc {
                seq += 1;
                h.seq = seq;
                delta += Delta::new_item(data.len(), h.ram_len);
                self.insert_item(&mut extents, (ino, idx), &h, &data)?;
            }
        }
        drop(extents);
        self.set_counter("seq", seq + 1)?;
        add_counter(self, "used", delta.used)?;
        Ok(delta)
    }

    /// Insert one extent value — its header and stored bytes, `None` for a hole — replacing
    /// what was there, with a new sequence number; returns what that changed for the file
    /// ([`Delta::apply`]).
    pub fn put_value(
        &self,
        ino: u64,
        idx: u64,
        value: Option<(ExtentHeader, &[u8])>,
    ) -> Result<Delta, FsError> {
        let mut extents = self.open_table(EXTENTS)?;
        let mut delta = self.remove_item(&mut extents, (ino, idx))?;
        if let Some((mut h, stored)) = value {
            h.seq = self.next_counter("seq")?;
            delta += Delta::new_item(stored.len(), h.ram_len);
            self.insert_item(&mut extents, (ino, idx), &h, stored)?;
        }
        drop(extents);
        add_counter(self, "used", delta.used)?;
        Ok(delta)
    }

    /// Make `key` name what the item `item` names, replacing what was there (btrfs's clone):
    /// an item whose bytes are in the data backend takes a reference to them, an inline one
    /// is copied. It gets a new sequence number. Returns what that changed for the file
    /// ([`Delta::apply`]); the store's count changes only by what is new to it.
    pub fn share_item(
        &self,
        extents: &mut ExtentTable<'_>,
        key: (u64, u64),
        item: &[u8],
    ) -> Result<Delta, FsError> {
        let s = stored(item).map_err(|e| corrupt(key, &e))?;
        let mut delta = self.remove_item(extents, key)?;
        delta.held += s.len() as i64;
        delta.bytes += covered_by(item);
        match s {
            Stored::External(at, len) => {
                self.store.may_share.store(true, Ordering::SeqCst);
                shared::add_ref(self, at, len)?
            }
            Stored::Inline(b) => delta.used += b.len() as i64,
        }
        let mut v = item.to_vec();
        ExtentHeader::set_seq(&mut v, self.next_counter("seq")?).map_err(|e| corrupt(key, &e))?;
        extents.insert(key, v.as_slice())?;
        add_counter(self, "used", delta.used)?;
        Ok(delta)
    }

    /// Insert the item for header `h` and its stored bytes; stored bytes larger than
    /// [`INLINE_MAX`] go to the data backend and the item points at them.
    fn insert_item(
        &self,
        extents: &mut ExtentTable<'_>,
        key: (u64, u64),
        h: &ExtentHeader,
        stored: &[u8],
    ) -> Result<(), FsError> {
        if stored.len() <= INLINE_MAX {
            extents.insert(key, h.encode(stored).as_slice())?;
        } else {
            let offset = self.put_stored(stored)?;
            extents.insert(key, external_item_of(h, stored.len(), offset).as_slice())?;
        }
        Ok(())
    }

    /// Remove the item at `key`: its bytes are given up unless other items still name them
    /// (shared). The caller adds `used` to the store's counter.
    pub fn remove_item(
        &self,
        extents: &mut ExtentTable<'_>,
        key: (u64, u64),
    ) -> Result<Delta, FsError> {
        let Some(old) = extents.remove(key)? else {
            return Ok(Delta::default());
        };
        let Ok(s) = stored(old.value()) else {
            return Ok(Delta::default());
        };
        let n = -(s.len() as i64);
        let bytes = -covered_by(old.value());
        if let Stored::External(at, _) = s {
            // A store that never shared frees without looking (a removal is rm -rf's cost).
            if self.store.may_share.load(Ordering::SeqCst) && shared::drop_ref(self, at)? {
                return Ok(Delta {
                    held: n,
                    used: 0,
                    bytes,
                });
            }
        }
        self.free_stored(s);
        Ok(Delta {
            held: n,
            used: n,
            bytes,
        })
    }
}
