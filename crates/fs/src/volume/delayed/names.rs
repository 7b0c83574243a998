//! Delayed directory entries: a create, mkdir, unlink or rmdir that touches nothing but
//! entries and inode records is kept in memory — the entry (or its removal), the new or
//! changed inode records (a new directory's parent with its record), the parent's times and
//! link count — and written by the next write transaction, as the delayed inode items are
//! ([`super`]). Lookup and readdir look here before the store.
//!
//! Mirrors fs/btrfs/delayed-inode.c's delayed dir-index items: btrfs_insert_delayed_dir_index()
//! and btrfs_delete_delayed_dir_index() keep DIR_INDEX insertions and deletions in the
//! directory's btrfs_delayed_node, readdir merges them (btrfs_readdir_delayed_dir_index,
//! btrfs_should_delete_dir_index), and the transaction commit writes them. Where it differs:
//! btrfs still inserts DIR_ITEM (the name hash that lookup uses) at once in the running
//! transaction; here the entry itself is delayed, and lookup looks in the map first, because
//! a redb transaction cannot be joined by the next request the way a btrfs transaction is.
//!
//! # The invariant
//!
//! For every (directory, name), exactly one of the delayed map and the last commit is the
//! authority at any moment: the map's entry when it has one, else the store's. So a delayed
//! entry says what the name is *absolutely* — this inode, or nothing — never how to change
//! what the store had: a transaction writes it by inserting or removing the key, whatever
//! inode the store holds under it. A later change of the same name replaces the map's entry
//! (the newest wins); an entry leaves the map only when the commit that wrote it has landed
//! and nobody changed it since. Dropping an unwritten create's record (its inode unlinked
//! and forgotten before any commit) never drops the name's entry, so it can never uncover an
//! older removal's name in the store.
//!
//! Issue 40 broke this: a removal carried the inode it removed and was written only if the
//! store still named that inode. A name unlinked (its inode committed), made again and
//! unlinked again before a commit then left the first inode's entry in the store, pointing
//! at an inode the purge deleted: EEXIST on the next create, ENOENT on stat, a dangling
//! entry on disk. Tested directly (`a_name_removed_made_again_and_removed_again_is_gone_from_the_store`,
//! the shuttle models' `names_reused_*`) and against the kernel (wring-difftest).
//!
//! # Staging and readers
//!
//! A change is staged in [`Names`] under the writer lock (no transaction runs meanwhile, so
//! the newest state is the map over the last commit) and kept only when all of it is: a
//! change that finds it needs a transaction leaves nothing behind. Entries carry the same
//! commit-sequence marks as the inode items: a reader that finds an entry a transaction
//! wrote uses it only while its snapshot is older than that transaction (a name unlinked and
//! made again is never hidden by the older entry, nor shown after its removal committed).

use std::collections::BTreeMap;

use super::{DelayedStore, InodeStore, Item, LazySnap};
use crate::error::FsError;
use crate::store::records::{Inode, Kind};
use crate::sync::{lock, MutexGuard};

/// What a delayed entry says of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameEntry {
    /// The name is this inode, of this kind.
    Is(u64, Kind),
    /// The name is gone, whatever the last commit has under it.
    Removed,
}

impl NameEntry {
    /// The inode and kind the name has, if any.
    pub(crate) fn found(self) -> Option<(u64, Kind)> {
        match self {
            NameEntry::Is(ino, kind) => Some((ino, kind)),
            NameEntry::Removed => None,
        }
    }
}

/// A delayed entry: what it says, its generation (a writer removes only what it wrote) and
/// the number of the last transaction that wrote it (0: none yet).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameItem {
    pub(super) entry: NameEntry,
    pub(super) generation: u64,
    pub(super) written_by: u64,
}

impl NameItem {
    /// What the entry says to a reader whose snapshot has number `seq`: `None` when the
    /// snapshot already has the transaction that wrote it (read the snapshot instead).
    pub(crate) fn newer_than(&self, seq: u64) -> Option<NameEntry> {
        (self.written_by == 0 || seq < self.written_by).then_some(self.entry)
    }
}

