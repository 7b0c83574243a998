//! statx(2) on the mount (fstests generic/424, issue 40), beside a scratch btrfs, on the
//! suite's transport: the kernel sends FUSE_STATX when statx asks for the birth time (with its
//! cached attributes stale, as a chattr leaves them), and wring answers it with the basic
//! fields and the `stx_attributes` btrfs_getattr reports (src/transport/tests.rs compares the
//! answer itself with btrfs's). Linux 6.18 drops a FUSE server's `stx_attributes` and
//! `stx_attributes_mask` (fs/fuse/dir.c fuse_do_statx keeps the basic fields and the birth
//! time): on such a kernel the mount reports none of the four, and once the kernel passes
//! them on (the mask says so) they must be btrfs's.
mod common;
use common::*;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use wring_btrfs::scratch::ScratchFs;

/// `STATX_ATTR_COMPRESSED | _IMMUTABLE | _APPEND | _NODUMP`.
const FOUR: u64 = 0x74;

fn statx(path: &Path) -> libc::statx {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: statx is plain data; all zeroes is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statx buffer, both alive across the call.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            p.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_ALL,
            &mut stx,
        )
    };
    assert_eq!(
        r,
        0,
        "statx {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    stx
}

fn chattr(args: &str, f: &Path) {
    let o = sh(&format!("chattr {args} {}", f.display()));
    assert!(
        o.status.success(),
        "chattr {args}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn statx_reaches_wring_and_reports_what_the_kernel_passes_on() {
    if !require_root("statx_reaches_wring_and_reports_what_the_kernel_passes_on") {
        return;
    }
    let mut m = Mount::new("statx");
    m.start("");
    let btrfs = ScratchFs::new("").unwrap();
    let files = [m.p("f"), btrfs.path().join("f")];
    for f in &files {
        std::fs::write(f, b"twelve bytes").unwrap();
    }
    let before = status_figure(&m.mnt, "fuse:", "statx=");
    for letters in ["", "a", "c", "d", "i", "acdi"] {
        for f in &files {
            chattr("-a -c -d -i", f);
            if !letters.is_empty() {
                chattr(&format!("+{letters}"), f);
            }
        }
        let (ours, theirs) = (statx(&files[0]), statx(&files[1]));
        let basic = |s: &libc::statx| (s.stx_size, s.stx_mode, s.stx_nlink, s.stx_uid);
        assert_eq!(basic(&ours), basic(&theirs), "+{letters}");
        let pair = |s: &libc::statx| (s.stx_attributes & FOUR, s.stx_attributes_mask & FOUR);
        eprintln!(
            "+{letters}: wring {:?}, btrfs {:?}",
            pair(&ours),
            pair(&theirs)
        );
        match ours.stx_attributes_mask & FOUR {
            // The kernel passes none on (Linux 6.18): none shows.
            0 => assert_eq!(pair(&ours), (0, 0), "+{letters}"),
            _ => assert_eq!(pair(&ours), pair(&theirs), "+{letters}: wring, then btrfs"),
        }
    }
    for f in &files {
        chattr("-a -i", f);
    }
    let asked = status_figure(&m.mnt, "fuse:", "statx=") - before;
    assert!(
        asked >= 6,
        "the kernel sent {asked} STATX for 6 statx after chattr"
    );
    m.stop();
}
