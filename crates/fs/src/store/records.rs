//! On-disk records: the inode item and the file extent item, in fixed little-endian layouts.
//!
//! Mirrors btrfs_inode_item and btrfs_file_extent_item (ctree.h): an extent records its
//! compression type, its level (which btrfs does not keep), the stored and decoded lengths and a
//! crc32 of the stored bytes (btrfs keeps csums in a separate tree; here they sit in the item).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wring_engine::Algorithm;

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

impl Kind {
    /// From the stored byte.
    pub fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::Char,
            7 => Kind::Block,
            _ => return None,
        })
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
        Time::from_system(SystemTime::now())
    }

    /// From a SystemTime.
    pub fn from_system(t: SystemTime) -> Time {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Time {
                secs: d.as_secs() as i64,
                nsecs: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let (mut s, mut n) = (-(d.as_secs() as i64), d.subsec_nanos());
                if n > 0 {
                    s -= 1;
                    n = 1_000_000_000 - n;
                }
                Time { secs: s, nsecs: n }
            }
        }
    }

    /// To a SystemTime.
    pub fn to_system(self) -> SystemTime {
        if self.secs >= 0 {
            UNIX_EPOCH + Duration::new(self.secs as u64, self.nsecs)
        } else {
            UNIX_EPOCH - Duration::from_secs(self.secs.unsigned_abs())
                + Duration::from_nanos(self.nsecs as u64)
        }
    }
}

/// The inode item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// Kind.
    pub kind: Kind,
    /// FLAG_* bits.
    pub flags: u8,
    /// Permission bits (07777).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard links (directories: 2 + subdirectories).
    pub nlink: u32,
    /// Device number for device nodes.
    pub rdev: u32,
    /// Size in bytes.
    pub size: u64,
    /// Bytes of stored extents.
    pub disk: u64,
    /// Extent size this file is cut into (0 until the first write fixes it).
    pub extent_size: u32,
    /// Access time.
    pub atime: Time,
    /// Modification time.
    pub mtime: Time,
    /// Change time.
    pub ctime: Time,
}

const INODE_LEN: usize = 1 + 1 + 4 * 6 + 8 * 2 + 4 + 12 * 3;

impl Inode {
    /// A new inode stamped now.
    pub fn new(kind: Kind, perm: u32, uid: u32, gid: u32) -> Inode {
        let now = Time::now();
        Inode {
            kind,
            flags: 0,
            perm: perm & 0o7777,
            uid,
            gid,
            nlink: if kind == Kind::Dir { 2 } else { 1 },
            rdev: 0,
            size: 0,
            disk: 0,
            extent_size: 0,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }

    /// Encode.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(INODE_LEN);
        b.push(self.kind as u8);
        b.push(self.flags);
        for v in [self.perm, self.uid, self.gid, self.nlink, self.rdev] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.size.to_le_bytes());
        b.extend_from_slice(&self.disk.to_le_bytes());
        b.extend_from_slice(&self.extent_size.to_le_bytes());
        for t in [self.atime, self.mtime, self.ctime] {
            b.extend_from_slice(&t.secs.to_le_bytes());
            b.extend_from_slice(&t.nsecs.to_le_bytes());
        }
        b
    }

    /// Decode; `None` when damaged.
    pub fn from_bytes(b: &[u8]) -> Option<Inode> {
        if b.len() != INODE_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let time_at = |i: usize| Time {
            secs: u64_at(i) as i64,
            nsecs: u32_at(i + 8),
        };
        Some(Inode {
            kind: Kind::from_u8(b[0])?,
            flags: b[1],
            perm: u32_at(2),
            uid: u32_at(6),
            gid: u32_at(10),
            nlink: u32_at(14),
            rdev: u32_at(18),
            size: u64_at(26),
            disk: u64_at(34),
            extent_size: u32_at(42),
            atime: time_at(46),
            mtime: time_at(58),
            ctime: time_at(70),
        })
    }
}

/// How an extent's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Raw bytes.
    Raw,
    /// Compressed with this algorithm at this level.
    Compressed(Algorithm, i32),
}

/// The file extent item: header fields plus the stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentHeader {
    /// Encoding.
    pub encoding: Encoding,
    /// Decoded length (may be shorter than the extent size: zeros follow).
    pub ram_len: u32,
    /// crc32 of the stored bytes.
    pub crc: u32,
    /// Unique sequence number (keys the decompressed-extent cache).
    pub seq: u64,
}

/// Bytes before the stored data in an extent value.
pub const EXTENT_HEADER_LEN: usize = 20;
/// Stored bytes up to this size stay inline in the extent item (btrfs's max_inline default);
/// larger ones go to the data file.
pub const INLINE_MAX: usize = 2048;
/// Length of an item whose bytes are in the data file: the header, offset and length.
pub const EXTERNAL_ITEM_LEN: usize = EXTENT_HEADER_LEN + 12;
/// Item version: header followed by the stored bytes.
const INLINE: u8 = 1;
/// Item version: header followed by the (offset, length) of the bytes in the data file.
const EXTERNAL: u8 = 2;

/// Where an extent item's stored bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored<'a> {
    /// In the item.
    Inline(&'a [u8]),
    /// In the data file: (offset, length).
    External(u64, u64),
}

