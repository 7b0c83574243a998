//! Delayed inode items: attribute changes that touch nothing but an inode's own record (a
//! setattr without a size — chmod, chown, utimens, the kernel's flush of a file's times) are
//! kept in memory, newest record per inode, instead of a write transaction each, and written
//! by the next write transaction the volume opens: every one applies them first, and drops
//! them once it has committed. The committer's tick writes them when nothing else has, and
//! every sync, fsync and unmount does before its durable commit, so what is durable when is
//! what it was with a transaction per change.
//!
//! Mirrors fs/btrfs/delayed-inode.c: btrfs_delayed_update_inode() keeps the inode item in a
//! btrfs_delayed_node instead of COWing the fs tree per change, and
//! btrfs_commit_inode_delayed_inode() / btrfs_run_delayed_items() write them into the running
//! transaction (at the latest in its commit). Readers of an inode's attributes look here
//! first (btrfs reads the in-core inode). The number held is bounded as btrfs's
//! BTRFS_DELAYED_BACKGROUND is: past [`MAX_ITEMS`] the update writes them all.
//!
//! Consistency: every write transaction is opened through [`DelayedStore::write`], which
//! holds `writer` for its whole life; a delayed update holds it too while it reads the
//! inode and stores the new record. So a delayed update and a transaction never interleave
//! (as two transactions never do in redb), and a transaction always reads the newest record.
//! A transaction dropped without commit leaves the items in the map.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use crate::error::FsError;
use crate::store::records::Inode;
use crate::store::{self, Store, Txn, INODES};
use crate::volume::lock;

/// Delayed items held before an update writes them all (btrfs: BTRFS_DELAYED_BACKGROUND is
/// 128 per root, with a hard limit above; records here are 100 bytes or so).
pub const MAX_ITEMS: usize = 4096;

/// The newest record of each inode with a delayed change, and its generation (a number that
/// grows with every change, so a writer removes only what it wrote).
#[derive(Default)]
struct Items {
    map: HashMap<u64, (u64, Inode)>,
    generation: u64,
}

/// The store with its delayed inode items. Derefs to the [`Store`]; `write`, `commit`,
/// `sync` and `commit_if_due` here take the items into account.
pub struct DelayedStore {
    store: Store,
    /// Held for the life of every write transaction and by every delayed update.
    writer: Mutex<()>,
    items: Mutex<Items>,
    /// Delayed updates and their flushes, for `wring status`.
    pub delayed_counts: crate::counters::DelayedCounts,
}

/// A write transaction of the volume: the delayed items were written into it when it began;
/// they leave the map when it commits.
pub struct VolTxn<'s> {
    txn: Txn<'s>,
    /// (inode, generation) of each delayed item written into this transaction.
    applied: Vec<(u64, u64)>,
    _writer: MutexGuard<'s, ()>,
}

impl<'s> std::ops::Deref for VolTxn<'s> {
    type Target = Txn<'s>;

    fn deref(&self) -> &Txn<'s> {
        &self.txn
    }
}

impl std::ops::Deref for DelayedStore {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

impl std::ops::DerefMut for DelayedStore {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}

/// What a delayed update does with an inode's record.
pub enum Change {
    /// Store this record as the inode's newest.
    Put(Inode),
    /// The change needs a transaction (it touches more than the record); nothing was kept.
    NeedsTxn,
}

impl DelayedStore {
    /// The store, with no delayed items yet.
    pub fn new(store: Store) -> DelayedStore {
        DelayedStore {
            store,
            writer: Mutex::new(()),
            items: Mutex::default(),
            delayed_counts: crate::counters::DelayedCounts::default(),
        }
    }

