//! The file extent item's layout, declared once, and its codec: a 20-byte header (how the
//! bytes are stored, their decoded length, checksum and sequence number) followed either by
//! the stored bytes themselves (an inline item) or by where they are in the data backend (an
//! external item, 32 bytes in all).
//!
//! Mirrors btrfs_file_extent_item (btrfs_tree.h) and its accessors; tree-checker.c's
//! check_extent_data_item is [`ExtentHeader::decode`] and [`stored`].

use wring_engine::Algorithm;

use super::MAX_FILE_SIZE;
use crate::store::layout::{
    get_i8, get_u32, get_u64, get_u8, put_i8, put_u32, put_u64, put_u8, Field, Layout, RecordError,
    Span,
};

/// The record's name in errors.
const R: &str = "extent item";
/// Where the stored bytes are: 1, inline (after the header); 2, external (in the data backend).
pub const VERSION: Field<1> = Field::new(R, "version", 0);
/// The compression algorithm's code (0: raw).
pub const COMPRESSION: Field<1> = Field::new(R, "compression", 1);
/// The compression level (signed).
pub const LEVEL: Field<1> = Field::new(R, "level", 2);
/// [`ExtentHeader::dict`].
pub const DICT: Field<1> = Field::new(R, "dict", 3);
/// [`ExtentHeader::ram_len`].
pub const RAM_LEN: Field<4> = Field::new(R, "ram_len", 4);
/// [`ExtentHeader::crc`].
pub const CRC: Field<4> = Field::new(R, "crc", 8);
/// [`ExtentHeader::seq`].
pub const SEQ: Field<8> = Field::new(R, "seq", 12);
/// An external item's offset of its stored bytes in the data backend.
pub const OFFSET: Field<8> = Field::new(R, "offset", 20);
/// An external item's length of its stored bytes.
pub const LEN: Field<4> = Field::new(R, "len", 28);

/// Every field of an external item, in order; the header's are the first.
const FIELDS: &[Span] = &[
    VERSION.span(),
    COMPRESSION.span(),
    LEVEL.span(),
    DICT.span(),
    RAM_LEN.span(),
    CRC.span(),
    SEQ.span(),
    OFFSET.span(),
    LEN.span(),
];

/// The header every extent item starts with; an inline item's stored bytes follow it.
pub const EXTENT_HEADER: Layout = Layout {
    record: R,
    len: SEQ.end(),
    fields: FIELDS.split_at(7).0,
};

/// An item whose stored bytes are in the data backend: the header, their offset and length.
pub const EXTERNAL_ITEM: Layout = Layout {
    record: R,
    len: LEN.end(),
    fields: FIELDS,
};

const _: () = assert!(EXTENT_HEADER.tiles() && EXTERNAL_ITEM.tiles());

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
pub const EXTENT_HEADER_LEN: usize = EXTENT_HEADER.len;
/// Stored bytes up to this size stay inline in the extent item (btrfs's max_inline default);
/// larger ones go to the data file.
pub const INLINE_MAX: usize = 2048;
/// Length of an item whose bytes are in the data file: the header, offset and length.
pub const EXTERNAL_ITEM_LEN: usize = EXTERNAL_ITEM.len;
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

/// Where the stored bytes of the item `b` are; the error says what is damaged. An external
/// item's bytes end before the largest file offset (the data file is a file).
pub fn stored(b: &[u8]) -> Result<Stored<'_>, RecordError> {
    match get_u8(b, &VERSION)? {
        INLINE => {
            EXTENT_HEADER.holds(b)?;
            Ok(Stored::Inline(
                b.get(EXTENT_HEADER_LEN..).unwrap_or_default(),
            ))
        }
        EXTERNAL => {
            EXTERNAL_ITEM.fits(b)?;
            let offset = get_u64(b, &OFFSET)?;
            let len = get_u32(b, &LEN)?;
            match offset.checked_add(u64::from(len)) {
                Some(end) if end <= MAX_FILE_SIZE => Ok(Stored::External(offset, u64::from(len))),
                _ => Err(OFFSET.invalid(offset, "its stored bytes would end past a file's end")),
            }
        }
        v => Err(VERSION.invalid(v, "neither inline (1) nor external (2)")),
    }
}

