//! One slot of the device (`struct zram_table_entry` in drivers/block/zram/zram_drv.h): what it
//! holds ([`Slot`]), its flags (zram's `enum zram_pageflags`), its algorithm priority and last
//! access; the same-filled test (`page_same_filled`), and the errors that name a slot.

use super::arena::Handle;
use crate::error::BlkError;

/// One slot's contents (`zram_table_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Never written, or freed: reads as zeros.
    Empty,
    /// One 8-byte word repeated over the page.
    Same(u64),
    /// An arena object of `len` bytes: compressed, or raw when `len` is a whole page.
    Stored {
        /// The object.
        handle: Handle,
        /// Its length.
        len: u16,
    },
    /// Written back: the page, uncompressed, is block `block` of the backing file
    /// (`ZRAM_WB`).
    Written {
        /// The block.
        block: u64,
    },
}

impl Slot {
    /// Whether the slot holds a raw (huge) slot of `slot_size` bytes.
    pub fn is_huge(&self, slot_size: usize) -> bool {
        matches!(self, Slot::Stored { len, .. } if *len as usize == slot_size)
    }
}

/// Slot flags (zram's `enum zram_pageflags`).
pub mod flag {
    /// Marked idle by `idle` (the actions' `mark_idle`) and not accessed since
    /// (`ZRAM_IDLE`).
    pub const IDLE: u8 = 1;
    /// Every recompression algorithm failed to save memory on it; not tried again until it is
    /// rewritten (`ZRAM_INCOMPRESSIBLE`).
    pub const INCOMPRESSIBLE: u8 = 2;
    /// Recompressed with a secondary algorithm (`ZRAM_RECOMP`); the entry's priority names it.
    pub const RECOMP: u8 = 4;
}

/// One slot with its flags and last access (`zram_table_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) slot: Slot,
    pub(crate) flags: u8,
    /// The algorithm the object is compressed with: 0 the primary, 1 to 3 a
    /// `recomp_algorithm` (zram's `ZRAM_COMP_PRIORITY` bits).
    pub(crate) prio: u8,
    /// Seconds on the store's clock at the last read or write.
    pub(crate) ac_time: u64,
}

impl Entry {
    pub(crate) const EMPTY: Entry = Entry {
        slot: Slot::Empty,
        flags: 0,
        prio: 0,
        ac_time: 0,
    };

    pub(crate) fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// The repeated word if `page` is one 8-byte word over and over (zram's `page_same_filled`):
/// stored as the word. A length that is not whole words is never same-filled. The one copy:
/// the bench's zram model counts same-filled pages with it too.
pub fn same_filled(page: &[u8]) -> Option<u64> {
    let mut words = page.chunks_exact(8);
    if !words.remainder().is_empty() {
        return None;
    }
    let first = words.next()?;
    if words.all(|w| w == first) {
        let mut b = [0u8; 8];
        b.copy_from_slice(first);
        Some(u64::from_ne_bytes(b))
    } else {
        None
    }
}

pub(crate) fn fill_same(word: u64, start: usize, out: &mut [u8]) {
    let b = word.to_ne_bytes();
    for (i, o) in out.iter_mut().enumerate() {
        *o = b[(start + i) % 8];
    }
}

/// A reported range of the device (block status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Start in bytes.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Reads as zeros and holds no memory (never written, discarded, or a zero page).
    pub hole: bool,
}

pub(crate) fn corrupt(message: &str) -> BlkError {
    BlkError::Corrupt {
        page: 0,
        message: message.to_string(),
    }
}

pub(crate) fn with_page(mut e: BlkError, index: usize) -> BlkError {
    if let BlkError::Corrupt { page, .. } | BlkError::Decompress { page, .. } = &mut e {
        *page = index as u64;
    }
    e
}
