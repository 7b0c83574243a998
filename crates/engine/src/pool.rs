//! Mirrors EROFS's global page pool for decompression destinations (the patch "erofs: add a
//! global page pool for lz4 decompression", today's reserved pages in fs/erofs/zutil.c:
//! `__erofs_allocpage()`, `erofs_release_pages()`, `z_erofs_rsv_nrpages`); wring differs in
//! handing out whole multi-page buffers, in a resizable pool, and in keeping at most `size`
//! pool pages (free + lent out) instead of refilling the free list with any returned page.
//!
//! The pool holds `size` reserved 4 KiB pages, allocated when the size is set (the knob
//! defaults to 0: off). [`PagePool::alloc`] takes the pages for one decompressed extent from
//! the pool — a *hit* per page — and falls back to the allocator for the rest — a *miss* per
//! page, timed, and a *fallback* per buffer the pool (on) could not fill. Never a failure,
//! never a wait. Dropping the [`PageBuf`] gives its pool pages back; allocator pages, and pool
//! pages beyond a shrunk size, are freed.
//!
//! Reserved pages live in anonymous mappings of up to [`GROW_CHUNK`] pages, populated when
//! mapped and locked with mlock(2) as a whole (the kernel's pool pages cannot be reclaimed
//! either). When RLIMIT_MEMLOCK (or anything else) refuses the lock, a log line says so and
//! the pages stay reserved but unlocked. A reserved page freed by a shrink is unlocked and
//! handed back to the kernel at once (madvise DONTNEED); its mapping goes with its last page.
//! Mapping and locking happen outside the pool's lock, so a resize never stalls reads.
//!
//! The pool hands out pages, not contiguous buffers: a 128 KiB extent is 32 pages. Front ends
//! that decode into one contiguous slice decode into a reused staging buffer and scatter it
//! into the pages ([`PageBuf::copy_from`]); readers gather ranges back ([`PageBuf::read_at`]).

use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::sync::{lock, Arc, Mutex};

/// Size of one pool page.
pub const PAGE_SIZE: usize = 4096;

/// Counters of a [`PagePool`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PoolStats {
    /// The size knob: pages the pool reserves (0 = off).
    pub size: usize,
    /// Reserved pages idle in the pool.
    pub free: usize,
    /// Reserved pages lent out to live [`PageBuf`]s (allocator pages are not counted).
    pub in_use: usize,
    /// Reserved pages (free or lent) locked in memory.
    pub locked: usize,
    /// Pages served from the pool.
    pub hits: u64,
    /// Pages that had to come from the allocator.
    pub misses: u64,
    /// Buffers the pool, while on, could not fill from its reserve alone.
    pub fallbacks: u64,
    /// Time spent allocating the missed pages, in nanoseconds.
    pub alloc_nanos: u64,
}

/// One anonymous mapping holding reserved pages; unmapped when its last page is dropped.
struct Chunk {
    base: NonNull<u8>,
    pages: usize,
    locked: bool,
}

