//! btrfs encoded I/O: `BTRFS_IOC_ENCODED_READ` and `BTRFS_IOC_ENCODED_WRITE`.
//!
//! Mirrors include/uapi/linux/btrfs.h (`struct btrfs_ioctl_encoded_io_args`, the ioctl numbers,
//! `BTRFS_ENCODED_IO_COMPRESSION_*`) and the rules of fs/btrfs/ioctl.c
//! (btrfs_ioctl_encoded_read/write) and fs/btrfs/inode.c (btrfs_encoded_read,
//! btrfs_do_encoded_write). The kernel reads or writes one extent per call, in the format it
//! keeps on disk; both calls need CAP_SYS_ADMIN, and writes need a file opened for writing.
//!
//! What a read returns (btrfs_encoded_read):
//! * a compressed extent: the whole on-disk extent (`bytes` is its sector-aligned size, so zero
//!   padding may follow the compressed stream); the file range `[offset, offset + len)` is
//!   `[unencoded_offset, unencoded_offset + len)` of the `unencoded_len` decoded bytes;
//! * a compressed inline extent: the inline item, with the same fields;
//! * plain data, a hole or a preallocated range: the file's bytes (zeros for holes and
//!   prealloc), `compression` none, `len == unencoded_len == bytes`, at most the buffer's size
//!   (and at most 128 KiB for plain data);
//! * at or past end of file: zero bytes and `len == 0`.

use std::ffi::c_void;
use std::fs::File;
use std::io;

use rustix::io::Errno;
use rustix::ioctl::{ioctl, opcode, Ioctl, IoctlOutput, Opcode};
use wring_engine::{Algorithm, CompressSpec};

use crate::error::{BtrfsError, Op, Refusal};

/// `BTRFS_IOCTL_MAGIC`.
pub const BTRFS_IOCTL_MAGIC: u8 = 0x94;
/// btrfs's superblock magic as `statfs` reports it (`BTRFS_SUPER_MAGIC`).
pub const BTRFS_SUPER_MAGIC: i64 = 0x9123_683E;
/// Largest compressed extent the kernel reads or writes (`BTRFS_MAX_COMPRESSED`).
pub const MAX_COMPRESSED: usize = 128 * 1024;
/// Largest decompressed extent (`BTRFS_MAX_UNCOMPRESSED`).
pub const MAX_UNCOMPRESSED: usize = 128 * 1024;

/// `struct btrfs_ioctl_encoded_io_args`, field for field.
#[repr(C)]
#[derive(Debug)]
pub struct EncodedIoArgs {
    /// iovecs holding the encoded data.
    pub iov: *const libc::iovec,
    /// Number of iovecs.
    pub iovcnt: libc::c_ulong,
    /// File offset (sector-aligned for writes).
    pub offset: i64,
    /// Must be zero.
    pub flags: u64,
    /// Length of the file range the data covers.
    pub len: u64,
    /// Length of the data once decoded.
    pub unencoded_len: u64,
    /// Where the file range starts inside the decoded data.
    pub unencoded_offset: u64,
    /// `BTRFS_ENCODED_IO_COMPRESSION_*`.
    pub compression: u32,
    /// `BTRFS_ENCODED_IO_ENCRYPTION_*`.
    pub encryption: u32,
    /// Must be zero.
    pub reserved: [u8; 64],
}

impl EncodedIoArgs {
    fn new(iov: &libc::iovec, offset: i64) -> Self {
        EncodedIoArgs {
            iov,
            iovcnt: 1,
            offset,
            flags: 0,
            len: 0,
            unencoded_len: 0,
            unencoded_offset: 0,
            compression: 0,
            encryption: 0,
            reserved: [0; 64],
        }
    }
}

/// `BTRFS_IOC_ENCODED_READ`: `_IOR(BTRFS_IOCTL_MAGIC, 64, struct btrfs_ioctl_encoded_io_args)`.
pub const BTRFS_IOC_ENCODED_READ: Opcode = opcode::read::<EncodedIoArgs>(BTRFS_IOCTL_MAGIC, 64);
/// `BTRFS_IOC_ENCODED_WRITE`: `_IOW(BTRFS_IOCTL_MAGIC, 64, struct btrfs_ioctl_encoded_io_args)`.
pub const BTRFS_IOC_ENCODED_WRITE: Opcode = opcode::write::<EncodedIoArgs>(BTRFS_IOCTL_MAGIC, 64);

