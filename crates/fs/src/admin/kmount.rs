//! The mount(2) call behind a wring mount, made here so that the kernel records the type as
//! `fuse.wring`, as it does `fuse.sshfs`: `findmnt -t fuse.wring`, `mount -a` and other fstab
//! tools then know a wring mount for what it is.
//!
//! Mirrors libfuse's `fuse_mount_sys` (lib/mount.c): open /dev/fuse, mount with
//! `fd=N,rootmode=…,user_id=…,group_id=…` and the subtype in the type name, then serve the
//! descriptor. Where this process may not (/dev/fuse or mount(2) refused: not root),
//! [`mount`] says so with `None`, and the caller mounts through fusermount3 (`fusermount.rs`,
//! with `subtype=wring`, so the type is `fuse.wring` there too).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::io::Errno;
use rustix::mount::{MountFlags, UnmountFlags};

/// The type the kernel records for a wring mount.
pub const FSTYPE: &str = "fuse.wring";

/// What a mount is made with.
pub struct MountSpec<'a> {
    /// The source shown by findmnt (`wring:DIR`).
    pub source: &'a str,
    /// Whether users other than the owner may enter (`allow_other`).
    pub allow_other: bool,
    /// The VFS flags (`vfs_flags` in `volume/vfs.rs`).
    pub flags: MountFlags,
}

/// Change a mount's VFS flags (`mount -o remount,…`): the kernel flushes and, for `ro`,
/// refuses with EBUSY while a file is open for writing, as for any filesystem.
pub fn remount(mountpoint: &Path, flags: MountFlags) -> io::Result<()> {
    // FUSE ignores option text on a remount made through mount(2).
    rustix::mount::mount_remount(mountpoint, flags, c"").map_err(io::Error::from)
}

/// Mount a FUSE connection on `mountpoint` with type [`FSTYPE`], returning the /dev/fuse
/// descriptor to serve; `Ok(None)` when this process may not call mount(2) itself.
pub fn mount(mountpoint: &Path, spec: &MountSpec<'_>) -> io::Result<Option<OwnedFd>> {
    let root_mode = std::fs::metadata(mountpoint)?.mode() & libc::S_IFMT;
    let dev: File = match OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(dev) => dev,
        // fusermount3 is set-uid and opens it itself.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
        Err(e) => return Err(io::Error::new(e.kind(), format!("opening /dev/fuse: {e}"))),
    };
    let mut data = format!(
        "fd={},rootmode={root_mode:o},user_id={},group_id={},default_permissions",
        dev.as_raw_fd(),
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    if spec.allow_other {
        data.push_str(",allow_other");
    }
    let data = CString::new(data).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    match rustix::mount::mount(spec.source, mountpoint, FSTYPE, spec.flags, data.as_c_str()) {
        Ok(()) => Ok(Some(dev.into())),
        Err(Errno::PERM) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Where the filesystem with `source` (`wring:DIR`) is mounted, by /proc/self/mountinfo's
/// text `info` (its mount point, octal escapes undone).
pub fn mounted_at(info: &str, source: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let src = right.split(' ').nth(1)?;
        (unescape(src) == source).then(|| unescape(left.split(' ').nth(4).unwrap_or("")))
    })
}

/// Undo mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (b[i], oct) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Detach the mount on `mountpoint` when serving ends with an error, so that no dead
/// connection is left behind. Best effort.
pub fn detach(mountpoint: &Path) {
    if let Err(e) = rustix::mount::unmount(mountpoint, UnmountFlags::DETACH) {
        if e != Errno::INVAL {
            log::warn!("detaching {}: {e}", mountpoint.display());
        }
    }
}
