//! Extent addresses: where an extent's stored bytes are in the bucket, packed into the one u64
//! that the filesystem's extent items already record as a data-file offset (btrfs's
//! EXTENT_DATA items record a logical byte number in the same way; here the upper half names a
//! segment object instead of a block group).
//!
//! `addr = segment << 32 | offset`: segments up to 2³² − 1 (segment 0 is never written, so
//! address 0 is never valid), offsets up to 4 GiB inside a segment.

use std::fmt;

/// The largest offset inside a segment (segments are at most 4 GiB).
pub const MAX_OFFSET: u64 = u32::MAX as u64;

/// An extent's address: segment number and byte offset inside the segment's data.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Addr(u64);

impl Addr {
    /// The address of `offset` in `segment`.
    pub fn new(segment: u32, offset: u32) -> Addr {
        Addr(((segment as u64) << 32) | offset as u64)
    }

    /// The address recorded as `raw` (an extent item's u64).
    pub fn from_raw(raw: u64) -> Addr {
        Addr(raw)
    }

    /// The u64 an extent item records.
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The segment number.
    pub fn segment(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The offset inside the segment's data.
    pub fn offset(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Debug for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.segment(), self.offset())
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "segment {} offset {}", self.segment(), self.offset())
    }
}

/// The object name of `segment` under `prefix`: `PREFIX/seg/<16 hex digits>`.
pub fn segment_key(prefix: &str, segment: u32) -> String {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        format!("seg/{:016x}", segment)
    } else {
        format!("{prefix}/seg/{:016x}", segment)
    }
}

/// The segment number named by an object's last path part (16 hex digits), if it is one.
pub fn parse_segment_name(name: &str) -> Option<u32> {
    if name.len() != 16 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(name, 16)
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(seg in any::<u32>(), off in any::<u32>()) {
            let a = Addr::new(seg, off);
            prop_assert_eq!(a.segment(), seg);
            prop_assert_eq!(a.offset(), off);
            prop_assert_eq!(Addr::from_raw(a.raw()), a);
        }

        #[test]
        fn order_is_segment_then_offset(s1 in any::<u32>(), o1 in any::<u32>(), s2 in any::<u32>(), o2 in any::<u32>()) {
            prop_assert_eq!(Addr::new(s1, o1).cmp(&Addr::new(s2, o2)), (s1, o1).cmp(&(s2, o2)));
        }

        #[test]
        fn names_round_trip(seg in any::<u32>()) {
            let key = segment_key("p/q", seg);
            let name = key.rsplit('/').next().unwrap_or_default();
            prop_assert_eq!(parse_segment_name(name), Some(seg));
        }

        #[test]
        fn names_never_panic(s in ".{0,20}") {
            let _ = parse_segment_name(&s);
        }
    }

    #[test]
    fn keys() {
        assert_eq!(segment_key("fs1", 1), "fs1/seg/0000000000000001");
        assert_eq!(segment_key("/a/b/", 0xabc), "a/b/seg/0000000000000abc");
        assert_eq!(segment_key("", 2), "seg/0000000000000002");
        assert_eq!(parse_segment_name("0000000100000000"), None);
        assert_eq!(parse_segment_name("000000000000000g"), None);
    }
}
