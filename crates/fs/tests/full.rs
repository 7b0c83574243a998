//! A full store (issue 27), on real small filesystems: a loop-mounted ext4 image and a tmpfs
//! with `size=`. What a btrfs user expects: data that cannot be stored is ENOSPC (at fsync and
//! close for buffered writes, which FUSE's writeback cache accepts before the daemon sees
//! them; at the call itself for O_DIRECT writes, fallocate, create and mkdir), fsync'ed data
//! stays intact, deleting works on the full store and its space shows in df at once, writing
//! works again without a remount, compressible data can use what compression frees, a kill -9
//! while full loses nothing fsync'ed, and the store's files hold about the live data after
//! overwrites and crashes. `wring fsck` is clean after each.

mod common;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::ledger::Ledger;
use common::{require_root, sh, text, Mount, Rng};

const MIB: u64 = 1 << 20;

/// A small filesystem for a store, unmounted (its image deleted) when dropped.
struct SmallFs {
    dir: PathBuf,
    image: Option<PathBuf>,
}

impl SmallFs {
    /// A loop-mounted ext4 image of `mib` MiB.
    fn ext4(name: &str, mib: u64) -> SmallFs {
        let dir = PathBuf::from(format!("/tmp/wring-full-{name}-{}", std::process::id()));
        let image = dir.with_extension("img");
        let fs = SmallFs::unmounted(dir, Some(image.clone()));
        let d = fs.dir.display();
        let i = image.display();
        let out = sh(&format!(
            "truncate -s {mib}M {i} && mkfs.ext4 -q -F {i} && mount -o loop {i} {d}"
        ));
        assert!(out.status.success(), "ext4: {out:?}");
        fs
    }

    /// A tmpfs of `mib` MiB.
    fn tmpfs(name: &str, mib: u64) -> SmallFs {
        let dir = PathBuf::from(format!("/tmp/wring-full-{name}-{}", std::process::id()));
        let fs = SmallFs::unmounted(dir, None);
        let out = sh(&format!(
            "mount -t tmpfs -o size={mib}M,mode=0700 tmpfs {}",
            fs.dir.display()
        ));
        assert!(out.status.success(), "tmpfs: {out:?}");
        fs
    }

