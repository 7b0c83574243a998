//! Model-checked protocol (shuttle) on a toy store: delayed updates (a chmod's), write
//! transactions that change the same inode in the transaction (a writeback's size), the
//! committer's flush and a sync race with readers. After every run no change is lost — the
//! durable record has the last mode and every size step — and meanwhile no reader (one
//! inode, or the many-inode snapshot) ever saw a mode or a size go back.
//!
//! The names: delayed creates (files and nodes), unlinks and name reuse race symlinks,
//! links and renames through transactions, the committer and readers; no entry ever names
//! a record the store lacks, and the durable store holds what each name's last change said.
//!
//! Run with `cargo test -p wring-fs --features shuttle --lib model`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use shuttle::sync::Arc;
use shuttle::thread;

use super::{merge, Change, DelayedStore, InodeStore, Listing, NameEntry, Written};
use crate::error::{errno, FsError};
use crate::store::records::{Inode, Kind};
use crate::sync::{lock, Mutex, MutexGuard};

const ITERATIONS: usize = 3000;

/// The last commit, the durable one, and a write lock (redb's: one writer at a time).
#[derive(Default)]
struct Toy {
    db: Mutex<ToySnap>,
    durable: Mutex<ToySnap>,
    write_lock: Mutex<()>,
}

/// Records, entries, orphans, the inode counter and the number of the last transaction
/// that wrote delayed items.
#[derive(Default, Clone)]
struct ToySnap {
    records: HashMap<u64, Inode>,
    names: BTreeMap<(u64, Vec<u8>), (u64, Kind)>,
    orphans: BTreeSet<u64>,
    next_ino: u64,
    seq: u64,
}

impl std::ops::Index<&u64> for ToySnap {
    type Output = Inode;

    fn index(&self, ino: &u64) -> &Inode {
        &self.records[ino]
    }
}

/// A transaction: the state it began with, changed in place, replacing the last commit's
/// when it commits.
struct ToyTxn<'s> {
    _lock: MutexGuard<'s, ()>,
    state: RefCell<ToySnap>,
}

impl ToyTxn<'_> {
    fn get(&self, ino: u64) -> Inode {
        self.state.borrow().records[&ino].clone()
    }
}

impl InodeStore for Toy {
    type Txn<'s> = ToyTxn<'s>;
    type Snap<'s> = ToySnap;

