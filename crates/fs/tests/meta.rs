//! Metadata through a real mount: what many small files do (unpack, copy, delete) keeps every
//! guarantee while the daemon does less per file.

mod common;

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::{require_root, status_figure, Mount};

/// syncfs(2) on the filesystem holding `p`.
fn syncfs(p: &Path) -> std::io::Result<()> {
    let f = fs::File::open(p)?;
    // SAFETY: syncfs on a descriptor this function owns.
    match unsafe { libc::syncfs(f.as_raw_fd()) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Regression: a file written, closed and unlinked was deleted at once, while the kernel
/// still held it; the kernel's later flush of its times (a SETATTR the writeback cache sends)
/// then failed with ENOENT and `sync` reported "No such file or directory" — after every
/// `tar -x` that replaces a file. The kernel's reference (until FORGET) now keeps the
/// unlinked inode as an orphan, deleted once the kernel lets it go; nothing is left behind.
#[test]
fn sync_after_unlinking_written_files_succeeds_and_leaves_no_orphans() {
    if !require_root("sync_after_unlinking_written_files_succeeds_and_leaves_no_orphans") {
        return;
    }
    let mut m = Mount::new("unlink-sync");
    m.start("compress=zstd:1");
    fs::create_dir(m.p("d")).unwrap();
    for i in 0..50 {
        fs::write(m.p(&format!("d/f{i}")), format!("file {i}\n")).unwrap();
        fs::remove_file(m.p(&format!("d/f{i}"))).unwrap();
    }
    // A replaced file, as tar and cp replace one.
    fs::write(m.p("d/g"), b"old").unwrap();
    fs::write(m.p("d/g.new"), b"new").unwrap();
    fs::rename(m.p("d/g.new"), m.p("d/g")).unwrap();
    let r = syncfs(&m.mnt);
    assert!(r.is_ok(), "syncfs after unlinking written files: {r:?}");
    assert_eq!(fs::read(m.p("d/g")).unwrap(), b"new");
    // Held by an open descriptor as well: still reads, and its size is right.
    let f = fs::File::open(m.p("d/g")).unwrap();
    fs::remove_file(m.p("d/g")).unwrap();
    assert_eq!(f.metadata().unwrap().size(), 3);
    drop(f);
    assert!(syncfs(&m.mnt).is_ok());
    m.stop();
    let report = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(
        report.problems.is_empty(),
        "fsck after unmount: {:?}",
        report.problems
    );
    // Every inode but the root and d is gone: none was left as an orphan.
    let store = wring_fs::store::Store::open(&m.store).unwrap();
    let txn = store.read().unwrap();
    let inodes = wring_fs::store::counter(&txn, "inodes").unwrap();
    assert_eq!(inodes, 1, "inodes left in the store besides the root");
}

/// `lookup=N` and `getattr=N` from the mount's status.
fn lookups_and_getattrs(mnt: &Path) -> (u64, u64) {
    let status = wring_fs::daemon::status(mnt).unwrap();
    let line = status.lines().find(|l| l.starts_with("fuse: ")).unwrap();
    let get = |name: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map_or(0, |v| v.parse().unwrap())
    };
    (get("lookup"), get("getattr"))
}

/// The kernel keeps entries and attributes for longer than a second (the daemon is the only
/// writer): a tree stat'ed twice, the second time after a pause, does not ask the daemon again.
/// What the daemon changes behind the kernel once a file's writeback commits is invalidated, so
/// `du` after a sync sees the bytes the file's extents cover (btrfs's st_blocks), not the 0
/// the create replied.
#[test]
fn the_kernel_keeps_attributes_and_sees_what_writeback_changes() {
    if !require_root("the_kernel_keeps_attributes_and_sees_what_writeback_changes") {
        return;
    }
    let mut m = Mount::new("ttl");
    m.start("compress=zstd:1");
    fs::create_dir(m.p("d")).unwrap();
    let body: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8 / 16).collect();
    for i in 0..20 {
        fs::write(m.p(&format!("d/f{i}")), &body).unwrap();
        // The kernel's copy, taken while the file's writeback may still be under way.
        fs::metadata(m.p(&format!("d/f{i}"))).unwrap();
    }
    syncfs(&m.mnt).unwrap();
    wring_fs::daemon::get_xattr(&m.mnt, wring_fs::SYNC_XATTR).unwrap();
    let blocks: Vec<u64> = (0..20)
        .map(|i| fs::metadata(m.p(&format!("d/f{i}"))).unwrap().blocks())
        .collect();
    for (i, b) in blocks.iter().enumerate() {
        // The 2048 sectors of the data, as btrfs counts them, however few it is stored in.
        assert_eq!(*b, 2048, "d/f{i}: st_blocks after sync");
    }
    let before = lookups_and_getattrs(&m.mnt);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for i in 0..20 {
        fs::symlink_metadata(m.p(&format!("d/f{i}"))).unwrap();
    }
    let after = lookups_and_getattrs(&m.mnt);
    assert_eq!(
        before, after,
        "(lookups, getattrs) the daemon answered for a tree the kernel had just stat'ed"
    );
    m.stop();
}

