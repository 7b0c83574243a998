//! The inode item's layout, declared once, and its codec: every field at a fixed offset,
//! little-endian; the item of a store older than format version [`VERSION_BYTES`] is the
//! same without its last field, `bytes`.
//!
//! Mirrors btrfs_inode_item (btrfs_tree.h) and its accessors; tree-checker.c's
//! check_inode_item is [`Inode::validate`].

use super::{Kind, Time, MAX_FILE_SIZE};
use crate::store::layout::{
    get_i64, get_u32, get_u64, get_u8, put_i64, put_u32, put_u64, put_u8, Field, Layout,
    RecordError, Span,
};

/// The record's name in errors.
const R: &str = "inode";
/// [`Kind`].
pub const KIND: Field<1> = Field::new(R, "kind", 0);
/// [`Inode::flags`].
pub const FLAGS: Field<1> = Field::new(R, "flags", 1);
/// [`Inode::perm`].
pub const PERM: Field<4> = Field::new(R, "perm", 2);
/// [`Inode::uid`].
pub const UID: Field<4> = Field::new(R, "uid", 6);
/// [`Inode::gid`].
pub const GID: Field<4> = Field::new(R, "gid", 10);
/// [`Inode::nlink`].
pub const NLINK: Field<4> = Field::new(R, "nlink", 14);
/// [`Inode::rdev`].
pub const RDEV: Field<4> = Field::new(R, "rdev", 18);
/// Zeros, never read.
pub const RESERVED: Field<4> = Field::new(R, "reserved", 22);
/// [`Inode::size`].
pub const SIZE: Field<8> = Field::new(R, "size", 26);
/// [`Inode::disk`].
pub const DISK: Field<8> = Field::new(R, "disk", 34);
/// [`Inode::extent_size`].
pub const EXTENT_SIZE: Field<4> = Field::new(R, "extent_size", 42);
/// [`Inode::atime`].
pub const ATIME: TimeFields = TimeFields::at("atime.secs", "atime.nsecs", 46);
/// [`Inode::mtime`].
pub const MTIME: TimeFields = TimeFields::at("mtime.secs", "mtime.nsecs", 58);
/// [`Inode::ctime`].
pub const CTIME: TimeFields = TimeFields::at("ctime.secs", "ctime.nsecs", 70);
/// [`Inode::bytes`]: from format version [`VERSION_BYTES`] on.
pub const BYTES: Field<8> = Field::new(R, "bytes", 82);

/// A time's two fields: seconds (signed), then nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeFields {
    /// Seconds since the epoch.
    pub secs: Field<8>,
    /// Nanoseconds.
    pub nsecs: Field<4>,
}

impl TimeFields {
    const fn at(secs: &'static str, nsecs: &'static str, at: usize) -> TimeFields {
        TimeFields {
            secs: Field::new(R, secs, at),
            nsecs: Field::new(R, nsecs, at + 8),
        }
    }

    fn get(&self, b: &[u8]) -> Result<Time, RecordError> {
        Ok(Time {
            secs: get_i64(b, &self.secs)?,
            nsecs: get_u32(b, &self.nsecs)?,
        })
    }

    fn put(&self, b: &mut [u8], t: Time) {
        put_i64(b, &self.secs, t.secs);
        put_u32(b, &self.nsecs, t.nsecs);
    }
}

/// Every field of today's item, in order.
const FIELDS: &[Span] = &[
    KIND.span(),
    FLAGS.span(),
    PERM.span(),
    UID.span(),
    GID.span(),
    NLINK.span(),
    RDEV.span(),
    RESERVED.span(),
    SIZE.span(),
    DISK.span(),
    EXTENT_SIZE.span(),
    ATIME.secs.span(),
    ATIME.nsecs.span(),
    MTIME.secs.span(),
    MTIME.nsecs.span(),
    CTIME.secs.span(),
    CTIME.nsecs.span(),
    BYTES.span(),
];

/// The inode item (format version [`VERSION_BYTES`] on): 90 bytes.
pub const INODE: Layout = Layout {
    record: R,
    len: BYTES.end(),
    fields: FIELDS,
};

