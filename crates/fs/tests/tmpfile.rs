//! O_TMPFILE (issue 28), side by side with a scratch btrfs: an unnamed file made in a
//! directory (owner, mode, no link), named later by linkat from /proc/self/fd, and one left
//! unnamed gone when closed; a crash while one is open leaves nothing after the next mount.
//! On the suite's transport (`scripts/test.sh` runs it through /dev/fuse and through FUSE over
//! io_uring): both decode FUSE_TMPFILE with the same `wire` (issue 40; fuser, which served
//! /dev/fuse before, did not know the opcode, and O_TMPFILE was EOPNOTSUPP there).
mod common;
use common::*;

use std::ffi::CString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use wring_btrfs::scratch::ScratchFs;

/// open(dir, O_TMPFILE | O_RDWR, 0640).
fn tmpfile(dir: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o640)
        .open(dir)
}

/// linkat(AT_FDCWD, /proc/self/fd/N, AT_FDCWD, to, AT_SYMLINK_FOLLOW).
fn link_fd(f: &std::fs::File, to: &Path) -> std::io::Result<()> {
    let from = CString::new(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
    let to = CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: both are NUL-terminated paths that live across the call.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// What O_TMPFILE does in `dir`: (nlink and mode while unnamed, what the named one reads
/// back with its nlink, the names left in `dir`).
fn outcome(dir: &Path) -> (u64, u32, Vec<u8>, u64, Vec<String>) {
    let mut f = tmpfile(dir).unwrap();
    f.write_all(b"made without a name\n").unwrap();
    let md = f.metadata().unwrap();
    link_fd(&f, &dir.join("named")).unwrap();
    drop(f);
    let mut gone = tmpfile(dir).unwrap();
    gone.write_all(b"never named").unwrap();
    drop(gone);
    let named = std::fs::read(dir.join("named")).unwrap();
    let nlink = std::fs::metadata(dir.join("named")).unwrap().nlink();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (md.nlink(), md.mode() & 0o7777, named, nlink, names)
}

#[test]
fn o_tmpfile_as_btrfs() {
    if !require_root("o_tmpfile_as_btrfs") {
        return;
    }
    let mut m = Mount::new("tmpfile");
    m.start("");
    let btrfs = ScratchFs::new("").unwrap();
    std::fs::create_dir(m.p("d")).unwrap();
    std::fs::create_dir(btrfs.path().join("d")).unwrap();
    let ours = outcome(&m.p("d"));
    assert_eq!(ours, outcome(&btrfs.path().join("d")));
    assert_eq!(ours.0, 0, "unnamed");
    // A crash with an unnamed file open: the next mount deletes it.
    let held = tmpfile(&m.p("d")).unwrap();
    let ino = held.metadata().unwrap().ino();
    m.sync();
    m.kill();
    drop(held);
    m.start("");
    let status = wring_fs::daemon::status(&m.mnt).unwrap();
    let inodes: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("store: "))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix("inodes="))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(inodes, 3, "root, d and named; not inode {ino}");
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}
