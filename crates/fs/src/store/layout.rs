//! How the store's records are laid out, declared once: a [`Field`] per field (its record,
//! name, offset and width), a [`Layout`] per record listing them, the accessors both a
//! record's encoder and its decoder go through, and [`RecordError`], what a decoder returns
//! for a damaged record: the record, the field and what was wrong with it.
//!
//! Mirrors the kernel's on-disk structures (btrfs_tree.h's packed structs) read and written
//! only through the accessor pair BTRFS_SETGET_FUNCS generates per field, and the field it
//! names when tree-checker.c refuses an item. A field's width is its type ([`Field<N>`]), so
//! reading a u64 from a 4-byte field does not compile; its offset is checked against the
//! record's length each time, so a short record is an error, never a panic.

use crate::error::FsError;

/// One field of a record: `N` bytes at offset `at`, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<const N: usize> {
    /// The record it belongs to ("inode", "extent item", …).
    pub record: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its offset in the record.
    pub at: usize,
}

impl<const N: usize> Field<N> {
    /// The field `name` of `record`, at offset `at`.
    pub const fn new(record: &'static str, name: &'static str, at: usize) -> Self {
        Field { record, name, at }
    }

    /// The offset just past it.
    pub const fn end(&self) -> usize {
        self.at + N
    }

    /// Its place in its record's [`Layout`].
    pub const fn span(&self) -> Span {
        Span {
            name: self.name,
            at: self.at,
            len: N,
        }
    }

    /// The error naming this field.
    pub fn error(&self, problem: Problem) -> RecordError {
        RecordError::new(self.record, self.name, problem)
    }

    /// The error for a value this field may not hold, and why.
    pub fn invalid(&self, value: impl Into<i128>, why: &'static str) -> RecordError {
        self.error(Problem::Invalid {
            value: value.into(),
            why,
        })
    }

    /// Its bytes in `b`; a record too short to hold it is an error.
    fn bytes(&self, b: &[u8]) -> Result<[u8; N], RecordError> {
        b.get(self.at..self.end())
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or_else(|| {
                self.error(Problem::Short {
                    need: self.end(),
                    have: b.len(),
                })
            })
    }

    /// Write `v` as its bytes into `buf`. Encoders size their buffers from their layout, so
    /// the field is always there; a buffer that is too short is left as it is (the
    /// round-trip tests would see the field missing).
    fn put(&self, buf: &mut [u8], v: [u8; N]) {
        if let Some(d) = buf.get_mut(self.at..self.end()) {
            d.copy_from_slice(&v);
        }
    }
}

/// A field's name and place, as its record's [`Layout`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Its name.
    pub name: &'static str,
    /// Its offset.
    pub at: usize,
    /// Its width in bytes.
    pub len: usize,
}

/// A record's fields, in order, and its length: what [`Layout::fits`] checks a record's
/// bytes against before any field is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The record's name.
    pub record: &'static str,
    /// Its length in bytes (for a record with a tail, the part before it).
    pub len: usize,
    /// Its fields, each starting where the one before ends.
    pub fields: &'static [Span],
}

impl Layout {
    /// Whether the fields tile the record: each starts where the one before ended, the last
    /// ends at its length. Checked at compile time for every layout (`const _`).
    pub const fn tiles(&self) -> bool {
        let (mut at, mut rest) = (0, self.fields);
        while let [f, tail @ ..] = rest {
            if f.at != at || f.len == 0 {
                return false;
            }
            at += f.len;
            rest = tail;
        }
        at == self.len
    }

    /// `b` holds exactly this record: the first field it is too short for, or its excess
    /// length, is the error.
    pub fn fits(&self, b: &[u8]) -> Result<(), RecordError> {
        self.holds(b)?;
        match b.len() == self.len {
            true => Ok(()),
            false => Err(self.excess(b.len())),
        }
    }

    /// `b` holds at least this record (a record with a tail: the bytes after it).
    pub fn holds(&self, b: &[u8]) -> Result<(), RecordError> {
        match self.fields.iter().find(|f| f.at + f.len > b.len()) {
            None => Ok(()),
            Some(f) => Err(RecordError::new(
                self.record,
                f.name,
                Problem::Short {
                    need: f.at + f.len,
                    have: b.len(),
                },
            )),
        }
    }

    /// The error for a record of `have` bytes, longer than this layout.
    pub fn excess(&self, have: usize) -> RecordError {
        let last = self.fields.last().map_or("", |f| f.name);
        RecordError::new(
            self.record,
            last,
            Problem::Long {
                want: self.len,
                have,
            },
        )
    }
}

/// Read a one-byte field.
pub fn get_u8(b: &[u8], f: &Field<1>) -> Result<u8, RecordError> {
    f.bytes(b).map(u8::from_le_bytes)
}

/// Read a one-byte signed field.
pub fn get_i8(b: &[u8], f: &Field<1>) -> Result<i8, RecordError> {
    f.bytes(b).map(i8::from_le_bytes)
}

