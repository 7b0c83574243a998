//! The block store: zram's device model (drivers/block/zram/zram_drv.c) without the block layer.
//!
//! * The device is an array of slots (`zram->table`), each under its own lock
//!   (`zram_slot_lock`), so clients writing different pages never wait for each other. A slot is
//!   empty, *same-filled* (one repeated 8-byte word, stored as the word with no allocation:
//!   `page_same_filled`, `ZRAM_SAME`), or an object in the [`Arena`] with its length; an object
//!   a page long is a *huge* page stored raw (`ZRAM_HUGE`).
//! * Requests are split by page (`zram_bio_read`/`zram_bio_write`). A partial page is read,
//!   modified and written back under its slot lock (`zram_bvec_write`'s partial path). Whole
//!   pages of one request are compressed as one batch on the streams, outside any slot lock,
//!   then each is stored under its slot's lock (as `zram_write_page` compresses before taking
//!   the slot lock).
//! * A page whose compressed size reaches the arena's huge class size is stored raw
//!   (`comp_len >= huge_class_size`), counted in `huge_pages` and `huge_pages_since`.
//! * At `mem_limit` a write fails with [`BlkError::NoSpace`]; the page that failed keeps its old
//!   contents and pages written before it in the same request stay written (zram fails the bio
//!   the same way; NBD gives no atomicity across a request either).
//! * Discard frees whole pages only, partial pages at the ends are left alone, and every page
//!   in the range counts in `notify_free` (`zram_bio_discard`). Write-zeroes frees whole pages
//!   too (they read back as zeros and report as holes) and zero-fills partial ends.
//!
//! * Each slot carries zram's flags and its last access time (`ac_time`): a read or a write
//!   clears [`flag::IDLE`] and stamps the time from the store's [`Clock`], which the
//!   actions' `idle` reads (zram's `idle` attribute).
//!
//! * What the actions above need (writeback, recompression, idle aging, the schedule) is this
//!   type's crate-visible interface: the slots under their locks ([`Store::entries`]), a slot
//!   decoded ([`Store::load`]), released ([`Store::release`]) or written back
//!   ([`Store::write_back_slot`]), its flags with their counters ([`Store::set_flag`]), the
//!   algorithms, the arena, the writeback budget. The schedule's policy is a value the device
//!   holds for the actions ([`Store::set_policy`], `PolicyState`) and shows in `stat`; the
//!   device never runs it.
//!
//! * Staging buffers come from the engine's page pool ([`PagePool`], EROFS's reserved pages for
//!   decompression; `page_pool=N`, off by default): a read takes two pool pages at the first
//!   page that needs them and reuses them for the rest of the request: a compressed object's
//!   copy, and a bounce page that part of a page decodes (or a huge or written-back page is
//!   read) into; a whole page decodes straight into the caller's buffer, as EROFS decodes into
//!   page-cache pages. A write batch compresses each page into a pool page. An empty pool
//!   falls back to the allocator, never waits; `stat` counts hits, misses and fallbacks.
//!
//! * Slot size: 4 KiB by default, zram's only one (its slots are `PAGE_SIZE`). Beyond zram,
//!   `slot_size=8K|16K|32K` makes a slot several pages, compressed alone as one object, so a
//!   compressor sees more context (nbdkit's `allocator=zstd` compresses 32 KiB pages for the
//!   same reason): everything above — same-filled words, huge (raw) slots, the split by slot,
//!   read-modify-write of partial slots, discard of whole slots — is per slot, and the arena
//!   is built for objects up to the slot size ([`Arena::with_max_object`]: whole pages plus a
//!   tail in zsmalloc's classes). The NBD export advertises the slot as its preferred block
//!   size (`wring blk start`). In this module
//!   and its siblings "page" means "slot" where a slot is meant. The price: a partial write
//!   decodes and encodes a whole slot, and a 4 KiB read decodes a whole slot.
//!
//! Lock order: a slot lock, then an arena class lock; never two slot locks at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use wring_engine::clock::{Clock, SystemClock};
use wring_engine::pool::PagePool;