/// An inode record as a transaction writes it.
#[derive(Clone)]
pub(crate) struct Record {
    /// Inode number.
    pub ino: u64,
    /// Its newest record.
    pub inode: Inode,
    /// Made by a delayed create: written even though the store has no record yet.
    pub new: bool,
    /// Left without a name by a delayed unlink while held: goes into the orphan table.
    pub orphan: bool,
    /// The parent of a directory a delayed mkdir made (0: none): goes into the parents table.
    pub parent: u64,
}

impl Record {
    pub(super) fn of(ino: u64, inode: Inode) -> Record {
        Record {
            ino,
            inode,
            new: false,
            orphan: false,
            parent: 0,
        }
    }
}

/// Everything delayed that one transaction writes.
#[derive(Default)]
pub(crate) struct Written {
    /// Inode records.
    pub records: Vec<Record>,
    /// Entries: (directory, name, what it is now).
    pub names: Vec<(u64, Vec<u8>, NameEntry)>,
    /// The next inode number past every delayed create (0: none made).
    pub next_ino: u64,
}

impl Written {
    /// Nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty() && self.names.is_empty()
    }
}

/// A delayed namespace change being staged (see the module's header): reads see the newest
/// state with what is staged so far; nothing is kept unless the change returns `Some`.
pub(crate) struct Names<'a, B: InodeStore + 'a> {
    store: &'a DelayedStore<B>,
    snap: LazySnap<'a, B>,
    inodes: Vec<Record>,
    names: Vec<(u64, Vec<u8>, NameEntry)>,
    next_ino: Option<u64>,
    _writer: MutexGuard<'a, ()>,
}

impl<'a, B: InodeStore + 'a> Names<'a, B> {
    /// The snapshot of the last commit (taken when first asked for).
    pub(crate) fn snap(&self) -> Result<&B::Snap<'a>, FsError> {
        self.snap.get()
    }

    /// `ino`'s newest record.
    pub(crate) fn inode(&self, ino: u64) -> Result<Inode, FsError> {
        if let Some(r) = self.inodes.iter().rev().find(|r| r.ino == ino) {
            return Ok(r.inode.clone());
        }
        // No transaction runs (the writer lock is held) and a committed one has removed what
        // it wrote: an item in the map is the newest record.
        let held = lock(&self.store.items)
            .map
            .get(&ino)
            .map(|i| i.inode.clone());
        match held {
            Some(i) => Ok(i),
            None => B::get(self.snap.get()?, ino),
        }
    }

    /// What `name` in `parent` is now.
    pub(crate) fn name(&self, parent: u64, name: &[u8]) -> Result<Option<(u64, Kind)>, FsError> {
        let staged = self.names.iter().rev();
        if let Some((_, _, e)) = staged.clone().find(|n| n.0 == parent && n.1 == name) {
            return Ok(e.found());
        }
        let key = (parent, name.to_vec());
        let held = lock(&self.store.items).names.get(&key).map(|n| n.entry);
        match held {
            Some(e) => Ok(e.found()),
            None => B::name(self.snap.get()?, parent, name),
        }
    }

    /// Whether directory `dir` has entries now.
    pub(crate) fn has_entries(&self, dir: u64) -> Result<bool, FsError> {
        let staged = self.names.iter().filter(|n| n.0 == dir);
        if staged.clone().any(|n| n.2.found().is_some()) {
            return Ok(true);
        }
        let mut removed: std::collections::HashSet<Vec<u8>> = staged.map(|n| n.1.clone()).collect();
        {
            let items = lock(&self.store.items);
            let range = items.names.range((dir, Vec::new())..(dir + 1, Vec::new()));
            for ((_, name), item) in range {
                if removed.contains(name) {
                    continue;
                }
                match item.entry {
                    NameEntry::Is(..) => return Ok(true),
                    NameEntry::Removed => {
                        removed.insert(name.clone());
                    }
                }
            }
        }
        B::any_name(self.snap.get()?, dir, &mut |name| !removed.contains(name))
    }

    /// A new inode number, handed out once (the store's counter is moved past it when the
    /// change is written).
    pub(crate) fn next_ino(&mut self) -> Result<u64, FsError> {
        let next = match self.next_ino {
            Some(n) => n,
            None => {
                let held = lock(&self.store.items).next_ino;
                held.max(B::next_ino(self.snap.get()?)?)
            }
        };
        self.next_ino = Some(next + 1);
        Ok(next)
    }

    /// Keep `inode` as `ino`'s newest record.
    pub(crate) fn put_inode(&mut self, ino: u64, inode: Inode) {
        self.inodes.push(Record::of(ino, inode));
    }

    /// Keep the record of an inode this change makes in `parent` (its parent is recorded
    /// when it is a directory).
    pub(crate) fn new_inode(&mut self, ino: u64, inode: Inode, parent: u64) {
        let dir = inode.kind == Kind::Dir;
        self.inodes.push(Record {
            new: true,
            parent: if dir { parent } else { 0 },
            ..Record::of(ino, inode)
        });
    }

    /// Keep `inode` as the record of `ino`, left without a name while held: an orphan.
    pub(crate) fn orphan(&mut self, ino: u64, inode: Inode) {
        self.inodes.push(Record {
            orphan: true,
            ..Record::of(ino, inode)
        });
    }

    /// Keep what `name` in `parent` is now.
    pub(crate) fn put_name(&mut self, parent: u64, name: &[u8], entry: NameEntry) {
        self.names.push((parent, name.to_vec(), entry));
    }
}

