//! Mirrors EROFS's global page pool for decompression destinations (the patch "erofs: add a
//! global page pool for lz4 decompression", today's reserved pages in fs/erofs/zutil.c:
//! `__erofs_allocpage()`, `erofs_release_pages()`, `z_erofs_rsv_nrpages`); wring differs in
//! handing out whole multi-page buffers, in a resizable pool, and in keeping at most `size`
//! pool pages (free + lent out) instead of refilling the free list with any returned page.
//!
//! The pool holds `size` reserved 4 KiB pages, allocated when the size is set (the knob
//! defaults to 0: off). [`PagePool::alloc`] takes the pages for one decompressed extent from
//! the pool — a *hit* per page — and falls back to the allocator for the rest — a *miss* per
//! page, timed. Dropping the [`PageBuf`] gives its pool pages back; pages the pool has no
//! room for (allocator pages, or pages beyond a shrunk size) are freed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::sync::{lock, Arc, Mutex};

/// Size of one pool page.
pub const PAGE_SIZE: usize = 4096;

/// One page of a decompression destination.
pub type Page = Box<[u8; PAGE_SIZE]>;

/// Counters of a [`PagePool`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The size knob: pages the pool reserves (0 = off).
    pub size: usize,
    /// Reserved pages idle in the pool.
    pub free: usize,
    /// Reserved pages lent out to live [`PageBuf`]s (allocator pages are not counted).
    pub in_use: usize,
    /// Pages served from the pool.
    pub hits: u64,
    /// Pages that had to come from the allocator.
    pub misses: u64,
    /// Time spent allocating the missed pages, in nanoseconds.
    pub alloc_nanos: u64,
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
    hits: AtomicU64,
    misses: AtomicU64,
    alloc_nanos: AtomicU64,
}

/// A zeroed page from the allocator.
fn new_page() -> Page {
    Box::new([0; PAGE_SIZE])
}

/// A zeroed page from the allocator, or `None` when there is no memory for it.
fn try_new_page() -> Option<Page> {
    let layout = std::alloc::Layout::new::<[u8; PAGE_SIZE]>();
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<[u8; PAGE_SIZE]>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was just allocated by the global allocator with the layout of the boxed
    // type, is non-null and zeroed (a valid `[u8; PAGE_SIZE]`); the box takes sole ownership.
    Some(unsafe { Box::from_raw(ptr) })
}

/// Pages a resize allocates (outside any lock) before adding them to the pool: 1 MiB, so a
/// large resize never holds memory it cannot use yet nor keeps the pool's lock for long.
const GROW_CHUNK: usize = 256;

/// A hook run before each chunk of a resize is allocated, with the number of pages the
/// resize reserves in all (tests use it to hold a resize mid-way).
/// (std's lock and Arc even under `--features shuttle`: a static, outside what it models.)
pub type GrowHook = std::sync::Arc<dyn Fn(usize) + Send + Sync>;

static GROW_HOOK: std::sync::Mutex<Option<GrowHook>> = std::sync::Mutex::new(None);

fn grow_hook() -> std::sync::MutexGuard<'static, Option<GrowHook>> {
    GROW_HOOK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Testing only: run `hook` before each chunk of every later resize (`None` removes it).
#[doc(hidden)]
pub fn set_grow_hook(hook: Option<GrowHook>) {
    *grow_hook() = hook;
}

impl PagePool {
    /// A pool reserving `pages` pages up front; 0 turns it off.
    pub fn new(pages: usize) -> Arc<PagePool> {
        let pool = Arc::new(PagePool {
            reserve: Mutex::new(Reserve::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            alloc_nanos: AtomicU64::new(0),
        });
        pool.set_size(pages);
        pool
    }

    /// Set the number of reserved pages. Growing allocates the new pages now; shrinking frees
    /// idle pages now, and pages given back later beyond the size are freed then.
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
        drop(excess);
        if missing > 0 {
            self.reserve_more(missing);
        }
    }

    /// Allocate `count` pages, [`GROW_CHUNK`] at a time outside the lock, each chunk added
    /// while there is still room for it (another resize may run meanwhile). Fallible: when
    /// memory runs out the pool stays smaller than its size, with a log line, and reads fall
    /// back to the allocator as on a miss.
    fn reserve_more(&self, count: usize) {
        let hook = grow_hook().clone();
        let mut added = 0;
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
            let mut fresh = Vec::new();
            if fresh.try_reserve_exact(want).is_err() {
                return self.grow_failed(added, count);
            }
            for _ in 0..want {
                match try_new_page() {
                    Some(p) => fresh.push(p),
                    None => break,
                }
            }
            let got = fresh.len();
            let mut reserve = lock(&self.reserve);
            let take = reserve.room().min(got);
            reserve.free.extend(fresh.drain(..take));
            drop(reserve);
            drop(fresh);
            added += take;
            if got < want {
                return self.grow_failed(added, count);
            }
        }
    }

    fn grow_failed(&self, added: usize, count: usize) {
        log::warn!(
            "page pool: out of memory after reserving {added} of {count} more pages; \
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
        let pooled = {
            let mut reserve = lock(&self.reserve);
            let take = count.min(reserve.free.len());
            let from = reserve.free.len() - take;
            pages.extend(reserve.free.drain(from..));
            reserve.in_use += take;
            take
        };
        let missed = count - pooled;
        if missed > 0 {
            let started = Instant::now();
            pages.extend((0..missed).map(|_| new_page()));
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.alloc_nanos.fetch_add(nanos, Ordering::Relaxed);
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
    /// as many as the size allows, free the rest.
    fn give_back(&self, mut pages: Vec<Page>, pooled: usize) {
        {
            let mut reserve = lock(&self.reserve);
            reserve.in_use = reserve.in_use.saturating_sub(pooled);
            let keep = reserve.room().min(pages.len());
            let from = pages.len() - keep;
            reserve.free.extend(pages.drain(from..));
        }
        drop(pages);
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
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
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
            .map(|(i, page)| &page[..self.page_len(i)])
    }

    /// The pages in order for writing, each trimmed to the buffer's length.
    pub fn pages_mut(&mut self) -> impl Iterator<Item = &mut [u8]> {
        let len = self.len;
        self.pages.iter_mut().enumerate().map(move |(i, page)| {
            let n = len.saturating_sub(i * PAGE_SIZE).min(PAGE_SIZE);
            &mut page[..n]
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
        let mut rest = out;
        for page in self.pages() {
            let n = page.len().min(rest.len());
            let (head, tail) = rest.split_at_mut(n);
            head.copy_from_slice(&page[..n]);
            rest = tail;
            if rest.is_empty() {
                break;
            }
        }
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
