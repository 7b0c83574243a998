//! The segment object format: extents' stored bytes one after another, then an index of them and
//! a fixed trailer. Mirrors btrfs's checksum tree in miniature: every extent's crc32 is kept
//! beside its place, so a ranged read of one extent is verified without fetching the segment,
//! and fsck verifies a whole object.
//!
//! ```text
//! [data: extents, data_len bytes]
//! [index: count × (offset u32, len u32, crc32 u32), little-endian, sorted by offset]
//! [trailer, 32 bytes: magic "WRSEGv01", segment u64, count u32, data_len u32,
//!  index crc32 u32, trailer crc32 u32 (of the 28 bytes before it)]
//! ```

use crate::error::FormatError;

/// The trailer's first eight bytes.
pub const MAGIC: &[u8; 8] = b"WRSEGv01";
/// Bytes of the trailer.
pub const TRAILER_LEN: usize = 32;
/// Bytes of one index entry.
pub const ENTRY_LEN: usize = 12;

/// One extent in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Offset in the segment's data.
    pub offset: u32,
    /// Stored length.
    pub len: u32,
    /// crc32 (IEEE) of the stored bytes.
    pub crc: u32,
}

impl Entry {
    /// The extent's bytes in its segment's `data`; None when they pass its end (an index
    /// from [`parse_index`] never does: it checked every entry against the data's length).
    pub fn bytes<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        let start = self.offset as usize;
        data.get(start..start.checked_add(self.len as usize)?)
    }
}

/// A segment's trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// The segment number it was written as.
    pub segment: u64,
    /// Extents in the index.
    pub count: u32,
    /// Bytes of data before the index.
    pub data_len: u32,
    /// crc32 of the index bytes.
    pub index_crc: u32,
}

impl Trailer {
    /// Bytes of the index.
    pub fn index_len(&self) -> u64 {
        self.count as u64 * ENTRY_LEN as u64
    }

    /// Bytes of the whole object.
    pub fn object_len(&self) -> u64 {
        self.data_len as u64 + self.index_len() + TRAILER_LEN as u64
    }

    /// The trailer's bytes.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut t = [0u8; TRAILER_LEN];
        t[..8].copy_from_slice(MAGIC);
        t[8..16].copy_from_slice(&self.segment.to_le_bytes());
        t[16..20].copy_from_slice(&self.count.to_le_bytes());
        t[20..24].copy_from_slice(&self.data_len.to_le_bytes());
        t[24..28].copy_from_slice(&self.index_crc.to_le_bytes());
        let crc = crc32fast::hash(&t[..28]);
        t[28..32].copy_from_slice(&crc.to_le_bytes());
        t
    }

    /// Parse the last [`TRAILER_LEN`] bytes of an object of `object_len` bytes.
    pub fn parse(bytes: &[u8], object_len: u64) -> Result<Trailer, FormatError> {
        let t: &[u8; TRAILER_LEN] = bytes.try_into().map_err(|_| {
            FormatError(format!(
                "the trailer is {} bytes, not {TRAILER_LEN}",
                bytes.len()
            ))
        })?;
        if &t[..8] != MAGIC {
            return Err(FormatError("no segment trailer (bad magic)".into()));
        }
        let want = le_u32(&t[28..32]);
        if crc32fast::hash(&t[..28]) != want {
            return Err(FormatError("the trailer's checksum does not match".into()));
        }
        let trailer = Trailer {
            segment: u64::from_le_bytes(t[8..16].try_into().unwrap_or_default()),
            count: le_u32(&t[16..20]),
            data_len: le_u32(&t[20..24]),
            index_crc: le_u32(&t[24..28]),
        };
        if trailer.object_len() != object_len {
            return Err(FormatError(format!(
                "the trailer describes {} bytes but the object has {object_len}",
                trailer.object_len()
            )));
        }
        Ok(trailer)
    }
}

/// The little-endian u32 in `w`: four bytes cut from a fixed-size record by a constant range,
/// which rustc and clippy check against the record's length (so the 0 is never taken).
fn le_u32(w: &[u8]) -> u32 {
    w.try_into().map_or(0, u32::from_le_bytes)
}

/// The index bytes of `entries`.
pub fn encode_index(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for e in entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.crc.to_le_bytes());
    }
    out
}

