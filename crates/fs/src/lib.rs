//! wring-fs: a FUSE filesystem that compresses file data transparently by btrfs's rules, over a
//! crash-safe embedded store.
//!
//! Mirrors fs/btrfs as a whole: mount options (super.c), the compression decision per extent
//! (inode.c's `inode_need_compress`/`compress_file_range`), the `compression` property
//! (props.c), compsize's report, and the checksum on every extent (file-item.c). It differs in
//! storing everything in a [redb](https://docs.rs/redb) database in the store directory, in
//! honouring a per-file level, and in allowing extents of up to 4 MiB.
//!
//! Layers, bottom up: [`store`] (tables and records), [`volume`] (the filesystem core:
//! [`inode`] and [`dir`] namespace operations, [`extent`] data), [`fuse`] (the thin
//! `fuser::Filesystem` adapter), [`daemon`] (mount, unmount, the control channel), [`fsck`],
//! [`stat`] and [`status`].

pub mod admin;
pub mod counters;
mod error;
pub mod options;
#[cfg(test)]
mod sim;
pub mod store;
mod sync;
pub mod transport;
pub mod volume;

pub use admin::{daemon, fsck, kmount};
pub use error::FsError;
pub use options::{Atime, Compress, OptionError, Options};
pub use transport::{fuse, ops, uring};
pub use volume::data::extent;
pub use volume::names::{acl, dir, fsflags, inode};
pub use volume::Volume;
pub use volume::{stat, status, vfs};

/// Extended attribute holding the per-file/per-directory compression property (btrfs's name).
pub const PROP_XATTR: &str = "btrfs.compression";
/// Control attribute on the mount root: read for the live options and engine statistics.
pub const STATUS_XATTR: &str = "wring.status";
/// Control attribute on the mount root: write option text to remount.
pub const OPTIONS_XATTR: &str = "wring.options";
/// Control attribute on any inode: read for the compsize-style report of that file or tree.
pub const STAT_XATTR: &str = "wring.stat";
/// Control attribute on the mount root: read to make everything durable (answers "ok").
pub const SYNC_XATTR: &str = "wring.sync";
/// Control attribute on the mount root: read to make everything durable and the mount
/// read-only (the last step of `remount,ro`, once the kernel's mount is read-only and no
/// setxattr can reach the daemon; answers "ok").
pub const READ_ONLY_XATTR: &str = "wring.readonly";
/// Control attribute on the mount root: the daemon's process id.
pub const PID_XATTR: &str = "wring.pid";
