//! On-disk records: the inode item ([`inode`]) and the file extent item ([`extent`]), in
//! fixed little-endian layouts declared once each ([`super::layout`]), which their encoders
//! and decoders both go through; a directory entry's kind; the times they hold.
//!
//! Mirrors btrfs_inode_item and btrfs_file_extent_item (ctree.h): an extent records its
//! compression type, its level (which btrfs does not keep), the stored and decoded lengths and a
//! crc32 of the stored bytes (btrfs keeps csums in a separate tree; here they sit in the item).
//! A damaged record decodes to a [`RecordError`] naming the record and the field, as
//! tree-checker.c names what it refuses.

pub mod extent;
pub mod inode;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::layout::Field;
pub use super::layout::{Problem, RecordError};
pub use extent::{
    external_item, external_item_of, set_external_offset, stored, stored_len, Encoding,
    ExtentHeader, Stored, EXTENT_HEADER, EXTENT_HEADER_LEN, EXTERNAL_ITEM, EXTERNAL_ITEM_LEN,
    INLINE_MAX,
};
pub use inode::{
    covered, covered_within, Inode, INODE, INODE_LEN, INODE_LEN_V3, INODE_V3, VERSION_BYTES,
};

/// Kinds of inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Regular file.
    File = 1,
    /// Directory.
    Dir = 2,
    /// Symbolic link.
    Symlink = 3,
    /// Named pipe.
    Fifo = 4,
    /// Unix socket.
    Socket = 5,
    /// Character device.
    Char = 6,
    /// Block device.
    Block = 7,
}

/// A directory entry's kind: the second of the (inode, kind) pair its value holds.
pub const DIRENT_KIND: Field<1> = Field::new("directory entry", "kind", 8);

impl Kind {
    /// From the byte stored in `field` (an inode's kind, or a directory entry's).
    pub fn decode(v: u8, field: &Field<1>) -> Result<Kind, RecordError> {
        Ok(match v {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::Char,
            7 => Kind::Block,
            _ => return Err(field.invalid(v, "not a kind of inode")),
        })
    }

    /// From the byte a directory entry stores.
    pub fn of_entry(v: u8) -> Result<Kind, RecordError> {
        Kind::decode(v, &DIRENT_KIND)
    }

    /// From the S_IFMT bits of a mode.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::Char,
            libc::S_IFBLK => Kind::Block,
            _ => return None,
        })
    }
}

/// Inode flag: an extent did not compress under `compress`; stop trying (btrfs NOCOMPRESS).
pub const FLAG_NOCOMPRESS: u8 = 1;
/// chattr +i: immutable.
pub const FLAG_IMMUTABLE: u8 = 2;
/// chattr +a: append-only.
pub const FLAG_APPEND: u8 = 4;
/// chattr +d: not for dump(8).
pub const FLAG_NODUMP: u8 = 8;
/// chattr +A: no access time updates.
pub const FLAG_NOATIME: u8 = 16;
/// chattr +S: synchronous updates (kept and shown; every commit here is one anyway).
pub const FLAG_SYNC: u8 = 32;
/// chattr +D: synchronous directory updates (kept and shown).
pub const FLAG_DIRSYNC: u8 = 64;
/// chattr +C: nodatacow, which for btrfs means no compression.
pub const FLAG_NOCOW: u8 = 128;

/// A timestamp as seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Time {
    /// Seconds (may be negative).
    pub secs: i64,
    /// Nanoseconds.
    pub nsecs: u32,
}

impl Time {
    /// The current time.
    pub fn now() -> Time {
        // The kernel's clock for inode times (current_time(): the coarse realtime clock), so
        // a time set here and one the kernel sets later (a write's mtime it flushes) are in
        // order, as on a kernel filesystem: relatime compares them.
        match rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse) {
            ts if ts.tv_sec >= 0 => Time {
                secs: ts.tv_sec,
                nsecs: ts.tv_nsec as u32,
            },
            _ => Time::from_system(SystemTime::now()),
        }
    }

    /// From a SystemTime (saturating at the ends of the i64 range, which Linux's SystemTime
    /// cannot leave anyway).
    pub fn from_system(t: SystemTime) -> Time {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Time {
                secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                nsecs: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let secs = i64::try_from(d.as_secs()).map_or(i64::MIN, |s| -s);
                match d.subsec_nanos() {
                    0 => Time { secs, nsecs: 0 },
                    _ if secs == i64::MIN => Time { secs, nsecs: 0 },
                    n => Time {
                        secs: secs - 1,
                        nsecs: NANOS_PER_SEC - n,
                    },
                }
            }
        }
    }

    /// Whether this is a time the store may hold: nanoseconds below one second (every i64
    /// second count is one SystemTime and FUSE can carry).
    pub fn is_valid(self) -> bool {
        self.nsecs < NANOS_PER_SEC
    }

    /// To a SystemTime. Never panics: a time outside what SystemTime holds (only a damaged
    /// one, which decoding refuses) saturates.
    pub fn to_system(self) -> SystemTime {
        let nanos = Duration::from_nanos(u64::from(self.nsecs));
        let t = if self.secs >= 0 {
            UNIX_EPOCH.checked_add(Duration::from_secs(self.secs.unsigned_abs()))
        } else {
            UNIX_EPOCH.checked_sub(Duration::from_secs(self.secs.unsigned_abs()))
        };
        t.and_then(|t| t.checked_add(nanos)).unwrap_or(UNIX_EPOCH)
    }
}

/// Nanoseconds in a second.
const NANOS_PER_SEC: u32 = 1_000_000_000;

/// The largest file size and offset: the kernel's MAX_LFS_FILESIZE (loff_t is signed).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// crc32 of stored bytes.
pub fn checksum(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests;