    /// Begin a write transaction holding every delayed item (see [`VolTxn`]).
    pub fn write(&self) -> Result<VolTxn<'_>, FsError> {
        let writer = lock(&self.writer);
        let txn = self.store.write()?;
        let items: Vec<(u64, u64, Inode)> = {
            let items = lock(&self.items);
            let all = items.map.iter();
            all.map(|(&ino, (g, i))| (ino, *g, i.clone())).collect()
        };
        let mut applied = Vec::with_capacity(items.len());
        if !items.is_empty() {
            let mut inodes = txn.open_table(INODES)?;
            for (ino, g, inode) in items {
                inodes.insert(ino, inode.to_bytes().as_slice())?;
                applied.push((ino, g));
            }
        }
        Ok(VolTxn {
            txn,
            applied,
            _writer: writer,
        })
    }

    /// Commit `t` (durable when asked or when the commit interval has passed, see
    /// [`Store::commit`]); the delayed items it wrote are then no longer delayed.
    pub fn commit(&self, t: VolTxn<'_>, durable: bool) -> Result<(), FsError> {
        let VolTxn {
            txn,
            applied,
            _writer,
        } = t;
        self.store.commit(txn, durable)?;
        if !applied.is_empty() {
            let mut items = lock(&self.items);
            for (ino, g) in &applied {
                if items.map.get(ino).is_some_and(|(have, _)| have == g) {
                    items.map.remove(ino);
                }
            }
            self.delayed_counts.flushed(applied.len());
        }
        Ok(())
    }

    /// Make every commit and every delayed item durable (fsync, sync, unmount).
    pub fn sync(&self) -> Result<(), FsError> {
        if lock(&self.items).map.is_empty() {
            // Also where a store opened for fsck says there is nothing to do.
            return self.store.sync();
        }
        let t = self.write()?;
        self.commit(t, true)
    }

    /// The committer's tick: write the delayed items, then make the commits durable once the
    /// commit interval has passed (see [`Store::commit_if_due`]).
    pub fn commit_if_due(&self) -> Result<bool, FsError> {
        self.flush()?;
        self.store.commit_if_due()
    }

    /// Write the delayed items in one transaction (not a durable one unless it is due).
    pub fn flush(&self) -> Result<(), FsError> {
        if lock(&self.items).map.is_empty() {
            return Ok(());
        }
        let t = self.write()?;
        self.commit(t, false)
    }

    /// The newest record of `ino` when a change to it is delayed.
    pub fn delayed_inode(&self, ino: u64) -> Option<Inode> {
        lock(&self.items).map.get(&ino).map(|(_, i)| i.clone())
    }

    /// Delayed items held now.
    pub fn delayed_len(&self) -> usize {
        lock(&self.items).map.len()
    }

    /// Change `ino`'s record without a transaction: `f` gets its newest record and a snapshot
    /// of the last commit (to look at its xattrs), and says what to keep. No transaction
    /// runs meanwhile. Returns the kept record, or `None` when `f` needs a transaction.
    pub fn update(
        &self,
        ino: u64,
        f: impl FnOnce(Inode, &store::Snapshot<'_>) -> Result<Change, FsError>,
    ) -> Result<Option<Inode>, FsError> {
        let (inode, full) = {
            let _writer = lock(&self.writer);
            let snap = self.store.read()?;
            let base = match self.delayed_inode(ino) {
                Some(i) => i,
                None => store::get_inode(&snap.open_table(INODES)?, ino)?,
            };
            let Change::Put(inode) = f(base, &snap)? else {
                return Ok(None);
            };
            let mut items = lock(&self.items);
            items.generation += 1;
            let g = items.generation;
            items.map.insert(ino, (g, inode.clone()));
            self.delayed_counts.updates.fetch_add(1, Ordering::Relaxed);
            (inode, items.map.len() >= MAX_ITEMS)
        };
        if full {
            // Bounded: this update writes them all.
            self.flush()?;
        }
        Ok(Some(inode))
    }
}

#[cfg(test)]
mod tests {
    use crate::inode::{NewInode, SetAttr};
    use crate::store::{Store, ROOT};
    use crate::{Options, Volume};

