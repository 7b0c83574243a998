//! Faults of the store's disk, injected (issue 27). Every store operation — a write and its
//! fsync, create, mkdir, symlink, link, unlink, rmdir, rename, truncate, punch hole, chmod,
//! setxattr, removexattr — and the commit that makes it durable, runs on the real
//! filesystem code over a [`SimDisk`] whose Nth write, length change or sync fails, for every
//! N the operation reaches: once with EIO, once with ENOSPC, and from N on with each (a dead
//! disk, a full one). Each run must:
//! - fail with the errno injected (an ENOSPC never turns into EIO) or succeed;
//! - leave the live filesystem as it was before the operation or after it;
//! - let the next operation work once the disk is healthy again, without a remount;
//! - mount again from the disk, fsck clean, as before or after the operation — after it if
//!   the operation said it succeeded.
//!
//! The simulated disk here is a test double for a failing or full block device (this
//! machine has no dm-flakey or dm-error); the real full filesystems are in
//! `crates/fs/tests/full.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::admin::fsck::{self, FsckReport};
use crate::error::FsError;
use crate::store::records::Kind;
use crate::store::simdisk::{Rng, SimDisk};
use crate::store::ROOT;
use crate::volume::{NewInode, SetAttr};
use crate::{Options, Volume};

/// Extents of 16 KiB, so a file has several, most of them in the data file.
const OPTIONS: &str = "compress-force=lzo,max_extent=16K,streams=1";
/// The simulated disk: room for the store and its global reserve (2 MiB).
const CAPACITY: u64 = 64 << 20;

/// What a path holds, as a user sees it: kind, mode, contents (or target), xattrs.
type Seen = (Kind, u32, Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>);
/// The whole tree by path.
type Tree = BTreeMap<String, Seen>;

fn bytes(seed: u32, len: usize) -> Vec<u8> {
    // Compressible but not trivial: words with the seed and position in them.
    let mut v = Vec::with_capacity(len + 32);
    let mut i = 0u32;
    while v.len() < len {
        v.extend_from_slice(format!("{seed}:{i} extent ").as_bytes());
        i = i.wrapping_add(seed | 1);
    }
    v.truncate(len);
    v
}

fn dir(mode: u32) -> NewInode<'static> {
    NewInode {
        kind: Kind::Dir,
        ..NewInode::file(mode)
    }
}

fn lookup(vol: &Volume, path: &str) -> u64 {
    let mut ino = ROOT;
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = vol.lookup(ino, part.as_bytes()).expect(path).0;
    }
    ino
}

/// The tree under `dir` (its path `at`) as a user sees it.
fn walk(vol: &Volume, dir: u64, at: &str, tree: &mut Tree) -> Result<(), FsError> {
    let list = vol.readdir(dir, u64::MAX, 0)?;
    for e in list.iter().skip(2) {
        let path = format!("{at}/{}", String::from_utf8_lossy(&e.name));
        let inode = vol.inode(e.ino)?;
        let body = match inode.kind {
            Kind::File => vol.read(e.ino, 0, u32::MAX)?,
            Kind::Symlink => vol.readlink(e.ino)?,
            _ => Vec::new(),
        };
        let mut xattrs = BTreeMap::new();
        for name in vol.listxattr(e.ino)? {
            let value = vol.getxattr(e.ino, &name)?;
            xattrs.insert(name, value);
        }
        tree.insert(path.clone(), (inode.kind, inode.perm, body, xattrs));
        if inode.kind == Kind::Dir {
            walk(vol, e.ino, &path, tree)?;
        }
    }
    Ok(())
}

fn tree(vol: &Volume) -> Result<Tree, FsError> {
    let mut t = Tree::new();
    walk(vol, ROOT, "", &mut t)?;
    Ok(t)
}