    fn begin(&self) -> Result<ToyTxn<'_>, FsError> {
        let guard = lock(&self.write_lock);
        Ok(ToyTxn {
            _lock: guard,
            state: RefCell::new(lock(&self.db).clone()),
        })
    }

    /// As the redb store's: records the store has or a create made, orphans, entries into
    /// what exists, removals of what the entry still names, the counter moved on.
    fn put(txn: &ToyTxn<'_>, written: &Written, seq: u64) -> Result<(), FsError> {
        if written.is_empty() {
            return Ok(());
        }
        let mut st = txn.state.borrow_mut();
        for r in &written.records {
            if !r.new && !st.records.contains_key(&r.ino) {
                continue;
            }
            st.records.insert(r.ino, r.inode.clone());
            if r.orphan && r.inode.nlink == 0 {
                st.orphans.insert(r.ino);
            }
        }
        for (parent, name, entry) in &written.names {
            let key = (*parent, name.clone());
            match *entry {
                NameEntry::Is(ino, kind) => {
                    if st.records.contains_key(parent) && st.records.contains_key(&ino) {
                        st.names.insert(key, (ino, kind));
                    }
                }
                NameEntry::Removed => {
                    st.names.remove(&key);
                }
            }
        }
        st.next_ino = st.next_ino.max(written.next_ino);
        st.seq = seq;
        Ok(())
    }

    fn seq(snap: &ToySnap) -> Result<u64, FsError> {
        Ok(snap.seq)
    }

    fn commit(&self, txn: ToyTxn<'_>, durable: bool) -> Result<(), FsError> {
        let mut db = lock(&self.db);
        *db = txn.state.into_inner();
        if durable {
            *lock(&self.durable) = db.clone();
        }
        Ok(())
    }

    fn snapshot(&self) -> Result<ToySnap, FsError> {
        Ok(lock(&self.db).clone())
    }

    fn get(snap: &ToySnap, ino: u64) -> Result<Inode, FsError> {
        snap.records.get(&ino).cloned().ok_or(errno(libc::ENOENT))
    }

    fn name(snap: &ToySnap, parent: u64, name: &[u8]) -> Result<Option<(u64, Kind)>, FsError> {
        Ok(snap.names.get(&(parent, name.to_vec())).copied())
    }

    fn next_ino(snap: &ToySnap) -> Result<u64, FsError> {
        Ok(snap.next_ino)
    }

    /// Directories are not modelled: every one is in [`DIR`].
    fn parent(_snap: &ToySnap, _dir: u64) -> Result<u64, FsError> {
        Ok(DIR)
    }

    fn any_name(
        snap: &ToySnap,
        dir: u64,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, FsError> {
        let mut range = snap.names.range((dir, Vec::new())..(dir + 1, Vec::new()));
        Ok(range.any(|((_, n), _)| f(n)))
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
/// The directory the names model works in.
const DIR: u64 = 1;
/// The store's next inode number at the start.
const FIRST_FREE: u64 = 100;

fn store() -> Arc<DelayedStore<Toy>> {
    let toy = Toy::default();
    {
        let mut db = lock(&toy.db);
        for ino in [INO, OTHER] {
            db.records.insert(ino, Inode::new(Kind::File, 0o600, 0, 0));
        }
        db.records.insert(DIR, Inode::new(Kind::Dir, 0o755, 0, 0));
        db.next_ino = FIRST_FREE;
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
    t.state.borrow_mut().records.insert(ino, i);
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

/// A read of a file's data takes its extents from a snapshot and its size from the record
/// [`DelayedStore::snapshot_with`] gives with it. For a file a delayed create made, racing
/// its writeback and the committer, that record is the snapshot's own: the create's (size 0)
/// while the snapshot lacks the file, never the size of a writeback committed after it (the
/// newest record, which made a read of a new file return zeros where its data was).
#[test]
fn a_read_takes_a_new_files_record_from_its_own_snapshot() {
    shuttle::check_random(
        || {
            let s = store();
            let ino = create(&s, b"new");
            let writeback = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    grow(&s, ino);
                    grow(&s, ino);
                })
            };
            let committer = {
                let s = Arc::clone(&s);
                thread::spawn(move || s.flush().unwrap())
            };
            let reader = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    for _ in 0..3 {
                        let (snap, record) = s.snapshot_with(ino).unwrap();
                        let stored = snap.records.get(&ino).map_or(0, |i| i.size);
                        assert_eq!(record.map(|i| i.size).ok(), Some(stored));
                    }
                })
            };
            for t in [writeback, committer, reader] {
                t.join().unwrap();
            }
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

/// A delayed create of `name` in [`DIR`], as the volume's: a new number, the record, the
/// entry. Returns the inode.
fn create(s: &DelayedStore<Toy>, name: &[u8]) -> u64 {
    let made = s.change(|n| {
        assert!(n.name(DIR, name)?.is_none(), "the name is taken");
        let ino = n.next_ino()?;
        n.new_inode(ino, Inode::new(Kind::File, 0o644, 0, 0), DIR);
        n.put_name(DIR, name, NameEntry::Is(ino, Kind::File));
        Ok(Some(ino))
    });
    made.unwrap().unwrap()
}

/// A delayed unlink of `name` while its inode is held: the entry goes, the inode becomes an
/// orphan.
fn unlink(s: &DelayedStore<Toy>, name: &[u8]) -> u64 {
    let gone = s.change(|n| {
        let (ino, _) = n.name(DIR, name)?.expect("the name is there");
        let mut i = n.inode(ino)?;
        i.nlink -= 1;
        n.orphan(ino, i);
        n.put_name(DIR, name, NameEntry::Removed);
        Ok(Some(ino))
    });
    gone.unwrap().unwrap()
}

/// A create through a transaction (a mkdir's): the number from the store's counter, which
/// the delayed creates written at its start have moved past theirs.
fn create_in_txn(s: &DelayedStore<Toy>, name: &[u8]) -> u64 {
    let t = s.write().unwrap();
    let ino = {
        let mut st = t.state.borrow_mut();
        let ino = st.next_ino;
        st.next_ino += 1;
        st.records.insert(ino, Inode::new(Kind::Dir, 0o755, 0, 0));
        st.names.insert((DIR, name.to_vec()), (ino, Kind::Dir));
        ino
    };
    s.commit(t, false).unwrap();
    ino
}

/// A rename of `a` to `c` through a transaction (as every rename is), when `a` is there once
/// the delayed items are written at its start: a transaction that changes what a delayed
/// entry it wrote says, so the entry left in the map until the commit removes it is older
/// than the commit. Whether it renamed.
fn rename_in_txn(s: &DelayedStore<Toy>) -> bool {
    let t = s.write().unwrap();
    let renamed = {
        let mut st = t.state.borrow_mut();
        match st.names.remove(&(DIR, b"a".to_vec())) {
            Some(e) => {
                st.names.insert((DIR, b"c".to_vec()), e);
                true
            }
            None => false,
        }
    };
    s.commit(t, false).unwrap();
    renamed
}

/// What `a`, `c` and `d` are, by lookup, and the listing (as readdir's).
fn observe(s: &DelayedStore<Toy>) -> ([Option<u64>; 3], Listing) {
    let look = |n: &[u8]| s.name(DIR, n).unwrap().map(|(ino, _)| ino);
    let looked = [look(b"a"), look(b"c"), look(b"d")];
    let view = s.names_in(DIR).unwrap();
    let (snap, delayed) = (view.snap, view.names);
    let range = snap.names.range((DIR, Vec::new())..(DIR + 1, Vec::new()));
    let mut listed: Vec<_> = range.map(|((_, n), (i, k))| (n.clone(), *i, *k)).collect();
    merge(&mut listed, &delayed, snap.seq);
    (looked, listed)
}

/// Delayed creates and unlinks race a rename through a transaction of a name they made, a
/// create through a transaction, the committer and a forget, under readers. `a` is made (the first inode) and may be
/// renamed to `c`; `d` is made, unlinked while held and made again. A reader never sees the
/// first inode under two names (a lookup or a listing: an entry the rename's commit
/// replaced, shown beside the commit), nor a name's history go back (`d`: absent, the
/// second inode, absent, the third); every inode number is handed out once; after a sync the
/// durable store has what the last change of each name says, and the unlinked inode only as
/// an orphan without links, if at all.
#[test]
fn delayed_names_racing_transactions_are_seen_in_order_and_lost_nowhere() {
    shuttle::check_random(
        || {
            let s = store();
            let names = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    let first = create(&s, b"a");
                    let second = create(&s, b"d");
                    assert_eq!(unlink(&s, b"d"), second);
                    let third = create(&s, b"d");
                    // The kernel's FORGET of the orphan.
                    s.discard(second);
                    [first, second, third]
                })
            };
            let txn = {
                let s = Arc::clone(&s);
                thread::spawn(move || (rename_in_txn(&s), create_in_txn(&s, b"b")))
            };
            let committer = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    s.flush().unwrap();
                    s.flush().unwrap();
                })
            };
            let reader = {
                let s = Arc::clone(&s);
                thread::spawn(move || (0..3).map(|_| observe(&s)).collect::<Vec<_>>())
            };
            let [first, second, third] = names.join().unwrap();
            let (renamed, b) = txn.join().unwrap();
            committer.join().unwrap();
            // Each lookup on its own: a name's history never goes back (`a`: absent, the
            // first inode, absent once renamed; `c`: absent, the first inode; `d`: absent,
            // the second inode, absent, the third). A listing is one view: the first inode
            // under one name at most, no inode twice.
            let mut at = [0; 3];
            for (looked, listed) in reader.join().unwrap() {
                let histories = [
                    [None, Some(first), None, None],
                    [None, Some(first), Some(first), Some(first)],
                    [None, Some(second), None, Some(third)],
                ];
                for k in 0..3 {
                    let h = &histories[k];
                    let now = (at[k]..h.len()).find(|&p| h[p] == looked[k]);
                    let Some(now) = now else {
                        panic!("name {k} read as {:?} after phase {}", looked[k], at[k]);
                    };
                    at[k] = now;
                }
                let mut inos: Vec<u64> = listed.iter().map(|e| e.1).collect();
                inos.sort_unstable();
                inos.dedup();
                assert_eq!(
                    inos.len(),
                    listed.len(),
                    "an inode listed twice: {listed:?}"
                );
            }
            let mut all = vec![first, second, third, b];
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 4, "an inode number handed out twice");
            s.sync().unwrap();
            assert_eq!(s.delayed_len(), 0);
            let d = lock(&s.durable).clone();
            let name = |n: &[u8]| d.names.get(&(DIR, n.to_vec())).map(|e| e.0);
            let at = if renamed { b"c" } else { b"a" };
            assert_eq!(name(at), Some(first));
            assert_eq!(name(b"d"), Some(third));
            assert_eq!(name(b"b"), Some(b));
            assert!(d.records.contains_key(&first) && d.records.contains_key(&third));
            if let Some(i) = d.records.get(&second) {
                assert!(
                    i.nlink == 0 && d.orphans.contains(&second),
                    "inode {second}"
                );
            }
            assert!(d.next_ino > first.max(second).max(third).max(b));
        },
        ITERATIONS,
    );
}

