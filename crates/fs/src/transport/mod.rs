//! The transports: how FUSE requests reach the volume and their answers go back, with one
//! protocol layer for both. [`wire`] decodes requests and encodes replies; [`ops`] holds what
//! each request does, written once against small answer traits; `dispatch` hands a decoded
//! request to its body and writes the answer. Two transports carry them — [`dev`], `/dev/fuse`
//! (threads that `read(2)` a request each from their clone of the connection and `writev(2)`
//! the reply; INIT, FORGET, INTERRUPT and the notifications go this way on either transport),
//! and [`uring`], FUSE over io_uring (`uring=1`: the io_uring commands, one registered entry
//! per thread).
//!
//! Mirrors the kernel's VFS entry points a filesystem fills in (btrfs_dir_inode_operations,
//! btrfs_file_operations), here reached through fs/fuse's two channels to a server.

// FUSE requests come from the kernel on behalf of any process: decoding them must not panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub(crate) mod dev;
mod dispatch;
pub(crate) mod ops;
pub mod uring;
pub mod wire;

/// The largest WRITE the kernel sends (INIT's max_write).
pub const MAX_WRITE: usize = 1 << 20;

/// Readahead of a wring mount, as btrfs's: 4 MiB. FUSE_INIT asks the kernel for it, and the
/// daemon sets the mount's bdi to it (`admin/bdi.rs`), since the kernel takes the smaller.
pub(crate) const READAHEAD_KB: u32 = 4096;

#[cfg(test)]
mod tests;