impl Stored<'_> {
    /// Length of the stored bytes.
    pub fn len(&self) -> u64 {
        match self {
            Stored::Inline(b) => b.len() as u64,
            Stored::External(_, n) => *n,
        }
    }

    /// No stored bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where the stored bytes of the item `b` are; `None` when the item is damaged.
pub fn stored(b: &[u8]) -> Option<Stored<'_>> {
    match *b.first()? {
        INLINE if b.len() >= EXTENT_HEADER_LEN => Some(Stored::Inline(&b[EXTENT_HEADER_LEN..])),
        EXTERNAL if b.len() == EXTERNAL_ITEM_LEN => {
            let offset = u64::from_le_bytes(b[20..28].try_into().ok()?);
            let len = u32::from_le_bytes(b[28..32].try_into().ok()?);
            Some(Stored::External(offset, len as u64))
        }
        _ => None,
    }
}

/// Length of the stored bytes of the item `b` (0 when it is damaged).
pub fn stored_len(b: &[u8]) -> u64 {
    stored(b).map_or(0, |s| s.len())
}

/// The item for an inline item's bytes moved to the data file at `offset`.
pub fn external_item(inline: &[u8], offset: u64) -> [u8; EXTERNAL_ITEM_LEN] {
    let mut item = [0u8; EXTERNAL_ITEM_LEN];
    item[..EXTENT_HEADER_LEN].copy_from_slice(&inline[..EXTENT_HEADER_LEN]);
    item[0] = EXTERNAL;
    item[20..28].copy_from_slice(&offset.to_le_bytes());
    let len = (inline.len() - EXTENT_HEADER_LEN) as u32;
    item[28..32].copy_from_slice(&len.to_le_bytes());
    item
}

fn alg_code(a: Algorithm) -> u8 {
    match a {
        Algorithm::Zlib => 1,
        Algorithm::Lzo => 2,
        Algorithm::Zstd => 3,
        Algorithm::Lz4 => 4,
        Algorithm::Lz4hc => 5,
    }
}

fn alg_from(c: u8) -> Option<Algorithm> {
    Some(match c {
        1 => Algorithm::Zlib,
        2 => Algorithm::Lzo,
        3 => Algorithm::Zstd,
        4 => Algorithm::Lz4,
        5 => Algorithm::Lz4hc,
        _ => return None,
    })
}

impl ExtentHeader {
    /// Encode the header followed by `data`.
    pub fn encode(&self, data: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; EXTENT_HEADER_LEN];
        self.put(&mut b);
        b.extend_from_slice(data);
        b
    }

    /// Write the header into the first [`EXTENT_HEADER_LEN`] bytes of `b`.
    pub fn put(&self, b: &mut [u8]) {
        let (code, level) = match self.encoding {
            Encoding::Raw => (0u8, 0i32),
            Encoding::Compressed(a, l) => (alg_code(a), l),
        };
        b[0] = INLINE;
        b[1] = code;
        b[2] = level as i8 as u8;
        b[3] = 0;
        b[4..8].copy_from_slice(&self.ram_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.crc.to_le_bytes());
        b[12..20].copy_from_slice(&self.seq.to_le_bytes());
    }

    /// Set the sequence number in an encoded value.
    pub fn set_seq(value: &mut [u8], seq: u64) {
        value[12..20].copy_from_slice(&seq.to_le_bytes());
    }

    /// Decode the header of an item; [`stored`] says where its bytes are.
    pub fn decode(b: &[u8]) -> Option<ExtentHeader> {
        stored(b)?;
        let encoding = match b[1] {
            0 => Encoding::Raw,
            c => Encoding::Compressed(alg_from(c)?, b[2] as i8 as i32),
        };
        Some(ExtentHeader {
            encoding,
            ram_len: u32::from_le_bytes(b[4..8].try_into().ok()?),
            crc: u32::from_le_bytes(b[8..12].try_into().ok()?),
            seq: u64::from_le_bytes(b[12..20].try_into().ok()?),
        })
    }
}

/// crc32 of stored bytes.
pub fn checksum(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_round_trip() {
        let mut i = Inode::new(Kind::File, 0o644, 1, 2);
        i.size = 12345;
        i.disk = 999;
        i.extent_size = 131072;
        i.flags = FLAG_NOCOMPRESS;
        i.mtime = Time { secs: -5, nsecs: 7 };
        assert_eq!(Inode::from_bytes(&i.to_bytes()), Some(i));
    }

    #[test]
    fn extent_round_trip() {
        let h = ExtentHeader {
            encoding: Encoding::Compressed(Algorithm::Zstd, -3),
            ram_len: 4096,
            crc: 7,
            seq: 9,
        };
        let b = h.encode(b"abc");
        assert_eq!(ExtentHeader::decode(&b), Some(h.clone()));
        assert_eq!(&b[EXTENT_HEADER_LEN..], b"abc");
        assert_eq!(stored(&b), Some(Stored::Inline(b"abc")));
        let ext = external_item(&b, 1 << 40);
        assert_eq!(ExtentHeader::decode(&ext), Some(h));
        assert_eq!(stored(&ext), Some(Stored::External(1 << 40, 3)));
        assert_eq!(stored(&ext[..31]), None);
        assert_eq!(stored(&[9u8; 40]), None);
    }

    #[test]
    fn negative_times() {
        let t = Time {
            secs: -10,
            nsecs: 5,
        };
        assert_eq!(Time::from_system(t.to_system()), t);
    }
}