/// `commits=N` from the mount's status.
fn commits(mnt: &Path) -> u64 {
    status_figure(mnt, "transactions: ", "commits=")
}

/// Writing small files costs well under a transaction each: the creates are delayed (their
/// entries and records written by the next transaction), their writebacks, finishing one
/// by one as the files are closed, are committed in batches, and the kernel's flush of
/// their times is a delayed inode item. Every file reads back after a remount.
#[test]
fn writing_small_files_costs_less_than_a_commit_each() {
    if !require_root("writing_small_files_costs_less_than_a_commit_each") {
        return;
    }
    let mut m = Mount::new("write-commits");
    m.start("compress-force=zstd:1");
    fs::create_dir(m.p("d")).unwrap();
    syncfs(&m.mnt).unwrap();
    const FILES: u64 = 300;
    let before = commits(&m.mnt);
    for i in 0..FILES {
        fs::write(m.p(&format!("d/f{i}")), format!("file {i}\n").repeat(40)).unwrap();
    }
    syncfs(&m.mnt).unwrap();
    let used = commits(&m.mnt) - before;
    eprintln!("{used} commits to write {FILES} small files");
    assert!(
        used <= FILES / 2,
        "{used} commits to write {FILES} small files"
    );
    m.stop();
    m.start("compress-force=zstd:1");
    for i in 0..FILES {
        let back = fs::read(m.p(&format!("d/f{i}"))).unwrap();
        assert_eq!(
            back,
            format!("file {i}\n").repeat(40).into_bytes(),
            "file {i}"
        );
    }
    m.stop();
}

/// `rm -rf` costs no transaction per file: each unlink is delayed (the entry's removal and
/// the inode's record, an orphan while the kernel holds it), and the kernel's flush of the
/// ctime the unlink gave it is a delayed inode item; the committer, the batch that deletes
/// the forgotten orphans and the sync write them together. A file still open keeps its
/// times: futimens on it after the unlink is stored, so the attributes a later fchmod
/// answers with (which replace the kernel's copy) still have it.
#[test]
fn removing_files_nobody_has_open_costs_no_commit_each() {
    if !require_root("removing_files_nobody_has_open_costs_no_commit_each") {
        return;
    }
    let mut m = Mount::new("rm-commits");
    m.start("compress=zstd:1");
    fs::create_dir(m.p("d")).unwrap();
    const FILES: u64 = 200;
    for i in 0..FILES {
        fs::write(m.p(&format!("d/f{i}")), format!("file {i}\n")).unwrap();
    }
    syncfs(&m.mnt).unwrap();
    let before = commits(&m.mnt);
    let delayed = || status_figure(&m.mnt, "delayed_inodes: ", "names=");
    let delayed_before = delayed();
    for i in 0..FILES {
        fs::remove_file(m.p(&format!("d/f{i}"))).unwrap();
    }
    syncfs(&m.mnt).unwrap();
    let used = commits(&m.mnt) - before;
    eprintln!("{used} commits to remove {FILES} files");
    // The committer's ticks, the deletions of the forgotten orphans in a batch or two, the
    // sync.
    assert!(
        used <= 10,
        "{used} commits to remove {FILES} files nobody had open"
    );
    let unlinks = delayed() - delayed_before;
    assert!(unlinks >= FILES, "{unlinks} of {FILES} unlinks delayed");
    // Open while unlinked: its times are kept.
    let f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("d/open"))
        .unwrap();
    fs::remove_file(m.p("d/open")).unwrap();
    let t = libc::timespec {
        tv_sec: 1_000_000_000,
        tv_nsec: 0,
    };
    // SAFETY: futimens on an open descriptor with two valid timespecs.
    let r = unsafe { libc::futimens(f.as_raw_fd(), [t, t].as_ptr()) };
    assert_eq!(r, 0, "futimens: {}", std::io::Error::last_os_error());
    assert_eq!(f.metadata().unwrap().mtime(), 1_000_000_000);
    // SAFETY: fchmod on an open descriptor.
    let r = unsafe { libc::fchmod(f.as_raw_fd(), 0o600) };
    assert_eq!(r, 0, "fchmod: {}", std::io::Error::last_os_error());
    let md = f.metadata().unwrap();
    assert_eq!((md.mtime(), md.mode() & 0o777), (1_000_000_000, 0o600));
    drop(f);
    syncfs(&m.mnt).unwrap();
    m.stop();
    let report = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// `name=N` from `wring status`'s `fuse:` line (requests by opcode).
fn fuse_requests(mnt: &Path, name: &str) -> u64 {
    let status = wring_fs::daemon::status(mnt).unwrap();
    let line = status.lines().find(|l| l.starts_with("fuse: ")).unwrap();
    let want = format!("{name}=");
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(want.as_str()))
        .map_or(0, |v| v.parse().unwrap())
}