/// What a name's entry is in the durable store, by name in [`DIR`].
fn durable_name(s: &DelayedStore<Toy>, name: &[u8]) -> Option<u64> {
    lock(&s.durable)
        .names
        .get(&(DIR, name.to_vec()))
        .map(|e| e.0)
}

/// A symlink through a transaction (as every symlink is): EEXIST when the transaction finds
/// the name taken once the delayed items are written at its start.
fn symlink_in_txn(s: &DelayedStore<Toy>, name: &[u8]) -> Result<u64, i32> {
    let t = s.write().unwrap();
    let made = {
        let mut st = t.state.borrow_mut();
        let key = (DIR, name.to_vec());
        match st.names.contains_key(&key) {
            true => Err(libc::EEXIST),
            false => {
                let ino = st.next_ino;
                st.next_ino += 1;
                st.records
                    .insert(ino, Inode::new(Kind::Symlink, 0o777, 0, 0));
                st.names.insert(key, (ino, Kind::Symlink));
                Ok(ino)
            }
        }
    };
    s.commit(t, false).unwrap();
    made
}

/// Issue 40's bug, alone: a name whose inode is committed is unlinked (delayed), made again
/// and unlinked again before any commit; the second removal must take the name away from
/// the store, whatever inode the store has under it, and a symlink made next gets it.
#[test]
fn a_name_unlinked_made_again_and_unlinked_again_is_gone() {
    shuttle::check_random(
        || {
            let s = store();
            let first = create(&s, b"n");
            s.flush().unwrap();
            assert_eq!(unlink(&s, b"n"), first);
            let second = create(&s, b"n");
            assert_eq!(unlink(&s, b"n"), second);
            s.discard(first);
            s.discard(second);
            assert_eq!(s.name(DIR, b"n").unwrap(), None);
            let link = symlink_in_txn(&s, b"n").expect("the name is free");
            s.sync().unwrap();
            assert_eq!(durable_name(&s, b"n"), Some(link));
        },
        1,
    );
}

