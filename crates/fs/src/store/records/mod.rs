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
    /// Bytes of the file its extents cover, each extent's decoded length rounded up to a
    /// 4 KiB block ([`covered`]): btrfs's inode bytes, which `st_blocks` reports, so `du`
    /// and coreutils' sparse-file test see what btrfs shows them. A record written before
    /// format version [`VERSION_BYTES`] has none; decoding gives it `disk` until the first
    /// writable open counts it ([`crate::store::Store::open`]).
    pub bytes: u64,
    /// Extent size this file is cut into (0 until the first write fixes it).
    pub extent_size: u32,
    /// Access time.
    pub atime: Time,
    /// Modification time.
    pub mtime: Time,
    /// Change time.
    pub ctime: Time,
}

/// Length of an inode item.
pub const INODE_LEN: usize = INODE_LEN_V3 + 8;
/// Length of an inode item written before format version [`VERSION_BYTES`]: without `bytes`.
pub const INODE_LEN_V3: usize = 1 + 1 + 4 * 6 + 8 * 2 + 4 + 12 * 3;
/// The format version from which every inode item has `bytes`.
pub const VERSION_BYTES: u64 = 4;
/// The block a file's `bytes` count in.
const BLOCK: u64 = 4096;

/// Bytes of its file an extent of `ram_len` decoded bytes covers: rounded up to a block, as
/// btrfs counts each file extent's num_bytes in its inode.
pub fn covered(ram_len: u32) -> u64 {
    u64::from(ram_len).next_multiple_of(BLOCK)
}

/// [`covered`] for an extent of a file cut into `extent_size`-byte extents (0: not cut yet):
/// at most one extent's worth, so a damaged header claiming more (which fsck reports as
/// such) does not also make its file's count wrong when one is counted from the items.
pub fn covered_within(ram_len: u32, extent_size: u32) -> u64 {
    covered(match extent_size {
        0 => ram_len,
        e => ram_len.min(e),
    })
}

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
            bytes: 0,
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
        b.extend_from_slice(&self.bytes.to_le_bytes());
        b
    }

    /// Decode; `None` when damaged ([`Inode::decode`] says why).
    pub fn from_bytes(b: &[u8]) -> Option<Inode> {
        Inode::decode(b).ok()
    }

    /// Decode and validate: every field is one this filesystem could have written, so nothing
    /// built from it (attributes, extent ranges) can overflow. The error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<Inode, String> {
        if b.len() != INODE_LEN && b.len() != INODE_LEN_V3 {
            return Err(format!(
                "inode item is {} bytes, not {INODE_LEN} (or {INODE_LEN_V3} before format \
                 version {VERSION_BYTES})",
                b.len()
            ));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | (u64::from(u32_at(i + 4)) << 32);
        let time_at = |i: usize| Time {
            secs: u64_at(i) as i64,
            nsecs: u32_at(i + 8),
        };
        let inode = Inode {
            kind: Kind::from_u8(b[0]).ok_or_else(|| format!("unknown inode kind {}", b[0]))?,
            flags: b[1],
            perm: u32_at(2),
            uid: u32_at(6),
            gid: u32_at(10),
            nlink: u32_at(14),
            rdev: u32_at(18),
            size: u64_at(26),
            disk: u64_at(34),
            bytes: match b.len() {
                INODE_LEN => u64_at(INODE_LEN_V3),
                _ => u64_at(34),
            },
            extent_size: u32_at(42),
            atime: time_at(46),
            mtime: time_at(58),
            ctime: time_at(70),
        };
        inode.validate()?;
        Ok(inode)
    }

    /// Check the fields a damaged item could get wrong in a way that matters.
    pub fn validate(&self) -> Result<(), String> {
        if self.perm & !0o7777 != 0 {
            return Err(format!("permission bits {:o} beyond 07777", self.perm));
        }
        if self.size > MAX_FILE_SIZE {
            return Err(format!("size {} beyond the largest file offset", self.size));
        }
        if self.disk > MAX_FILE_SIZE {
            return Err(format!("{} stored bytes", self.disk));
        }
        if self.bytes > MAX_FILE_SIZE {
            return Err(format!("{} bytes covered by extents", self.bytes));
        }
        let e = self.extent_size as usize;
        if e != 0 && (!e.is_multiple_of(4096) || e > crate::options::MAX_MAX_EXTENT) {
            return Err(format!("extent size {e}"));
        }
        for (name, t) in [
            ("atime", self.atime),
            ("mtime", self.mtime),
            ("ctime", self.ctime),
        ] {
            if !t.is_valid() {
                return Err(format!("{name} has {} nanoseconds", t.nsecs));
            }
        }
        Ok(())
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
    /// The store's dictionary the stored bytes were compressed with (zstd only; 0: none).
    /// Byte 3 of the header, zero in every store made before dictionaries.
    pub dict: u8,
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
            // The data file is a file: its bytes end before the largest file offset.
            offset
                .checked_add(u64::from(len))
                .filter(|&end| end <= MAX_FILE_SIZE)?;
            Some(Stored::External(offset, len as u64))
        }
        _ => None,
    }
}

