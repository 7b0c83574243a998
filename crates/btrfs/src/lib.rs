//! wring's btrfs bridge: reads and writes btrfs compressed extents through the kernel's
//! encoded I/O ioctls (BTRFS_IOC_ENCODED_READ / BTRFS_IOC_ENCODED_WRITE).
//!
//! * [`ioctl`] — the uapi struct, ioctl numbers and safe wrappers ([`encoded_read`],
//!   [`encoded_write`]);
//! * [`extents`] — walk a file extent by extent in its on-disk encoding;
//! * [`verify`] — decode each extent with the engine and compare with the kernel's read;
//! * [`testing`] — scratch btrfs filesystems on loop devices and test data, for tests.
//!
//! Mirrors the user-facing side of fs/btrfs/ioctl.c and fs/btrfs/inode.c's encoded I/O.
//! Encoded I/O needs CAP_SYS_ADMIN and Linux 5.18 or later.

mod error;
pub mod extents;
pub mod ioctl;
pub mod testing;
pub mod verify;

pub use error::{BtrfsError, Op};
pub use extents::{open_for_encoded_read, Extent, Extents};
pub use ioctl::{encoded_read, encoded_write, Compression, EncodedRead, EncodedWrite};
pub use verify::{verify_file, verify_path, ExtentCheck, Report, Verdict};
