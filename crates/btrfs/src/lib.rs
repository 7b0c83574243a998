//! wring's btrfs bridge: reads and writes btrfs compressed extents through the kernel's
//! encoded I/O ioctls (BTRFS_IOC_ENCODED_READ / BTRFS_IOC_ENCODED_WRITE).
//!
//! * [`ioctl`] — the uapi struct, ioctl numbers and safe wrappers ([`encoded_read`],
//!   [`encoded_write`]);
//! * [`codec`] — one extent's bytes in the kernel's formats, encoded or decoded in memory;
//! * [`extents`] — walk a file extent by extent in its on-disk encoding;
//! * [`verify`] — decode each extent with the engine and compare with the kernel's read;
//! * [`search`] — a file's extent items from tree search (what compsize reads);
//! * [`fsinfo`] — inode flags, shared ranges (FIEMAP), xattrs, CAP_SYS_ADMIN;
//! * [`guard`] — the write lease and stamps that keep a file still while it is rewritten;
//! * [`walk`] — the regular files under some paths, staying on one btrfs;
//! * [`stat`] — a compsize-style report with extent counts and a ratio histogram;
//! * [`recompress`] — rewrite files' extents compressed by wring, content unchanged;
//! * [`scratch`] — throwaway btrfs filesystems on loop devices, for the benchmarks' kernel runs
//!   and for tests.
//!
//! Mirrors the user-facing side of fs/btrfs/ioctl.c and fs/btrfs/inode.c's encoded I/O.
//! Encoded I/O needs CAP_SYS_ADMIN and Linux 5.18 or later.

pub mod codec;
mod error;
pub mod extents;
pub mod fsinfo;
pub mod guard;
pub mod ioctl;
pub mod recompress;
pub mod scratch;
pub mod search;
pub mod stat;
pub mod verify;
pub mod walk;

pub use error::{BtrfsError, Op, Refusal};
pub use extents::{open_for_encoded_read, Extent, Extents};
pub use ioctl::{encoded_read, encoded_write, Compression, EncodedRead, EncodedWrite};
pub use verify::{verify_file, verify_path, ExtentCheck, Report, Verdict};

/// The README, whose examples run as doc tests (`cargo test -p wring-btrfs --doc`).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