use super::algos::Algorithms;
use super::arena::Arena;
use super::backing::{Backing, WbError, Writeback};
use super::policy::PolicyState;
use super::slot::{corrupt, fill_same, flag, same_filled, with_page, Entry, Extent, Slot};
use super::staging::{segments, Seg, Staging};
use super::stats::{BdStat, Counters, IoStat, MmStat, Stat};
use super::streams::{PageJob, Streams};
use crate::error::BlkError;
use crate::options::{check_slot_size, Schedule, PAGE_SIZE};
use crate::report::ScheduleStat;
use crate::sync::{lock, Mutex, MutexGuard};

/// Pages compressed or decompressed as one batch.
const CHUNK: usize = 32;

/// What a page becomes.
#[derive(Debug, Clone, Copy)]
enum New<'a> {
    Same(u64),
    Bytes(&'a [u8]),
}

/// A compressed RAM block device.
pub struct Store {
    size: u64,
    /// Bytes per slot: [`PAGE_SIZE`] (zram's) or a multiple of it up to 32 KiB.
    slot_size: usize,
    slots: Vec<Mutex<Entry>>,
    arena: Arena,
    /// The primary algorithm and the `recomp_algorithm`s.
    algos: Algorithms,
    /// The backing file and the writeback budget.
    wb: Writeback,
    counters: Counters,
    mem_limit: AtomicU64,
    clock: Arc<dyn Clock>,
    /// The scheduled policy and its last round, for the actions' schedule.
    policy: Mutex<PolicyState>,
    /// Staging pages for reads (the compressed copy and its decoded page) and for the
    /// write path's compressed output (`page_pool`; 0 pages: every page from the allocator).
    pool: std::sync::Arc<PagePool>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("size", &self.size)
            .field("algorithm", &self.algos.primary().algorithm())
            .finish()
    }
}

impl Store {
    /// A device of `size` bytes (rounded up to whole pages, as zram's `disksize`), compressing
    /// on `streams`, limited to `mem_limit` bytes of arena (0 = no limit).
    pub fn new(size: u64, mem_limit: u64, streams: Box<dyn Streams>) -> Result<Store, BlkError> {
        Store::with_slot_size(size, PAGE_SIZE, mem_limit, streams)
    }

    /// As [`Store::new`] with slots of `slot_size` bytes (see [`crate::SLOT_SIZES`]);
    /// the size is rounded up to whole slots.
    pub fn with_slot_size(
        size: u64,
        slot_size: usize,
        mem_limit: u64,
        streams: Box<dyn Streams>,
    ) -> Result<Store, BlkError> {
        check_slot_size(slot_size)?;
        let pages = size.div_ceil(slot_size as u64);
        if pages == 0 {
            return Err(BlkError::Option(
                "the device size must be at least 1 byte".into(),
            ));
        }
        let n = usize::try_from(pages)
            .map_err(|_| BlkError::Option(format!("a size of {size} bytes is too large")))?;
        let mut slots = Vec::new();
        slots.try_reserve_exact(n).map_err(|_| {
            BlkError::Option(format!(
                "could not allocate the slot table for {n} pages; choose a smaller size"
            ))
        })?;
        slots.extend((0..n).map(|_| Mutex::new(Entry::EMPTY)));
        Ok(Store {
            size: pages * slot_size as u64,
            slot_size,
            slots,
            arena: Arena::with_max_object(slot_size),
            algos: Algorithms::new(streams),
            wb: Writeback::default(),
            counters: Counters::default(),
            mem_limit: AtomicU64::new(mem_limit),
            clock: Arc::new(SystemClock::default()),
            policy: Mutex::new(PolicyState::default()),
            pool: PagePool::new(0),
        })
    }

    /// Add a recompression algorithm at `prio` (1 to 3), before the store is shared.
    pub fn set_recomp(&mut self, prio: u8, streams: Box<dyn Streams>) -> Result<(), BlkError> {
        self.algos.set(prio, streams)
    }