/// The inode item before format version [`VERSION_BYTES`]: 82 bytes, all but `bytes`.
pub const INODE_V3: Layout = Layout {
    record: R,
    len: BYTES.at,
    fields: FIELDS.split_at(FIELDS.len() - 1).0,
};

const _: () = assert!(INODE.tiles() && INODE_V3.tiles());

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
pub const INODE_LEN: usize = INODE.len;
/// Length of an inode item written before format version [`VERSION_BYTES`]: without `bytes`.
pub const INODE_LEN_V3: usize = INODE_V3.len;
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

    /// Encode, at today's length ([`INODE`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0; INODE.len];
        put_u8(&mut b, &KIND, self.kind as u8);
        put_u8(&mut b, &FLAGS, self.flags);
        put_u32(&mut b, &PERM, self.perm);
        put_u32(&mut b, &UID, self.uid);
        put_u32(&mut b, &GID, self.gid);
        put_u32(&mut b, &NLINK, self.nlink);
        put_u32(&mut b, &RDEV, self.rdev);
        put_u64(&mut b, &SIZE, self.size);
        put_u64(&mut b, &DISK, self.disk);
        put_u32(&mut b, &EXTENT_SIZE, self.extent_size);
        ATIME.put(&mut b, self.atime);
        MTIME.put(&mut b, self.mtime);
        CTIME.put(&mut b, self.ctime);
        put_u64(&mut b, &BYTES, self.bytes);
        b
    }

    /// Decode and validate an item of either length ([`INODE`], [`INODE_V3`]): every field
    /// is one this filesystem could have written, so nothing built from it (attributes,
    /// extent ranges) can overflow. The error names the field and what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<Inode, RecordError> {
        let layout = if b.len() > INODE_V3.len {
            &INODE
        } else {
            &INODE_V3
        };
        layout.fits(b)?;
        let disk = get_u64(b, &DISK)?;
        let inode = Inode {
            kind: Kind::decode(get_u8(b, &KIND)?, &KIND)?,
            flags: get_u8(b, &FLAGS)?,
            perm: get_u32(b, &PERM)?,
            uid: get_u32(b, &UID)?,
            gid: get_u32(b, &GID)?,
            nlink: get_u32(b, &NLINK)?,
            rdev: get_u32(b, &RDEV)?,
            size: get_u64(b, &SIZE)?,
            disk,
            // An item from before `bytes`: its stored bytes, what `st_blocks` showed then.
            bytes: match layout.len {
                INODE_LEN => get_u64(b, &BYTES)?,
                _ => disk,
            },
            extent_size: get_u32(b, &EXTENT_SIZE)?,
            atime: ATIME.get(b)?,
            mtime: MTIME.get(b)?,
            ctime: CTIME.get(b)?,
        };
        inode.validate()?;
        Ok(inode)
    }

    /// Check the fields a damaged item could get wrong in a way that matters.
    pub fn validate(&self) -> Result<(), RecordError> {
        if self.perm & !0o7777 != 0 {
            return Err(PERM.invalid(self.perm, "permission bits beyond 07777"));
        }
        for (f, v, what) in [
            (&SIZE, self.size, "a size beyond the largest file offset"),
            (&DISK, self.disk, "more stored bytes than a file can have"),
            (
                &BYTES,
                self.bytes,
                "more bytes covered than a file can have",
            ),
        ] {
            if v > MAX_FILE_SIZE {
                return Err(f.invalid(v, what));
            }
        }
        let e = self.extent_size as usize;
        if e != 0 && (!e.is_multiple_of(4096) || e > crate::options::MAX_MAX_EXTENT) {
            return Err(EXTENT_SIZE.invalid(
                self.extent_size,
                "not an extent size (a multiple of 4096 up to the largest extent)",
            ));
        }
        for (f, t) in [
            (&ATIME, self.atime),
            (&MTIME, self.mtime),
            (&CTIME, self.ctime),
        ] {
            if !t.is_valid() {
                return Err(f.nsecs.invalid(t.nsecs, "a second or more of nanoseconds"));
            }
        }
        Ok(())
    }
}