// SAFETY: a Chunk only owns its mapping (nothing thread-bound); the bytes are reached through
// `Page`s, each owning a disjoint page of it.
unsafe impl Send for Chunk {}
// SAFETY: as above; `&Chunk` gives no access to the bytes.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Map `pages` populated pages, and try to lock them; `Err` when there is no memory.
    fn map(pages: usize) -> std::io::Result<(std::sync::Arc<Chunk>, Option<std::io::Error>)> {
        let len = pages * PAGE_SIZE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let Some(base) = NonNull::new(ptr.cast::<u8>()) else {
            return Err(std::io::Error::other("mmap returned a null mapping"));
        };
        // SAFETY: `base..base+len` is the mapping just made, owned here.
        let lock_error =
            (unsafe { libc::mlock(ptr, len) } != 0).then(std::io::Error::last_os_error);
        let chunk = Chunk {
            base,
            pages,
            locked: lock_error.is_none(),
        };
        Ok((std::sync::Arc::new(chunk), lock_error))
    }

    /// The chunk's pages, each owning its part of the mapping.
    fn split(chunk: &std::sync::Arc<Chunk>) -> impl Iterator<Item = Page> + '_ {
        (0..chunk.pages).map(move |i| {
            // SAFETY: `i < pages`, so the offset stays inside the mapping.
            let at = unsafe { NonNull::new_unchecked(chunk.base.as_ptr().add(i * PAGE_SIZE)) };
            Page(Mem::Mapped {
                chunk: std::sync::Arc::clone(chunk),
                at,
            })
        })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`; every page referring to it is gone (they hold the
        // Arc). munmap also unlocks it.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.pages * PAGE_SIZE) };
    }
}

/// Where a page's bytes live.
enum Mem {
    /// A reserved page inside a pool mapping.
    Mapped {
        chunk: std::sync::Arc<Chunk>,
        at: NonNull<u8>,
    },
    /// An allocator page (a miss).
    Heap(Box<[u8; PAGE_SIZE]>),
}

/// One page of a decompression destination.
pub struct Page(Mem);

// SAFETY: a Page owns its 4 KiB exclusively (reserved pages are handed out once per offset
// of their mapping); the mapping lives as long as the Arc it holds.
unsafe impl Send for Page {}
// SAFETY: `&Page` only reads its bytes.
unsafe impl Sync for Page {}

impl Page {
    fn bytes(&self) -> &[u8; PAGE_SIZE] {
        match &self.0 {
            // SAFETY: `at` is a page-aligned, page-long part of a live mapping that only this
            // Page reaches; the borrow of `self` bounds the reference.
            Mem::Mapped { at, .. } => unsafe { &*at.as_ptr().cast::<[u8; PAGE_SIZE]>() },
            Mem::Heap(b) => b,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8; PAGE_SIZE] {
        match &mut self.0 {
            // SAFETY: as in `bytes`, and `&mut self` makes this the only reference.
            Mem::Mapped { at, .. } => unsafe { &mut *at.as_ptr().cast::<[u8; PAGE_SIZE]>() },
            Mem::Heap(b) => b,
        }
    }

    fn is_reserved(&self) -> bool {
        matches!(self.0, Mem::Mapped { .. })
    }

    fn is_locked(&self) -> bool {
        matches!(&self.0, Mem::Mapped { chunk, .. } if chunk.locked)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Mem::Mapped { chunk, at } = &self.0 {
            // The pool gave this reserved page up: unlock it and hand it to the kernel now
            // rather than when the whole mapping goes. (Failures only keep the memory.)
            // SAFETY: `at` is this page's own part of the live mapping; nobody reads it again.
            unsafe {
                if chunk.locked {
                    libc::munlock(at.as_ptr().cast(), PAGE_SIZE);
                }
                libc::madvise(at.as_ptr().cast(), PAGE_SIZE, libc::MADV_DONTNEED);
            }
        }
    }
}

/// The reserved pages and their bookkeeping, under the pool's lock.
#[derive(Default)]
struct Reserve {
    /// The size knob.
    size: usize,
    /// Idle reserved pages.
    free: Vec<Page>,
    /// Reserved pages lent out.
    in_use: usize,
}

impl Reserve {
    /// Pages the pool could still take back without exceeding its size.
    fn room(&self) -> usize {
        self.size.saturating_sub(self.free.len() + self.in_use)
    }
}

/// A pool of reserved 4 KiB pages for decompression destinations, shared as `Arc<PagePool>`.
pub struct PagePool {
    reserve: Mutex<Reserve>,
    /// Reserved pages (free or lent) in locked mappings.
    locked: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    fallbacks: AtomicU64,
    alloc_nanos: AtomicU64,
}

/// A zeroed page from the allocator.
fn new_page() -> Page {
    Page(Mem::Heap(Box::new([0; PAGE_SIZE])))
}

/// Pages a resize maps (outside any lock) before adding them to the pool: 1 MiB, so a
/// large resize never holds memory it cannot use yet nor keeps the pool's lock for long.
pub const GROW_CHUNK: usize = 256;

/// A hook run before each chunk of a resize is allocated, with the number of pages the
/// resize reserves in all (tests use it to hold a resize mid-way).
/// (std's lock and Arc even under `--features shuttle`: a static, outside what it models.)
pub type GrowHook = std::sync::Arc<dyn Fn(usize) + Send + Sync>;

static GROW_HOOK: std::sync::Mutex<Option<GrowHook>> = std::sync::Mutex::new(None);

fn grow_hook() -> std::sync::MutexGuard<'static, Option<GrowHook>> {
    wring_sync::lock(&GROW_HOOK)
}

/// Testing only: run `hook` before each chunk of every later resize (`None` removes it).
#[doc(hidden)]
pub fn set_grow_hook(hook: Option<GrowHook>) {
    *grow_hook() = hook;
}

/// RLIMIT_MEMLOCK's soft limit in bytes, for the log line (`None`: unlimited or unknown).
fn memlock_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

impl PagePool {
    /// A pool reserving `pages` pages up front; 0 turns it off.
    pub fn new(pages: usize) -> Arc<PagePool> {
        let pool = Arc::new(PagePool {
            reserve: Mutex::new(Reserve::default()),
            locked: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            alloc_nanos: AtomicU64::new(0),
        });
        pool.set_size(pages);
        pool
    }

    /// Set the number of reserved pages. Growing maps (and locks) the new pages now; shrinking
    /// frees idle pages now, and pages given back later beyond the size are freed then.
    pub fn set_size(&self, pages: usize) {
        let (missing, excess) = {
            let mut reserve = lock(&self.reserve);
            reserve.size = pages;
            let keep = pages.saturating_sub(reserve.in_use);
            let excess = match reserve.free.len().checked_sub(keep) {
                Some(n) if n > 0 => reserve.free.split_off(keep),
                _ => Vec::new(),
            };
            (reserve.room(), excess)
        };
        log::debug!(
            "page pool: size {pages}, reserving {missing} more, freeing {}",
            excess.len()
        );
        self.discard(excess);
        if missing > 0 {
            self.reserve_more(missing);
        }
    }

    /// Free reserved pages the pool no longer keeps (outside its lock).
    fn discard(&self, pages: Vec<Page>) {
        let locked = pages.iter().filter(|p| p.is_locked()).count();
        self.locked.fetch_sub(locked, Ordering::Relaxed);
        drop(pages);
    }

    /// Map `count` pages, [`GROW_CHUNK`] at a time outside the lock, each chunk added while
    /// there is still room for it (another resize may run meanwhile). Fallible: when memory
    /// runs out the pool stays smaller than its size, with a log line, and reads fall back to
    /// the allocator as on a miss.
    fn reserve_more(&self, count: usize) {
        let hook = grow_hook().clone();
        let mut added = 0;
        let mut warned = false;
        while added < count {
            if let Some(h) = &hook {
                h(count);
            }
            let want = (count - added)
                .min(GROW_CHUNK)
                .min(lock(&self.reserve).room());
            if want == 0 {
                return;
            }
            let chunk = match Chunk::map(want) {
                Ok((chunk, lock_error)) => {
                    if let Some(e) = lock_error.filter(|_| !warned) {
                        warned = true;
                        self.lock_failed(count, &e);
                    }
                    chunk
                }
                Err(e) => return self.grow_failed(added, count, &e),
            };
            let mut fresh: Vec<Page> = Vec::new();
            if fresh.try_reserve_exact(want).is_err() {
                return self.grow_failed(added, count, &std::io::Error::other("no memory"));
            }
            fresh.extend(Chunk::split(&chunk));
            let mut reserve = lock(&self.reserve);
            let take = reserve.room().min(want);
            if chunk.locked {
                self.locked.fetch_add(take, Ordering::Relaxed);
            }
            reserve.free.extend(fresh.drain(..take));
            drop(reserve);
            drop(fresh);
            added += take;
        }
    }

    fn lock_failed(&self, count: usize, e: &std::io::Error) {
        let limit = memlock_limit()
            .map_or_else(|| "unlimited".to_string(), |n| format!("{} KiB", n / 1024));
        log::warn!(
            "page pool: cannot lock {count} pages in memory ({e}; RLIMIT_MEMLOCK is {limit}): \
             the pages stay reserved but may be swapped out; raise the limit (ulimit -l, or \
             LimitMEMLOCK= in a systemd unit) or run with CAP_IPC_LOCK"
        );
    }

    fn grow_failed(&self, added: usize, count: usize, e: &std::io::Error) {
        log::warn!(
            "page pool: out of memory after reserving {added} of {count} more pages ({e}); \
             lower page_pool or free memory"
        );
    }

    /// The size knob: how many pages the pool reserves.
    pub fn size(&self) -> usize {
        lock(&self.reserve).size
    }

    /// Pages for `bytes` bytes (`ceil(bytes / 4096)` of them): from the pool while it has
    /// some (a hit per page), else from the allocator (a miss per page). Never fails.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> PageBuf {
        let count = bytes.div_ceil(PAGE_SIZE);
        let mut pages = Vec::with_capacity(count);
        let (pooled, on) = {
            let mut reserve = lock(&self.reserve);
            let take = count.min(reserve.free.len());
            let from = reserve.free.len() - take;
            pages.extend(reserve.free.drain(from..));
            reserve.in_use += take;
            (take, reserve.size > 0)
        };
        let missed = count - pooled;
        if missed > 0 {
            let started = Instant::now();
            pages.extend((0..missed).map(|_| new_page()));
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.alloc_nanos.fetch_add(nanos, Ordering::Relaxed);
            if on {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.hits.fetch_add(pooled as u64, Ordering::Relaxed);
        self.misses.fetch_add(missed as u64, Ordering::Relaxed);
        PageBuf {
            pool: Arc::clone(self),
            pages,
            len: bytes,
            pooled,
        }
    }

    /// Take back the pages of a dropped buffer, `pooled` of which were lent by the pool: keep
    /// the reserved ones the size allows, free the rest.
    fn give_back(&self, mut pages: Vec<Page>, pooled: usize) {
        // Allocator pages never join the reserve: it holds mapped (lockable) pages only.
        pages.retain(Page::is_reserved);
        {
            let mut reserve = lock(&self.reserve);
            reserve.in_use = reserve.in_use.saturating_sub(pooled);
            let keep = reserve.room().min(pages.len());
            let from = pages.len() - keep;
            reserve.free.extend(pages.drain(from..));
        }
        self.discard(pages);
    }

    /// The counters now.
    pub fn stats(&self) -> PoolStats {
        let (size, free, in_use) = {
            let reserve = lock(&self.reserve);
            (reserve.size, reserve.free.len(), reserve.in_use)
        };
        PoolStats {
            size,
            free,
            in_use,
            locked: self.locked.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            alloc_nanos: self.alloc_nanos.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for PagePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagePool")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Pages holding one decompressed extent; returns its pages to the pool on drop (or frees them
/// when the pool is full/off).
///
/// Pages from the pool are not cleared: every byte up to [`len`](PageBuf::len) is meant to be
/// overwritten (by [`copy_from`](PageBuf::copy_from) or through
/// [`pages_mut`](PageBuf::pages_mut)). Bytes past `len` in the last page are never exposed.
pub struct PageBuf {
    pool: Arc<PagePool>,
    pages: Vec<Page>,
    len: usize,
    /// How many of `pages` the pool lent.
    pooled: usize,
}

impl PageBuf {
    /// Bytes the buffer holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes (and no pages).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many bytes of page `index` belong to the buffer.
    fn page_len(&self, index: usize) -> usize {
        self.len.saturating_sub(index * PAGE_SIZE).min(PAGE_SIZE)
    }

    /// The pages in order, each trimmed to the buffer's length.
    pub fn pages(&self) -> impl Iterator<Item = &[u8]> {
        self.pages
            .iter()
            .enumerate()
            .map(|(i, page)| &page.bytes()[..self.page_len(i)])
    }

    /// The pages in order for writing, each trimmed to the buffer's length.
    pub fn pages_mut(&mut self) -> impl Iterator<Item = &mut [u8]> {
        let len = self.len;
        self.pages.iter_mut().enumerate().map(move |(i, page)| {
            let n = len.saturating_sub(i * PAGE_SIZE).min(PAGE_SIZE);
            &mut page.bytes_mut()[..n]
        })
    }

    /// Scatter contiguous `data` into the pages; `data.len()` should equal [`len`](Self::len).
    /// Extra data is ignored and a shortfall is zero-filled, so no stale pool bytes remain.
    pub fn copy_from(&mut self, data: &[u8]) {
        let mut rest = data;
        for page in self.pages_mut() {
            let n = page.len().min(rest.len());
            let (head, tail) = rest.split_at(n);
            page[..n].copy_from_slice(head);
            page[n..].fill(0);
            rest = tail;
        }
    }

    /// Gather the bytes into `out`; copies `min(out.len(), len())` bytes.
    pub fn copy_to(&self, out: &mut [u8]) {
        self.read_at(0, out);
    }

    /// Gather the bytes from `offset` on into `out`; returns how many were copied
    /// (`min(out.len(), len() - offset)`, 0 past the end).
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> usize {
        let n = self.len.saturating_sub(offset).min(out.len());
        let mut rest = &mut out[..n];
        let copied = rest.len();
        let mut at = offset;
        while !rest.is_empty() {
            let (index, within) = (at / PAGE_SIZE, at % PAGE_SIZE);
            let Some(page) = self.pages.get(index) else {
                break;
            };
            let n = (PAGE_SIZE - within).min(rest.len());
            let (head, tail) = rest.split_at_mut(n);
            head.copy_from_slice(&page.bytes()[within..within + n]);
            rest = tail;
            at += n;
        }
        copied
    }

    /// The bytes as one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0; self.len];
        self.copy_to(&mut out);
        out
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        self.pool
            .give_back(std::mem::take(&mut self.pages), self.pooled);
    }
}

impl fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageBuf")
            .field("len", &self.len)
            .field("pages", &self.pages.len())
            .field("pooled", &self.pooled)
            .finish()
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    /// A resize adds its pages a chunk at a time without holding the pool's lock: held
    /// between two chunks, the first chunk is already usable and reads are served.
    #[test]
    fn a_resize_grows_in_chunks_and_never_blocks_reads() {
        // A size no other test asks for: the hook is process-wide.
        const PAGES: usize = GROW_CHUNK * 3 + 7;
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = std::sync::Mutex::new(release_rx);
        let calls = std::sync::atomic::AtomicUsize::new(0);
        set_grow_hook(Some(std::sync::Arc::new(move |count| {
            // Hold the resize before its second chunk.
            if count == PAGES && calls.fetch_add(1, Ordering::SeqCst) == 1 {
                let _ = entered_tx.send(());
                let _ = release_rx.lock().map(|rx| rx.recv());
            }
        })));
        let pool = PagePool::new(0);
        let grower = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || pool.set_size(PAGES))
        };
        entered_rx.recv().unwrap();
        let mid = pool.stats();
        let buf = pool.alloc(3 * PAGE_SIZE);
        drop(buf);
        drop(release_tx);
        let joined = grower.join();
        set_grow_hook(None);
        assert!(joined.is_ok());
        assert_eq!((mid.size, mid.free), (PAGES, GROW_CHUNK), "{mid:?}");
        let end = pool.stats();
        assert_eq!((end.free, end.hits), (PAGES, 3), "{end:?}");
    }

    #[test]
    fn pool_and_buffers_are_send_and_sync() {
        assert_send_sync::<PagePool>();
        assert_send_sync::<Arc<PagePool>>();
        assert_send_sync::<PageBuf>();
    }

    #[test]
    fn new_reserves_up_front() {
        let pool = PagePool::new(8);
        let s = pool.stats();
        assert_eq!((s.size, s.free, s.in_use), (8, 8, 0));
        assert_eq!((s.hits, s.misses, s.alloc_nanos), (0, 0, 0));
        assert_eq!(pool.size(), 8);
    }

    #[test]
    fn hits_and_misses_are_exact() {
        let pool = PagePool::new(4);
        let a = pool.alloc(3 * PAGE_SIZE); // 3 hits
        let s = pool.stats();
        assert_eq!((s.hits, s.misses, s.free, s.in_use), (3, 0, 1, 3));
        assert_eq!(s.alloc_nanos, 0);
        let b = pool.alloc(PAGE_SIZE + 1); // 1 hit, 1 miss
        let s = pool.stats();
        assert_eq!((s.hits, s.misses, s.free, s.in_use), (4, 1, 0, 4));
        let c = pool.alloc(10 * PAGE_SIZE); // 10 misses
        let s = pool.stats();
        assert_eq!((s.hits, s.misses, s.free, s.in_use), (4, 11, 0, 4));
        assert!(s.alloc_nanos > 0);
        let empty = pool.alloc(0);
        assert!(empty.is_empty());
        assert_eq!(empty.pages().count(), 0);
        assert_eq!(pool.stats().hits + pool.stats().misses, 15);
        drop((a, b, c, empty));
        let s = pool.stats();
        assert_eq!((s.free, s.in_use), (4, 0));
    }

    #[test]
    fn pages_come_back_on_drop() {
        let pool = PagePool::new(2);
        for round in 1..=5u64 {
            let buf = pool.alloc(2 * PAGE_SIZE);
            assert_eq!(pool.stats().free, 0);
            drop(buf);
            let s = pool.stats();
            assert_eq!((s.free, s.in_use), (2, 0));
            assert_eq!((s.hits, s.misses), (2 * round, 0));
        }
    }

    #[test]
    fn allocator_pages_are_not_kept_beyond_size() {
        let pool = PagePool::new(2);
        let lent = pool.alloc(2 * PAGE_SIZE);
        let missed = pool.alloc(3 * PAGE_SIZE);
        drop(missed); // the pool's pages are out: no room for these
        assert_eq!(pool.stats().free, 0);
        drop(lent);
        let s = pool.stats();
        assert_eq!((s.free, s.in_use, s.size), (2, 0, 2));
    }

    #[test]
    fn shrinking_frees_idle_now_and_returned_later() {
        let pool = PagePool::new(8);
        pool.set_size(3);
        assert_eq!(pool.stats().free, 3);
        let held = pool.alloc(3 * PAGE_SIZE);
        pool.set_size(1);
        let s = pool.stats();
        assert_eq!((s.size, s.free, s.in_use), (1, 0, 3));
        drop(held);
        let s = pool.stats();
        assert_eq!((s.size, s.free, s.in_use), (1, 1, 0));
        pool.set_size(0);
        assert_eq!(pool.stats().free, 0);
    }

    #[test]
    fn growing_reserves_only_what_is_missing() {
        let pool = PagePool::new(4);
        let held = pool.alloc(3 * PAGE_SIZE);
        pool.set_size(6);
        let s = pool.stats();
        assert_eq!((s.free, s.in_use), (3, 3));
        drop(held);
        let s = pool.stats();
        assert_eq!((s.size, s.free, s.in_use), (6, 6, 0));
        assert_eq!(s.misses, 0);
    }

    #[test]
    fn size_zero_is_off() {
        let pool = PagePool::new(0);
        for _ in 0..3 {
            let buf = pool.alloc(5 * PAGE_SIZE);
            assert_eq!(buf.pages().count(), 5);
            drop(buf);
        }
        let s = pool.stats();
        assert_eq!(
            (s.size, s.free, s.in_use, s.hits, s.misses),
            (0, 0, 0, 0, 15)
        );
    }

    #[test]
    fn concurrent_alloc_and_drop() {
        let pool = PagePool::new(24);
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let pool = Arc::clone(&pool);
                std::thread::spawn(move || {
                    let mut pages = 0u64;
                    for i in 0..200usize {
                        let bytes = ((t * 7 + i * 13) % 5) * PAGE_SIZE + (i % 3);
                        let mut buf = pool.alloc(bytes);
                        let data = vec![t as u8; bytes];
                        buf.copy_from(&data);
                        assert_eq!(buf.to_vec(), data);
                        pages += bytes.div_ceil(PAGE_SIZE) as u64;
                        if i % 50 == 0 {
                            pool.set_size(16 + (t + i) % 16);
                        }
                    }
                    pages
                })
            })
            .collect();
        let pages: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let s = pool.stats();
        assert_eq!(s.hits + s.misses, pages);
        assert_eq!(s.in_use, 0);
        assert!(s.free <= s.size);
        // Setting the size again tops the reserve up exactly.
        pool.set_size(s.size);
        let s = pool.stats();
        assert_eq!(s.free + s.in_use, s.size);
    }

    #[test]
    fn concurrent_fixed_size_keeps_every_reserved_page() {
        let pool = PagePool::new(32);
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let pool = Arc::clone(&pool);
                std::thread::spawn(move || {
                    for i in 0..300usize {
                        let buf = pool.alloc(((t + i) % 4 + 1) * PAGE_SIZE);
                        let s = pool.stats();
                        assert!(s.free + s.in_use <= s.size);
                        drop(buf);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = pool.stats();
        assert_eq!((s.size, s.free, s.in_use), (32, 32, 0));
    }

    #[test]
    fn copy_round_trip() {
        let pool = PagePool::new(40);
        for len in [0, 1, 4095, 4096, 4097, 131072] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut buf = pool.alloc(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.is_empty(), len == 0);
            assert_eq!(buf.pages().count(), len.div_ceil(PAGE_SIZE));
            buf.copy_from(&data);
            let mut out = vec![0xEE; len];
            buf.copy_to(&mut out);
            assert_eq!(out, data, "len {len}");
            assert_eq!(buf.to_vec(), data);
            assert_eq!(buf.pages().map(<[u8]>::len).sum::<usize>(), len);
            assert_eq!(buf.pages().flatten().copied().collect::<Vec<_>>(), data);
        }
    }

    #[test]
    fn reused_pages_do_not_leak_past_len() {
        let pool = PagePool::new(1);
        let mut buf = pool.alloc(PAGE_SIZE);
        buf.copy_from(&[0xAA; PAGE_SIZE]);
        drop(buf);
        let mut buf = pool.alloc(10);
        assert_eq!(pool.stats().hits, 2);
        let pages: Vec<&[u8]> = buf.pages().collect();
        assert_eq!(pages.len(), 1);
        assert_eq!(pages[0].len(), 10);
        buf.copy_from(&[1; 10]);
        assert_eq!(buf.to_vec(), vec![1; 10]);
        // A short copy zero-fills instead of leaving old bytes.
        buf.copy_from(&[2; 4]);
        assert_eq!(buf.to_vec(), [2, 2, 2, 2, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn mismatched_lengths_do_not_panic() {
        let pool = PagePool::new(2);
        let mut buf = pool.alloc(5000);
        buf.copy_from(&[7; 6000]);
        assert_eq!(buf.to_vec(), vec![7; 5000]);
        let mut short = [0u8; 100];
        buf.copy_to(&mut short);
        assert_eq!(short, [7; 100]);
        let mut long = vec![9u8; 6000];
        buf.copy_to(&mut long);
        assert_eq!(&long[..5000], &[7; 5000][..]);
        assert_eq!(&long[5000..], &[9; 1000][..]);
    }

    /// A buffer the pool (on) cannot fill alone is one fallback; with the pool off, misses
    /// are not fallbacks.
    #[test]
    fn fallbacks_count_buffers_the_pool_could_not_fill() {
        let pool = PagePool::new(3);
        let a = pool.alloc(2 * PAGE_SIZE);
        let b = pool.alloc(2 * PAGE_SIZE); // 1 hit, 1 miss: a fallback
        let c = pool.alloc(PAGE_SIZE); // all missed: a fallback
        let s = pool.stats();
        assert_eq!((s.hits, s.misses, s.fallbacks), (3, 2, 2), "{s:?}");
        drop((a, b, c));
        let off = PagePool::new(0);
        drop(off.alloc(PAGE_SIZE));
        assert_eq!((off.stats().misses, off.stats().fallbacks), (1, 0));
    }

    /// The reserve is locked in memory (we run as root or within RLIMIT_MEMLOCK), and a
    /// shrink unlocks what it frees.
    #[test]
    fn reserved_pages_are_locked() {
        let pool = PagePool::new(16);
        let s = pool.stats();
        assert_eq!((s.free, s.locked), (16, 16), "{s:?}");
        let held = pool.alloc(4 * PAGE_SIZE);
        assert_eq!(pool.stats().locked, 16);
        pool.set_size(2);
        assert_eq!(pool.stats().locked, 4, "{:?}", pool.stats());
        drop(held);
        assert_eq!(pool.stats().locked, 2, "{:?}", pool.stats());
        pool.set_size(0);
        assert_eq!(pool.stats().locked, 0);
    }

    #[test]
    fn read_at_gathers_any_range() {
        let pool = PagePool::new(8);
        let data: Vec<u8> = (0..3 * PAGE_SIZE + 100).map(|i| (i % 253) as u8).collect();
        let mut buf = pool.alloc(data.len());
        buf.copy_from(&data);
        for (from, len) in [
            (0, 10),
            (4090, 20),
            (PAGE_SIZE, PAGE_SIZE),
            (3 * PAGE_SIZE, 500),
        ] {
            let mut out = vec![0xEE; len];
            let n = buf.read_at(from, &mut out);
            let end = (from + len).min(data.len());
            assert_eq!(n, end - from);
            assert_eq!(&out[..n], &data[from..end], "{from}+{len}");
        }
        assert_eq!(buf.read_at(data.len() + 5, &mut [0; 4]), 0);
    }

    #[test]
    fn pages_mut_writes_through() {
        let pool = PagePool::new(0);
        let mut buf = pool.alloc(PAGE_SIZE + 3);
        for (i, page) in buf.pages_mut().enumerate() {
            page.fill(i as u8 + 1);
        }
        let mut expected = vec![1; PAGE_SIZE];
        expected.extend([2, 2, 2]);
        assert_eq!(buf.to_vec(), expected);
    }
}
