//! Errors of the btrfs bridge, in plain words.
//!
//! The kernel answers encoded I/O with bare errnos (fs/btrfs/ioctl.c:
//! btrfs_ioctl_encoded_read/btrfs_ioctl_encoded_write); this turns the common ones into
//! sentences a person can act on and keeps the rest as [`std::io::Error`].

use std::io;
use std::path::PathBuf;

/// Which encoded I/O operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// BTRFS_IOC_ENCODED_READ.
    EncodedRead,
    /// BTRFS_IOC_ENCODED_WRITE.
    EncodedWrite,
    /// A normal `pread` of file data.
    Read,
    /// Opening or inspecting the file.
    Open,
    /// BTRFS_IOC_TREE_SEARCH_V2 / BTRFS_IOC_FS_INFO.
    Search,
    /// FS_IOC_FIEMAP.
    Fiemap,
    /// FS_IOC_GETFLAGS.
    Flags,
    /// fcntl F_SETLEASE / F_GETLEASE.
    Lease,
    /// A normal `pwrite` of file data.
    Write,
    /// fdatasync.
    Sync,
    /// Restoring the file's times.
    Times,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::EncodedRead => "encoded read",
            Op::EncodedWrite => "encoded write",
            Op::Read => "read",
            Op::Open => "open",
            Op::Search => "tree search",
            Op::Fiemap => "fiemap",
            Op::Flags => "reading inode flags",
            Op::Lease => "lease",
            Op::Write => "write",
            Op::Sync => "fdatasync",
            Op::Times => "restoring times",
        })
    }
}

/// Why a btrfs encoded read or write failed.
#[derive(Debug, thiserror::Error)]
pub enum BtrfsError {
    /// EPERM: encoded I/O bypasses permission checks on the data, so the kernel wants root.
    #[error("{op} needs CAP_SYS_ADMIN (run as root)")]
    NeedsCapSysAdmin {
        /// The operation that was refused.
        op: Op,
    },
    /// ENOTTY/EOPNOTSUPP, or EINVAL from a file that is not on btrfs.
    #[error("{op} failed: the file is not on btrfs (or the kernel is older than 5.18 and has no encoded I/O)")]
    NotBtrfs {
        /// The operation that was refused.
        op: Op,
    },
    /// EBADF from an encoded write: the file descriptor was not opened for writing.
    #[error("encoded write needs the file opened for writing")]
    NotOpenForWriting,
    /// ENOBUFS: the compressed extent does not fit in the buffer given to the kernel.
    #[error("the compressed extent at offset {offset} does not fit in a {buffer}-byte buffer")]
    BufferTooSmall {
        /// File offset of the read.
        offset: u64,
        /// Size of the buffer that was too small.
        buffer: usize,
    },
    /// EINVAL from an encoded write on btrfs: the extent broke one of the kernel's rules.
    #[error("the kernel refused the encoded write at offset {offset}: {reason}")]
    WriteRejected {
        /// File offset of the write.
        offset: u64,
        /// The rule that was broken, as far as wring can tell.
        reason: String,
    },
    /// EINVAL from an encoded read on btrfs.
    #[error("the kernel refused the encoded read at offset {offset} as invalid")]
    ReadRejected {
        /// File offset of the read.
        offset: u64,
    },
    /// A file offset or length that does not fit the kernel's types.
    #[error("offset {offset} is out of range for encoded I/O")]
    OffsetOutOfRange {
        /// The offending value.
        offset: u64,
    },
    /// The kernel reported progress of zero bytes where it must move forward.
    #[error("the kernel reported an empty extent at offset {offset} before the end of the file")]
    NoProgress {
        /// File offset of the read.
        offset: u64,
    },
    /// A path given by the user is not on btrfs.
    #[error("{}: not on btrfs", path.display())]
    PathNotBtrfs {
        /// The path.
        path: PathBuf,
    },
    /// A path could not be opened or inspected.
    #[error("{}: {source}", path.display())]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Any other system error.
    #[error("{op} at offset {offset} failed: {source}")]
    Io {
        /// The operation.
        op: Op,
        /// File offset involved (0 when none).
        offset: u64,
        /// The system error.
        #[source]
        source: io::Error,
    },
}

impl BtrfsError {
    /// Wrap a system error that has no better description.
    pub fn io(op: Op, offset: u64, source: io::Error) -> Self {
        BtrfsError::Io { op, offset, source }
    }
}