/// One encoded read or write: a pointer to a `btrfs_ioctl_encoded_io_args` in, the ioctl's
/// return value (bytes read or taken) out. rustix's `Updater` has this shape but drops the
/// return value, which is the whole answer here. Private, and built only with the two opcodes
/// above.
struct EncodedIo<'a, const OPCODE: Opcode> {
    args: &'a mut EncodedIoArgs,
}

// SAFETY: OPCODE is BTRFS_IOC_ENCODED_READ or BTRFS_IOC_ENCODED_WRITE (the type is private and
// only built with those), both of which take a pointer to a `btrfs_ioctl_encoded_io_args`, which
// `as_ptr` returns; a read fills the struct's output fields, so the call is marked mutating; the
// output is the syscall's non-negative return value, not read through the pointer.
unsafe impl<const OPCODE: Opcode> Ioctl for EncodedIo<'_, OPCODE> {
    type Output = usize;

    const IS_MUTATING: bool = true;

    fn opcode(&self) -> Opcode {
        OPCODE
    }

    fn as_ptr(&mut self) -> *mut c_void {
        std::ptr::from_mut(self.args).cast()
    }

    unsafe fn output_from_ptr(out: IoctlOutput, _: *mut c_void) -> rustix::io::Result<usize> {
        usize::try_from(out).map_err(|_| Errno::INVAL)
    }
}

/// `BTRFS_ENCODED_IO_COMPRESSION_NONE`.
pub const COMPRESSION_NONE: u32 = 0;
/// `BTRFS_ENCODED_IO_COMPRESSION_ZLIB`.
pub const COMPRESSION_ZLIB: u32 = 1;
/// `BTRFS_ENCODED_IO_COMPRESSION_ZSTD`.
pub const COMPRESSION_ZSTD: u32 = 2;
/// `BTRFS_ENCODED_IO_COMPRESSION_LZO_4K`; LZO_8K..LZO_64K follow (3 + log2(sector / 4 KiB)).
pub const COMPRESSION_LZO_4K: u32 = 3;
/// `BTRFS_ENCODED_IO_COMPRESSION_LZO_64K`.
pub const COMPRESSION_LZO_64K: u32 = 7;
/// `BTRFS_ENCODED_IO_ENCRYPTION_NONE`.
pub const ENCRYPTION_NONE: u32 = 0;

/// How an extent's bytes are encoded (`BTRFS_ENCODED_IO_COMPRESSION_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Compression {
    /// Stored as is.
    None,
    /// zlib stream.
    Zlib,
    /// zstd frame.
    Zstd,
    /// btrfs's LZO framing, whose segments respect sectors of `sector_size` bytes.
    Lzo {
        /// The sector size the framing was written for (4 KiB .. 64 KiB).
        sector_size: u32,
    },
    /// A value this code does not know.
    Unknown(u32),
}

impl Compression {
    /// Decode the kernel's value.
    pub fn from_raw(raw: u32) -> Compression {
        match raw {
            COMPRESSION_NONE => Compression::None,
            COMPRESSION_ZLIB => Compression::Zlib,
            COMPRESSION_ZSTD => Compression::Zstd,
            COMPRESSION_LZO_4K..=COMPRESSION_LZO_64K => Compression::Lzo {
                sector_size: 4096 << (raw - COMPRESSION_LZO_4K),
            },
            other => Compression::Unknown(other),
        }
    }

    /// The kernel's value (None for an LZO sector size btrfs cannot express).
    pub fn to_raw(self) -> Option<u32> {
        match self {
            Compression::None => Some(COMPRESSION_NONE),
            Compression::Zlib => Some(COMPRESSION_ZLIB),
            Compression::Zstd => Some(COMPRESSION_ZSTD),
            Compression::Lzo { sector_size } => lzo_raw(sector_size),
            Compression::Unknown(raw) => Some(raw),
        }
    }

