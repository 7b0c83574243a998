//! Errors of the btrfs bridge, in plain words.
//!
//! The kernel answers encoded I/O with bare errnos (fs/btrfs/ioctl.c:
//! btrfs_ioctl_encoded_read/btrfs_ioctl_encoded_write); this turns the common ones into
//! sentences a person can act on and keeps the rest as [`std::io::Error`].

use std::io;
use std::path::PathBuf;

use wring_engine::Algorithm;

use crate::ioctl::Compression;

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

/// Which of btrfs_do_encoded_write's rules an encoded write broke, as far as wring can tell.
///
/// Callers match on the variant (a refusal no rule explains means a nodatasum inode or a
/// read-only filesystem); the words are for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The compression value is `none` or one the kernel does not know.
    #[error("compression {0} cannot be written")]
    CannotWrite(Compression),
    /// The compression has no `BTRFS_ENCODED_IO_COMPRESSION_*` value at all.
    #[error("compression {0} has no btrfs encoding")]
    NoEncoding(Compression),
    /// The algorithm has no btrfs encoding for this sector size (lz4, or lzo on odd sectors).
    #[error("no btrfs encoding for {algorithm} on {sector_size}-byte sectors")]
    NoEncodingForSector {
        /// The algorithm asked for.
        algorithm: Algorithm,
        /// The filesystem's sector size.
        sector_size: u64,
    },
    /// lzo framed for another sector size than the filesystem's.
    #[error("lzo for {lzo}-byte sectors on a {sector_size}-byte-sector filesystem")]
    LzoSectorMismatch {
        /// The sector size of the lzo framing.
        lzo: u32,
        /// The filesystem's sector size.
        sector_size: u64,
    },
    /// `len` at `unencoded_offset` runs past `unencoded_len`.
    #[error(
        "len {len} at unencoded_offset {unencoded_offset} runs past unencoded_len {unencoded_len}"
    )]
    RunsPast {
        /// The file range length.
        len: u64,
        /// Where the range starts in the decoded data.
        unencoded_offset: u64,
        /// The decoded length.
        unencoded_len: u64,
    },
    /// The decoded length is over BTRFS_MAX_UNCOMPRESSED.
    #[error("unencoded_len {unencoded_len} is over {max}")]
    UnencodedTooLong {
        /// The decoded length.
        unencoded_len: u64,
        /// BTRFS_MAX_UNCOMPRESSED.
        max: u64,
    },
    /// The encoded bytes are empty or over BTRFS_MAX_COMPRESSED.
    #[error("{count} encoded bytes (must be 1..={max})")]
    EncodedSize {
        /// How many encoded bytes.
        count: u64,
        /// BTRFS_MAX_COMPRESSED.
        max: u64,
    },
    /// The encoded data is not smaller than what it decodes to.
    #[error("{count} encoded bytes are not fewer than the {unencoded_len} decoded ones")]
    NotSmaller {
        /// How many encoded bytes.
        count: u64,
        /// The decoded length.
        unencoded_len: u64,
    },
    /// The file offset is not sector-aligned.
    #[error("offset {offset} is not a multiple of the {sector_size}-byte sector")]
    MisalignedOffset {
        /// The file offset.
        offset: u64,
        /// The filesystem's sector size.
        sector_size: u64,
    },
    /// The range ends inside the file off a sector boundary.
    #[error("the range ends at {end} inside the file, not on a sector boundary")]
    MisalignedEnd {
        /// Where the range ends.
        end: u64,
    },
    /// `unencoded_offset` is not sector-aligned.
    #[error("unencoded_offset {unencoded_offset} is not sector-aligned")]
    MisalignedUnencodedOffset {
        /// The offset into the decoded data.
        unencoded_offset: u64,
    },
    /// The range's end does not fit in a file offset.
    #[error("the range at offset {offset} with length {len} ends past the largest file offset")]
    EndOverflows {
        /// The file offset.
        offset: u64,
        /// The range length.
        len: u64,
    },
    /// The kernel said EINVAL and the write breaks none of the rules wring knows.
    #[error(
        "no rule wring knows is broken (is the file nodatasum/nocow, or the filesystem read-only?)"
    )]
    NoKnownRule,
}

/// Why a btrfs encoded read or write failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
        reason: Refusal,
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

    /// The filesystem has no room (ENOSPC) or the owner is over quota (EDQUOT).
    pub fn no_room(&self) -> bool {
        match self {
            BtrfsError::Io { source, .. } | BtrfsError::Path { source, .. } => {
                matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
            }
            _ => false,
        }
    }
}
