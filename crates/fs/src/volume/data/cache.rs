//! The cache of decoded extents: a read of part of an extent decodes it whole, once, into pages
//! of the engine's page pool (`page_pool=N` reserves them; an extent the cache drops gives its
//! pages back), so the next small reads of it copy instead of decoding again. Two readers of
//! one extent (adjacent readahead requests share their boundary extents) decode it once.
//!
//! Mirrors the page cache btrfs's compressed reads fill (compression.c decodes a whole
//! compressed extent and fills every page cache page it covers). Differs in being small and
//! per mount (32 MiB, oldest out first) and keyed by the extent's sequence number, so a
//! rewritten extent is never served from the cache.

use std::sync::{Arc, MutexGuard};

use wring_engine::pool::PageBuf;

use crate::error::FsError;
use crate::volume::{lock, Volume, LOCK_STRIPES};

/// Bytes of decompressed extents kept for sequential small reads.
const CACHE_BYTES: usize = 32 << 20;

/// A decompressed extent in the cache.
pub(crate) struct Cached {
    ino: u64,
    idx: u64,
    seq: u64,
    /// The decoded bytes, in page pool pages (given back when the cache drops them).
    data: Arc<PageBuf>,
}

impl Volume {
    /// Decode one extent value (verifying its checksum) into its bytes, through the cache.
    pub(crate) fn decode_extent(
        &self,
        ino: u64,
        idx: u64,
        offset: u64,
        value: &[u8],
    ) -> Result<Arc<PageBuf>, FsError> {
        let h = Volume::header(ino, offset, value)?;
        if let Some(d) = self.cache_get(ino, idx, h.seq) {
            return Ok(d);
        }
        let _g = self.decode_lock(ino, idx);
        if let Some(d) = self.cache_get(ino, idx, h.seq) {
            return Ok(d);
        }
        let data = Arc::new(self.decode_pages(ino, offset, value)?);
        self.cache_put(ino, idx, h.seq, data.clone());
        Ok(data)
    }

    /// The decode lock of extent `idx` of `ino`.
    pub(crate) fn decode_lock(&self, ino: u64, idx: u64) -> MutexGuard<'_, ()> {
        let h = ino.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ idx;
        lock(&self.decode_stripes[(h as usize) % LOCK_STRIPES])
    }

    /// Drop cached extents of `ino` (all of them, or from index `from` on).
    pub(crate) fn forget_cache(&self, ino: u64, from: Option<u64>) {
        lock(&self.cache).retain(|c| c.ino != ino || from.is_some_and(|f| c.idx < f));
    }

    pub(crate) fn cache_get(&self, ino: u64, idx: u64, seq: u64) -> Option<Arc<PageBuf>> {
        let cache = lock(&self.cache);
        cache
            .iter()
            .find(|c| c.ino == ino && c.idx == idx && c.seq == seq)
            .map(|c| c.data.clone())
    }

    pub(crate) fn cache_put(&self, ino: u64, idx: u64, seq: u64, data: Arc<PageBuf>) {
        let mut cache = lock(&self.cache);
        cache.retain(|c| !(c.ino == ino && c.idx == idx));
        cache.push_back(Cached {
            ino,
            idx,
            seq,
            data,
        });
        let mut total: usize = cache.iter().map(|c| c.data.len()).sum();
        while total > CACHE_BYTES {
            match cache.pop_front() {
                Some(c) => total -= c.data.len(),
                None => break,
            }
        }
    }
}