impl<B: InodeStore> DelayedStore<B> {
    /// Make a namespace change without a transaction: `f` reads the newest state and stages
    /// the change in [`Names`]; `Ok(None)` from it means a transaction is needed, and nothing
    /// is kept. No transaction runs meanwhile.
    pub(crate) fn change<T>(
        &self,
        f: impl FnOnce(&mut Names<'_, B>) -> Result<Option<T>, FsError>,
    ) -> Result<Option<T>, FsError> {
        let (out, full) = {
            let mut n = Names {
                store: self,
                snap: LazySnap::new(&self.store),
                inodes: Vec::new(),
                names: Vec::new(),
                next_ino: None,
                _writer: lock(&self.writer),
            };
            let Some(out) = f(&mut n)? else {
                return Ok(None);
            };
            let mut items = lock(&self.items);
            if let Some(next) = n.next_ino {
                items.next_ino = items.next_ino.max(next);
            }
            for r in n.inodes.drain(..) {
                items.put(r);
            }
            for (parent, name, entry) in n.names.drain(..) {
                items.generation += 1;
                let item = NameItem {
                    entry,
                    generation: items.generation,
                    written_by: 0,
                };
                items.names.insert((parent, name), item);
            }
            self.delayed_counts
                .names
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (out, items.len() >= super::MAX_ITEMS)
        };
        if full {
            // The change is kept whatever this says: a failed flush leaves everything to the
            // next transaction.
            if let Err(e) = self.flush() {
                log::warn!("writing the delayed items: {e}");
            }
        }
        Ok(Some(out))
    }

    /// What `name` in `parent` is: its delayed entry, else the last commit's (looked up in
    /// that order, as [`DelayedStore::inode`] does; an unwritten entry needs no snapshot).
    pub(crate) fn name(&self, parent: u64, name: &[u8]) -> Result<Option<(u64, Kind)>, FsError> {
        let item = lock(&self.items)
            .names
            .get(&(parent, name.to_vec()))
            .copied();
        if let Some(i) = item.filter(|i| i.written_by == 0) {
            return Ok(i.entry.found());
        }
        let snap = self.store.snapshot()?;
        let seq = B::seq(&snap)?;
        match item.and_then(|i| i.newer_than(seq)) {
            Some(e) => Ok(e.found()),
            None => B::name(&snap, parent, name),
        }
    }

    /// A snapshot of the last commit and the delayed entries of `dir` as they were when it
    /// was taken (under the map's lock, as [`DelayedStore::snapshot`]), by name, to [`merge`]
    /// into a listing read from it. Entries copied before the snapshot could be ones not
    /// written then, which a transaction has since written and changed (a rename): the
    /// listing would show both (the shuttle model found it).
    pub(crate) fn names_in(&self, dir: u64) -> Result<DirView<'_, B>, FsError> {
        let items = lock(&self.items);
        let snap = self.store.snapshot()?;
        let seq = B::seq(&snap)?;
        let range = items.names.range((dir, Vec::new())..(dir + 1, Vec::new()));
        let names = range.map(|((_, n), i)| (n.clone(), *i)).collect();
        let item = items.map.get(&dir);
        let parent = item.and_then(|i| i.parent_newer_than(seq));
        let record = item.filter(|i| i.newer_than(seq)).map(|i| i.inode.clone());
        Ok(DirView {
            snap,
            names,
            parent,
            record,
        })
    }

