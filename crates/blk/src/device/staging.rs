//! A request cut by slots (`zram_bio_read`/`zram_bio_write` split a bio by page), and the
//! staging buffers of whole slots its pages pass through: pool pages (the engine's page pool,
//! EROFS's reserved pages) for 4 KiB slots, a heap buffer for larger ones.

use wring_engine::pool::PageBuf;

/// A piece of a request inside one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    pub(crate) page: usize,
    pub(crate) start: usize,
    pub(crate) len: usize,
    /// Whether it covers the whole slot.
    pub(crate) whole: bool,
}

impl Seg {
    pub(crate) fn whole(&self) -> bool {
        self.whole
    }
}

/// Split `len` bytes at `offset` by slots of `slot` bytes.
pub(crate) fn segments(offset: u64, len: usize, slot: usize) -> impl Iterator<Item = Seg> {
    let end = offset + len as u64;
    let mut pos = offset;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let page = (pos / slot as u64) as usize;
        let start = (pos % slot as u64) as usize;
        let len = (slot - start).min((end - pos) as usize);
        pos += len as u64;
        Some(Seg {
            page,
            start,
            len,
            whole: start == 0 && len == slot,
        })
    })
}

/// Staging buffers of whole slots: pool pages when a slot is one page (the pool's pages are
/// not contiguous), else one heap buffer cut into slots.
pub(crate) enum Staging {
    Pool(PageBuf),
    Heap(Vec<u8>),
}

impl Staging {
    pub(crate) fn slots_mut(&mut self, slot: usize) -> impl Iterator<Item = &mut [u8]> {
        let (pool, heap) = match self {
            Staging::Pool(b) => (Some(b.pages_mut()), None),
            Staging::Heap(v) => (None, Some(v.chunks_mut(slot))),
        };
        pool.into_iter().flatten().chain(heap.into_iter().flatten())
    }

    pub(crate) fn slots(&self, slot: usize) -> impl Iterator<Item = &[u8]> {
        let (pool, heap) = match self {
            Staging::Pool(b) => (Some(b.pages()), None),
            Staging::Heap(v) => (None, Some(v.chunks(slot))),
        };
        pool.into_iter().flatten().chain(heap.into_iter().flatten())
    }
}
