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
//! Creates, mkdirs, unlinks and rmdirs are delayed the same way, with their directory entries
//! ([`names`]).
//!
//! The protocol is generic over what it sits on ([`InodeStore`]): the redb [`Store`], or in the
//! shuttle model (`cargo test -p wring-fs --features shuttle --lib model`) a toy store.

mod names;

pub(crate) use names::{merge, Listing, NameEntry, Record, Written};

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::error::FsError;
use crate::store::records::{Inode, Kind};
use crate::store::{self, Store, DIRENTS, INODES, ORPHANS};
use crate::sync::{lock, Mutex, MutexGuard};
use redb::ReadableTable;

/// Delayed items held before an update writes them all (btrfs: BTRFS_DELAYED_BACKGROUND is
/// 128 per root, with a hard limit above; records here are 100 bytes or so).
pub(crate) const MAX_ITEMS: usize = 4096;

/// What the delayed items are written to: transactions that commit, snapshots of the last
/// commit, and inode records in both.
pub(crate) trait InodeStore {
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
    /// Write delayed records and entries into `txn`, with the number of the transaction
    /// writing them.
    fn put(txn: &Self::Txn<'_>, written: &Written, seq: u64) -> Result<(), FsError>;
    /// The number of the last committed transaction that wrote delayed records (0: none).
    fn seq(snap: &Self::Snap<'_>) -> Result<u64, FsError>;
    /// Commit `txn`, durably when asked (or when due).
    fn commit(&self, txn: Self::Txn<'_>, durable: bool) -> Result<(), FsError>;
    /// A snapshot of the last commit.
    fn snapshot(&self) -> Result<Self::Snap<'_>, FsError>;
    /// `ino`'s record in `snap` (ENOENT when it has none).
    fn get(snap: &Self::Snap<'_>, ino: u64) -> Result<Inode, FsError>;
    /// What `name` in `parent` is in `snap`.
    fn name(
        snap: &Self::Snap<'_>,
        parent: u64,
        name: &[u8],
    ) -> Result<Option<(u64, Kind)>, FsError>;
    /// The next inode number `snap`'s counter hands out.
    fn next_ino(snap: &Self::Snap<'_>) -> Result<u64, FsError>;
    /// The parent of directory `dir` in `snap`.
    fn parent(snap: &Self::Snap<'_>, dir: u64) -> Result<u64, FsError>;
    /// Whether `f` says true of the name of any entry of `dir` in `snap` (stops there).
    fn any_name(
        snap: &Self::Snap<'_>,
        dir: u64,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, FsError>;
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

    fn put(txn: &store::Txn<'_>, written: &Written, seq: u64) -> Result<(), FsError> {
        if written.is_empty() {
            return Ok(());
        }
        let mut made = 0i64;
        {
            let mut inodes = txn.open_table(INODES)?;
            let mut orphans = txn.open_table(ORPHANS)?;
            let mut parents = txn.open_table(store::PARENTS)?;
            for r in &written.records {
                // A delayed update only ever changes an inode the store has, or one a delayed
                // create made. One it does not have is gone with commits a failed one took
                // back (see store::recovery): writing the record would bring back an inode
                // without a name.
                if inodes.get(r.ino)?.is_none() {
                    if !r.new {
                        continue;
                    }
                    made += 1;
                    if r.parent != 0 {
                        parents.insert(r.ino, r.parent)?;
                    }
                }
                inodes.insert(r.ino, r.inode.to_bytes().as_slice())?;
                if r.orphan && r.inode.nlink == 0 {
                    orphans.insert(r.ino, ())?;
                }
            }
            // After the records. A delayed entry is the name's whole truth (see names.rs):
            // it replaces whatever the last commit has under the key, whichever inode that
            // was. Only an entry naming an inode or a directory the store lacks (gone with
            // commits a failed one took back) is not written: the name goes instead, so no
            // entry ever points at nothing.
            let mut dirents = txn.open_table(DIRENTS)?;
            for (parent, name, entry) in &written.names {
                let key = (*parent, name.as_slice());
                match *entry {
                    NameEntry::Is(ino, kind) => {
                        if inodes.get(*parent)?.is_some() && inodes.get(ino)?.is_some() {
                            dirents.insert(key, (ino, kind as u8))?;
                        } else {
                            log::warn!(
                                "a delayed entry in directory {parent} names inode {ino}, \
                                 which the store lacks: the name is dropped"
                            );
                            dirents.remove(key)?;
                        }
                    }
                    NameEntry::Removed => {
                        dirents.remove(key)?;
                    }
                }
            }
        }
        if written.next_ino > 0 {
            let stored = txn
                .open_table(store::META)?
                .get("next_ino")?
                .map(|v| v.value());
            if written.next_ino > stored.unwrap_or(0) {
                txn.set_counter("next_ino", written.next_ino)?;
            }
        }
        store::add_counter(txn, "inodes", made)?;
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

    fn name(
        snap: &store::Snapshot<'_>,
        parent: u64,
        name: &[u8],
    ) -> Result<Option<(u64, Kind)>, FsError> {
        entry_of(&snap.open_table(DIRENTS)?, parent, name)
    }

    fn parent(snap: &store::Snapshot<'_>, dir: u64) -> Result<u64, FsError> {
        store::parent_of(snap, dir)
    }

    fn any_name(
        snap: &store::Snapshot<'_>,
        dir: u64,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, FsError> {
        let dirents = snap.open_table(DIRENTS)?;
        for r in dirents.range((dir, &[][..])..(dir + 1, &[][..]))? {
            if f(r?.0.value().1) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn next_ino(snap: &store::Snapshot<'_>) -> Result<u64, FsError> {
        let meta = snap.open_table(store::META)?;
        let next = meta.get("next_ino")?.map(|v| v.value());
        // As store::next_counter: a missing counter is damage, and so is the last number.
        match next.filter(|&n| n < u64::MAX) {
            Some(n) => Ok(n),
            None => {
                log::error!("the store's next_ino counter is missing or exhausted; run wring fsck");
                Err(crate::error::errno(libc::EUCLEAN))
            }
        }
    }

    fn sync(&self) -> Result<(), FsError> {
        Store::sync(self)
    }

    fn commit_if_due(&self) -> Result<bool, FsError> {
        Store::commit_if_due(self)
    }
}

/// Look a name up in a directory table (of a transaction or a snapshot): the store's side of
/// [`InodeStore::name`], and of the namespace's lookups inside a write transaction.
pub(crate) fn entry_of<T: ReadableTable<(u64, &'static [u8]), (u64, u8)>>(
    dirents: &T,
    parent: u64,
    name: &[u8],
) -> Result<Option<(u64, Kind)>, FsError> {
    let found = dirents.get((parent, name))?.map(|v| v.value());
    Ok(found.and_then(|(ino, k)| Kind::of_entry(k).ok().map(|k| (ino, k))))
}

/// META's counter of the transactions that wrote delayed records (see the module's header).
pub(crate) const SEQ_KEY: &str = "delayed_seq";

/// A delayed record: its generation (a number that grows with every change, so a writer
/// removes only what it wrote), the record, and the number of the last transaction that
/// wrote it (0: none yet).
/// `new` and `orphan` are a [`Record`]'s, kept until a commit writes the record.
#[derive(Clone)]
struct Item {
    generation: u64,
    inode: Inode,
    written_by: u64,
    new: bool,
    orphan: bool,
    parent: u64,
}

/// The newest record of each inode with a delayed change, and the delayed entries.
#[derive(Default)]
struct Items {
    map: HashMap<u64, Item>,
    names: names::NameMap,
    generation: u64,
    /// The number of the last transaction that wrote items.
    seq: u64,
    /// The next inode number past every delayed create since the last commit (0: none).
    next_ino: u64,
}

impl Items {
    /// Delayed records and entries held.
    fn len(&self) -> usize {
        self.map.len() + self.names.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep `inode` as `ino`'s newest record (with the flags of the one it replaces).
    fn put(&mut self, r: Record) {
        self.generation += 1;
        let ino = r.ino;
        let mut item = Item::replacing(self.map.get(&ino), r);
        item.generation = self.generation;
        self.map.insert(ino, item);
    }

    /// Mark everything held as written by transaction `seq`; what it writes, and the
    /// (key, generation) of each item for its commit to remove.
    fn write_all(&mut self, seq: u64) -> (Written, Applied) {
        let mut written = Written {
            next_ino: self.next_ino,
            ..Written::default()
        };
        let mut applied = Applied::default();
        for (&ino, item) in self.map.iter_mut() {
            item.written_by = seq;
            applied.inodes.push((ino, item.generation));
            written.records.push(Record {
                ino,
                inode: item.inode.clone(),
                new: item.new,
                orphan: item.orphan,
                parent: item.parent,
            });
        }
        for ((parent, name), item) in self.names.iter_mut() {
            item.written_by = seq;
            applied
                .names
                .push(((*parent, name.clone()), item.generation));
            written.names.push((*parent, name.clone(), item.entry));
        }
        (written, applied)
    }

    /// Remove what a committed transaction wrote and nobody changed since.
    fn remove_applied(&mut self, applied: &Applied) {
        for (ino, g) in &applied.inodes {
            if self.map.get(ino).is_some_and(|i| i.generation == *g) {
                self.map.remove(ino);
            }
        }
        for (key, g) in &applied.names {
            if self.names.get(key).is_some_and(|i| i.generation == *g) {
                self.names.remove(key);
            }
        }
    }
}

/// What a transaction wrote: (key, generation) of each record and entry.
#[derive(Default)]
struct Applied {
    inodes: Vec<(u64, u64)>,
    names: Vec<((u64, Vec<u8>), u64)>,
}

impl Applied {
    fn len(&self) -> usize {
        self.inodes.len() + self.names.len()
    }
}

/// The store with its delayed inode items. Derefs to the store; `write`, `commit`, `sync`
/// and `commit_if_due` here take the items into account.
pub(crate) struct DelayedStore<B: InodeStore = Store> {
    store: B,
    /// Held for the life of every write transaction and by every delayed update.
    writer: Mutex<()>,
    items: Mutex<Items>,
    /// Delayed updates and their flushes, for `wring status`.
    pub delayed_counts: crate::counters::DelayedCounts,
}

/// A write transaction of the volume: the delayed items were written into it when it began;
/// they leave the map when it commits.
pub(crate) struct VolTxn<'s, B: InodeStore + 's = Store> {
    txn: B::Txn<'s>,
    /// The delayed items written into this transaction.
    applied: Applied,
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
pub(crate) struct LazySnap<'s, B: InodeStore + 's> {
    store: &'s B,
    snap: std::cell::OnceCell<B::Snap<'s>>,
}

impl<'s, B: InodeStore + 's> LazySnap<'s, B> {
    /// No snapshot yet.
    fn new(store: &'s B) -> LazySnap<'s, B> {
        LazySnap {
            store,
            snap: std::cell::OnceCell::new(),
        }
    }

    /// The snapshot (taken now if not yet).
    pub(crate) fn get(&self) -> Result<&B::Snap<'s>, FsError> {
        if let Some(s) = self.snap.get() {
            return Ok(s);
        }
        let s = self.store.snapshot()?;
        Ok(self.snap.get_or_init(|| s))
    }
}

/// What a delayed update does with an inode's record.
pub(crate) enum Change {
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
    pub(crate) fn new(store: B) -> Result<DelayedStore<B>, FsError> {
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
    pub(crate) fn write(&self) -> Result<VolTxn<'_, B>, FsError> {
        let writer = lock(&self.writer);
        let txn = self.store.begin()?;
        let (written, applied, seq) = {
            let mut items = lock(&self.items);
            if items.is_empty() {
                (Written::default(), Applied::default(), 0)
            } else {
                items.seq += 1;
                let seq = items.seq;
                let (written, applied) = items.write_all(seq);
                (written, applied, seq)
            }
        };
        B::put(&txn, &written, seq)?;
        Ok(VolTxn {
            txn,
            applied,
            _writer: writer,
        })
    }

    /// Commit `t` (durable when asked or when the commit interval has passed, see
    /// [`Store::commit`]); the delayed items it wrote are then no longer delayed.
    pub(crate) fn commit(&self, t: VolTxn<'_, B>, durable: bool) -> Result<(), FsError> {
        let VolTxn {
            txn,
            applied,
            _writer,
        } = t;
        self.store.commit(txn, durable)?;
        let mut items = lock(&self.items);
        // Any transaction may have handed out inode numbers: the next delayed create reads
        // the counter again.
        items.next_ino = 0;
        if applied.len() > 0 {
            items.remove_applied(&applied);
            self.delayed_counts.flushed(applied.len());
        }
        Ok(())
    }

    /// Make every commit and every delayed item durable (fsync, sync, unmount).
    pub(crate) fn sync(&self) -> Result<(), FsError> {
        if lock(&self.items).is_empty() {
            // Also where a store opened for fsck says there is nothing to do.
            return self.store.sync();
        }
        let t = self.write()?;
        self.commit(t, true)
    }

    /// The committer's tick: write the delayed items, then make the commits durable once the
    /// commit interval has passed (see [`Store::commit_if_due`]).
    pub(crate) fn commit_if_due(&self) -> Result<bool, FsError> {
        self.flush()?;
        self.store.commit_if_due()
    }

    /// Write the delayed items in one transaction (not a durable one unless it is due).
    pub(crate) fn flush(&self) -> Result<(), FsError> {
        if lock(&self.items).is_empty() {
            return Ok(());
        }
        let t = self.write()?;
        self.commit(t, false)
    }

    /// The newest record of `ino`: its delayed one, else the last commit's. The map is looked
    /// at first: an item leaves it only after its commit, so one not found is in the
    /// snapshot taken next (the other order could miss it in both); an item a transaction
    /// wrote counts only while the snapshot's number is below that transaction's.
    pub(crate) fn inode(&self, ino: u64) -> Result<Inode, FsError> {
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

    /// A snapshot of the last commit and `ino`'s record in it; while the snapshot has none,
    /// the record `ino`'s delayed create kept when the snapshot was taken (ENOENT when there
    /// was none). Taken under the map's lock, as [`DelayedStore::snapshot`] is. The newest
    /// record instead can come from commits after the snapshot: a read that took the file's
    /// size from it and its extents from the snapshot found none of them, and read a file
    /// created, written and written back meanwhile as zeros.
    pub(crate) fn snapshot_with(
        &self,
        ino: u64,
    ) -> Result<(B::Snap<'_>, Result<Inode, FsError>), FsError> {
        let (snap, item) = {
            let items = lock(&self.items);
            let snap = self.store.snapshot()?;
            let item = items.map.get(&ino).map(|i| (i.written_by, i.inode.clone()));
            (snap, item)
        };
        let record = match B::get(&snap, ino) {
            Err(FsError::Errno(libc::ENOENT)) => match item {
                Some((by, inode)) if by == 0 || B::seq(&snap)? < by => Ok(inode),
                _ => Err(FsError::Errno(libc::ENOENT)),
            },
            r => r,
        };
        Ok((snap, record))
    }

    /// A snapshot of the last commit with the delayed records as they were when it was taken,
    /// for a reader of many inodes (`wring stat`'s walk): a record not among them was written
    /// by a commit the snapshot has (items leave the map only after their commit, and the
    /// snapshot is taken under the map's lock). Looking in the live map while walking an older
    /// snapshot would miss an item committed and dropped in between.
    pub(crate) fn snapshot(&self) -> Result<(B::Snap<'_>, HashMap<u64, Inode>), FsError> {
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
    /// nothing to remove. The record of a delayed unlink stays: the purge must find the
    /// inode without links (and a crash, in the orphan table). That of an inode a delayed
    /// create made goes too: the store never had it.
    pub(crate) fn discard(&self, ino: u64) {
        let mut items = lock(&self.items);
        if items.map.get(&ino).is_some_and(|i| i.orphan && !i.new) {
            return;
        }
        if items.map.remove(&ino).is_some() {
            self.delayed_counts
                .discarded
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Delayed records and entries held now.
    pub(crate) fn delayed_len(&self) -> usize {
        lock(&self.items).len()
    }

    /// Change `ino`'s record without a transaction: `f` gets its newest record and a snapshot
    /// of the last commit (to look at its xattrs; taken when first asked for: an inode with a
    /// delayed record and nothing to look up takes none), and says what to keep. No
    /// transaction runs meanwhile. Returns the kept record, or `None` when `f` needs a
    /// transaction.
    pub(crate) fn update(
        &self,
        ino: u64,
        f: impl FnOnce(Inode, &LazySnap<'_, B>) -> Result<Change, FsError>,
    ) -> Result<Option<Inode>, FsError> {
        let (inode, full) = {
            let _writer = lock(&self.writer);
            let snap = LazySnap::new(&self.store);
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
            items.put(Record::of(ino, inode.clone()));
            self.delayed_counts.updates.fetch_add(1, Ordering::Relaxed);
            (inode, items.len() >= MAX_ITEMS)
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

    /// A fresh store in the temp dir named `name`, and the volume on it.
    pub(super) fn scratch(name: &str) -> (std::path::PathBuf, Volume) {
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
        // The create is delayed too: written now.
        vol.store.flush().unwrap();
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
        // A symlink is a transaction: it writes every delayed item (a's, and b's create).
        let l = NewInode {
            kind: crate::store::records::Kind::Symlink,
            target: Some(b"a"),
            ..NewInode::file(0o777)
        };
        vol.create(ROOT, b"l", l).unwrap();
        assert_eq!(
            vol.store.delayed_len(),
            0,
            "symlink's transaction left the items"
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

#[cfg(all(test, feature = "shuttle"))]
mod model;