    fn unmounted(dir: PathBuf, image: Option<PathBuf>) -> SmallFs {
        sh(&format!("umount -l {} 2>/dev/null", dir.display()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        SmallFs { dir, image }
    }

    /// A mount whose store is on this filesystem (made now).
    fn mount(&self, name: &str) -> Mount {
        let mut m = Mount::unmade(name);
        m.store = self.dir.join("store");
        wring_fs::store::Store::mkfs(&m.store).unwrap();
        m
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let d = self.dir.display();
        sh(&format!("umount {d} 2>/dev/null || umount -l {d}"));
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(i) = &self.image {
            let _ = std::fs::remove_file(i);
        }
    }
}

/// statvfs's f_bavail in bytes.
fn free(path: &Path) -> u64 {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs writes only into `st`; `c` is a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    assert_eq!(r, 0, "statvfs {}", path.display());
    st.f_bavail * st.f_frsize
}

/// The errno of `r`'s error, `Ok(())` as 0.
fn errno_of<T>(r: std::io::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// Random bytes (incompressible).
fn random(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&rng.next().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Write `total` bytes of `fill` in 1 MiB calls to `f`; the errno of the first failed
/// write (0: none) and, with `fsync`, of the fsync, then of the close.
fn fill(mut f: File, total: u64, fsync: bool, mut fill: impl FnMut() -> Vec<u8>) -> [i32; 3] {
    let mut write = 0;
    let mut done = 0;
    while done < total {
        if let Err(e) = f.write_all(&fill()) {
            write = e.raw_os_error().unwrap_or(-1);
            break;
        }
        done += MIB;
    }
    let sync = if fsync { errno_of(f.sync_all()) } else { 0 };
    [write, sync, close(f)]
}

/// close(2) of `f`; the errno (0: closed).
fn close(f: File) -> i32 {
    use std::os::fd::IntoRawFd;
    let fd = f.into_raw_fd();
    // SAFETY: `fd` was the file's, which gave it up: it is closed once, here.
    match unsafe { libc::close(fd) } {
        0 => 0,
        _ => std::io::Error::last_os_error().raw_os_error().unwrap_or(-1),
    }
}

/// A new file opened O_DIRECT.
fn direct(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap()
}

/// Aligned `len`-byte O_DIRECT writes of random bytes to `f`, each at the start of an
/// extent of its own (after the file's end), until one fails (at most `max` bytes); the
/// errno of that one (0: none failed).
fn direct_writes(f: &mut File, len: usize, max: u64, rng: &mut Rng) -> i32 {
    use std::os::unix::fs::FileExt;
    const EXTENT: u64 = 128 << 10;
    let buf = random(rng, len + 4096);
    let at = buf.as_ptr().align_offset(4096);
    let mut next = f.metadata().unwrap().len().div_ceil(EXTENT) * EXTENT;
    let mut done = 0;
    while done < max {
        if let Err(e) = f.write_all_at(&buf[at..at + len], next) {
            return e.raw_os_error().unwrap_or(-1);
        }
        done += len as u64;
        next += EXTENT;
    }
    0
}

/// fallocate(2) of `len` bytes at the start of `f`; the errno (0: done).
fn fallocate(f: &File, len: u64) -> i32 {
    // SAFETY: fallocate on a descriptor `f` owns; no memory is passed.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) };
    match r {
        0 => 0,
        _ => std::io::Error::last_os_error().raw_os_error().unwrap_or(-1),
    }
}

fn fsck_clean(store: &Path, what: &str) {
    let r = wring_fs::fsck::fsck(store).unwrap();
    assert!(r.problems.is_empty(), "{what}: fsck: {:?}", r.problems);
}

/// Incompressible data fills the store; every way of adding data is ENOSPC, nothing
/// fsync'ed is touched, deleting works at once, and the mount goes on.
fn incompressible_fill(fs: &SmallFs, name: &str) {
    let mut m = fs.mount(name);
    m.start("compress=zstd:1");
    let mut rng = Rng(27);
    let keep = random(&mut rng, 800_000);
    std::fs::write(m.p("keep"), &keep).unwrap();
    File::open(m.p("keep")).unwrap().sync_all().unwrap();
    let room = free(&m.mnt);
    // Made while there is room: a full store refuses new files.
    let big2 = File::create(m.p("big2")).unwrap();
    let mut odirect = direct(&m.p("direct"));
    let falloc = File::create(m.p("falloc")).unwrap();

    // Buffered writes land in the kernel's page cache: fsync is where ENOSPC shows.
    let [write, sync, _] = fill(File::create(m.p("big")).unwrap(), 2 * room, true, || {
        random(&mut rng, MIB as usize)
    });
    assert_eq!((write, sync), (0, libc::ENOSPC), "buffered write, fsync");
    // Without fsync, close reports it (the kernel's flush on close waits for writeback).
    let [write, _, close] = fill(big2, 32 * MIB, false, || random(&mut rng, MIB as usize));
    assert_eq!((write, close), (0, libc::ENOSPC), "buffered write, close");
    assert_eq!(fallocate(&falloc, 16 * MIB), libc::ENOSPC, "fallocate");
    // O_DIRECT writes get it from the write itself: 4 KiB ones fill what is left. What is
    // left moves a little as the database's file grows and shrinks with its commits, so
    // the names are tried after each top-off until the store is full for them too.
    let mut names = ["dir", "new"].map(|n| (n, 0));
    for _ in 0..10 {
        let e = direct_writes(&mut odirect, 4096, room, &mut rng);
        assert_eq!(e, libc::ENOSPC, "O_DIRECT write");
        names[0].1 = errno_of(std::fs::create_dir(m.p("dir")));
        names[1].1 = errno_of(File::create(m.p("new")));
        if names.iter().all(|n| n.1 == libc::ENOSPC) {
            break;
        }
        let _ = std::fs::remove_dir(m.p("dir"));
        let _ = std::fs::remove_file(m.p("new"));
    }
    assert_eq!(names, [("dir", libc::ENOSPC), ("new", libc::ENOSPC)]);
    assert!(
        free(&m.mnt) < MIB,
        "df shows the store full: {}",
        free(&m.mnt)
    );
    assert!(std::fs::read(m.p("keep")).unwrap() == keep, "fsync'ed data");
    let status = wring_fs::daemon::status(&m.mnt).unwrap();
    assert!(status.contains("space: full"), "{status}");

    // Deleting works on the full store, and its space is free at once.
    drop((odirect, falloc));
    for f in ["big", "big2", "direct", "falloc"] {
        std::fs::remove_file(m.p(f)).unwrap();
    }
    // (The kernel tells the daemon it forgot the files just after the unlinks return.)
    let freed = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        free(&m.mnt) > room / 2
    });
    assert!(freed, "df after rm: {} of {room}", free(&m.mnt));
    // And the mount goes on.
    let again = random(&mut rng, MIB as usize);
    std::fs::write(m.p("again"), &again).unwrap();
    File::open(m.p("again")).unwrap().sync_all().unwrap();
    std::fs::create_dir(m.p("dir")).unwrap();
    m.stop();
    fsck_clean(&m.store, name);
    m.start("compress=zstd:1");
    assert!(std::fs::read(m.p("keep")).unwrap() == keep);
    assert!(std::fs::read(m.p("again")).unwrap() == again);
    m.stop();
    fsck_clean(&m.store, name);
}

#[test]
fn incompressible_data_fills_a_store_on_ext4() {
    if !require_root("incompressible_data_fills_a_store_on_ext4") {
        return;
    }
    let fs = SmallFs::ext4("ext4", 64);
    incompressible_fill(&fs, "full-ext4");
}

#[test]
fn incompressible_data_fills_a_store_on_tmpfs() {
    if !require_root("incompressible_data_fills_a_store_on_tmpfs") {
        return;
    }
    let fs = SmallFs::tmpfs("tmpfs", 64);
    incompressible_fill(&fs, "full-tmpfs");
}

/// Reservations are of raw bytes, but they go once an extent is stored: compressible data
/// stores what compression lets it, well past the raw free space.
#[test]
fn compressible_data_uses_what_compression_frees() {
    if !require_root("compressible_data_uses_what_compression_frees") {
        return;
    }
    let fs = SmallFs::ext4("text", 64);
    let mut m = fs.mount("full-text");
    m.start("compress-force=zstd:3");
    let room = free(&m.mnt);
    let mut rng = Rng(3);
    let mut files = Vec::new();
    // Files of 4 MiB, each fsync'ed, until one fails.
    for i in 0.. {
        let data = text(&mut rng, 4 * MIB as usize);
        let path = m.p(&format!("t{i}"));
        let mut f = File::create(&path).unwrap();
        let ok = f.write_all(&data).is_ok() && f.sync_all().is_ok();
        if !ok {
            break;
        }
        files.push((path, data));
        assert!(i < 1000, "never full");
    }
    let stored = files.len() as u64 * 4 * MIB;
    assert!(
        stored > 2 * room,
        "{} MiB of compressible data stored in {} MiB",
        stored / MIB,
        room / MIB
    );
    for (path, data) in &files {
        assert!(std::fs::read(path).unwrap() == *data, "{}", path.display());
    }
    m.stop();
    fsck_clean(&m.store, "compressible");
}

/// A writer of fsync'ed blocks overwrites a file on a full store (some of its writes get
/// ENOSPC, some find room the last durable commit gave back) and the daemon is killed; every
/// block fsync'ed before the kill reads back.
#[test]
fn kill_9_while_full_loses_nothing_fsynced() {
    if !require_root("kill_9_while_full_loses_nothing_fsynced") {
        return;
    }
    let fs = SmallFs::tmpfs("kill", 64);
    let mut m = fs.mount("full-kill");
    let opts = "compress-force=zstd:1,max_extent=64K";
    m.start(opts);
    let ledger = Ledger::new(512);
    // Every block written once, fsync'ed.
    let stop = Arc::new(AtomicBool::new(false));
    let mut generation = 0u64;
    while ledger.acked_count() < 512 {
        let w = ledger.writer(m.p("data"), generation, 7 + generation, stop.clone(), None);
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        generation = w.join().unwrap() + 1;
        stop.store(false, Ordering::Relaxed);
    }
    let mut rng = Rng(9);
    let filler = File::create(m.p("filler")).unwrap();
    let [_, sync, _] = fill(filler, 128 * MIB, true, || random(&mut rng, MIB as usize));
    assert_eq!(sync, libc::ENOSPC, "the filler fills the store");
    for cycle in 0..4 {
        let errors = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let w = ledger.writer(
            m.p("data"),
            generation,
            rng.next(),
            stop.clone(),
            Some(errors.clone()),
        );
        std::thread::sleep(Duration::from_millis(500 + rng.below(1500)));
        m.kill();
        stop.store(true, Ordering::Relaxed);
        generation = w.join().unwrap() + 1;
        fsck_clean(&m.store, &format!("cycle {cycle}"));
        m.start(opts);
        ledger.check(&m.p("data"), &format!("cycle {cycle}"));
    }
    // Still full, still usable: deleting the filler gives the writer room.
    std::fs::remove_file(m.p("filler")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let before = ledger.acked.lock().unwrap().clone();
    let w = ledger.writer(m.p("data"), generation, 11, stop.clone(), None);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    assert!(
        *ledger.acked.lock().unwrap() != before,
        "no fsync succeeded after the rm"
    );
    ledger.check(&m.p("data"), "after rm");
    m.stop();
    fsck_clean(&m.store, "end");
}

/// Blocks the data file holds on disk.
fn data_file_bytes(store: &Path) -> u64 {
    std::fs::metadata(store.join(wring_fs::store::DATA_FILE))
        .unwrap()
        .blocks()
        * 512
}

/// Bytes the store's extents use (`df`'s used on the mount).
fn used(mnt: &Path) -> u64 {
    let c = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statvfs writes only into `st`; `c` is a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

/// Overwriting a 100 MiB file 20 times leaves the data file at most about 1.2x the live
/// data; after a crash with unsynced data, the next mount gives back what no commit names.
#[test]
fn overwrites_and_crashes_give_their_space_back() {
    if !require_root("overwrites_and_crashes_give_their_space_back") {
        return;
    }
    let fs = SmallFs::ext4("reuse", 512);
    let mut m = fs.mount("full-reuse");
    m.start("compress=zstd:1");
    let mut rng = Rng(100);
    let size = 100 * MIB as usize;
    for round in 0..20 {
        let data = random(&mut rng, size);
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(m.p("big"))
            .unwrap();
        f.write_all(&data).unwrap();
        if round % 5 == 4 {
            f.sync_all().unwrap();
        }
    }
    m.sync();
    let live = used(&m.mnt);
    let held = data_file_bytes(&m.store);
    assert!(live >= 100 * MIB, "live {live}");
    assert!(
        held * 10 <= live * 12,
        "after 20 overwrites the data file holds {} MiB for {} MiB live",
        held / MIB,
        live / MIB
    );
    // 100 MiB more, never made durable, then a crash.
    let mut f = File::create(m.p("lost")).unwrap();
    f.write_all(&random(&mut rng, size)).unwrap();
    drop(f);
    std::thread::sleep(Duration::from_millis(1500));
    m.kill();
    fsck_clean(&m.store, "after the crash");
    m.start("compress=zstd:1");
    let live = used(&m.mnt);
    let held = data_file_bytes(&m.store);
    assert!(
        held * 10 <= live * 12 + 10 * MIB,
        "after a crash the data file holds {} MiB for {} MiB live",
        held / MIB,
        live / MIB
    );
    m.stop();
    fsck_clean(&m.store, "end");
}