    /// The engine algorithm that decodes this, when wring has one. LZO maps only for 4 KiB
    /// sectors: wring's LZO framing is btrfs's on 4 KiB-sector filesystems.
    pub fn algorithm(self) -> Option<Algorithm> {
        match self {
            Compression::Zlib => Some(Algorithm::Zlib),
            Compression::Zstd => Some(Algorithm::Zstd),
            Compression::Lzo { sector_size: 4096 } => Some(Algorithm::Lzo),
            _ => None,
        }
    }

    /// The encoding to declare for an extent the engine compressed with `algorithm` on a
    /// filesystem of `sector_size`; None where btrfs has no such type (lz4, lz4hc).
    pub fn for_algorithm(algorithm: Algorithm, sector_size: u32) -> Option<Compression> {
        // Whether btrfs has the algorithm at all is CompressSpec's rule; the sector size is this
        // encoding's own.
        CompressSpec::default_for(algorithm)
            .btrfs_algorithm()
            .ok()?;
        match algorithm {
            Algorithm::Zlib => Some(Compression::Zlib),
            Algorithm::Zstd => Some(Compression::Zstd),
            Algorithm::Lzo if sector_size == 4096 => Some(Compression::Lzo { sector_size }),
            _ => None,
        }
    }

    /// Whether the data needs decoding.
    pub fn is_compressed(self) -> bool {
        self != Compression::None
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Zlib => f.write_str("zlib"),
            Compression::Zstd => f.write_str("zstd"),
            Compression::Lzo { sector_size: 4096 } => f.write_str("lzo"),
            Compression::Lzo { sector_size } => write!(f, "lzo-{}k", sector_size / 1024),
            Compression::Unknown(raw) => write!(f, "unknown({raw})"),
        }
    }
}

fn lzo_raw(sector_size: u32) -> Option<u32> {
    if !sector_size.is_power_of_two() || !(4096..=65536).contains(&sector_size) {
        return None;
    }
    Some(COMPRESSION_LZO_4K + sector_size.trailing_zeros() - 12)
}

/// What one encoded read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedRead {
    /// Bytes the kernel put in the buffer (the ioctl's return value).
    pub bytes: usize,
    /// Length of the file range this covers; the next extent starts at `offset + len`.
    pub len: u64,
    /// Length of the data once decoded.
    pub unencoded_len: u64,
    /// Where the file range starts inside the decoded data.
    pub unencoded_offset: u64,
    /// How the bytes are encoded.
    pub compression: Compression,
    /// `BTRFS_ENCODED_IO_ENCRYPTION_*` (0: none).
    pub encryption: u32,
}

/// One extent to write with [`encoded_write`].
#[derive(Debug, Clone, Copy)]
pub struct EncodedWrite<'a> {
    /// The encoded bytes (at most 128 KiB, and fewer than `unencoded_len`).
    pub data: &'a [u8],
    /// Length of the file range to fill (sector-aligned unless it ends at or past i_size).
    pub len: u64,
    /// Length of `data` once decoded (at most 128 KiB).
    pub unencoded_len: u64,
    /// Where the file range starts inside the decoded data (sector-aligned).
    pub unencoded_offset: u64,
    /// How `data` is encoded (must not be [`Compression::None`]).
    pub compression: Compression,
}

impl<'a> EncodedWrite<'a> {
    /// A whole compressed extent: the file range is all of the decoded data.
    pub fn whole(data: &'a [u8], unencoded_len: u64, compression: Compression) -> Self {
        EncodedWrite {
            data,
            len: unencoded_len,
            unencoded_len,
            unencoded_offset: 0,
            compression,
        }
    }