/// A store on a fresh simulated disk holding the same tree every time, all durable.
fn fresh() -> (SimDisk, Arc<Volume>) {
    let disk = SimDisk::with_capacity(CAPACITY);
    let (db, data, reserve) = (disk.new_file(), disk.new_file(), disk.new_file());
    crate::store::Store::mkfs_sim(&db).unwrap();
    let vol = Volume::open_sim_with(db, data, Some(reserve), options()).unwrap();
    let vol = Arc::new(vol);
    vol.watch_rollbacks();
    let (d, _) = vol.create(ROOT, b"d", dir(0o755)).unwrap();
    vol.create(ROOT, b"empty", dir(0o700)).unwrap();
    for (name, len, seed) in [("a", 150_000, 1), ("b", 40_000, 2), ("keep", 70_000, 3)] {
        let (ino, _) = vol
            .create(d, name.as_bytes(), NewInode::file(0o644))
            .unwrap();
        vol.write(ino, 0, &bytes(seed, len), None).unwrap();
    }
    let a = lookup(&vol, "d/a");
    vol.setxattr(a, b"user.tag", b"one", 0).unwrap();
    let target = b"d/a";
    let link = NewInode {
        kind: Kind::Symlink,
        target: Some(target),
        ..NewInode::file(0o777)
    };
    vol.create(ROOT, b"s", link).unwrap();
    vol.sync().unwrap();
    (disk, vol)
}

fn options() -> Options {
    Options::parse(OPTIONS).unwrap()
}