/// Read a four-byte field.
pub fn get_u32(b: &[u8], f: &Field<4>) -> Result<u32, RecordError> {
    f.bytes(b).map(u32::from_le_bytes)
}

/// Read an eight-byte field.
pub fn get_u64(b: &[u8], f: &Field<8>) -> Result<u64, RecordError> {
    f.bytes(b).map(u64::from_le_bytes)
}

/// Read an eight-byte signed field.
pub fn get_i64(b: &[u8], f: &Field<8>) -> Result<i64, RecordError> {
    f.bytes(b).map(i64::from_le_bytes)
}

/// Write a one-byte field.
pub fn put_u8(buf: &mut [u8], f: &Field<1>, v: u8) {
    f.put(buf, v.to_le_bytes());
}

/// Write a one-byte signed field.
pub fn put_i8(buf: &mut [u8], f: &Field<1>, v: i8) {
    f.put(buf, v.to_le_bytes());
}

/// Write a four-byte field.
pub fn put_u32(buf: &mut [u8], f: &Field<4>, v: u32) {
    f.put(buf, v.to_le_bytes());
}

/// Write an eight-byte field.
pub fn put_u64(buf: &mut [u8], f: &Field<8>, v: u64) {
    f.put(buf, v.to_le_bytes());
}

/// Write an eight-byte signed field.
pub fn put_i64(buf: &mut [u8], f: &Field<8>, v: i64) {
    f.put(buf, v.to_le_bytes());
}

/// A damaged record: which record, which of its fields, and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{record} record: field {field}: {problem}")]
#[non_exhaustive]
pub struct RecordError {
    /// The record ("inode", "extent item", …).
    pub record: &'static str,
    /// The field.
    pub field: &'static str,
    /// What was wrong.
    pub problem: Problem,
}

impl RecordError {
    /// The error for `field` of `record`.
    pub fn new(record: &'static str, field: &'static str, problem: Problem) -> RecordError {
        RecordError {
            record,
            field,
            problem,
        }
    }

    /// The filesystem's error for this damage in a record of inode `ino` (its extent at file
    /// offset `offset`; 0 for the inode item): EIO, as btrfs answers a bad checksum, with this
    /// error as the reason.
    pub fn at(&self, ino: u64, offset: u64) -> FsError {
        FsError::Corrupt {
            ino,
            offset,
            reason: self.to_string(),
        }
    }
}

/// What was wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// The record ends before the field does.
    #[error("the record ends at byte {have}, before the field's end at {need}")]
    Short {
        /// Where the field ends.
        need: usize,
        /// The record's length.
        have: usize,
    },
    /// The record goes on past its last field.
    #[error("the record is {have} bytes, longer than its {want}")]
    Long {
        /// The record's length by its layout.
        want: usize,
        /// Its length.
        have: usize,
    },
    /// A value the field may not hold.
    #[error("invalid value {value}: {why}")]
    Invalid {
        /// The value.
        value: i128,
        /// Why it may not be there.
        why: &'static str,
    },
    /// The field's bytes are not a valid instance of what they hold (a dictionary that does
    /// not digest), as the code that parses them says.
    #[error("{why}")]
    Unreadable {
        /// The parser's words.
        why: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Field<1> = Field::new("test", "a", 0);
    const B: Field<4> = Field::new("test", "b", 1);
    const C: Field<8> = Field::new("test", "c", 5);
    const T: Layout = Layout {
        record: "test",
        len: 13,
        fields: &[A.span(), B.span(), C.span()],
    };
    const _: () = assert!(T.tiles());

    #[test]
    fn fields_round_trip_and_a_short_record_names_its_field() {
        let mut buf = vec![0; T.len];
        put_u8(&mut buf, &A, 7);
        put_u32(&mut buf, &B, 0xdead_beef);
        put_i64(&mut buf, &C, -3);
        assert_eq!(T.fits(&buf), Ok(()));
        assert_eq!(get_u8(&buf, &A), Ok(7));
        assert_eq!(get_u32(&buf, &B), Ok(0xdead_beef));
        assert_eq!(get_i64(&buf, &C), Ok(-3));
        let e = T.fits(&buf[..6]).unwrap_err();
        assert_eq!((e.record, e.field), ("test", "c"));
        assert_eq!(
            e.to_string(),
            "test record: field c: the record ends at byte 6, before the field's end at 13"
        );
        assert_eq!(get_u64(&buf[..12], &C).unwrap_err().field, "c");
        let long = [0u8; 14];
        assert_eq!(T.fits(&long).unwrap_err().field, "c");
        assert_eq!(
            A.invalid(9u8, "no such kind").to_string(),
            "test record: field a: invalid value 9: no such kind"
        );
    }

    #[test]
    fn a_gap_or_an_overlap_does_not_tile() {
        const GAP: Layout = Layout {
            fields: &[A.span(), C.span()],
            ..T
        };
        const OVER: Layout = Layout {
            len: 12,
            fields: &[A.span(), B.span(), Field::<8>::new("test", "d", 4).span()],
            ..T
        };
        let (gap, over) = (GAP, OVER);
        assert!(!gap.tiles() && !over.tiles());
    }
}