    /// Add a recompression algorithm live at the lowest free priority; returns it.
    pub fn install_recomp(&self, streams: Box<dyn Streams>) -> Result<u8, BlkError> {
        self.algos.install(streams)
    }

    /// The primary algorithm and the secondary ones.
    pub(crate) fn algorithms(&self) -> &Algorithms {
        &self.algos
    }

    /// One slot's algorithm priority (0 the primary).
    pub fn priority(&self, page: usize) -> Option<u8> {
        self.slots.get(page).map(|s| lock(s).prio)
    }

    /// Read access times from `clock` instead of the monotonic clock (before the store is
    /// shared; tests move a [`ManualClock`](wring_engine::clock::ManualClock)).
    pub fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// Device size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes per slot (`slot_size`).
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Whether a slot holds a raw (huge) slot on this device.
    pub(crate) fn is_huge(&self, slot: &Slot) -> bool {
        slot.is_huge(self.slot_size)
    }

    /// Split a request by this device's slots.
    fn segments(&self, offset: u64, len: usize) -> impl Iterator<Item = Seg> {
        segments(offset, len, self.slot_size)
    }

    /// Staging for `n` whole slots: pool pages for 4 KiB slots, a heap buffer for larger ones.
    fn staging(&self, n: usize) -> Staging {
        if self.slot_size == PAGE_SIZE {
            Staging::Pool(self.pool.alloc(n * PAGE_SIZE))
        } else {
            Staging::Heap(vec![0u8; n * self.slot_size])
        }
    }

    /// The arena (for its class table and huge class size).
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// A copy of one slot's state.
    pub fn slot(&self, page: usize) -> Option<Slot> {
        self.slots.get(page).map(|s| lock(s).slot)
    }

    /// One slot's flags ([`flag`]).
    pub fn flags(&self, page: usize) -> Option<u8> {
        self.slots.get(page).map(|s| lock(s).flags)
    }

    /// Set or clear flag `f` on a locked entry, keeping its counter.
    pub(crate) fn set_flag(&self, e: &mut Entry, f: u8, on: bool) {
        if e.has(f) == on {
            return;
        }
        let counter = match f {
            flag::IDLE => &self.counters.idle_pages,
            flag::INCOMPRESSIBLE => &self.counters.incompressible_pages,
            flag::RECOMP => &self.counters.recomp_pages,
            _ => return,
        };
        if on {
            e.flags |= f;
            Counters::add(counter, 1);
        } else {
            e.flags &= !f;
            Counters::sub(counter, 1);
        }
    }

    /// Whole seconds on the store's clock (zram stamps `ac_time` at that resolution, which is
    /// all `idle SECONDS` needs).
    pub(crate) fn now(&self) -> u64 {
        self.clock.now().as_secs()
    }