/// Point the external item `b` at `offset` (the compactor moved its stored bytes); false, and
/// `b` unchanged, when it is not an external item.
pub fn set_external_offset(b: &mut [u8], offset: u64) -> bool {
    if b.len() != EXTERNAL_ITEM_LEN || b.first() != Some(&EXTERNAL) {
        return false;
    }
    b[20..28].copy_from_slice(&offset.to_le_bytes());
    true
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

/// The item for `len` stored bytes under header `h`, in the data file at `offset`.
pub fn external_item_of(h: &ExtentHeader, len: usize, offset: u64) -> [u8; EXTERNAL_ITEM_LEN] {
    let mut item = [0u8; EXTERNAL_ITEM_LEN];
    h.put(&mut item);
    item[0] = EXTERNAL;
    item[20..28].copy_from_slice(&offset.to_le_bytes());
    item[28..32].copy_from_slice(&(len as u32).to_le_bytes());
    item
}

fn alg_code(a: Algorithm) -> u8 {
    match a {
        Algorithm::Zlib => 1,
        Algorithm::Lzo => 2,
        Algorithm::Zstd => 3,
        Algorithm::Lz4 => 4,
        Algorithm::Lz4hc => 5,
        // Reserved for zram's algorithms; options::parse_spec refuses them for now.
        Algorithm::LzoRle => 6,
        Algorithm::Deflate => 7,
    }
}

fn alg_from(c: u8) -> Option<Algorithm> {
    Some(match c {
        1 => Algorithm::Zlib,
        2 => Algorithm::Lzo,
        3 => Algorithm::Zstd,
        4 => Algorithm::Lz4,
        5 => Algorithm::Lz4hc,
        6 => Algorithm::LzoRle,
        7 => Algorithm::Deflate,
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
        b[3] = self.dict;
        b[4..8].copy_from_slice(&self.ram_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.crc.to_le_bytes());
        b[12..20].copy_from_slice(&self.seq.to_le_bytes());
    }

    /// Set the sequence number in an encoded item; false, and `value` unchanged, when it is
    /// too short to hold a header.
    pub fn set_seq(value: &mut [u8], seq: u64) -> bool {
        match value.get_mut(12..20) {
            Some(b) => {
                b.copy_from_slice(&seq.to_le_bytes());
                true
            }
            None => false,
        }
    }

    /// Decode the header of an item; [`stored`] says where its bytes are. A level outside
    /// the algorithm's range, or a decoded length beyond the largest extent, is damage.
    pub fn decode(b: &[u8]) -> Option<ExtentHeader> {
        stored(b)?;
        let encoding = match b[1] {
            0 => Encoding::Raw,
            c => {
                let alg = alg_from(c)?;
                let level = b[2] as i8 as i32;
                let valid = level == 0 || (alg.min_level()..=alg.max_level()).contains(&level);
                if !valid {
                    return None;
                }
                Encoding::Compressed(alg, level)
            }
        };
        let ram_len = u32::from_le_bytes(b[4..8].try_into().ok()?);
        if ram_len as usize > crate::options::MAX_MAX_EXTENT {
            return None;
        }
        // Only zstd takes a dictionary.
        let dict = b[3];
        if dict != 0 && !matches!(encoding, Encoding::Compressed(Algorithm::Zstd, _)) {
            return None;
        }
        Some(ExtentHeader {
            encoding,
            ram_len: u32::from_le_bytes(b[4..8].try_into().ok()?),
            crc: u32::from_le_bytes(b[8..12].try_into().ok()?),
            seq: u64::from_le_bytes(b[12..20].try_into().ok()?),
            dict,
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
        i.bytes = 8192;
        i.extent_size = 131072;
        i.flags = FLAG_NOCOMPRESS;
        i.mtime = Time { secs: -5, nsecs: 7 };
        assert_eq!(Inode::from_bytes(&i.to_bytes()), Some(i));
    }

    /// A record from before format version 4 has no `bytes`: it decodes with its stored
    /// bytes in their place (what `st_blocks` showed then), and re-encodes at today's length.
    #[test]
    fn an_inode_item_from_before_bytes_decodes() {
        let mut i = Inode::new(Kind::File, 0o644, 1, 2);
        i.size = 1 << 20;
        i.disk = 5000;
        i.bytes = 1 << 20;
        let old = &i.to_bytes()[..INODE_LEN_V3];
        let back = Inode::decode(old).unwrap();
        assert_eq!(back.bytes, 5000);
        assert_eq!(
            Inode {
                bytes: i.bytes,
                ..back.clone()
            },
            i
        );
        assert_eq!(back.to_bytes().len(), INODE_LEN);
        assert!(Inode::decode(&i.to_bytes()[..INODE_LEN_V3 + 4]).is_err());
        assert_eq!(
            (covered(0), covered(1), covered(4096), covered(4097)),
            (0, 4096, 4096, 8192)
        );
    }

    #[test]
    fn extent_round_trip() {
        let h = ExtentHeader {
            encoding: Encoding::Compressed(Algorithm::Zstd, -3),
            ram_len: 4096,
            crc: 7,
            seq: 9,
            dict: 3,
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

    /// Regression: a damaged item with a time past what SystemTime holds made getattr panic.
    #[test]
    fn a_time_no_system_time_holds_is_refused_and_never_panics() {
        let mut i = Inode::new(Kind::File, 0o644, 1, 2);
        i.atime = Time {
            secs: i64::MAX,
            nsecs: 2_000_000_000,
        };
        let b = i.to_bytes();
        let why = Inode::decode(&b).unwrap_err();
        assert!(why.contains("atime"), "{why}");
        assert_eq!(Inode::from_bytes(&b), None);
        // Converting it anyway saturates instead of panicking.
        let _ = i.atime.to_system();
        for secs in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX] {
            for nsecs in [0, 999_999_999] {
                let t = Time { secs, nsecs };
                assert_eq!(Time::from_system(t.to_system()), t, "{t:?}");
            }
        }
    }

    #[test]
    fn damaged_inode_fields_are_refused() {
        let good = Inode::new(Kind::File, 0o644, 1, 2);
        type Damage = fn(&mut Inode);
        let cases: [(&str, Damage); 6] = [
            ("permission", |i| i.perm = 0o10000),
            ("size", |i| i.size = MAX_FILE_SIZE + 1),
            ("stored bytes", |i| i.disk = u64::MAX),
            ("covered by extents", |i| i.bytes = MAX_FILE_SIZE + 1),
            ("extent size", |i| i.extent_size = 4097),
            ("ctime", |i| i.ctime.nsecs = 1_000_000_000),
        ];
        for (what, damage) in cases {
            let mut i = good.clone();
            damage(&mut i);
            let why = Inode::decode(&i.to_bytes()).unwrap_err();
            assert!(why.contains(what), "{what}: {why}");
        }
        let mut b = good.to_bytes();
        b[0] = 9;
        assert!(Inode::decode(&b).is_err());
        assert!(Inode::decode(&b[1..]).is_err());
    }

    #[test]
    fn damaged_extent_headers_are_refused() {
        let h = ExtentHeader {
            encoding: Encoding::Compressed(Algorithm::Zlib, 9),
            ram_len: 4096,
            crc: 0,
            seq: 1,
            dict: 0,
        };
        let mut b = h.encode(b"x");
        b[2] = 10; // zlib has no level 10
        assert_eq!(ExtentHeader::decode(&b), None);
        let mut b = h.encode(b"x");
        b[3] = 1; // a dictionary with zlib
        assert_eq!(ExtentHeader::decode(&b), None);
        let mut b = h.encode(b"x");
        b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(ExtentHeader::decode(&b), None);
        let far = external_item(&h.encode(b"xyz"), u64::MAX - 1);
        assert_eq!(stored(&far), None);
    }

    proptest::proptest! {
        /// Whatever bytes an inode item holds, decoding never panics, what decodes re-encodes
        /// to an item that decodes the same, and its times convert.
        #[test]
        fn any_inode_item(b in proptest::collection::vec(proptest::prelude::any::<u8>(), INODE_LEN_V3..=INODE_LEN)) {
            if let Ok(i) = Inode::decode(&b) {
                proptest::prop_assert_eq!(Inode::decode(&i.to_bytes()), Ok(i.clone()));
                for t in [i.atime, i.mtime, i.ctime] {
                    proptest::prop_assert_eq!(Time::from_system(t.to_system()), t);
                }
            }
        }

        /// Any time converts without panicking; a valid one round-trips.
        #[test]
        fn any_time(secs in proptest::prelude::any::<i64>(), nsecs in proptest::prelude::any::<u32>()) {
            let t = Time { secs, nsecs };
            let back = Time::from_system(t.to_system());
            if t.is_valid() {
                proptest::prop_assert_eq!(back, t);
            }
        }

        /// Whatever bytes an extent item holds, decoding never panics and what decodes
        /// re-encodes the same; an external item's range fits in a file.
        #[test]
        fn any_extent_item(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Some(h) = ExtentHeader::decode(&b) {
                if let Some(Stored::Inline(data)) = stored(&b) {
                    proptest::prop_assert_eq!(ExtentHeader::decode(&h.encode(data)), Some(h));
                }
            }
            if let Some(Stored::External(at, len)) = stored(&b) {
                proptest::prop_assert!(at.checked_add(len).is_some_and(|e| e <= MAX_FILE_SIZE));
            }
        }
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
