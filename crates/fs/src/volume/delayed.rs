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
//! A transaction dropped without commit leaves the items in the map. A reader looks in the
//! map before it takes its snapshot ([`DelayedStore::inode`]): an item leaves the map only
//! after its commit, so one it does not find is in the snapshot.
//!
//! Between a transaction's commit and the removal of the items it wrote, an item is older
//! than the committed record (the transaction may have changed the inode after writing the
//! item: a writeback's new size). So each transaction that writes items gets a number, writes
//! it into the store with them (`delayed_seq` in META), and marks each item it wrote with it;
//! a reader that finds a marked item takes a snapshot and uses the item only if the snapshot's
//! number is below the mark (the commit has not landed), else the committed record. Without
//! this a reader could see a size, then an older one (the shuttle model below found it).
//!
//! The protocol is generic over what it sits on ([`InodeStore`]): the redb [`Store`], or in the
//! shuttle model (`cargo test -p wring-fs --features shuttle --lib model`) a toy store.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::error::FsError;
use crate::store::records::Inode;
use crate::store::{self, Store, INODES};
use crate::sync::{lock, Mutex, MutexGuard};
use redb::ReadableTable;

/// Delayed items held before an update writes them all (btrfs: BTRFS_DELAYED_BACKGROUND is
/// 128 per root, with a hard limit above; records here are 100 bytes or so).
pub const MAX_ITEMS: usize = 4096;

/// What the delayed items are written to: transactions that commit, snapshots of the last
/// commit, and inode records in both.
pub trait InodeStore {
    /// A write transaction.
    type Txn<'s>
    where
        Self: 's;
    /// A consistent snapshot of the last commit.
    type Snap<'s>
    where
        Self: 's;
    /// Begin a write transaction.
    fn begin(&self) -> Result<Self::Txn<'_>, FsError>;
    /// Write inode records into `txn`, with the number of the transaction writing them.
    fn put(txn: &Self::Txn<'_>, records: &[(u64, Inode)], seq: u64) -> Result<(), FsError>;
    /// The number of the last committed transaction that wrote delayed records (0: none).
    fn seq(snap: &Self::Snap<'_>) -> Result<u64, FsError>;
    /// Commit `txn`, durably when asked (or when due).
    fn commit(&self, txn: Self::Txn<'_>, durable: bool) -> Result<(), FsError>;
    /// A snapshot of the last commit.
    fn snapshot(&self) -> Result<Self::Snap<'_>, FsError>;
    /// `ino`'s record in `snap` (ENOENT when it has none).
    fn get(snap: &Self::Snap<'_>, ino: u64) -> Result<Inode, FsError>;
    /// Make every commit durable.
    fn sync(&self) -> Result<(), FsError>;
    /// Make the commits durable when the commit interval has passed.
    fn commit_if_due(&self) -> Result<bool, FsError>;
}

impl InodeStore for Store {
    type Txn<'s> = store::Txn<'s>;
    type Snap<'s> = store::Snapshot<'s>;

    fn begin(&self) -> Result<store::Txn<'_>, FsError> {
        self.write()
    }

    fn put(txn: &store::Txn<'_>, records: &[(u64, Inode)], seq: u64) -> Result<(), FsError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut inodes = txn.open_table(INODES)?;
        for (ino, inode) in records {
            // A delayed update only ever changes an inode the store has. One it does not
            // have is gone with commits a failed one took back (see store::recovery):
            // writing the record would bring back an inode without a name.
            if inodes.get(*ino)?.is_none() {
                continue;
            }
            inodes.insert(*ino, inode.to_bytes().as_slice())?;
        }
        txn.open_table(store::META)?.insert(SEQ_KEY, seq)?;
        Ok(())
    }

    fn seq(snap: &store::Snapshot<'_>) -> Result<u64, FsError> {
        store::counter(snap, SEQ_KEY)
    }

    fn commit(&self, txn: store::Txn<'_>, durable: bool) -> Result<(), FsError> {
        Store::commit(self, txn, durable)
    }

    fn snapshot(&self) -> Result<store::Snapshot<'_>, FsError> {
        self.read()
    }

    fn get(snap: &store::Snapshot<'_>, ino: u64) -> Result<Inode, FsError> {
        store::get_inode(&snap.open_table(INODES)?, ino)
    }

    fn sync(&self) -> Result<(), FsError> {
        Store::sync(self)
    }

    fn commit_if_due(&self) -> Result<bool, FsError> {
        Store::commit_if_due(self)
    }
}

/// META's counter of the transactions that wrote delayed records (see the module's header).
pub const SEQ_KEY: &str = "delayed_seq";

/// A delayed record: its generation (a number that grows with every change, so a writer
/// removes only what it wrote), the record, and the number of the last transaction that
/// wrote it (0: none yet).
#[derive(Clone)]
struct Item {
    generation: u64,
    inode: Inode,
    written_by: u64,
}

/// The newest record of each inode with a delayed change.
#[derive(Default)]
struct Items {
    map: HashMap<u64, Item>,
    generation: u64,
    /// The number of the last transaction that wrote items.
    seq: u64,
}

/// The store with its delayed inode items. Derefs to the store; `write`, `commit`, `sync`
/// and `commit_if_due` here take the items into account.
pub struct DelayedStore<B: InodeStore = Store> {
    store: B,
    /// Held for the life of every write transaction and by every delayed update.
    writer: Mutex<()>,
    items: Mutex<Items>,
    /// Delayed updates and their flushes, for `wring status`.
    pub delayed_counts: crate::counters::DelayedCounts,
}

/// A write transaction of the volume: the delayed items were written into it when it began;
/// they leave the map when it commits.
pub struct VolTxn<'s, B: InodeStore + 's = Store> {
    txn: B::Txn<'s>,
    /// (inode, generation) of each delayed item written into this transaction.
    applied: Vec<(u64, u64)>,
    _writer: MutexGuard<'s, ()>,
}

impl<'s, B: InodeStore + 's> std::ops::Deref for VolTxn<'s, B> {
    type Target = B::Txn<'s>;

    fn deref(&self) -> &B::Txn<'s> {
        &self.txn
    }
}

