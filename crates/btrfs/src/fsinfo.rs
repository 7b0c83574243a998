//! What wring asks the kernel about a file before touching it: inode attribute flags
//! (`FS_IOC_GETFLAGS`, as lsattr/chattr), which ranges share their data extents with other
//! files or snapshots (`FS_IOC_FIEMAP`'s `FIEMAP_EXTENT_SHARED`, as `filefrag -v` and
//! fs/btrfs/fiemap.c report it), extended attributes, and whether this process holds
//! CAP_SYS_ADMIN (/proc/self/status, as capsh prints it).
//!
//! Mirrors include/uapi/linux/fs.h and include/uapi/linux/fiemap.h.

use std::ffi::CString;
use std::fs::File;
use std::io;

use rustix::io::Errno;
use rustix::ioctl::{ioctl, opcode, Getter, Opcode, Updater};

use crate::error::{BtrfsError, Op};
use crate::ioctl::fs_info;

/// `FS_COMPR_FL` (`chattr +c`).
pub const FS_COMPR_FL: u32 = 0x0000_0004;
/// `FS_IMMUTABLE_FL` (`chattr +i`).
pub const FS_IMMUTABLE_FL: u32 = 0x0000_0010;
/// `FS_APPEND_FL` (`chattr +a`).
pub const FS_APPEND_FL: u32 = 0x0000_0020;
/// `FS_NOCOMP_FL` (`chattr +m`, btrfs's NOCOMPRESS).
pub const FS_NOCOMP_FL: u32 = 0x0000_0400;
/// `FS_NOCOW_FL` (`chattr +C`, btrfs's NODATACOW).
pub const FS_NOCOW_FL: u32 = 0x0080_0000;

/// `FS_IOC_GETFLAGS`: `_IOR('f', 1, long)` (the kernel copies an int).
pub const FS_IOC_GETFLAGS: Opcode = opcode::read::<libc::c_long>(b'f', 1);

/// The inode's attribute flags (`FS_*_FL`).
pub fn inode_flags(file: &File) -> Result<u32, BtrfsError> {
    // SAFETY: the descriptor is open for the call; whatever the opcode's `long` says, the
    // kernel's FS_IOC_GETFLAGS (fs/ioctl.c, ioctl_getflags) writes one `unsigned int`, which is
    // the getter's output type.
    let flags = unsafe { ioctl(file, Getter::<FS_IOC_GETFLAGS, u32>::new()) };
    flags.map_err(|errno| BtrfsError::io(Op::Flags, 0, io::Error::from(errno)))
}

/// `struct fiemap` without its extents.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct FiemapHeader {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

/// `struct fiemap_extent`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

/// `FS_IOC_FIEMAP`: `_IOWR('f', 11, struct fiemap)`.
pub const FS_IOC_FIEMAP: Opcode = opcode::read_write::<FiemapHeader>(b'f', 11);
/// `FIEMAP_EXTENT_LAST`.
pub const FIEMAP_EXTENT_LAST: u32 = 0x0001;
/// `FIEMAP_EXTENT_SHARED`: the data extent has other references (reflinks, snapshots).
pub const FIEMAP_EXTENT_SHARED: u32 = 0x2000;

/// Extents asked for per FIEMAP call.
const FIEMAP_BATCH: usize = 256;

