//! Replies and notifications as the kernel reads them (include/uapi/linux/fuse.h): the
//! `fuse_out_header`, and each answer's structure (`fuse_entry_out`, `fuse_attr_out`,
//! `fuse_statx_out`, `fuse_open_out`, `fuse_init_out`, …), written at the start of a buffer
//! the caller made large enough (the largest is a READ's or a listing's, bounded by the
//! request's size): a writer given a shorter one writes what fits and says `None`, and the
//! request is answered EIO rather than the thread panicking.
//!
//! Mirrors fs/fuse/dev.c's reading side (fuse_dev_do_write, copy_out_args) and the
//! structures fs/fuse/inode.c and dir.c take apart (process_init_reply, fuse_fillattr,
//! fuse_statx_to_attr, parse_dirfile).

use std::time::{Duration, SystemTime};

use super::types::{FileAttr, FileType, Statfs};
use super::{ATTR, ATTR_OUT, DIRENT, ENTRY_OUT, OPEN_OUT, OUT_HEADER, STATX_OUT};

/// `v` at `b[at..]`; `None` when it does not fit.
fn put<const N: usize>(b: &mut [u8], at: usize, v: [u8; N]) -> Option<()> {
    *b.get_mut(at..)?.first_chunk_mut::<N>()? = v;
    Some(())
}
fn put_u16(b: &mut [u8], at: usize, v: u16) -> Option<()> {
    put(b, at, v.to_le_bytes())
}
fn put_u32(b: &mut [u8], at: usize, v: u32) -> Option<()> {
    put(b, at, v.to_le_bytes())
}
fn put_u64(b: &mut [u8], at: usize, v: u64) -> Option<()> {
    put(b, at, v.to_le_bytes())
}

/// `struct fuse_out_header` as bytes: `error` is 0 or a negative errno (or, with `unique`
/// 0, a notification's code).
pub fn out_header(unique: u64, error: i32, payload_len: usize) -> [u8; OUT_HEADER] {
    let len = (OUT_HEADER + payload_len) as u32;
    let mut h = [0u8; OUT_HEADER];
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&error.to_le_bytes());
    h[8..16].copy_from_slice(&unique.to_le_bytes());
    h
}

/// `struct fuse_ioctl_out` (result, no retry, no iovecs) and the data after it; the bytes
/// written.
pub fn put_ioctl_out(b: &mut [u8], result: i32, data: &[u8]) -> Option<usize> {
    let (head, rest) = b.split_first_chunk_mut::<16>()?;
    *head = [0; 16];
    head[..4].copy_from_slice(&result.to_le_bytes());
    rest.get_mut(..data.len())?.copy_from_slice(data);
    Some(16 + data.len())
}

/// Seconds (negative before 1970) and nanoseconds of a time, as `struct fuse_attr` has it.
pub(super) fn secs_nsecs(t: SystemTime) -> (u64, u32) {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs(), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (mut s, mut n) = (-(d.as_secs() as i64), d.subsec_nanos());
            if n > 0 {
                s -= 1;
                n = 1_000_000_000 - n;
            }
            (s as u64, n)
        }
    }
}

/// The `S_IF*` bits of a file type.
pub fn type_bits(k: FileType) -> u32 {
    k.bits()
}

/// `struct fuse_attr` at `b[at..]` (88 bytes).
fn put_attr(b: &mut [u8], at: usize, a: &FileAttr) -> Option<()> {
    let b = b.get_mut(at..at + ATTR)?;
    put_u64(b, 0, a.ino)?;
    put_u64(b, 8, a.size)?;
    put_u64(b, 16, a.blocks)?;
    let times = [a.atime, a.mtime, a.ctime].map(secs_nsecs);
    for (k, (s, n)) in times.into_iter().enumerate() {
        put_u64(b, 24 + 8 * k, s)?;
        put_u32(b, 48 + 4 * k, n)?;
    }
    put_u32(b, 60, type_bits(a.kind) | u32::from(a.perm))?;
    put_u32(b, 64, a.nlink)?;
    put_u32(b, 68, a.uid)?;
    put_u32(b, 72, a.gid)?;
    put_u32(b, 76, a.rdev)?;
    put_u32(b, 80, a.blksize)?;
    put_u32(b, 84, a.flags)
}