/// Point the external item `b` at `offset` (the compactor moved its stored bytes); an error,
/// and `b` unchanged, when it is not a sound external item.
pub fn set_external_offset(b: &mut [u8], offset: u64) -> Result<(), RecordError> {
    match stored(b)? {
        Stored::External(..) => {
            put_u64(b, &OFFSET, offset);
            Ok(())
        }
        Stored::Inline(_) => Err(VERSION.invalid(INLINE, "an inline item has no offset")),
    }
}

/// Length of the stored bytes of the item `b` (0 when it is damaged).
pub fn stored_len(b: &[u8]) -> u64 {
    stored(b).map_or(0, |s| s.len())
}

/// The item for an inline item's bytes moved to the data file at `offset`.
pub fn external_item(inline: &[u8], offset: u64) -> Result<[u8; EXTERNAL_ITEM_LEN], RecordError> {
    let h = ExtentHeader::decode(inline)?;
    match stored(inline)? {
        Stored::Inline(data) => Ok(external_item_of(&h, data.len(), offset)),
        Stored::External(..) => Err(VERSION.invalid(EXTERNAL, "the item is external already")),
    }
}

/// The item for `len` stored bytes under header `h`, in the data file at `offset`.
pub fn external_item_of(h: &ExtentHeader, len: usize, offset: u64) -> [u8; EXTERNAL_ITEM_LEN] {
    let mut item = [0u8; EXTERNAL_ITEM_LEN];
    h.put(&mut item);
    put_u8(&mut item, &VERSION, EXTERNAL);
    put_u64(&mut item, &OFFSET, offset);
    put_u32(&mut item, &LEN, len as u32);
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

/// The algorithm of compression code `c` (not 0, raw).
fn alg_from(c: u8) -> Result<Algorithm, RecordError> {
    Ok(match c {
        1 => Algorithm::Zlib,
        2 => Algorithm::Lzo,
        3 => Algorithm::Zstd,
        4 => Algorithm::Lz4,
        5 => Algorithm::Lz4hc,
        6 => Algorithm::LzoRle,
        7 => Algorithm::Deflate,
        _ => return Err(COMPRESSION.invalid(c, "no such compression")),
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

    /// Write the header, as an inline item's, into the first [`EXTENT_HEADER_LEN`] bytes
    /// of `b`.
    pub fn put(&self, b: &mut [u8]) {
        let (code, level) = match self.encoding {
            Encoding::Raw => (0u8, 0i32),
            Encoding::Compressed(a, l) => (alg_code(a), l),
        };
        put_u8(b, &VERSION, INLINE);
        put_u8(b, &COMPRESSION, code);
        put_i8(b, &LEVEL, level as i8);
        put_u8(b, &DICT, self.dict);
        put_u32(b, &RAM_LEN, self.ram_len);
        put_u32(b, &CRC, self.crc);
        put_u64(b, &SEQ, self.seq);
    }

    /// Set the sequence number in the encoded item `value` (a reflinked copy gets its own);
    /// an error, and `value` unchanged, when it is not a sound item.
    pub fn set_seq(value: &mut [u8], seq: u64) -> Result<(), RecordError> {
        stored(value)?;
        put_u64(value, &SEQ, seq);
        Ok(())
    }

    /// Decode the header of an item; [`stored`] says where its bytes are. A level outside
    /// the algorithm's range, a decoded length beyond the largest extent, or a dictionary
    /// with an algorithm other than zstd is damage.
    pub fn decode(b: &[u8]) -> Result<ExtentHeader, RecordError> {
        stored(b)?;
        let encoding = match get_u8(b, &COMPRESSION)? {
            0 => Encoding::Raw,
            c => {
                let alg = alg_from(c)?;
                let level = i32::from(get_i8(b, &LEVEL)?);
                let valid = level == 0 || (alg.min_level()..=alg.max_level()).contains(&level);
                if !valid {
                    return Err(LEVEL.invalid(level, "not a level of its algorithm"));
                }
                Encoding::Compressed(alg, level)
            }
        };
        let ram_len = get_u32(b, &RAM_LEN)?;
        if ram_len as usize > crate::options::MAX_MAX_EXTENT {
            return Err(RAM_LEN.invalid(ram_len, "longer than the largest extent"));
        }
        let dict = get_u8(b, &DICT)?;
        if dict != 0 && !matches!(encoding, Encoding::Compressed(Algorithm::Zstd, _)) {
            return Err(DICT.invalid(dict, "only zstd takes a dictionary"));
        }
        Ok(ExtentHeader {
            encoding,
            ram_len,
            crc: get_u32(b, &CRC)?,
            seq: get_u64(b, &SEQ)?,
            dict,
        })
    }
}
