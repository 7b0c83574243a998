//! File handles that survive the kernel forgetting the inode and a remount (issue 28), as
//! btrfs's do, which lets a mount be exported over NFS and handle-based tools (fanotify with
//! FID reporting, backup tools) work: `name_to_handle_at` on the mount, then
//! `open_by_handle_at` after the dentry cache is dropped and after an unmount and mount of
//! the same store gives the same file, and ESTALE only for a file deleted meanwhile. Run side
//! by side on a scratch btrfs, whose outcome must be the same. (This machine's kernel has no
//! NFS server, so the export itself is not shown here.)
mod common;
use common::*;

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use wring_btrfs::scratch::ScratchFs;

/// The largest handle (MAX_HANDLE_SZ).
const MAX_HANDLE: usize = 128;

/// A file handle: `struct file_handle` with its bytes.
#[derive(Clone)]
struct Handle(Vec<u8>);

/// `name_to_handle_at` of `path`.
fn handle_of(path: &Path) -> Handle {
    let header = std::mem::size_of::<libc::file_handle>();
    let mut buf = vec![0u8; header + MAX_HANDLE];
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut mount_id = 0;
    // SAFETY: `buf` holds a file_handle header and MAX_HANDLE bytes after it, as
    // handle_bytes says; the pointer is aligned for the header (u32 fields) because Vec<u8>
    // from the global allocator is at least 8-aligned; `c` is NUL-terminated.
    let r = unsafe {
        let h = buf.as_mut_ptr().cast::<libc::file_handle>();
        (*h).handle_bytes = MAX_HANDLE as u32;
        libc::name_to_handle_at(libc::AT_FDCWD, c.as_ptr(), h, &mut mount_id, 0)
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    Handle(buf)
}

/// `open_by_handle_at` through the mount at `mnt`: the file, or the errno.
fn open_handle(mnt: &Path, h: &Handle, flags: i32) -> Result<File, i32> {
    let m = File::open(mnt).unwrap();
    let mut buf = h.0.clone();
    // SAFETY: `buf` is a file_handle as name_to_handle_at filled it; the kernel only reads it.
    let fd = unsafe {
        libc::open_by_handle_at(
            m.as_raw_fd(),
            buf.as_mut_ptr().cast::<libc::file_handle>(),
            flags,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// What opening each handle gives: the file's contents (a directory: its entries), or the
/// errno.
fn outcome(mnt: &Path, handles: &[(&str, Handle)]) -> Vec<(String, Result<String, i32>)> {
    handles
        .iter()
        .map(|(name, h)| {
            let r = if name.ends_with('/') {
                open_handle(mnt, h, libc::O_RDONLY | libc::O_DIRECTORY).map(|f| {
                    let p = format!("/proc/self/fd/{}", f.as_raw_fd());
                    let mut names: Vec<String> = std::fs::read_dir(p)
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    names.join(",")
                })
            } else {
                open_handle(mnt, h, libc::O_RDONLY).map(|mut f| {
                    let mut s = String::new();
                    f.read_to_string(&mut s).unwrap();
                    s
                })
            };
            (name.to_string(), r)
        })
        .collect()
}

/// The tree the handles point into.
fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("d/e/f")).unwrap();
    std::fs::write(root.join("a"), "file a").unwrap();
    std::fs::write(root.join("d/e/f/deep"), "deep file").unwrap();
    std::fs::write(root.join("gone"), "deleted later").unwrap();
    std::fs::create_dir(root.join("d/gone-dir")).unwrap();
}

fn handles(root: &Path) -> Vec<(&'static str, Handle)> {
    ["a", "d/e/f/deep", "gone", "d/e/f/", "d/", "d/gone-dir/"]
        .into_iter()
        .map(|n| (n, handle_of(&root.join(n.trim_end_matches('/')))))
        .collect()
}

fn drop_caches() {
    std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
}

#[test]
fn file_handles_survive_a_remount_and_go_stale_when_deleted() {
    if !require_root("file_handles_survive_a_remount_and_go_stale_when_deleted") {
        return;
    }
    let mut m = Mount::new("handles");
    m.start("compress=zstd:1");
    let mut btrfs = ScratchFs::new("").expect("a scratch btrfs");
    let mut seen = Vec::new();
    for (which, root) in [("wring", m.mnt.clone()), ("btrfs", btrfs.path().into())] {
        make_tree(&root);
        let hs = handles(&root);
        let fresh = outcome(&root, &hs);
        std::fs::remove_file(root.join("gone")).unwrap();
        std::fs::remove_dir(root.join("d/gone-dir")).unwrap();
        if which == "wring" {
            m.sync();
        } else {
            btrfs.sync().unwrap();
        }
        drop_caches();
        let uncached = outcome(&root, &hs);
        if which == "wring" {
            m.stop();
            m.start("compress=zstd:1");
        } else {
            btrfs.remount().unwrap();
        }
        let remounted = outcome(&root, &hs);
        seen.push((which, fresh, uncached, remounted));
    }
    let (_, fresh, uncached, remounted) = &seen[0];
    assert_eq!(fresh[0].1, Ok("file a".into()));
    assert_eq!(remounted[1].1, Ok("deep file".into()), "{remounted:?}");
    assert_eq!(remounted[2].1, Err(libc::ESTALE), "deleted: {remounted:?}");
    assert_eq!(uncached[2].1, Err(libc::ESTALE), "deleted: {uncached:?}");
    for (which, f, u, r) in &seen[1..] {
        assert_eq!(
            (fresh, uncached, remounted),
            (f, u, r),
            "wring against {which}"
        );
    }
    m.stop();
}