    fn scratch(name: &str) -> (std::path::PathBuf, Volume) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        (dir, vol)
    }

    fn chmod(mode: u32) -> SetAttr {
        SetAttr {
            mode: Some(mode),
            ..Default::default()
        }
    }

    /// A chmod is kept in memory (no transaction), read back by getattr, written by the next
    /// transaction of any kind, and durable after sync: a store reopened after a sync has it.
    #[test]
    fn a_delayed_chmod_is_read_written_by_the_next_transaction_and_durable_after_sync() {
        let (dir, vol) = scratch("wring-delayed");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        // Write transactions begun so far (`wring status`'s count; a snapshot is not one).
        let commits = |v: &Volume| {
            let line = v.store.counts.line();
            let w = line.split_whitespace().find(|w| w.starts_with("write="));
            w.map(str::to_string).unwrap_or_default()
        };
        let before = commits(&vol);
        vol.setattr(a, &chmod(0o600)).unwrap();
        assert_eq!(commits(&vol), before, "a chmod began a transaction");
        assert_eq!(vol.store.delayed_len(), 1);
        assert_eq!(
            vol.inode(a).unwrap().perm,
            0o600,
            "getattr sees the delayed mode"
        );
        // Another chmod of the same inode replaces the item; one of another inode adds one.
        vol.setattr(a, &chmod(0o640)).unwrap();
        let (b, _) = vol.create(ROOT, b"b", NewInode::file(0o644)).unwrap();
        // create's transaction wrote a's item.
        assert_eq!(
            vol.store.delayed_len(),
            0,
            "create's transaction left the item"
        );
        vol.setattr(b, &chmod(0o700)).unwrap();
        assert_eq!(vol.store.delayed_len(), 1);
        vol.sync().unwrap();
        assert_eq!(vol.store.delayed_len(), 0);
        drop(vol);
        let vol = Volume::open(&dir, Options::default()).unwrap();
        assert_eq!(vol.inode(a).unwrap().perm, 0o640);
        assert_eq!(vol.inode(b).unwrap().perm, 0o700);
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A chmod of a file with an access ACL changes the ACL's mask too: that needs a
    /// transaction, and it gets one (nothing is delayed, the ACL follows).
    #[test]
    fn a_chmod_that_must_change_an_xattr_is_not_delayed() {
        let (dir, vol) = scratch("wring-delayed-acl");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        // u::rw-, u:65534:r--, g::r--, m::r--, o::--- in the xattr's form (version 2, then
        // tag, perm, id per entry).
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (1u16, 6u16, u32::MAX),
            (2, 4, 65534),
            (4, 4, u32::MAX),
            (0x10, 4, u32::MAX),
            (0x20, 0, u32::MAX),
        ] {
            acl.extend(tag.to_le_bytes());
            acl.extend(perm.to_le_bytes());
            acl.extend(id.to_le_bytes());
        }
        vol.setxattr(a, crate::acl::ACCESS, &acl, 0).unwrap();
        vol.setattr(a, &chmod(0o600)).unwrap();
        assert_eq!(
            vol.store.delayed_len(),
            0,
            "the chmod of an ACL'd file was delayed"
        );
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Past MAX_ITEMS the update that adds one writes them all: memory held is bounded.
    #[test]
    fn delayed_items_are_bounded() {
        let (dir, vol) = scratch("wring-delayed-bound");
        let mut inos = Vec::new();
        for i in 0..super::MAX_ITEMS + 10 {
            let name = format!("f{i}");
            inos.push(
                vol.create(ROOT, name.as_bytes(), NewInode::file(0o644))
                    .unwrap()
                    .0,
            );
        }
        for &ino in &inos {
            vol.setattr(ino, &chmod(0o600)).unwrap();
            assert!(vol.store.delayed_len() < super::MAX_ITEMS);
        }
        assert!(inos.iter().all(|&i| vol.inode(i).unwrap().perm == 0o600));
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