    /// A read or write of the page (`zram_accessed`): no longer idle, stamped now.
    fn accessed(&self, e: &mut Entry) {
        self.set_flag(e, flag::IDLE, false);
        e.ac_time = self.now();
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), BlkError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => {
                Counters::add(&self.counters.invalid_io, 1);
                Err(BlkError::OutOfRange {
                    offset,
                    len,
                    size: self.size,
                })
            }
        }
    }

    pub(crate) fn limit_pages(&self) -> u64 {
        self.mem_limit
            .load(Ordering::Acquire)
            .div_ceil(PAGE_SIZE as u64)
    }

    /// Read `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), BlkError> {
        self.check(offset, buf.len() as u64)?;
        Counters::add(&self.counters.num_reads, 1);
        let r = self.read_inner(offset, buf);
        if r.is_err() {
            Counters::add(&self.counters.failed_reads, 1);
        }
        r
    }

    fn read_inner(&self, offset: u64, buf: &mut [u8]) -> Result<(), BlkError> {
        // Two pool pages, taken at the first page that needs them and reused for every page
        // of the request: the compressed copy and the page it decodes into.
        let mut staging: Option<Staging> = None;
        let mut rest = buf;
        for s in self.segments(offset, rest.len()) {
            let (out, tail) = std::mem::take(&mut rest).split_at_mut(s.len);
            rest = tail;
            self.read_page(s, out, &mut staging)?;
        }
        Ok(())
    }

    /// Read one segment into `out`. The slot is snapshot under its lock (a compressed object
    /// copied into a pool page), then decoded outside it. A whole page decodes straight into
    /// `out`, the caller's page (as EROFS decompresses into page-cache pages); part of a page
    /// decodes into the second pool page, a bounce page (EROFS's reserved pages), and is
    /// copied from there. Raw (huge) and written-back pages are read the same way.
    fn read_page(
        &self,
        s: Seg,
        out: &mut [u8],
        staging: &mut Option<Staging>,
    ) -> Result<(), BlkError> {
        let mut e = lock(&self.slots[s.page]);
        self.accessed(&mut e);
        let (comp, bounce) = match e.slot {
            Slot::Empty => {
                out.fill(0);
                return Ok(());
            }
            Slot::Same(w) => {
                fill_same(w, s.start, out);
                return Ok(());
            }
            // A whole raw page needs no staging: it is copied straight out.
            Slot::Stored { handle, len } if s.whole() && len as usize == self.slot_size => {
                self.arena.read(handle, out);
                return Ok(());
            }
            Slot::Written { block } if s.whole() => {
                return self
                    .read_back_block(block, out)
                    .map_err(|err| with_page(err, s.page));
            }
            _ => self.staging_pages(staging, s.page)?,
        };
        let page: &mut [u8] = if s.whole() { &mut *out } else { &mut *bounce };
        let comp_len = match e.slot {
            Slot::Stored { handle, len } if len as usize == self.slot_size => {
                self.arena.read(handle, page);
                None
            }
            Slot::Stored { handle, len } => {
                let len = usize::from(len).min(comp.len());
                self.arena.read(handle, &mut comp[..len]);
                Some(len)
            }
            Slot::Written { block } => {
                self.read_back_block(block, page)
                    .map_err(|err| with_page(err, s.page))?;
                None
            }
            Slot::Empty | Slot::Same(_) => None,
        };
        let prio = e.prio;
        drop(e);
        if let Some(len) = comp_len {
            self.algos.decode(prio, &comp[..len], page, s.page)?;
        }
        if !s.whole() {
            out.copy_from_slice(&bounce[s.start..s.start + s.len]);
        }
        Ok(())
    }

    /// The request's two staging pages from the pool (taken at first use): a compressed
    /// object's copy, and the bounce page part of a page decodes into.
    fn staging_pages<'a>(
        &self,
        staging: &'a mut Option<Staging>,
        page: usize,
    ) -> Result<(&'a mut [u8], &'a mut [u8]), BlkError> {
        let buf = staging.get_or_insert_with(|| self.staging(2));
        let mut pages = buf.slots_mut(self.slot_size);
        match (pages.next(), pages.next()) {
            (Some(comp), Some(page)) => Ok((comp, page)),
            _ => Err(with_page(
                corrupt("the page pool gave no staging pages"),
                page,
            )),
        }
    }

    /// Write `data` at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), BlkError> {
        self.check(offset, data.len() as u64)?;
        Counters::add(&self.counters.num_writes, 1);
        let r = self.write_inner(offset, data);
        if r.is_err() {
            Counters::add(&self.counters.failed_writes, 1);
        }
        r
    }

    fn write_inner(&self, offset: u64, data: &[u8]) -> Result<(), BlkError> {
        let mut segs = self.segments(offset, data.len()).peekable();
        let mut chunk: Vec<Seg> = Vec::with_capacity(CHUNK);
        let mut pos = 0;
        while segs.peek().is_some() {
            chunk.clear();
            chunk.extend(segs.by_ref().take(CHUNK));
            let len: usize = chunk.iter().map(|s| s.len).sum();
            self.write_chunk(&chunk, &data[pos..pos + len])?;
            pos += len;
        }
        Ok(())
    }

    /// Write one chunk of segments from `data` (their bytes in order). Whole pages that are
    /// not same-filled are compressed as one batch into staging pages from the page pool
    /// (one page each), then each is stored under its slot's lock.
    fn write_chunk(&self, chunk: &[Seg], data: &[u8]) -> Result<(), BlkError> {
        let limit = self.arena.huge_class_size() - 1;
        let mut pos = 0;
        let pieces: Vec<&[u8]> = chunk
            .iter()
            .map(|s| {
                let p = &data[pos..pos + s.len];
                pos += s.len;
                p
            })
            .collect();
        let which: Vec<usize> = (0..chunk.len())
            .filter(|&i| chunk[i].whole() && same_filled(pieces[i]).is_none())
            .collect();
        let mut staging = self.staging(which.len());
        let mut jobs: Vec<PageJob<'_>> = which
            .iter()
            .zip(staging.slots_mut(self.slot_size))
            .map(|(&i, o)| {
                let n = limit.min(o.len());
                PageJob::new(pieces[i], &mut o[..n])
            })
            .collect();
        self.algos.primary().compress(&mut jobs);
        let results: Vec<Option<Result<Option<usize>, BlkError>>> =
            jobs.into_iter().map(|j| j.result).collect();
        let outs: Vec<&[u8]> = staging.slots(self.slot_size).collect();
        let mut results = which
            .into_iter()
            .zip(outs.into_iter().zip(results))
            .peekable();
        for (i, s) in chunk.iter().enumerate() {
            if !s.whole() {
                self.write_partial(*s, pieces[i])?;
                continue;
            }
            let new = match results.next_if(|(w, _)| *w == i) {
                Some((_, (out, r))) => match r {
                    Some(Ok(Some(n))) => New::Bytes(&out[..n.min(out.len())]),
                    Some(Ok(None)) => New::Bytes(pieces[i]),
                    Some(Err(e)) => return Err(e),
                    None => return Err(corrupt("not compressed")),
                },
                None => match same_filled(pieces[i]) {
                    Some(w) => New::Same(w),
                    None => New::Bytes(pieces[i]),
                },
            };
            let mut e = lock(&self.slots[s.page]);
            self.replace(&mut e, new)?;
            self.accessed(&mut e);
        }
        Ok(())
    }

    /// Read-modify-write of part of one slot, under its slot lock.
    fn write_partial(&self, s: Seg, bytes: &[u8]) -> Result<(), BlkError> {
        let mut e = lock(&self.slots[s.page]);
        let mut bufs = self.staging(2);
        let mut bufs = bufs.slots_mut(self.slot_size);
        let (Some(page), Some(out)) = (bufs.next(), bufs.next()) else {
            return Err(with_page(corrupt("no staging for a partial write"), s.page));
        };
        self.load(&e, s.page, page)?;
        page[s.start..s.start + s.len].copy_from_slice(bytes);
        let new = self.encode(page, out)?;
        self.replace(&mut e, new)?;
        self.accessed(&mut e);
        Ok(())
    }

    /// Decode one slot into `page`, a whole slot.
    pub(crate) fn load(
        &self,
        e: &Entry,
        page_index: usize,
        page: &mut [u8],
    ) -> Result<(), BlkError> {
        match e.slot {
            Slot::Empty => page.fill(0),
            Slot::Same(w) => fill_same(w, 0, page),
            Slot::Stored { handle, len } if len as usize == self.slot_size => {
                self.arena.read(handle, page)
            }
            Slot::Written { block } => self.read_back_block(block, page)?,
            Slot::Stored { handle, len } => {
                let mut comp = vec![0u8; len as usize];
                self.arena.read(handle, &mut comp);
                self.algos.decode(e.prio, &comp, page, page_index)?;
            }
        }
        Ok(())
    }

    /// What a whole page becomes: its word, its compressed bytes in `out`, or itself raw.
    fn encode<'a>(&self, page: &'a [u8], out: &'a mut [u8]) -> Result<New<'a>, BlkError> {
        if let Some(w) = same_filled(page) {
            return Ok(New::Same(w));
        }
        let limit = self.arena.huge_class_size() - 1;
        let mut jobs = [PageJob::new(page, &mut out[..limit])];
        self.algos.primary().compress(&mut jobs);
        let r = jobs[0].result.take();
        match r {
            Some(Ok(Some(n))) => Ok(New::Bytes(&out[..n])),
            Some(Ok(None)) => Ok(New::Bytes(page)),
            Some(Err(e)) => Err(e),
            None => Err(corrupt("not compressed")),
        }
    }

    /// Store `new` in a locked slot, then free what it held. On failure the slot is unchanged.
    fn replace(&self, e: &mut Entry, new: New<'_>) -> Result<(), BlkError> {
        let next = match new {
            New::Same(w) => Slot::Same(w),
            New::Bytes(b) => {
                let handle = self
                    .arena
                    .store(b, self.limit_pages())
                    .map_err(BlkError::NoSpace)?;
                Slot::Stored {
                    handle,
                    len: b.len() as u16,
                }
            }
        };
        self.release(e);
        e.slot = next;
        self.account(&next);
        Ok(())
    }

    pub(crate) fn account(&self, slot: &Slot) {
        let c = &self.counters;
        match *slot {
            Slot::Empty => return,
            Slot::Same(_) => Counters::add(&c.same_pages, 1),
            Slot::Stored { len, .. } => {
                Counters::add(&c.compr_data_size, len as u64);
                if self.is_huge(slot) {
                    Counters::add(&c.huge_pages, 1);
                    Counters::add(&c.huge_pages_since, 1);
                }
            }
            Slot::Written { .. } => Counters::add(&c.bd_count, 1),
        }
        Counters::add(&c.pages_stored, 1);
    }

    /// Free what a locked slot holds and make it empty, flags cleared (`zram_slot_free`).
    pub(crate) fn release(&self, e: &mut Entry) {
        for f in [flag::IDLE, flag::INCOMPRESSIBLE, flag::RECOMP] {
            self.set_flag(e, f, false);
        }
        e.prio = 0;
        let c = &self.counters;
        let slot = &mut e.slot;
        match *slot {
            Slot::Empty => return,
            Slot::Same(_) => Counters::sub(&c.same_pages, 1),
            Slot::Stored { handle, len } => {
                self.arena.free(handle);
                Counters::sub(&c.compr_data_size, len as u64);
                if self.is_huge(slot) {
                    Counters::sub(&c.huge_pages, 1);
                }
            }
            Slot::Written { block } => {
                self.wb.free(block);
                Counters::sub(&c.bd_count, 1);
            }
        }
        Counters::sub(&c.pages_stored, 1);
        *slot = Slot::Empty;
    }

    fn whole_pages(&self, offset: u64, len: u64) -> std::ops::Range<usize> {
        let slot = self.slot_size as u64;
        let first = offset.div_ceil(slot) as usize;
        let end = ((offset + len) / slot) as usize;
        first..end.max(first)
    }

    /// Discard (trim): free the whole pages in the range.
    pub fn discard(&self, offset: u64, len: u64) -> Result<(), BlkError> {
        self.check(offset, len)?;
        for page in self.whole_pages(offset, len) {
            self.release(&mut lock(&self.slots[page]));
            Counters::add(&self.counters.notify_free, 1);
        }
        Ok(())
    }

    /// Write zeros: whole pages become holes, partial ends are zero-filled.
    pub fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), BlkError> {
        self.check(offset, len)?;
        Counters::add(&self.counters.num_writes, 1);
        let whole = self.whole_pages(offset, len);
        let zeros = vec![0u8; self.slot_size];
        let r = (|| {
            for s in self.segments(offset, len as usize) {
                if whole.contains(&s.page) {
                    self.release(&mut lock(&self.slots[s.page]));
                } else {
                    self.write_partial(s, &zeros[..s.len])?;
                }
            }
            Ok(())
        })();
        if r.is_err() {
            Counters::add(&self.counters.failed_writes, 1);
        }
        r
    }

    /// Block status of the range: runs of data and holes, clipped to the range.
    pub fn extents(&self, offset: u64, len: u64) -> Result<Vec<Extent>, BlkError> {
        self.check(offset, len)?;
        let mut out: Vec<Extent> = Vec::new();
        for s in self.segments(offset, len as usize) {
            let slot = lock(&self.slots[s.page]).slot;
            let hole = matches!(slot, Slot::Empty | Slot::Same(0));
            let start = s.page as u64 * self.slot_size as u64 + s.start as u64;
            match out.last_mut() {
                Some(e) if e.hole == hole => e.len += s.len as u64,
                _ => out.push(Extent {
                    offset: start,
                    len: s.len as u64,
                    hole,
                }),
            }
        }
        Ok(out)
    }

    /// Compact the arena (`compact`); returns the pages freed.
    pub fn compact(&self) -> u64 {
        self.arena.compact()
    }

    /// Free every page and zero the statistics (`reset`; the size and options stay).
    pub fn reset(&self) {
        for s in &self.slots {
            self.release(&mut lock(s));
        }
        self.arena.reset_counters();
        let c = &self.counters;
        for a in [
            &c.huge_pages_since,
            &c.failed_reads,
            &c.failed_writes,
            &c.invalid_io,
            &c.notify_free,
            &c.num_reads,
            &c.num_writes,
            &c.bd_reads,
            &c.bd_writes,
        ] {
            a.store(0, Ordering::Release);
        }
    }

    /// Set `mem_limit` in bytes (0 = none). Lowering it below what is in use frees nothing;
    /// further writes that need memory fail until use drops below it.
    pub fn set_mem_limit(&self, bytes: u64) {
        self.mem_limit.store(bytes, Ordering::Release);
    }

    /// Set the page pool to `pages` reserved pages (0 turns it off), live: growing maps and
    /// locks the new pages without stalling requests, shrinking frees idle pages now.
    pub fn set_page_pool(&self, pages: usize) {
        self.pool.set_size(pages);
    }

    /// Change the number of streams live.
    pub fn set_streams(&self, n: usize) -> Result<(), BlkError> {
        self.algos.primary().set_streams(n)
    }

    /// Use `backing` for writeback (before the store is shared). Refused with slots larger
    /// than 4 KiB: the backing file's blocks and `writeback_limit` are 4 KiB pages.
    pub fn set_backing(&mut self, backing: Backing) -> Result<(), BlkError> {
        if self.slot_size != PAGE_SIZE {
            return Err(BlkError::Option(format!(
                "slot_size={}K cannot be used with backing_dev={}: writeback writes 4 KiB \
                 blocks; drop backing_dev, or use slot_size=4K",
                self.slot_size / 1024,
                backing.path().display()
            )));
        }
        self.wb.set_file(backing);
        Ok(())
    }

    /// Set the writeback budget in pages (`None`: no limit; zram's `writeback_limit` with
    /// `writeback_limit_enable`).
    pub fn set_writeback_limit(&self, pages: Option<u64>) {
        self.wb.set_limit(pages);
    }

    /// The writeback budget left.
    pub fn writeback_limit(&self) -> Option<u64> {
        self.wb.limit()
    }

    /// The writeback state: the backing file and the budget.
    pub(crate) fn writeback_state(&self) -> &Writeback {
        &self.wb
    }

    /// Write a locked slot out to `backing` uncompressed (zram's `zram_writeback_slots`, one
    /// page): the slot then names its block, keeping its access time.
    pub(crate) fn write_back_slot(
        &self,
        backing: &Backing,
        e: &mut Entry,
        page_index: usize,
    ) -> Result<(), WbError> {
        let mut page = vec![0u8; self.slot_size];
        self.load(e, page_index, &mut page)
            .map_err(WbError::Other)?;
        let Some(block) = backing.alloc() else {
            return Err(WbError::Full(format!(
                "all {} blocks are in use",
                backing.blocks()
            )));
        };
        if let Err(err) = backing.write(block, &page) {
            backing.free(block);
            let why = format!("writing block {block} failed: {err}");
            return Err(if err.raw_os_error() == Some(libc::ENOSPC) {
                WbError::Full(why)
            } else {
                WbError::Other(BlkError::Io {
                    what: format!("writeback to {}", backing.path().display()),
                    source: err,
                })
            });
        }
        let ac_time = e.ac_time;
        self.release(e);
        e.slot = Slot::Written { block };
        e.ac_time = ac_time;
        self.account(&e.slot);
        Counters::add(&self.counters.bd_writes, 1);
        Ok(())
    }

    /// Set or clear the scheduled policy live (`policy=`, the control request `policy`). The
    /// device only holds it: the actions' schedule runs it, its first round at once.
    pub fn set_policy(&self, policy: Option<Schedule>) {
        let mut s = lock(&self.policy);
        s.policy = policy;
        s.last_run = None;
    }

    /// The policy and its rounds, for the actions' schedule.
    pub(crate) fn policy_state(&self) -> MutexGuard<'_, PolicyState> {
        lock(&self.policy)
    }

    /// The slots, each under its own lock, by index: what the actions walk.
    pub(crate) fn entries(&self) -> &[Mutex<Entry>] {
        &self.slots
    }

    /// Read a written-back slot's block (a read, or the read half of a partial write),
    /// counted in `bd_reads`.
    fn read_back_block(&self, block: u64, page: &mut [u8]) -> Result<(), BlkError> {
        self.wb.read(block, page)?;
        Counters::add(&self.counters.bd_reads, 1);
        Ok(())
    }

    /// Statistics now.
    pub fn stat(&self) -> Stat {
        let c = &self.counters;
        // Per-page counters in 4 KiB pages (a slot is slot_size / 4096 of them).
        let per = (self.slot_size / PAGE_SIZE) as u64;
        let g = |a: &AtomicU64| Counters::get(a) * per;
        Stat {
            disksize: self.size,
            slot_size: self.slot_size,
            comp_algorithm: self.algos.primary().algorithm(),
            streams: self.algos.primary().streams(),
            mm_stat: MmStat {
                orig_data_size: g(&c.pages_stored) * PAGE_SIZE as u64,
                compr_data_size: Counters::get(&c.compr_data_size),
                mem_used_total: self.arena.total_pages() * PAGE_SIZE as u64,
                mem_limit: self.mem_limit.load(Ordering::Acquire),
                mem_used_max: self.arena.max_pages() * PAGE_SIZE as u64,
                same_pages: g(&c.same_pages),
                pages_compacted: self.arena.pages_compacted(),
                huge_pages: g(&c.huge_pages),
                huge_pages_since: g(&c.huge_pages_since),
            },
            idle_pages: g(&c.idle_pages),
            recomp_algorithms: self.algos.names(),
            recompressed_pages: g(&c.recomp_pages),
            incompressible_pages: g(&c.incompressible_pages),
            bd_stat: BdStat {
                bd_count: g(&c.bd_count),
                bd_reads: g(&c.bd_reads),
                bd_writes: g(&c.bd_writes),
            },
            backing_dev: self.wb.file().map(|b| b.path().display().to_string()),
            writeback_limit: self.writeback_limit(),
            policy: {
                let p = lock(&self.policy);
                p.policy.as_ref().map(|s| ScheduleStat {
                    policy: s.text(),
                    rounds: p.rounds,
                    last: p.last.clone(),
                })
            },
            stream_stats: self.algos.stream_stats(),
            io_stat: IoStat {
                failed_reads: Counters::get(&c.failed_reads),
                failed_writes: Counters::get(&c.failed_writes),
                invalid_io: Counters::get(&c.invalid_io),
                notify_free: g(&c.notify_free),
            },
            num_reads: Counters::get(&c.num_reads),
            num_writes: Counters::get(&c.num_writes),
            page_pool: self.pool.stats(),
        }
    }
}