/// The file ranges whose data extents are shared with another file, snapshot or range, merged
/// and sorted.
pub fn shared_ranges(file: &File) -> Result<Vec<(u64, u64)>, BtrfsError> {
    #[repr(C)]
    struct Request {
        header: FiemapHeader,
        extents: [FiemapExtent; FIEMAP_BATCH],
    }
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut start = 0u64;
    loop {
        let mut req = Box::new(Request {
            header: FiemapHeader {
                fm_start: start,
                fm_length: u64::MAX - start,
                fm_extent_count: FIEMAP_BATCH as u32,
                ..FiemapHeader::default()
            },
            extents: [FiemapExtent::default(); FIEMAP_BATCH],
        });
        // SAFETY: the descriptor is open for the call; `req` is a `struct fiemap` followed by
        // room for `fm_extent_count` extents, all in one live, exclusively borrowed allocation.
        let ret = unsafe { ioctl(file, Updater::<FS_IOC_FIEMAP, _>::new(&mut *req)) };
        ret.map_err(|errno| BtrfsError::io(Op::Fiemap, start, io::Error::from(errno)))?;
        let n = (req.header.fm_mapped_extents as usize).min(FIEMAP_BATCH);
        if n == 0 {
            break;
        }
        let mut last = false;
        for e in &req.extents[..n] {
            let end = e.fe_logical.saturating_add(e.fe_length);
            if e.fe_flags & FIEMAP_EXTENT_SHARED != 0 {
                match ranges.last_mut() {
                    Some((_, prev_end)) if *prev_end >= e.fe_logical => {
                        *prev_end = (*prev_end).max(end)
                    }
                    _ => ranges.push((e.fe_logical, end)),
                }
            }
            last |= e.fe_flags & FIEMAP_EXTENT_LAST != 0;
            start = start.max(end);
        }
        if last || n < FIEMAP_BATCH {
            break;
        }
    }
    Ok(ranges)
}

/// Whether `[start, end)` overlaps any of the sorted `ranges`.
pub fn overlaps(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    ranges.iter().any(|&(s, e)| s < end && start < e)
}

/// Whether the file has the extended attribute `name`.
pub fn has_xattr(file: &File, name: &str) -> Result<bool, BtrfsError> {
    let cname = CString::new(name).map_err(|_| {
        BtrfsError::io(
            Op::Open,
            0,
            io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"),
        )
    })?;
    match rustix::fs::fgetxattr_query(file, cname.as_c_str()) {
        Ok(_) => Ok(true),
        Err(Errno::NODATA) | Err(Errno::OPNOTSUPP) => Ok(false),
        Err(errno) => Err(BtrfsError::io(Op::Open, 0, io::Error::from(errno))),
    }
}

/// `CAP_SYS_ADMIN`'s bit number.
const CAP_SYS_ADMIN: u32 = 21;

/// Whether this process has CAP_SYS_ADMIN in its effective set (the capability encoded I/O and
/// tree search demand). Reads `CapEff` from /proc/self/status; falls back to "is root".
pub fn has_cap_sys_admin() -> bool {
    let from_proc = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| cap_eff_has(&s, CAP_SYS_ADMIN));
    from_proc.unwrap_or_else(|| rustix::process::geteuid().is_root())
}

fn cap_eff_has(status: &str, bit: u32) -> Option<bool> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    let mask = u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()?;
    Some(mask & (1u64 << bit) != 0)
}

/// Whether `file` is on btrfs (by `fstatfs`'s magic).
pub fn is_on_btrfs(file: &File) -> Result<bool, BtrfsError> {
    fs_info(file)
        .map(|i| i.is_btrfs)
        .map_err(|e| BtrfsError::io(Op::Open, 0, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(
        target_pointer_width = "64",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    fn ioctl_numbers_match_the_uapi_headers() {
        assert_eq!(FS_IOC_GETFLAGS, 0x8008_6601);
        assert_eq!(FS_IOC_FIEMAP, 0xC020_660B);
        assert_eq!(std::mem::size_of::<FiemapExtent>(), 56);
    }

    #[test]
    fn cap_eff_is_read_from_status() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(cap_eff_has(status, CAP_SYS_ADMIN), Some(true));
        let status = "CapEff:\t0000000000000000\n";
        assert_eq!(cap_eff_has(status, CAP_SYS_ADMIN), Some(false));
        assert_eq!(cap_eff_has("nothing", CAP_SYS_ADMIN), None);
    }

    #[test]
    fn overlap_is_half_open() {
        let r = [(0, 4096), (8192, 12288)];
        assert!(overlaps(&r, 4095, 4096));
        assert!(!overlaps(&r, 4096, 8192));
        assert!(overlaps(&r, 8000, 9000));
    }

    #[test]
    fn flags_and_xattrs_of_an_ordinary_file() {
        let file = File::open("/proc/self/exe").unwrap();
        // Any filesystem answers either with flags or ENOTTY; neither panics.
        let _ = inode_flags(&file);
        assert!(!has_xattr(&file, "user.wring-surely-absent").unwrap_or(false));
    }
}