impl<B: InodeStore> std::ops::Deref for DelayedStore<B> {
    type Target = B;

    fn deref(&self) -> &B {
        &self.store
    }
}

impl<B: InodeStore> std::ops::DerefMut for DelayedStore<B> {
    fn deref_mut(&mut self) -> &mut B {
        &mut self.store
    }
}

/// A snapshot of the last commit taken when first asked for ([`DelayedStore::update`]).
pub struct LazySnap<'s, B: InodeStore + 's> {
    store: &'s B,
    snap: std::cell::OnceCell<B::Snap<'s>>,
}

impl<'s, B: InodeStore + 's> LazySnap<'s, B> {
    /// The snapshot (taken now if not yet).
    pub fn get(&self) -> Result<&B::Snap<'s>, FsError> {
        if let Some(s) = self.snap.get() {
            return Ok(s);
        }
        let s = self.store.snapshot()?;
        Ok(self.snap.get_or_init(|| s))
    }
}

/// What a delayed update does with an inode's record.
pub enum Change {
    /// Store this record as the inode's newest.
    Put(Inode),
    /// The change needs a transaction (it touches more than the record); nothing was kept.
    NeedsTxn,
    /// Nothing to change after all (the newest record already says it).
    Unchanged,
}

impl<B: InodeStore> DelayedStore<B> {
    /// The store, with no delayed items yet; transactions are numbered on from the store's
    /// last number.
    pub fn new(store: B) -> Result<DelayedStore<B>, FsError> {
        let seq = B::seq(&store.snapshot()?)?;
        Ok(DelayedStore {
            store,
            writer: Mutex::new(()),
            items: Mutex::new(Items {
                seq,
                ..Items::default()
            }),
            delayed_counts: crate::counters::DelayedCounts::default(),
        })
    }

