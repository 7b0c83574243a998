//! What a setattr changes: the new mode, owner, size and times, and who asks.
//!
//! Mirrors the VFS's `struct iattr` (include/linux/fs.h), what notify_change() hands
//! btrfs_setattr(). Its own module, below the namespace's operations ([`super::inode`] that
//! applies it, [`super::fsflags`] whose guard judges it), so that neither names the other for
//! it.

use std::time::SystemTime;

use super::creds::Caller;

/// What setattr changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size.
    pub size: Option<u64>,
    /// New access time (`None` inside: now).
    pub atime: Option<Option<SystemTime>>,
    /// New modification time (`None` inside: now).
    pub mtime: Option<Option<SystemTime>>,
    /// The change time the kernel keeps (with the writeback cache it sends its own when it
    /// flushes times); `None`: now.
    pub ctime: Option<SystemTime>,
    /// Who asks; a size change by a process without CAP_FSETID drops the set-ID bits.
    pub caller: Option<Caller>,
}