/// Parse and check the index bytes described by `trailer`: the checksum, entries sorted,
/// not overlapping and inside the data.
pub fn parse_index(bytes: &[u8], trailer: &Trailer) -> Result<Vec<Entry>, FormatError> {
    if bytes.len() as u64 != trailer.index_len() {
        return Err(FormatError(format!(
            "the index is {} bytes, the trailer says {}",
            bytes.len(),
            trailer.index_len()
        )));
    }
    if crc32fast::hash(bytes) != trailer.index_crc {
        return Err(FormatError("the index's checksum does not match".into()));
    }
    let mut entries = Vec::with_capacity(trailer.count as usize);
    let mut end = 0u64;
    for c in bytes.as_chunks::<ENTRY_LEN>().0 {
        let e = Entry {
            offset: le_u32(&c[0..4]),
            len: le_u32(&c[4..8]),
            crc: le_u32(&c[8..12]),
        };
        let e_end = e.offset as u64 + e.len as u64;
        if (e.offset as u64) < end || e_end > trailer.data_len as u64 {
            return Err(FormatError(format!(
                "index entry {} (offset {}, {} bytes) overlaps the one before it or passes \
                 the data's end ({})",
                entries.len(),
                e.offset,
                e.len,
                trailer.data_len
            )));
        }
        end = e_end;
        entries.push(e);
    }
    Ok(entries)
}

/// A whole object's bytes parsed: trailer and index, every extent's checksum verified.
pub fn verify_object(bytes: &[u8]) -> Result<(Trailer, Vec<Entry>), FormatError> {
    let Some((body, tail)) = bytes.split_last_chunk::<TRAILER_LEN>() else {
        return Err(FormatError(format!(
            "the object is {} bytes, shorter than a trailer",
            bytes.len()
        )));
    };
    let trailer = Trailer::parse(tail, bytes.len() as u64)?;
    // Trailer::parse checked data_len + index + trailer against the object's length.
    let Some((data, index)) = body.split_at_checked(trailer.data_len as usize) else {
        return Err(FormatError(format!(
            "the trailer's {} bytes of data pass the object's end",
            trailer.data_len
        )));
    };
    let entries = parse_index(index, &trailer)?;
    for e in &entries {
        let Some(extent) = e.bytes(data) else {
            return Err(FormatError(format!(
                "the extent at offset {} ({} bytes) passes the data's end",
                e.offset, e.len
            )));
        };
        if crc32fast::hash(extent) != e.crc {
            return Err(FormatError(format!(
                "the extent at offset {} ({} bytes) fails its checksum",
                e.offset, e.len
            )));
        }
    }
    Ok((trailer, entries))
}

/// A segment being filled.
#[derive(Debug, Default)]
pub struct Builder {
    /// Data so far.
    pub data: Vec<u8>,
    /// One entry per extent appended.
    pub entries: Vec<Entry>,
}

impl Builder {
    /// Append an extent; returns its offset. The caller keeps the data under 4 GiB.
    pub fn push(&mut self, bytes: &[u8]) -> u32 {
        let offset = self.data.len() as u32;
        self.data.extend_from_slice(bytes);
        self.entries.push(Entry {
            offset,
            len: bytes.len() as u32,
            crc: crc32fast::hash(bytes),
        });
        offset
    }

    /// The object's bytes for segment `segment`: data, index, trailer.
    pub fn finish(mut self, segment: u64) -> (Vec<u8>, Vec<Entry>) {
        let index = encode_index(&self.entries);
        let trailer = Trailer {
            segment,
            count: self.entries.len() as u32,
            data_len: self.data.len() as u32,
            index_crc: crc32fast::hash(&index),
        };
        self.data.extend_from_slice(&index);
        self.data.extend_from_slice(&trailer.encode());
        (self.data, self.entries)
    }
}

/// Find the entry that starts at `offset`.
pub fn find(entries: &[Entry], offset: u32) -> Option<Entry> {
    entries
        .binary_search_by_key(&offset, |e| e.offset)
        .ok()
        .and_then(|i| entries.get(i))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn build(extents: &[Vec<u8>], seg: u64) -> (Vec<u8>, Vec<Entry>) {
        let mut b = Builder::default();
        for e in extents {
            b.push(e);
        }
        b.finish(seg)
    }

    proptest! {
        #[test]
        fn objects_round_trip(extents in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20), seg in any::<u64>()) {
            let (obj, entries) = build(&extents, seg);
            let (t, parsed) = verify_object(&obj).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(t.segment, seg);
            prop_assert_eq!(&parsed, &entries);
            for (e, want) in parsed.iter().zip(&extents) {
                prop_assert_eq!(&obj[e.offset as usize..(e.offset + e.len) as usize], &want[..]);
            }
        }

        #[test]
        fn any_flipped_byte_is_caught(extents in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..100), 1..8), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let (mut obj, _) = build(&extents, 7);
            let i = at.index(obj.len());
            obj[i] ^= 1 << bit;
            prop_assert!(verify_object(&obj).is_err());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = verify_object(&bytes);
        }

        #[test]
        fn truncation_is_caught(extents in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..100), 1..8), cut in 1usize..64) {
            let (obj, _) = build(&extents, 3);
            let cut = cut.min(obj.len());
            prop_assert!(verify_object(&obj[..obj.len() - cut]).is_err());
            prop_assert!(verify_object(&obj[cut..]).is_err());
        }
    }
}
