//! Administration, above the layers: mounting and serving a store ([`daemon`], with the
//! mount(2) call in [`kmount`] and the mount's readahead in [`bdi`]), unmounting, remounting
//! and the control channel's client side, checking and repairing a store that is not mounted
//! ([`fsck`]), and waiting for a process that still holds a store ([`holder`]). It uses the
//! transport, the volume and the store; nothing below uses it.
//!
//! Mirrors fs/btrfs/super.c's mount and remount (btrfs_mount, btrfs_remount,
//! btrfs_fill_super), libfuse's mount helper, `btrfs check` and e2fsck.

pub(crate) mod bdi;
pub mod daemon;
pub mod fsck;
mod fusermount;
pub(crate) mod holder;
pub mod kmount;
pub(crate) mod metrics;