    /// The parent of directory `dir`: a delayed mkdir's, else the last commit's (looked up
    /// in that order, as [`DelayedStore::inode`] does).
    pub(crate) fn parent(&self, dir: u64) -> Result<u64, FsError> {
        let item = lock(&self.items)
            .map
            .get(&dir)
            .map(|i| (i.parent, i.written_by));
        let snap = self.store.snapshot()?;
        let seq = B::seq(&snap)?;
        match item {
            Some((p, w)) if p != 0 && (w == 0 || seq < w) => Ok(p),
            _ => B::parent(&snap, dir),
        }
    }
}

/// A directory's delayed entries, by name.
pub(super) type DelayedNames = Vec<(Vec<u8>, NameItem)>;

/// A snapshot of the last commit and what is delayed of one directory as it was then.
pub(crate) struct DirView<'s, B: InodeStore + 's> {
    /// The snapshot.
    pub snap: B::Snap<'s>,
    /// The directory's delayed entries, to [`merge`] into what the snapshot lists.
    pub names: DelayedNames,
    /// The directory's parent, when a delayed mkdir made it and the snapshot has not.
    pub parent: Option<u64>,
    /// The directory's delayed record, when newer than the snapshot's (after a delayed
    /// rmdir it has no links).
    pub record: Option<Inode>,
}

/// A directory's entries as `(name, inode, kind)`, sorted by name.
pub(crate) type Listing = Vec<(Vec<u8>, u64, Kind)>;

/// Merge `delayed` (from [`DelayedStore::names_in`]) into `listed`, a directory's entries
/// as `(name, inode, kind)` sorted by name from a snapshot numbered `seq`.
pub(crate) fn merge(listed: &mut Listing, delayed: &DelayedNames, seq: u64) {
    for (name, item) in delayed {
        let Some(entry) = item.newer_than(seq) else {
            continue;
        };
        let at = listed.binary_search_by(|(n, _, _)| n.as_slice().cmp(name));
        match (at, entry.found()) {
            (Ok(i), Some((ino, kind))) => listed[i] = (name.clone(), ino, kind),
            (Ok(i), None) => {
                listed.remove(i);
            }
            (Err(i), Some((ino, kind))) => listed.insert(i, (name.clone(), ino, kind)),
            (Err(_), None) => {}
        }
    }
}

/// The delayed entries, by directory and name.
pub(super) type NameMap = BTreeMap<(u64, Vec<u8>), NameItem>;

impl Item {
    /// The parent a delayed mkdir gave this directory, to a reader whose snapshot is `seq`.
    fn parent_newer_than(&self, seq: u64) -> Option<u64> {
        (self.parent != 0 && self.newer_than(seq)).then_some(self.parent)
    }

    /// Whether the record is newer than a snapshot numbered `seq`.
    fn newer_than(&self, seq: u64) -> bool {
        self.written_by == 0 || seq < self.written_by
    }

