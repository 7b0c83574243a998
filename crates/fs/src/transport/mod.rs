//! The transports: how FUSE requests reach the volume and their answers go back. [`ops`] holds
//! what each request does, written once against small answer traits; two transports hand
//! requests to it — [`fuse`], the thin `fuser::Filesystem` adapter (fuser reads `/dev/fuse`
//! and writes the replies), and [`uring`], FUSE over io_uring (`uring=1`: the requests' wire
//! format, the io_uring commands, one registered entry per thread).
//!
//! Mirrors the kernel's VFS entry points a filesystem fills in (btrfs_dir_inode_operations,
//! btrfs_file_operations), here reached through fs/fuse's two channels to a server.

pub mod fuse;
pub mod ops;
pub mod uring;

/// Readahead of a wring mount, as btrfs's: 4 MiB. FUSE_INIT asks the kernel for it, and the
/// daemon sets the mount's bdi to it (`admin/bdi.rs`), since the kernel takes the smaller.
pub const READAHEAD_KB: u32 = 4096;
