//! `..` in a directory listing names the real parent, also after renames (a plain one and
//! RENAME_EXCHANGE) and after a remount; fsck agrees.
mod common;
use common::*;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The inode number readdir(3) gives for `..` in `dir` (d_ino, as the filesystem listed it;
/// `ls -i` would stat instead).
fn listed_dotdot(dir: &Path) -> u64 {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; the stream is closed below and entries are read while it
    // is open.
    unsafe {
        let d = libc::opendir(c.as_ptr());
        assert!(!d.is_null(), "opendir {}", dir.display());
        let mut found = None;
        loop {
            let e = libc::readdir(d);
            if e.is_null() {
                break;
            }
            if CStr::from_ptr((*e).d_name.as_ptr()).to_bytes() == b".." {
                found = Some((*e).d_ino);
            }
        }
        libc::closedir(d);
        found.unwrap_or_else(|| panic!("no `..` listed in {}", dir.display()))
    }
}

/// renameat2(RENAME_EXCHANGE) of two paths.
fn exchange(a: &Path, b: &Path) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let (ca, cb) = (
        CString::new(a.as_os_str().as_bytes()).unwrap(),
        CString::new(b.as_os_str().as_bytes()).unwrap(),
    );
    // SAFETY: two NUL-terminated paths that outlive the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(r, 0, "exchange: {}", std::io::Error::last_os_error());
}

fn ino(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().ino()
}

fn check(m: &Mount, child: &str, parent: &str) {
    assert_eq!(
        listed_dotdot(&m.p(child)),
        ino(&m.p(parent)),
        "`..` of {child} should be {parent}"
    );
}

#[test]
fn dotdot_names_the_parent() {
    if !require_root("dotdot_names_the_parent") {
        return;
    }
    let mut m = Mount::new("dotdot");
    m.start("compress=zstd:1");
    for d in ["a/b/c", "x/y"] {
        std::fs::create_dir_all(m.p(d)).unwrap();
    }
    check(&m, "a/b", "a");
    check(&m, "a/b/c", "a/b");
    check(&m, "a", ".");
    std::fs::rename(m.p("a/b"), m.p("x/b")).unwrap();
    check(&m, "x/b", "x");
    check(&m, "x/b/c", "x/b");
    exchange(&m.p("x/b"), &m.p("a"));
    // x/b is now the old a (parent x), and a is the old x/b (parent the root).
    check(&m, "x/b", "x");
    check(&m, "a", ".");
    check(&m, "a/c", "a");
    m.stop();
    m.start("compress=zstd:1");
    check(&m, "x/y", "x");
    check(&m, "x/b", "x");
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}