/// `struct fuse_entry_out` (128 bytes).
pub fn put_entry_out(b: &mut [u8], ttl: &Duration, a: &FileAttr) -> Option<usize> {
    put_u64(b, 0, a.ino)?;
    put_u64(b, 8, 0)?;
    put_u64(b, 16, ttl.as_secs())?;
    put_u64(b, 24, ttl.as_secs())?;
    put_u32(b, 32, ttl.subsec_nanos())?;
    put_u32(b, 36, ttl.subsec_nanos())?;
    put_attr(b, 40, a)?;
    Some(ENTRY_OUT)
}

/// `struct fuse_attr_out` (104 bytes).
pub fn put_attr_out(b: &mut [u8], ttl: &Duration, a: &FileAttr) -> Option<usize> {
    put_u64(b, 0, ttl.as_secs())?;
    put_u32(b, 8, ttl.subsec_nanos())?;
    put_u32(b, 12, 0)?;
    put_attr(b, 16, a)?;
    Some(ATTR_OUT)
}

/// `statx(2)`'s fields beyond `struct fuse_attr` that a STATX answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatxExtra {
    /// `stx_attributes` (`STATX_ATTR_*`).
    pub attributes: u64,
    /// `stx_attributes_mask`: the attributes the filesystem knows.
    pub attributes_mask: u64,
}

/// `STATX_BASIC_STATS`: every field `struct fuse_attr` has.
pub const STATX_BASIC_STATS: u32 = 0x7ff;

/// `struct fuse_statx_out` (288 bytes): the basic fields (no birth time: the store keeps
/// none), valid for `ttl`.
pub fn put_statx_out(b: &mut [u8], ttl: &Duration, a: &FileAttr, x: &StatxExtra) -> Option<usize> {
    let (head, s) = b.get_mut(..STATX_OUT)?.split_at_mut_checked(32)?;
    head.fill(0);
    s.fill(0);
    put_u64(head, 0, ttl.as_secs())?;
    put_u32(head, 8, ttl.subsec_nanos())?;
    // struct fuse_statx at 32.
    put_u32(s, 0, STATX_BASIC_STATS)?;
    put_u32(s, 4, a.blksize)?;
    put_u64(s, 8, x.attributes)?;
    put_u32(s, 16, a.nlink)?;
    put_u32(s, 20, a.uid)?;
    put_u32(s, 24, a.gid)?;
    put_u16(s, 28, (type_bits(a.kind) | u32::from(a.perm)) as u16)?;
    put_u64(s, 32, a.ino)?;
    put_u64(s, 40, a.size)?;
    put_u64(s, 48, a.blocks)?;
    put_u64(s, 56, x.attributes_mask)?;
    // struct fuse_sx_time: atime at 64, btime at 80 (left 0), ctime at 96, mtime at 112.
    for (at, t) in [(64, a.atime), (96, a.ctime), (112, a.mtime)] {
        let (secs, nsecs) = secs_nsecs(t);
        put_u64(s, at, secs)?;
        put_u32(s, at + 8, nsecs)?;
    }
    // new_decode_dev of the 32-bit device number.
    let (major, minor) = (
        (a.rdev & 0xfff00) >> 8,
        (a.rdev & 0xff) | ((a.rdev >> 12) & 0xfff00),
    );
    put_u32(s, 128, major)?;
    put_u32(s, 132, minor)?;
    Some(STATX_OUT)
}

/// FOPEN_KEEP_CACHE: the kernel keeps the file's cached pages when it is opened.
pub const FOPEN_KEEP_CACHE: u32 = 1 << 1;

/// `struct fuse_open_out` (16 bytes): handle `fh`, `FOPEN_*` flags `open_flags`.
pub fn put_open_out(b: &mut [u8], fh: u64, open_flags: u32) -> Option<usize> {
    put_u64(b, 0, fh)?;
    put_u32(b, 8, open_flags)?;
    put_u32(b, 12, 0)?;
    Some(OPEN_OUT)
}

/// A 4-byte answer padded to 8 (`fuse_write_out`, `fuse_getxattr_out`).
pub fn put_u32_out(b: &mut [u8], v: u32) -> Option<usize> {
    put_u32(b, 0, v)?;
    put_u32(b, 4, 0)?;
    Some(8)
}

