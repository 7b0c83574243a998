//! The mount(2) call behind a wring mount, made here so that the kernel records the type as
//! `fuse.wring`, as it does `fuse.sshfs`: `findmnt -t fuse.wring`, `mount -a` and other fstab
//! tools then know a wring mount for what it is. fuser's own mount always says `fuse`.
//!
//! Mirrors libfuse's `fuse_mount_sys` (lib/mount.c): open /dev/fuse, mount with
//! `fd=N,rootmode=…,user_id=…,group_id=…` and the subtype in the type name, then serve the
//! descriptor. Where this process may not (/dev/fuse or mount(2) refused: not root),
//! [`mount`] says so with `None`, and the caller falls back to fuser's mount, which goes
//! through fusermount3 (and says `fuse`).

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
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOATIME;
    match rustix::mount::mount(spec.source, mountpoint, FSTYPE, flags, data.as_c_str()) {
        Ok(()) => Ok(Some(dev.into())),
        Err(Errno::PERM) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Detach the mount on `mountpoint` when serving ends with an error, so that no dead
/// connection is left behind (fuser's own mount does the same on drop). Best effort.
pub fn detach(mountpoint: &Path) {
    if let Err(e) = rustix::mount::unmount(mountpoint, UnmountFlags::DETACH) {
        if e != Errno::INVAL {
            log::warn!("detaching {}: {e}", mountpoint.display());
        }
    }
}