    /// A record carrying the flags of the one it replaces (see [`Record`]).
    pub(super) fn replacing(old: Option<&Item>, r: Record) -> Item {
        Item {
            generation: 0,
            inode: r.inode,
            written_by: 0,
            new: r.new || old.is_some_and(|o| o.new),
            orphan: r.orphan || old.is_some_and(|o| o.orphan),
            parent: old.map_or(0, |o| o.parent).max(r.parent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::scratch;
    use crate::store::records::Kind;
    use crate::store::ROOT;
    use crate::volume::NewInode;
    use crate::{Options, Volume};

    /// Write transactions begun so far (`wring status`'s count).
    fn writes(vol: &Volume) -> u64 {
        let line = vol.store.counts.line();
        let w = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("write="));
        w.and_then(|n| n.parse().ok()).unwrap()
    }

    fn dir() -> NewInode<'static> {
        NewInode {
            kind: Kind::Dir,
            ..NewInode::file(0o755)
        }
    }

    /// The names `readdir` gives for `dir`, but `.` and `..`.
    fn listed(vol: &Volume, dir: u64) -> Vec<(Vec<u8>, u64)> {
        let list = vol.readdir(dir, u64::MAX, 0).unwrap();
        list.iter()
            .skip(2)
            .map(|e| (e.name.clone(), e.ino))
            .collect()
    }

    /// Creates of directories and of files the kernel holds, and the files' unlinks, begin
    /// no transaction; lookup (`..` too), readdir and getattr see each at once (an unlinked file as an orphan without links);
    /// a name made again is the new inode; after a sync and a reopen the store has exactly
    /// that, counts its inodes right, and fsck finds nothing.
    #[test]
    fn creates_and_unlinks_are_delayed_seen_at_once_and_durable_after_sync() {
        let (path, vol) = scratch("wring-delayed-names");
        let before = writes(&vol);
        let (d, _) = vol.create(ROOT, b"d", dir()).unwrap();
        let (e, _) = vol.create(d, b"e", dir()).unwrap();
        assert_eq!(
            vol.lookup(e, b"..").unwrap().0,
            d,
            "a delayed mkdir's parent"
        );
        let dots = vol.readdir(e, u64::MAX - 1, 0).unwrap();
        assert_eq!((dots[0].ino, dots[1].ino), (e, d));
        assert_eq!(vol.inode(d).unwrap().nlink, 3);
        let mut inos = Vec::new();
        for i in 0..100 {
            let name = format!("f{i:03}");
            let (ino, _) = vol
                .create_held(d, name.as_bytes(), NewInode::file(0o644), 1)
                .unwrap();
            inos.push(ino);
        }
        for (i, &ino) in inos.iter().enumerate() {
            assert_eq!(vol.lookup(d, format!("f{i:03}").as_bytes()).unwrap().0, ino);
        }
        assert_eq!(listed(&vol, d).len(), 101);
        for i in (0..100).step_by(2) {
            vol.remove(d, format!("f{i:03}").as_bytes(), false).unwrap();
        }
        assert_eq!(
            writes(&vol),
            before,
            "a create or an unlink began a transaction"
        );
        let err = vol.lookup(d, b"f000").unwrap_err();
        assert_eq!(err.errno(), libc::ENOENT);
        assert_eq!(vol.inode(inos[0]).unwrap().nlink, 0, "the orphan");
        let left = listed(&vol, d);
        assert_eq!(left.len(), 51);
        assert!(left
            .iter()
            .all(|(n, _)| n == b"e" || n.last().unwrap() % 2 == 1));
        let (again, _) = vol
            .create_held(d, b"f000", NewInode::file(0o600), 1)
            .unwrap();
        assert_ne!(again, inos[0]);
        assert_eq!(vol.lookup(d, b"f000").unwrap().0, again);
        let f000 = listed(&vol, d).into_iter().find(|e| e.0 == b"f000");
        assert_eq!(f000.map(|e| e.1), Some(again));
        // The kernel forgets what it removed: those inodes go.
        for &ino in inos.iter().step_by(2) {
            vol.forget(ino, 1);
        }
        vol.sync().unwrap();
        assert_eq!(vol.store.delayed_len(), 0);
        for &ino in inos.iter().step_by(2) {
            assert!(vol.inode(ino).is_err(), "inode {ino} outlived its FORGET");
        }
        drop(vol);
        let vol = Volume::open(&path, Options::default()).unwrap();
        assert_eq!(vol.lookup(d, b"f000").unwrap().0, again);
        assert_eq!(vol.lookup(d, b"f001").unwrap().0, inos[1]);
        assert_eq!(listed(&vol, d).len(), 52);
        assert_eq!(vol.lookup(e, b"..").unwrap().0, d);
        // The root, d, e, 50 files and the one made again.
        assert_eq!(vol.statfs().unwrap().2, 1 + 2 + 50 + 1);
        drop(vol);
        let r = crate::admin::fsck::fsck(&path).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let _ = std::fs::remove_dir_all(&path);
    }

    /// Issue 40's six commands: a name unlinked (delayed, its old inode committed), made
    /// again and unlinked again before any commit. The second removal must take the name
    /// away whatever inode the store still has under it: the symlink made after it gets the
    /// name, and after a sync, a reopen and fsck the store holds exactly that.
    #[test]
    fn a_name_removed_made_again_and_removed_again_is_gone_from_the_store() {
        let (path, vol) = scratch("wring-delayed-reuse");
        let (d, _) = vol.create_held(ROOT, b"d", dir(), 1).unwrap();
        let file = || NewInode::file(0o644);
        let (old, _) = vol.create_held(d, b"n0", file(), 1).unwrap();
        vol.write(old, 0, b"old\n", None).unwrap();
        // `ln -s n0 n1` is a transaction: it writes the delayed create of n0.
        let (n1, _) = vol.create_held(d, b"n1", symlink(b"n0"), 1).unwrap();
        vol.remove(d, b"n1", false).unwrap();
        vol.remove(d, b"n0", false).unwrap();
        let (new, _) = vol.create_held(d, b"n0", file(), 1).unwrap();
        vol.write(new, 0, b"new\n", None).unwrap();
        vol.remove(d, b"n0", false).unwrap();
        for ino in [n1, old, new] {
            vol.forget(ino, 1);
        }
        assert_eq!(vol.lookup(d, b"n0").unwrap_err().errno(), libc::ENOENT);
        assert!(listed(&vol, d).is_empty(), "{:?}", listed(&vol, d));
        let (t, _) = vol.create_held(d, b"n0", symlink(b"t"), 1).unwrap();
        assert_eq!(vol.lookup(d, b"n0").unwrap().0, t);
        vol.sync().unwrap();
        drop(vol);
        let r = crate::admin::fsck::fsck(&path).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let vol = Volume::open(&path, Options::default()).unwrap();
        assert_eq!(listed(&vol, d), vec![(b"n0".to_vec(), t)]);
        assert_eq!(vol.readlink(t).unwrap(), b"t");
        drop(vol);
        let _ = std::fs::remove_dir_all(&path);
    }

    fn symlink(target: &'static [u8]) -> NewInode<'static> {
        NewInode {
            kind: Kind::Symlink,
            target: Some(target),
            ..NewInode::file(0o777)
        }
    }

    /// What a delayed change cannot say takes a transaction, as before: the unlink of a file
    /// nobody holds (it is deleted at once), and a create in a directory with something to
    /// inherit (here the compression property, which the new file gets).
    #[test]
    fn deletions_and_inheriting_creates_take_a_transaction() {
        let (path, vol) = scratch("wring-delayed-names-txn");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let before = writes(&vol);
        vol.remove(ROOT, b"a", false).unwrap();
        assert_eq!(writes(&vol), before + 1);
        assert!(vol.inode(a).is_err(), "deleted with its last link");
        let (d, _) = vol.create(ROOT, b"d", dir()).unwrap();
        vol.setxattr(d, crate::PROP_XATTR.as_bytes(), b"zstd:9", 0)
            .unwrap();
        let before = writes(&vol);
        let (f, _) = vol.create(d, b"f", NewInode::file(0o644)).unwrap();
        assert_eq!(writes(&vol), before + 1);
        let prop = vol.getxattr(f, crate::PROP_XATTR.as_bytes()).unwrap();
        assert_eq!(prop, b"zstd:9");
        drop(vol);
        let _ = std::fs::remove_dir_all(&path);
    }

    /// An rmdir of a directory the kernel holds is delayed too, once it is empty — of entries
    /// in the store and of delayed ones alike (ENOTEMPTY otherwise); the removed directory
    /// lists nothing while open and goes at its FORGET; the store ends consistent.
    #[test]
    fn an_rmdir_is_delayed_once_the_directory_is_empty() {
        let (path, vol) = scratch("wring-delayed-rmdir");
        let (d, _) = vol.create_held(ROOT, b"d", dir(), 1).unwrap();
        let (stored, _) = vol
            .create_held(d, b"stored", NewInode::file(0o644), 1)
            .unwrap();
        vol.store.flush().unwrap();
        let (fresh, _) = vol
            .create_held(d, b"fresh", NewInode::file(0o644), 1)
            .unwrap();
        let before = writes(&vol);
        let e = vol.remove(ROOT, b"d", true).unwrap_err();
        assert_eq!(e.errno(), libc::ENOTEMPTY, "entries delayed and stored");
        vol.remove(d, b"fresh", false).unwrap();
        let e = vol.remove(ROOT, b"d", true).unwrap_err();
        assert_eq!(e.errno(), libc::ENOTEMPTY, "an entry in the store");
        vol.remove(d, b"stored", false).unwrap();
        let fh = vol.opendir(d).unwrap();
        vol.remove(ROOT, b"d", true).unwrap();
        assert_eq!(writes(&vol), before, "an rmdir began a transaction");
        assert_eq!(vol.lookup(ROOT, b"d").unwrap_err().errno(), libc::ENOENT);
        assert_eq!(vol.readdir(d, fh, 0).unwrap_err().errno(), libc::ENOENT);
        assert_eq!(vol.inode(ROOT).unwrap().nlink, 2);
        vol.releasedir(d, fh).unwrap();
        for ino in [stored, fresh, d] {
            vol.forget(ino, 1);
        }
        vol.sync().unwrap();
        for ino in [stored, fresh, d] {
            assert!(vol.inode(ino).is_err(), "inode {ino} outlived its FORGET");
        }
        assert_eq!(vol.statfs().unwrap().2, 1);
        drop(vol);
        let r = crate::admin::fsck::fsck(&path).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let _ = std::fs::remove_dir_all(&path);
    }

    /// A file made by a delayed create reads, takes writes and xattrs, and is renamed,
    /// linked and written back like any other (each of those transactions writes the create
    /// first); a name unlinked and made again between commits is never hidden.
    #[test]
    fn a_delayed_file_is_a_file() {
        let (path, vol) = scratch("wring-delayed-names-file");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        assert_eq!(vol.read(a, 0, 10).unwrap(), b"");
        assert_eq!(vol.listxattr(a).unwrap(), Vec::<Vec<u8>>::new());
        vol.write(a, 0, b"hello", None).unwrap();
        vol.fsync(a).unwrap();
        assert_eq!(vol.read(a, 0, 10).unwrap(), b"hello");
        let (b, _) = vol
            .create_held(ROOT, b"b", NewInode::file(0o644), 1)
            .unwrap();
        vol.setxattr(b, b"user.x", b"1", 0).unwrap();
        vol.rename(ROOT, b"b", ROOT, b"c", 0).unwrap();
        vol.link(b, ROOT, b"l").unwrap();
        vol.remove(ROOT, b"c", false).unwrap();
        assert_eq!(vol.inode(b).unwrap().nlink, 1);
        assert_eq!(vol.lookup(ROOT, b"l").unwrap().0, b);
        vol.store.flush().unwrap();
        vol.remove(ROOT, b"l", false).unwrap();
        let (l2, _) = vol.create(ROOT, b"l", NewInode::file(0o644)).unwrap();
        vol.store.flush().unwrap();
        assert_eq!(vol.lookup(ROOT, b"l").unwrap().0, l2);
        vol.forget(b, 1);
        vol.sync().unwrap();
        drop(vol);
        let r = crate::admin::fsck::fsck(&path).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let vol = Volume::open(&path, Options::default()).unwrap();
        assert_eq!(vol.read(a, 0, 10).unwrap(), b"hello");
        assert_eq!(vol.lookup(ROOT, b"l").unwrap().0, l2);
        assert!(vol.inode(b).is_err());
        drop(vol);
        let _ = std::fs::remove_dir_all(&path);
    }
}