    /// The first of btrfs_do_encoded_write()'s rules this write breaks, if any.
    ///
    /// `i_size` is the file's size before the write. The kernel stays the judge: this only
    /// explains an EINVAL it returned.
    pub fn broken_rule(&self, offset: u64, sector_size: u64, i_size: u64) -> Option<Refusal> {
        let aligned = |v: u64| sector_size == 0 || v.is_multiple_of(sector_size);
        let count = self.data.len() as u64;
        if self.compression == Compression::None || self.compression.to_raw().is_none() {
            return Some(Refusal::CannotWrite(self.compression));
        }
        if let Compression::Lzo { sector_size: lzo } = self.compression {
            if u64::from(lzo) != sector_size {
                return Some(Refusal::LzoSectorMismatch { lzo, sector_size });
            }
        }
        if self.unencoded_offset > self.unencoded_len
            || self.len > self.unencoded_len - self.unencoded_offset
        {
            return Some(Refusal::RunsPast {
                len: self.len,
                unencoded_offset: self.unencoded_offset,
                unencoded_len: self.unencoded_len,
            });
        }
        if self.unencoded_len > MAX_UNCOMPRESSED as u64 {
            return Some(Refusal::UnencodedTooLong {
                unencoded_len: self.unencoded_len,
                max: MAX_UNCOMPRESSED as u64,
            });
        }
        if count == 0 || count > MAX_COMPRESSED as u64 {
            return Some(Refusal::EncodedSize {
                count,
                max: MAX_COMPRESSED as u64,
            });
        }
        if count >= self.unencoded_len {
            return Some(Refusal::NotSmaller {
                count,
                unencoded_len: self.unencoded_len,
            });
        }
        if !aligned(offset) {
            return Some(Refusal::MisalignedOffset {
                offset,
                sector_size,
            });
        }
        let Some(end) = offset
            .checked_add(self.len)
            .filter(|&e| e <= i64::MAX as u64)
        else {
            return Some(Refusal::EndOverflows {
                offset,
                len: self.len,
            });
        };
        if end < i_size && !aligned(end) {
            return Some(Refusal::MisalignedEnd { end });
        }
        if !aligned(self.unencoded_offset) {
            return Some(Refusal::MisalignedUnencodedOffset {
                unencoded_offset: self.unencoded_offset,
            });
        }
        None
    }
}

/// Read the extent at `offset` in its on-disk encoding into `buf`.
///
/// `buf` should hold [`MAX_COMPRESSED`] bytes; a compressed extent that does not fit is
/// [`BtrfsError::BufferTooSmall`]. Needs CAP_SYS_ADMIN.
pub fn encoded_read(file: &File, offset: u64, buf: &mut [u8]) -> Result<EncodedRead, BtrfsError> {
    let pos = i64::try_from(offset).map_err(|_| BtrfsError::OffsetOutOfRange { offset })?;
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut args = EncodedIoArgs::new(&iov, pos);
    let ret = loop {
        let read = EncodedIo::<BTRFS_IOC_ENCODED_READ> { args: &mut args };
        // SAFETY: the descriptor is open for the whole call (borrowed from `file`); `args` is a
        // live `btrfs_ioctl_encoded_io_args` whose `iov` points at one iovec describing `buf`,
        // which is exclusively borrowed and valid for `buf.len()` bytes; the kernel writes at
        // most that many bytes there and fills the output fields of `args`.
        match unsafe { ioctl(file, read) } {
            Err(Errno::INTR) => continue,
            ret => break ret,
        }
    };
    let bytes = ret.map_err(|errno| {
        map_error(
            Op::EncodedRead,
            file,
            offset,
            buf.len(),
            io::Error::from(errno),
            None,
        )
    })?;
    Ok(EncodedRead {
        bytes,
        len: args.len,
        unencoded_len: args.unencoded_len,
        unencoded_offset: args.unencoded_offset,
        compression: Compression::from_raw(args.compression),
        encryption: args.encryption,
    })
}