/// `struct fuse_statfs_out` (80 bytes).
pub fn put_statfs_out(b: &mut [u8], s: &Statfs) -> Option<usize> {
    let b = b.first_chunk_mut::<80>()?;
    *b = [0; 80];
    for (k, v) in [s.blocks, s.bfree, s.bavail, s.files, s.ffree]
        .into_iter()
        .enumerate()
    {
        put_u64(b, 8 * k, v)?;
    }
    put_u32(b, 40, s.bsize)?;
    put_u32(b, 44, s.namelen)?;
    put_u32(b, 48, s.frsize)?;
    Some(80)
}

/// A `fuse_dirent` (`plus`: a `fuse_direntplus`, the entry first) at the start of `b`, if
/// it fits: its length, or `None`.
pub fn put_dirent(
    b: &mut [u8],
    ino: u64,
    next: u64,
    kind: FileType,
    name: &[u8],
    plus: Option<(&Duration, &FileAttr)>,
) -> Option<usize> {
    let entry = if plus.is_some() { ENTRY_OUT } else { 0 };
    let len = (entry + DIRENT + name.len()).next_multiple_of(8);
    if len > b.len() {
        return None;
    }
    if let Some((ttl, a)) = plus {
        put_entry_out(b, ttl, a)?;
    }
    let d = b.get_mut(entry..len)?;
    put_u64(d, 0, ino)?;
    put_u64(d, 8, next)?;
    put_u32(d, 16, name.len() as u32)?;
    put_u32(d, 20, type_bits(kind) >> 12)?;
    let (named, padding) = d.get_mut(DIRENT..)?.split_at_mut_checked(name.len())?;
    named.copy_from_slice(name);
    padding.fill(0);
    Some(len)
}

/// What INIT's answer says (`struct fuse_init_out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitOut {
    /// The protocol's minor version the daemon speaks.
    pub minor: u32,
    /// The largest readahead.
    pub max_readahead: u32,
    /// `FUSE_*` capability flags, the high 32 in `flags2`.
    pub flags: u64,
    /// Background requests (readahead, writeback) at most in flight.
    pub max_background: u16,
    /// Background requests at which the kernel counts the mount congested.
    pub congestion_threshold: u16,
    /// The largest WRITE.
    pub max_write: u32,
    /// Timestamp granularity in nanoseconds.
    pub time_gran: u32,
    /// Pages of the largest READ or WRITE.
    pub max_pages: u16,
}

/// `struct fuse_init_out` (64 bytes; the kernel takes it whole from 7.23 on).
pub fn init_out(i: &InitOut) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..4].copy_from_slice(&super::KERNEL_VERSION.to_le_bytes());
    b[4..8].copy_from_slice(&i.minor.to_le_bytes());
    b[8..12].copy_from_slice(&i.max_readahead.to_le_bytes());
    b[12..16].copy_from_slice(&(i.flags as u32).to_le_bytes());
    b[16..18].copy_from_slice(&i.max_background.to_le_bytes());
    b[18..20].copy_from_slice(&i.congestion_threshold.to_le_bytes());
    b[20..24].copy_from_slice(&i.max_write.to_le_bytes());
    b[24..28].copy_from_slice(&i.time_gran.to_le_bytes());
    b[28..30].copy_from_slice(&i.max_pages.to_le_bytes());
    b[32..36].copy_from_slice(&((i.flags >> 32) as u32).to_le_bytes());
    b
}

/// `FUSE_NOTIFY_INVAL_INODE`'s code (the out header's `error` field of a notification).
pub const NOTIFY_INVAL_INODE: i32 = 2;

/// A `FUSE_NOTIFY_INVAL_INODE` notification, header and `struct
/// fuse_notify_inval_inode_out`: drop the kernel's attributes of node `ino` and, when
/// `offset` is not negative, its cached pages from `offset` on (`len` of them, or all for
/// 0 or less).
pub fn inval_inode(ino: u64, offset: i64, len: i64) -> [u8; OUT_HEADER + 24] {
    let mut b = [0u8; OUT_HEADER + 24];
    b[..OUT_HEADER].copy_from_slice(&out_header(0, NOTIFY_INVAL_INODE, 24));
    b[OUT_HEADER..OUT_HEADER + 8].copy_from_slice(&ino.to_le_bytes());
    b[OUT_HEADER + 8..OUT_HEADER + 16].copy_from_slice(&offset.to_le_bytes());
    b[OUT_HEADER + 16..OUT_HEADER + 24].copy_from_slice(&len.to_le_bytes());
    b
}

const _: () = assert!(ATTR == 88 && ENTRY_OUT == 128 && ATTR_OUT == 104 && STATX_OUT == 288);