    /// Begin a write transaction holding every delayed item (see [`VolTxn`]).
    pub fn write(&self) -> Result<VolTxn<'_, B>, FsError> {
        let writer = lock(&self.writer);
        let txn = self.store.begin()?;
        let (applied, records, seq) = {
            let mut items = lock(&self.items);
            if items.map.is_empty() {
                (Vec::new(), Vec::new(), 0)
            } else {
                items.seq += 1;
                let seq = items.seq;
                let (applied, records): (Vec<_>, Vec<_>) = items
                    .map
                    .iter_mut()
                    .map(|(&ino, item)| {
                        item.written_by = seq;
                        ((ino, item.generation), (ino, item.inode.clone()))
                    })
                    .unzip();
                (applied, records, seq)
            }
        };
        B::put(&txn, &records, seq)?;
        Ok(VolTxn {
            txn,
            applied,
            _writer: writer,
        })
    }

    /// Commit `t` (durable when asked or when the commit interval has passed, see
    /// [`Store::commit`]); the delayed items it wrote are then no longer delayed.
    pub fn commit(&self, t: VolTxn<'_, B>, durable: bool) -> Result<(), FsError> {
        let VolTxn {
            txn,
            applied,
            _writer,
        } = t;
        self.store.commit(txn, durable)?;
        if !applied.is_empty() {
            let mut items = lock(&self.items);
            for (ino, g) in &applied {
                if items.map.get(ino).is_some_and(|i| i.generation == *g) {
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

    /// The newest record of `ino`: its delayed one, else the last commit's. The map is looked
    /// at first: an item leaves it only after its commit, so one not found is in the
    /// snapshot taken next (the other order could miss it in both); an item a transaction
    /// wrote counts only while the snapshot's number is below that transaction's.
    pub fn inode(&self, ino: u64) -> Result<Inode, FsError> {
        let item = lock(&self.items).map.get(&ino).cloned();
        if let Some(i) = item.as_ref().filter(|i| i.written_by == 0) {
            // No transaction has written it: newer than any commit, no snapshot needed.
            return Ok(i.inode.clone());
        }
        let snap = self.store.snapshot()?;
        match item {
            Some(i) if B::seq(&snap)? < i.written_by => Ok(i.inode),
            _ => B::get(&snap, ino),
        }
    }

    /// A snapshot of the last commit with the delayed records as they were when it was taken,
    /// for a reader of many inodes (`wring stat`'s walk): a record not among them was written
    /// by a commit the snapshot has (items leave the map only after their commit, and the
    /// snapshot is taken under the map's lock). Looking in the live map while walking an older
    /// snapshot would miss an item committed and dropped in between.
    pub fn snapshot(&self) -> Result<(B::Snap<'_>, HashMap<u64, Inode>), FsError> {
        let items = lock(&self.items);
        let snap = self.store.snapshot()?;
        let seq = B::seq(&snap)?;
        let records = items
            .map
            .iter()
            .filter(|(_, i)| i.written_by == 0 || seq < i.written_by)
            .map(|(&ino, i)| (ino, i.inode.clone()));
        Ok((snap, records.collect()))
    }

    /// Drop `ino`'s item without writing it: the inode is an orphan nobody holds any more, so
    /// nothing can read the record again and the next purge (or, after a crash, the next
    /// mount) deletes it — as btrfs drops the delayed item of an inode it evicts for deletion.
    /// rm -rf's files each get one (the kernel's flush of the ctime the unlink gave them).
    /// An item a running transaction already wrote stays written; its commit then finds
    /// nothing to remove.
    pub fn discard(&self, ino: u64) {
        if lock(&self.items).map.remove(&ino).is_some() {
            self.delayed_counts
                .discarded
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Delayed items held now.
    pub fn delayed_len(&self) -> usize {
        lock(&self.items).map.len()
    }

    /// Change `ino`'s record without a transaction: `f` gets its newest record and a snapshot
    /// of the last commit (to look at its xattrs; taken when first asked for: an inode with a
    /// delayed record and nothing to look up takes none), and says what to keep. No
    /// transaction runs meanwhile. Returns the kept record, or `None` when `f` needs a
    /// transaction.
    pub fn update(
        &self,
        ino: u64,
        f: impl FnOnce(Inode, &LazySnap<'_, B>) -> Result<Change, FsError>,
    ) -> Result<Option<Inode>, FsError> {
        let (inode, full) = {
            let _writer = lock(&self.writer);
            let snap = LazySnap {
                store: &self.store,
                snap: std::cell::OnceCell::new(),
            };
            // No transaction runs (the writer lock is held), and a committed one has removed
            // what it wrote: an item here is the newest record.
            let held = lock(&self.items).map.get(&ino).map(|i| i.inode.clone());
            let base = match held {
                Some(i) => i,
                None => B::get(snap.get()?, ino)?,
            };
            let Change::Put(inode) = f(base, &snap)? else {
                return Ok(None);
            };
            let mut items = lock(&self.items);
            items.generation += 1;
            let g = items.generation;
            let item = Item {
                generation: g,
                inode: inode.clone(),
                written_by: 0,
            };
            items.map.insert(ino, item);
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
    use crate::store::{Store, ROOT};
    use crate::volume::{NewInode, SetAttr};
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

    /// Once a change to a file this mount made without xattrs is delayed, a chmod or chown
    /// of it takes no snapshot (its record is in memory and it has no ACL or capabilities to
    /// adjust); what it set is durable after a sync.
    #[test]
    fn changes_to_a_bare_inode_with_a_delayed_record_take_no_snapshot() {
        let (dir, vol) = scratch("wring-delayed-bare");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        vol.setattr(a, &chmod(0o600)).unwrap();
        let reads = |v: &Volume| {
            let line = v.store.counts.line();
            let r = line.split_whitespace().find(|w| w.starts_with("read="));
            r.map(str::to_string).unwrap_or_default()
        };
        let before = reads(&vol);
        vol.setattr(a, &chmod(0o640)).unwrap();
        let chown = SetAttr {
            uid: Some(7),
            gid: Some(8),
            ..Default::default()
        };
        vol.setattr(a, &chown).unwrap();
        assert_eq!(
            reads(&vol),
            before,
            "a change to a bare inode took a snapshot"
        );
        vol.sync().unwrap();
        drop(vol);
        let vol = Volume::open(&dir, Options::default()).unwrap();
        let i = vol.inode(a).unwrap();
        assert_eq!((i.perm, i.uid, i.gid), (0o640, 7, 8));
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
        vol.setxattr(a, crate::volume::names::acl::ACCESS, &acl, 0)
            .unwrap();
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
    /// Stress: chmods (delayed) race with creates and file writes whose writeback commits
    /// (transactions that write the items), the committer's flush, syncs and getattrs. Each
    /// chmod thread owns its inodes and raises their mode one step at a time, so a reader
    /// must never see a mode go back (an item dropped before its commit is visible, or a
    /// transaction writing an older record over a newer item, would show as one), and after
    /// the last sync and a reopen every inode has its last mode.
    #[test]
    fn chmods_racing_transactions_and_syncs_keep_the_newest_mode() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        const THREADS: usize = 3;
        const PER: usize = 8;
        const STEPS: u32 = 0o177;
        let (dir, vol) = scratch("wring-delayed-stress");
        let vol = Arc::new(vol);
        let inos: Vec<u64> = (0..THREADS * PER)
            .map(|i| {
                let name = format!("f{i}");
                let new = NewInode::file(0o600);
                vol.create(ROOT, name.as_bytes(), new).unwrap().0
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let chmods: Vec<_> = (0..THREADS)
            .map(|t| {
                let (vol, mine) = (vol.clone(), inos[t * PER..(t + 1) * PER].to_vec());
                std::thread::spawn(move || {
                    for step in 1..=STEPS {
                        for &ino in &mine {
                            vol.setattr(ino, &chmod(0o600 + step)).unwrap();
                        }
                    }
                })
            })
            .collect();
        let others = {
            let (vol, stop) = (vol.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let name = format!("g{n}");
                    let (g, _) = vol
                        .create(ROOT, name.as_bytes(), NewInode::file(0o644))
                        .unwrap();
                    vol.write(g, 0, b"some bytes", None).unwrap();
                    match n % 3 {
                        0 => vol.fsync(g).unwrap(),
                        1 => vol.store.flush().unwrap(),
                        _ => vol.sync().unwrap(),
                    }
                }
            })
        };
        let reader = {
            let (vol, stop, inos) = (vol.clone(), stop.clone(), inos.clone());
            std::thread::spawn(move || {
                let mut seen = vec![0u32; inos.len()];
                while !stop.load(Ordering::Relaxed) {
                    for (k, &ino) in inos.iter().enumerate() {
                        let perm = vol.inode(ino).unwrap().perm;
                        assert!(
                            perm >= seen[k],
                            "inode {ino}: mode {perm:o} after {:o}",
                            seen[k]
                        );
                        seen[k] = perm;
                    }
                }
            })
        };
        for c in chmods {
            c.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        others.join().unwrap();
        reader.join().unwrap();
        vol.sync().unwrap();
        let vol = Arc::into_inner(vol).unwrap();
        drop(vol);
        let vol = Volume::open(&dir, Options::default()).unwrap();
        for &ino in &inos {
            assert_eq!(vol.inode(ino).unwrap().perm, 0o600 + STEPS, "inode {ino}");
        }
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Model-checked protocol (shuttle) on a toy store: delayed updates (a chmod's), write
/// transactions that change the same inode in the transaction (a writeback's size), the
/// committer's flush and a sync race with readers. After every run no change is lost — the
/// durable record has the last mode and every size step — and meanwhile no reader (one
/// inode, or the many-inode snapshot) ever saw a mode or a size go back.
///
/// Run with `cargo test -p wring-fs --features shuttle --lib model`.
#[cfg(all(test, feature = "shuttle"))]
mod model {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use shuttle::sync::Arc;
    use shuttle::thread;

    use super::{Change, DelayedStore, InodeStore};
    use crate::error::{errno, FsError};
    use crate::store::records::{Inode, Kind};
    use crate::sync::{lock, Mutex, MutexGuard};

    const ITERATIONS: usize = 3000;

    /// The last commit (its records and its `delayed_seq`), the durable one, and a write lock
    /// (redb's: one writer at a time).
    #[derive(Default)]
    struct Toy {
        db: Mutex<ToySnap>,
        durable: Mutex<HashMap<u64, Inode>>,
        write_lock: Mutex<()>,
    }

    /// Records and the number of the last transaction that wrote delayed ones.
    #[derive(Default, Clone)]
    struct ToySnap {
        records: HashMap<u64, Inode>,
        seq: u64,
    }

    impl std::ops::Index<&u64> for ToySnap {
        type Output = Inode;

        fn index(&self, ino: &u64) -> &Inode {
            &self.records[ino]
        }
    }

    struct ToyTxn<'s> {
        _lock: MutexGuard<'s, ()>,
        base: HashMap<u64, Inode>,
        pending: RefCell<HashMap<u64, Inode>>,
        seq: std::cell::Cell<Option<u64>>,
    }

    impl ToyTxn<'_> {
        fn get(&self, ino: u64) -> Inode {
            let pending = self.pending.borrow();
            pending.get(&ino).unwrap_or(&self.base[&ino]).clone()
        }
    }

    impl InodeStore for Toy {
        type Txn<'s> = ToyTxn<'s>;
        type Snap<'s> = ToySnap;

        fn begin(&self) -> Result<ToyTxn<'_>, FsError> {
            let guard = lock(&self.write_lock);
            Ok(ToyTxn {
                _lock: guard,
                base: lock(&self.db).records.clone(),
                pending: RefCell::default(),
                seq: std::cell::Cell::new(None),
            })
        }

        fn put(txn: &ToyTxn<'_>, records: &[(u64, Inode)], seq: u64) -> Result<(), FsError> {
            if !records.is_empty() {
                txn.pending.borrow_mut().extend(records.iter().cloned());
                txn.seq.set(Some(seq));
            }
            Ok(())
        }

        fn seq(snap: &ToySnap) -> Result<u64, FsError> {
            Ok(snap.seq)
        }

        fn commit(&self, txn: ToyTxn<'_>, durable: bool) -> Result<(), FsError> {
            let mut db = lock(&self.db);
            db.records.extend(txn.pending.into_inner());
            if let Some(seq) = txn.seq.get() {
                db.seq = seq;
            }
            if durable {
                *lock(&self.durable) = db.records.clone();
            }
            Ok(())
        }

        fn snapshot(&self) -> Result<ToySnap, FsError> {
            Ok(lock(&self.db).clone())
        }

        fn get(snap: &ToySnap, ino: u64) -> Result<Inode, FsError> {
            snap.records.get(&ino).cloned().ok_or(errno(libc::ENOENT))
        }

        fn sync(&self) -> Result<(), FsError> {
            let txn = self.begin()?;
            self.commit(txn, true)
        }

        fn commit_if_due(&self) -> Result<bool, FsError> {
            Ok(false)
        }
    }

    const INO: u64 = 7;
    const OTHER: u64 = 8;

    fn store() -> Arc<DelayedStore<Toy>> {
        let toy = Toy::default();
        for ino in [INO, OTHER] {
            lock(&toy.db)
                .records
                .insert(ino, Inode::new(Kind::File, 0o600, 0, 0));
        }
        Arc::new(DelayedStore::new(toy).unwrap())
    }

    fn chmod(s: &DelayedStore<Toy>, ino: u64, perm: u32) {
        let kept = s.update(ino, |mut i, _| {
            i.perm = perm;
            Ok(Change::Put(i))
        });
        assert!(matches!(kept, Ok(Some(_))));
    }

    /// A writeback's transaction: the inode as the transaction sees it, one byte longer.
    fn grow(s: &DelayedStore<Toy>, ino: u64) {
        let t = s.write().unwrap();
        let mut i = t.get(ino);
        i.size += 1;
        // A change of the transaction's own, not a delayed record: no number.
        t.pending.borrow_mut().insert(ino, i);
        s.commit(t, false).unwrap();
    }

    /// Reads `ino` twice each way; a mode or size that goes back fails.
    fn read_monotonic(s: &DelayedStore<Toy>, ino: u64) {
        let mut last = (0, 0);
        for _ in 0..2 {
            for i in [s.inode(ino).unwrap(), {
                let (snap, delayed) = s.snapshot().unwrap();
                delayed
                    .get(&ino)
                    .cloned()
                    .unwrap_or_else(|| snap[&ino].clone())
            }] {
                assert!(
                    i.perm >= last.0 && i.size >= last.1,
                    "read ({:o}, {}) after ({:o}, {})",
                    i.perm,
                    i.size,
                    last.0,
                    last.1
                );
                last = (i.perm, i.size);
            }
        }
    }

    #[test]
    fn delayed_updates_racing_transactions_lose_nothing_and_never_go_back() {
        shuttle::check_random(
            || {
                let s = store();
                let chmods = {
                    let s = Arc::clone(&s);
                    thread::spawn(move || {
                        chmod(&s, INO, 0o601);
                        chmod(&s, OTHER, 0o601);
                        chmod(&s, INO, 0o602);
                    })
                };
                let writeback = {
                    let s = Arc::clone(&s);
                    thread::spawn(move || {
                        grow(&s, INO);
                        grow(&s, INO);
                    })
                };
                let committer = {
                    let s = Arc::clone(&s);
                    thread::spawn(move || s.flush().unwrap())
                };
                let reader = {
                    let s = Arc::clone(&s);
                    thread::spawn(move || read_monotonic(&s, INO))
                };
                for t in [chmods, writeback, committer, reader] {
                    t.join().unwrap();
                }
                s.sync().unwrap();
                assert_eq!(s.delayed_len(), 0);
                let durable = lock(&s.durable).clone();
                assert_eq!((durable[&INO].perm, durable[&INO].size), (0o602, 2));
                assert_eq!(durable[&OTHER].perm, 0o601);
            },
            ITERATIONS,
        );
    }

    /// A sync racing a chmod: once both are done and a second sync ran, the chmod is durable;
    /// a chmod that returned before a sync began is durable when that sync returns.
    #[test]
    fn a_chmod_before_a_sync_is_durable_after_it() {
        shuttle::check_random(
            || {
                let s = store();
                let t = {
                    let s = Arc::clone(&s);
                    thread::spawn(move || {
                        chmod(&s, INO, 0o640);
                        s.sync().unwrap();
                        assert_eq!(lock(&s.durable)[&INO].perm, 0o640);
                    })
                };
                let other = {
                    let s = Arc::clone(&s);
                    thread::spawn(move || {
                        grow(&s, OTHER);
                        s.sync().unwrap();
                    })
                };
                t.join().unwrap();
                other.join().unwrap();
                assert_eq!(lock(&s.durable)[&OTHER].size, 1);
            },
            ITERATIONS,
        );
    }
}