/// Write one encoded extent at `offset`; returns the encoded bytes the kernel took.
///
/// The file must be open for writing and the caller needs CAP_SYS_ADMIN. The kernel does not
/// check that the data decodes: a bad extent is an I/O error on a later read.
pub fn encoded_write(
    file: &File,
    offset: u64,
    write: &EncodedWrite<'_>,
) -> Result<usize, BtrfsError> {
    let pos = i64::try_from(offset).map_err(|_| BtrfsError::OffsetOutOfRange { offset })?;
    let compression = write
        .compression
        .to_raw()
        .ok_or(BtrfsError::WriteRejected {
            offset,
            reason: Refusal::NoEncoding(write.compression),
        })?;
    let iov = libc::iovec {
        iov_base: write.data.as_ptr().cast_mut().cast(),
        iov_len: write.data.len(),
    };
    let mut args = EncodedIoArgs::new(&iov, pos);
    args.len = write.len;
    args.unencoded_len = write.unencoded_len;
    args.unencoded_offset = write.unencoded_offset;
    args.compression = compression;
    let call = EncodedIo::<BTRFS_IOC_ENCODED_WRITE> { args: &mut args };
    // SAFETY: the descriptor is open for the whole call; `args` is a live
    // `btrfs_ioctl_encoded_io_args` whose `iov` points at one iovec describing `write.data`,
    // valid for `data.len()` bytes for the call; the kernel only reads through it (ITER_SOURCE).
    let ret = unsafe { ioctl(file, call) };
    ret.map_err(|errno| {
        map_error(
            Op::EncodedWrite,
            file,
            offset,
            write.data.len(),
            io::Error::from(errno),
            Some(write),
        )
    })
}

/// What `fstatfs` says about the filesystem holding `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsInfo {
    /// Whether it is btrfs.
    pub is_btrfs: bool,
    /// Its block size (btrfs: the sector size).
    pub block_size: u64,
}

/// Inspect the filesystem holding `file`.
pub fn fs_info(file: &File) -> io::Result<FsInfo> {
    let st = rustix::fs::fstatfs(file)?;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between backends and libcs
    let magic = st.f_type as i64;
    Ok(FsInfo {
        is_btrfs: magic == BTRFS_SUPER_MAGIC,
        block_size: st.f_bsize as u64,
    })
}

/// Turn an errno from an encoded read/write into words.
fn map_error(
    op: Op,
    file: &File,
    offset: u64,
    buffer: usize,
    err: io::Error,
    write: Option<&EncodedWrite<'_>>,
) -> BtrfsError {
    let on_btrfs = || fs_info(file).map(|i| i.is_btrfs).unwrap_or(true);
    match err.raw_os_error() {
        Some(libc::EPERM) => BtrfsError::NeedsCapSysAdmin { op },
        Some(libc::ENOTTY) | Some(libc::EOPNOTSUPP) => BtrfsError::NotBtrfs { op },
        Some(libc::EINVAL) if !on_btrfs() => BtrfsError::NotBtrfs { op },
        Some(libc::ENOBUFS) => BtrfsError::BufferTooSmall { offset, buffer },
        Some(libc::EBADF) if op == Op::EncodedWrite => BtrfsError::NotOpenForWriting,
        Some(libc::EINVAL) => match write {
            Some(w) => BtrfsError::WriteRejected {
                offset,
                reason: explain_rejection(file, offset, w),
            },
            None => BtrfsError::ReadRejected { offset },
        },
        _ => BtrfsError::io(op, offset, err),
    }
}