/// An operation: what it is called, and what it does (with its fsync or sync).
type Step = (&'static str, fn(&Volume) -> Result<(), FsError>);

/// The extent size of [`OPTIONS`].
const EXTENT: usize = 16 << 10;

/// Whether `live` is `before` or `after`, or — when the operation wrote data and its
/// writeback failed, which loses what it wrote extent by extent, as a failed writeback loses
/// pages — `after` with some of its extents as they were before.
fn one_of(live: &Tree, before: &Tree, after: &Tree) -> bool {
    if live == before || live == after {
        return true;
    }
    live.len() == after.len()
        && live.iter().zip(after).all(|((p, l), (q, a))| {
            let b = before.get(p);
            p == q && (l == a || b.is_some_and(|b| extents_mixed(l, b, a)))
        })
}

/// `l` is a file as `a` is, each extent of its contents from `a` or from `b`.
fn extents_mixed(l: &Seen, b: &Seen, a: &Seen) -> bool {
    let same = (l.0, l.1, &l.3) == (a.0, a.1, &a.3) && l.0 == Kind::File;
    let sizes = l.2.len() == a.2.len() || l.2.len() == b.2.len();
    same && sizes
        && l.2.chunks(EXTENT).enumerate().all(|(i, c)| {
            let of = |v: &[u8]| {
                v.get(i * EXTENT..(i * EXTENT + c.len()).min(v.len()))
                    .map(<[u8]>::to_vec)
            };
            of(&a.2).as_deref() == Some(c) || of(&b.2).as_deref() == Some(c)
        })
}

fn steps() -> Vec<Step> {
    vec![
        ("write and fsync", |v| {
            let a = lookup(v, "d/a");
            v.write(a, 10_000, &bytes(9, 60_000), None)?;
            v.fsync(a)
        }),
        ("write, then sync", |v| {
            let b = lookup(v, "d/b");
            v.write(b, 30_000, &bytes(8, 30_000), None)?;
            v.sync()
        }),
        ("create", |v| {
            v.create(lookup(v, "d"), b"new", NewInode::file(0o600))?;
            v.sync()
        }),
        ("mkdir", |v| {
            v.create(ROOT, b"nd", dir(0o750))?;
            v.sync()
        }),
        ("symlink", |v| {
            let new = NewInode {
                kind: Kind::Symlink,
                target: Some(b"elsewhere"),
                ..NewInode::file(0o777)
            };
            v.create(ROOT, b"s2", new)?;
            v.sync()
        }),
        ("link", |v| {
            v.link(lookup(v, "d/b"), ROOT, b"hard")?;
            v.sync()
        }),
        ("unlink", |v| {
            v.remove(lookup(v, "d"), b"a", false)?;
            v.sync()
        }),
        ("rmdir", |v| {
            v.remove(ROOT, b"empty", true)?;
            v.sync()
        }),
        ("rename over", |v| {
            let d = lookup(v, "d");
            v.rename(d, b"b", d, b"a", 0)?;
            v.sync()
        }),
        ("truncate", |v| {
            let a = lookup(v, "d/a");
            let cut = SetAttr {
                size: Some(23_456),
                ..SetAttr::default()
            };
            v.setattr(a, &cut)?;
            v.fsync(a)
        }),
        ("punch hole", |v| {
            let a = lookup(v, "d/a");
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            v.fallocate(a, (5_000, 70_000, mode), None)?;
            v.fsync(a)
        }),
        ("chmod", |v| {
            let chmod = SetAttr {
                mode: Some(0o600),
                ..SetAttr::default()
            };
            v.setattr(lookup(v, "d/b"), &chmod)?;
            v.sync()
        }),
        ("setxattr", |v| {
            v.setxattr(lookup(v, "d/b"), b"user.new", b"value", 0)?;
            v.sync()
        }),
        ("removexattr", |v| {
            v.removexattr(lookup(v, "d/a"), b"user.tag")?;
            v.sync()
        }),
    ]
}

/// What the disk may do to an operation.
#[derive(Debug, Clone, Copy)]
struct Fault {
    errno: i32,
    sticky: bool,
}

const FAULTS: [Fault; 4] = [
    Fault {
        errno: libc::EIO,
        sticky: false,
    },
    Fault {
        errno: libc::ENOSPC,
        sticky: false,
    },
    Fault {
        errno: libc::EIO,
        sticky: true,
    },
    Fault {
        errno: libc::ENOSPC,
        sticky: true,
    },
];

/// The tree after `step` on a healthy disk.
fn expected(step: &Step) -> (Tree, Tree) {
    let (_disk, vol) = fresh();
    let before = tree(&vol).unwrap();
    (step.1)(&vol).unwrap_or_else(|e| panic!("{} on a healthy disk: {e}", step.0));
    (before, tree(&vol).unwrap())
}

fn fsck_clean(vol: &Volume, at: &str) {
    let mut report = FsckReport::default();
    fsck::check(vol, &mut report).unwrap();
    assert!(
        report.problems.is_empty(),
        "{at}: fsck: {:?}",
        report.problems
    );
}

/// Mount what `disk` holds (the volume on it dropped) and check it.
fn remount(disk: &SimDisk, at: &str) -> Tree {
    let vol = Volume::open_sim_with(disk.file(0), disk.file(1), Some(disk.file(2)), options())
        .unwrap_or_else(|e| panic!("{at}: the store does not mount again: {e}"));
    fsck_clean(&vol, at);
    tree(&vol).unwrap()
}

/// What the runs went through: runs, reopenings of the database, rollbacks to the last
/// durable commit, times the global reserve gave its blocks.
#[derive(Default, Debug)]
struct Tally {
    runs: u64,
    reopened: u64,
    rolled_back: u64,
    rescued: u64,
}

/// One run of `step` with the disk's `n`th I/O failing as `fault` says; false when the step
/// never reached its `n`th I/O (every I/O it does has been tried).
fn run(step: &Step, fault: Fault, n: u64, trees: &(Tree, Tree), seen: &mut Tally) -> bool {
    let (before, after) = trees;
    let at = format!("{} with I/O {n} failing ({fault:?})", step.0);
    let (disk, vol) = fresh();
    disk.fail_at(n, fault.errno, fault.sticky);
    let r = (step.1)(&vol);
    if disk.heal() == 0 {
        assert!(r.is_ok(), "{at}: failed with no fault: {r:?}");
        return false;
    }
    if let Err(e) = &r {
        assert_eq!(e.errno(), fault.errno, "{at}: {e}");
    }
    // The next operation works, with the disk healthy again.
    let live = tree(&vol).unwrap_or_else(|e| panic!("{at}: reading the tree: {e}"));
    let next = (|| {
        let (ino, _) = vol.create(ROOT, b"next", NewInode::file(0o644))?;
        vol.write(ino, 0, b"after the fault", None)?;
        vol.fsync(ino)
    })();
    next.unwrap_or_else(|e| panic!("{at}: the next operation fails: {e}"));
    assert!(
        one_of(&live, before, after),
        "{at}: the tree is neither as before nor as after the operation (it returned {r:?})"
    );
    fsck_clean(&vol, &at);
    let c = &vol.store().space().counts;
    let count = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    seen.runs += 1;
    seen.reopened += count(&c.recoveries);
    seen.rolled_back += count(&c.rollbacks);
    seen.rescued += count(&c.rescues);
    drop(vol);
    let mut back = remount(&disk, &at);
    back.remove("/next")
        .unwrap_or_else(|| panic!("{at}: the next operation's fsync'ed file is gone"));
    match r {
        Ok(()) => assert!(
            back == *after,
            "{at}: succeeded, but is not there after a mount"
        ),
        Err(_) => assert!(
            one_of(&back, before, after),
            "{at}: neither before nor after the operation after a mount"
        ),
    }
    true
}

#[test]
fn every_store_operation_survives_a_failing_or_full_disk() {
    let mut seen = Tally::default();
    for step in steps() {
        let trees = expected(&step);
        for fault in FAULTS {
            let mut n = 1;
            while run(&step, fault, n, &trees, &mut seen) {
                n += 1;
                assert!(n < 500, "{}: more I/Os than expected", step.0);
            }
        }
    }
    // Each path was taken: the database reopened (and went back to its last durable
    // commit), and ENOSPC met by the global reserve.
    assert!(seen.runs > 500, "{seen:?}");
    assert!(seen.reopened > 100 && seen.rolled_back > 0, "{seen:?}");
    assert!(seen.rescued > 50, "{seen:?}");
}

/// A disk that fills while the store is written: writes get ENOSPC, deleting a file frees
/// its space at once and writing works again, all without a remount, and nothing fsync'ed
/// is lost.
#[test]
fn a_disk_filling_up_under_the_store() {
    let (disk, vol) = fresh();
    let d = lookup(&vol, "d");
    let (big, _) = vol.create(d, b"big", NewInode::file(0o644)).unwrap();
    // Random bytes: lzo stores them raw.
    let mut rng = Rng(5);
    let chunk: Vec<u8> = (0..1 << 20).map(|_| rng.bits() as u8).collect();
    let mut at = 0u64;
    let full = loop {
        match vol
            .write(big, at, &chunk, None)
            .and_then(|()| vol.fsync(big))
        {
            Ok(()) => at += chunk.len() as u64,
            Err(e) => break e,
        }
        assert!(at < CAPACITY, "never full");
    };
    assert_eq!(full.errno(), libc::ENOSPC, "{full}");
    assert!(at > CAPACITY / 2, "full after {at} bytes");
    let report = vol.store().space_report();
    assert!(report.available < 1 << 20, "{report:?}");
    // 4 KiB writes, each at the start of an extent of its own, take what is left; then
    // nothing new fits, not even a name.
    loop {
        at = at.div_ceil(EXTENT as u64) * EXTENT as u64;
        if let Err(e) = vol.write(big, at, &chunk[..4096], None) {
            assert_eq!(e.errno(), libc::ENOSPC, "{e}");
            break;
        }
        at += 4096;
    }
    let more = vol.create(d, b"more", NewInode::file(0o644));
    assert_eq!(more.map_err(|e| e.errno()).err(), Some(libc::ENOSPC));
    let keep = lookup(&vol, "d/keep");
    assert_eq!(vol.read(keep, 0, u32::MAX).unwrap(), bytes(3, 70_000));
    // Deleting works and its space is free at once; then writing works again.
    vol.remove(d, b"big", false).unwrap();
    vol.sync().unwrap();
    assert!(vol.store().space_report().available > CAPACITY / 2);
    let (again, _) = vol.create(d, b"again", NewInode::file(0o644)).unwrap();
    vol.write(again, 0, &chunk, None).unwrap();
    vol.fsync(again).unwrap();
    drop(vol);
    let back = remount(&disk, "after the fill");
    assert_eq!(back["/d/again"].2, chunk);
    assert_eq!(back["/d/keep"].2, bytes(3, 70_000));
}
