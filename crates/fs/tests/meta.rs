//! Metadata through a real mount: what many small files do (unpack, copy, delete) keeps every
//! guarantee while the daemon does less per file.

mod common;

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::{require_root, Mount};

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