fn explain_rejection(file: &File, offset: u64, write: &EncodedWrite<'_>) -> Refusal {
    let sector = fs_info(file).map(|i| i.block_size).unwrap_or(4096);
    let i_size = file.metadata().map(|m| m.len()).unwrap_or(0);
    write
        .broken_rule(offset, sector, i_size)
        .unwrap_or(Refusal::NoKnownRule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn args_layout_matches_uapi_header() {
        assert_eq!(size_of::<EncodedIoArgs>(), 128);
        assert_eq!(align_of::<EncodedIoArgs>(), 8);
        assert_eq!(offset_of!(EncodedIoArgs, iov), 0);
        assert_eq!(offset_of!(EncodedIoArgs, iovcnt), 8);
        assert_eq!(offset_of!(EncodedIoArgs, offset), 16);
        assert_eq!(offset_of!(EncodedIoArgs, flags), 24);
        assert_eq!(offset_of!(EncodedIoArgs, len), 32);
        assert_eq!(offset_of!(EncodedIoArgs, unencoded_len), 40);
        assert_eq!(offset_of!(EncodedIoArgs, unencoded_offset), 48);
        assert_eq!(offset_of!(EncodedIoArgs, compression), 56);
        assert_eq!(offset_of!(EncodedIoArgs, encryption), 60);
        assert_eq!(offset_of!(EncodedIoArgs, reserved), 64);
    }

    #[test]
    #[cfg(all(
        target_pointer_width = "64",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    fn ioctl_numbers_match_the_kernel() {
        assert_eq!(BTRFS_IOC_ENCODED_READ, 0x8080_9440);
        assert_eq!(BTRFS_IOC_ENCODED_WRITE, 0x4080_9440);
    }

    #[test]
    fn compression_values_round_trip() {
        for raw in 0..10 {
            assert_eq!(Compression::from_raw(raw).to_raw(), Some(raw));
        }
        assert_eq!(
            Compression::from_raw(3),
            Compression::Lzo { sector_size: 4096 }
        );
        assert_eq!(
            Compression::from_raw(5),
            Compression::Lzo { sector_size: 16384 }
        );
        assert_eq!(Compression::from_raw(8), Compression::Unknown(8));
        assert_eq!(Compression::Lzo { sector_size: 3000 }.to_raw(), None);
    }

    #[test]
    fn compression_maps_to_engine_algorithms() {
        assert_eq!(Compression::Zstd.algorithm(), Some(Algorithm::Zstd));
        assert_eq!(Compression::Zlib.algorithm(), Some(Algorithm::Zlib));
        assert_eq!(
            Compression::from_raw(COMPRESSION_LZO_4K).algorithm(),
            Some(Algorithm::Lzo)
        );
        assert_eq!(Compression::Lzo { sector_size: 65536 }.algorithm(), None);
        assert_eq!(Compression::None.algorithm(), None);
        assert_eq!(Compression::for_algorithm(Algorithm::Lz4, 4096), None);
        assert_eq!(Compression::for_algorithm(Algorithm::Lzo, 65536), None);
        for alg in [Algorithm::Zlib, Algorithm::Zstd, Algorithm::Lzo] {
            let c = Compression::for_algorithm(alg, 4096).unwrap();
            assert_eq!(c.algorithm(), Some(alg));
        }
    }

    #[test]
    fn write_rules_follow_btrfs_do_encoded_write() {
        let data = [0u8; 100];
        let ok = EncodedWrite::whole(&data, 8192, Compression::Zstd);
        assert_eq!(ok.broken_rule(4096, 4096, 0), None);
        assert_eq!(
            ok.broken_rule(100, 4096, 0),
            Some(Refusal::MisalignedOffset {
                offset: 100,
                sector_size: 4096
            })
        );
        assert!(ok
            .broken_rule(100, 4096, 0)
            .unwrap()
            .to_string()
            .contains("offset 100"));
        // Unaligned end is fine at EOF, not inside the file.
        let tail = EncodedWrite {
            len: 5000,
            unencoded_len: 5000,
            ..ok
        };
        assert_eq!(tail.broken_rule(0, 4096, 0), None);
        assert_eq!(
            tail.broken_rule(0, 4096, 1 << 20),
            Some(Refusal::MisalignedEnd { end: 5000 })
        );
        assert!(matches!(
            ok.broken_rule(u64::MAX - 4095, 4096, 0),
            Some(Refusal::EndOverflows { .. })
        ));
        let not_smaller = EncodedWrite::whole(&data, 100, Compression::Zlib);
        assert!(matches!(
            not_smaller.broken_rule(0, 4096, 0),
            Some(Refusal::NotSmaller { .. })
        ));
        let past = EncodedWrite {
            unencoded_offset: 4096,
            ..ok
        };
        assert!(matches!(
            past.broken_rule(0, 4096, 0),
            Some(Refusal::RunsPast { .. })
        ));
        let none = EncodedWrite {
            compression: Compression::None,
            ..ok
        };
        assert_eq!(
            none.broken_rule(0, 4096, 0),
            Some(Refusal::CannotWrite(Compression::None))
        );
        assert_eq!(
            Refusal::NoKnownRule.to_string(),
            "no rule wring knows is broken (is the file nodatasum/nocow, or the filesystem read-only?)"
        );
    }

    #[test]
    fn encoded_read_off_btrfs_says_so() {
        let file = File::open("/proc/self/status").unwrap();
        let mut buf = vec![0u8; 4096];
        match encoded_read(&file, 0, &mut buf) {
            Err(BtrfsError::NotBtrfs { .. }) | Err(BtrfsError::NeedsCapSysAdmin { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}