/// The order the changes to names took effect in: each appends what it did while it holds
/// the writer lock (a delayed change inside [`DelayedStore::change`], a transaction between
/// its begin and commit), so the log is the linearization the store must end up agreeing with.
type Log = Arc<Mutex<Vec<(&'static [u8], Option<u64>)>>>;

/// A delayed create of a node `name` if the name is free (logged); its inode.
fn create_if_free(s: &DelayedStore<Toy>, log: &Log, name: &'static [u8]) -> Option<u64> {
    s.change(|n| {
        if n.name(DIR, name)?.is_some() {
            return Ok(Some(None));
        }
        let ino = n.next_ino()?;
        n.new_inode(ino, Inode::new(Kind::Fifo, 0o644, 0, 0), DIR);
        n.put_name(DIR, name, NameEntry::Is(ino, Kind::Fifo));
        lock(&**log).push((name, Some(ino)));
        Ok(Some(Some(ino)))
    })
    .unwrap()
    .unwrap()
}

/// A delayed unlink of `name` if it is there (logged): the inode, and whether that was its
/// last link (then it is an orphan the kernel holds).
fn unlink_if_there(s: &DelayedStore<Toy>, log: &Log, name: &'static [u8]) -> Option<(u64, bool)> {
    s.change(|n| {
        let Some((ino, _)) = n.name(DIR, name)? else {
            return Ok(Some(None));
        };
        let mut i = n.inode(ino)?;
        i.nlink = i.nlink.saturating_sub(1);
        let last = i.nlink == 0;
        match last {
            true => n.orphan(ino, i),
            false => n.put_inode(ino, i),
        }
        n.put_name(DIR, name, NameEntry::Removed);
        lock(&**log).push((name, None));
        Ok(Some(Some((ino, last))))
    })
    .unwrap()
    .unwrap()
}

/// A symlink made with two names (`s`, `l`) in one transaction, then `l` renamed over `n` in
/// another (as every symlink, link and rename is: through transactions),
/// logged.
fn symlink_link_rename(s: &DelayedStore<Toy>, log: &Log) -> u64 {
    let t = s.write().unwrap();
    let sym = {
        let mut st = t.state.borrow_mut();
        let ino = st.next_ino;
        st.next_ino += 1;
        let mut i = Inode::new(Kind::Symlink, 0o777, 0, 0);
        i.nlink = 2;
        st.records.insert(ino, i);
        st.names.insert((DIR, b"s".to_vec()), (ino, Kind::Symlink));
        st.names.insert((DIR, b"l".to_vec()), (ino, Kind::Symlink));
        lock(&**log).extend([(&b"s"[..], Some(ino)), (&b"l"[..], Some(ino))]);
        ino
    };
    s.commit(t, false).unwrap();
    let t = s.write().unwrap();
    {
        let mut st = t.state.borrow_mut();
        let moved = st.names.remove(&(DIR, b"l".to_vec()));
        if let Some(e) = moved {
            if let Some((old, _)) = st.names.insert((DIR, b"n".to_vec()), e) {
                if let Some(r) = st.records.get_mut(&old) {
                    r.nlink = r.nlink.saturating_sub(1);
                }
            }
            lock(&**log).extend([(&b"l"[..], None), (&b"n"[..], Some(e.0))]);
        }
    }
    s.commit(t, false).unwrap();
    sym
}

/// Names reused by every kind of change at once: one thread makes `n` and `m`, unlinks them
/// and makes them again (delayed; the kernel's FORGET of each orphan discards its record),
/// while another makes a symlink with two names and renames one over `n` (transactions that
/// write the delayed items first), the committer flushes, and a reader looks names up and
/// lists the directory. Whatever the interleaving: a name that still names an inode names
/// one with a record, a listing has no name twice, every inode number is handed out once,
/// and after a sync the durable store names exactly what the last change of each name said
/// (the log of the order the changes took effect in), with no entry naming a missing record.
#[test]
fn names_reused_by_creates_unlinks_symlinks_links_and_renames_stay_consistent() {
    shuttle::check_random(
        || {
            let s = store();
            let log: Log = Arc::new(Mutex::new(Vec::new()));
            let reuse = {
                let (s, log) = (Arc::clone(&s), Arc::clone(&log));
                thread::spawn(move || {
                    let mut made = Vec::new();
                    for name in [&b"n"[..], b"m", b"n", b"n", b"m"] {
                        made.extend(create_if_free(&s, &log, name));
                        if let Some((ino, true)) = unlink_if_there(&s, &log, name) {
                            s.discard(ino);
                        }
                        made.extend(create_if_free(&s, &log, name));
                    }
                    made
                })
            };
            let txns = {
                let (s, log) = (Arc::clone(&s), Arc::clone(&log));
                thread::spawn(move || symlink_link_rename(&s, &log))
            };
            let committer = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    s.flush().unwrap();
                    s.flush().unwrap();
                })
            };
            let reader = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    for _ in 0..2 {
                        for name in [&b"n"[..], b"m", b"s", b"l"] {
                            let Some((ino, _)) = s.name(DIR, name).unwrap() else {
                                continue;
                            };
                            // A name that still names an inode names one with a record.
                            if s.inode(ino).is_err() {
                                let now = s.name(DIR, name).unwrap().map(|e| e.0);
                                assert_ne!(
                                    now,
                                    Some(ino),
                                    "{name:?} names inode {ino}, which is gone"
                                );
                            }
                        }
                        let (_, listed) = observe(&s);
                        let mut names: Vec<&Vec<u8>> = listed.iter().map(|e| &e.0).collect();
                        names.dedup();
                        assert_eq!(names.len(), listed.len(), "a name listed twice");
                    }
                })
            };
            let mut all = reuse.join().unwrap();
            all.push(txns.join().unwrap());
            committer.join().unwrap();
            reader.join().unwrap();
            let n = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), n, "an inode number handed out twice");
            s.sync().unwrap();
            assert_eq!(s.delayed_len(), 0);
            let d = lock(&s.durable).clone();
            for ((_, name), (ino, _)) in &d.names {
                assert!(
                    d.records.contains_key(ino),
                    "{name:?} names inode {ino}, which the store lacks"
                );
            }
            let mut want: BTreeMap<&[u8], Option<u64>> = BTreeMap::new();
            for (name, ino) in lock(&*log).iter() {
                want.insert(name, *ino);
            }
            for (name, ino) in want {
                assert_eq!(
                    durable_name(&s, name),
                    ino,
                    "{name:?} after {:?}",
                    lock(&*log)
                );
            }
        },
        ITERATIONS,
    );
}