/// A cold `ls -l` (list, then lstat every entry) is answered by READDIRPLUS: a few requests,
/// not a LOOKUP per entry. Each entry it returns is held like a lookup until FORGET, and the
/// ones left out of a full reply are not: after removing everything the listing returned, the
/// store counts the inodes it had before (none kept as an orphan), and fsck finds nothing.
#[test]
fn a_cold_listing_with_attributes_is_one_request_per_reply_and_holds_what_it_returns() {
    if !require_root(
        "a_cold_listing_with_attributes_is_one_request_per_reply_and_holds_what_it_returns",
    ) {
        return;
    }
    // With 200-byte names about 360 entries fill the 128 KiB a listing asks for (glibc's
    // buffer follows st_blksize): the 1,000 take three replies, and two entries are left out
    // of full ones.
    const FILES: usize = 1000;
    let mut m = Mount::new("readdirplus");
    m.start("compress=zstd:1");
    let files = |mnt: &Path| rustix::fs::statvfs(mnt).unwrap().f_files;
    let before = files(&m.mnt);
    fs::create_dir(m.p("d")).unwrap();
    for i in 0..FILES {
        // Long names: the listing takes many replies, so entries are left out of full ones.
        let name = format!("d/{i:04}-{}", "n".repeat(195));
        fs::write(m.p(&name), format!("{i}")).unwrap();
    }
    m.stop();
    // A fresh kernel side: nothing cached.
    m.start("compress=zstd:1");
    let lookups = fuse_requests(&m.mnt, "lookup") + fuse_requests(&m.mnt, "getattr");
    let mut seen = 0;
    for e in fs::read_dir(m.p("d")).unwrap() {
        let md = fs::symlink_metadata(e.unwrap().path()).unwrap();
        assert!(md.is_file() && md.len() >= 1);
        seen += 1;
    }
    assert_eq!(seen, FILES);
    let asked = fuse_requests(&m.mnt, "lookup") + fuse_requests(&m.mnt, "getattr") - lookups;
    assert!(
        asked < FILES as u64 / 10,
        "{asked} lookups and getattrs for a cold listing of {FILES} files"
    );
    assert!(fuse_requests(&m.mnt, "readdirplus") > 1, "no READDIRPLUS");
    fs::remove_dir_all(m.p("d")).unwrap();
    // The kernel sends its FORGETs when it gets to them; a sync deletes the orphans
    // forgotten by then.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while files(&m.mnt) != before && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        syncfs(&m.mnt).unwrap();
    }
    assert_eq!(
        files(&m.mnt),
        before,
        "inodes left after removing everything"
    );
    m.stop();
    let report = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Opening a file asks the daemon once and closing it nothing it waits for: a new file is
/// made and opened by one CREATE (no MKNOD), an existing one opened by OPEN (answered since
/// issue 40, so that an immutable file can refuse a writing open), the first FLUSH is answered
/// ENOSYS and the kernel sends no other, and RELEASE goes in the background at close (the
/// kernel still writes a file's pages back before close returns). Every file reads back,
/// also one unlinked while open, and fsck finds nothing after.
#[test]
fn opening_a_file_asks_once_and_closing_it_nothing_waited_for() {
    if !require_root("opening_a_file_asks_once_and_closing_it_nothing_waited_for") {
        return;
    }
    const FILES: u64 = 100;
    let mut m = Mount::new("open-once");
    m.start("compress=zstd:1");
    fs::create_dir(m.p("d")).unwrap();
    fs::write(m.p("first"), b"first").unwrap();
    assert_eq!(fs::read(m.p("first")).unwrap(), b"first");
    let ops = ["create", "mknod", "open", "flush", "release"];
    let before = ops.map(|op| fuse_requests(&m.mnt, op));
    for i in 0..FILES {
        fs::write(m.p(&format!("d/f{i}")), format!("file {i}\n")).unwrap();
    }
    for i in 0..FILES {
        let back = fs::read(m.p(&format!("d/f{i}"))).unwrap();
        assert_eq!(back, format!("file {i}\n").into_bytes());
    }
    let after = ops.map(|op| fuse_requests(&m.mnt, op));
    let asked: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    // RELEASE is sent in the background: the last ones may still be on their way.
    assert!(
        asked[..4] == [FILES, 0, FILES, 0] && asked[4] <= 2 * FILES,
        "CREATE, MKNOD, OPEN, FLUSH, RELEASE for {FILES} files written and read: {asked:?}"
    );
    let f = fs::File::open(m.p("d/f7")).unwrap();
    fs::remove_file(m.p("d/f7")).unwrap();
    let mut back = String::new();
    std::io::Read::read_to_string(&mut &f, &mut back).unwrap();
    assert_eq!(back, "file 7\n");
    drop(f);
    syncfs(&m.mnt).unwrap();
    m.stop();
    let report = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
