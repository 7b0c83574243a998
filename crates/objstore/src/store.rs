//! The segment store: extents appended into an open segment, sealed segments uploaded as
//! immutable objects in parallel (a bounded queue), ranged reads through the chunk cache with
//! sequential read-ahead, live/dead accounting per segment, the compactor's primitives and the
//! lease. Mirrors btrfs's data block groups and its relocation: extents live in large
//! containers, a container whose extents died is emptied by copying what is left and freed
//! once nothing refers to it.
//!
//! The API is synchronous (FUSE threads are plain threads); a tokio runtime owned by the store
//! runs the requests. Never call it from inside another tokio runtime.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path as ObjPath;
use object_store::{
    ClientOptions, ObjectStore, PutMode, PutOptions, PutPayload, RetryConfig, UpdateVersion,
};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;

use crate::addr::{parse_segment_name, segment_key, Addr};
use crate::cache::{Cache, Key};
use crate::config::MAX_EXTENT;
use crate::config::{allow_http, Config};
use crate::error::{Error, Result};
use crate::lease::{valid_holder, Lease};
use crate::segment::{self, find, Builder, Entry, Trailer, TRAILER_LEN};

/// What the store holds and does, for `wring status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes of segment objects in the bucket.
    pub bucket_bytes: u64,
    /// Segment objects in the bucket.
    pub bucket_segments: u64,
    /// Live extent bytes (in the bucket or on the way).
    pub live_bytes: u64,
    /// Bytes in the bucket no live extent uses (freed extents, indexes, trailers).
    pub dead_bytes: u64,
    /// Bytes appended but not in the bucket yet (open segment and upload queue).
    pub pending_bytes: u64,
    /// Sealed segments waiting for or in upload.
    pub pending_segments: u64,
    /// Uploads running now.
    pub uploads_in_flight: u64,
    /// Segment indexes held in memory.
    pub indexes_cached: u64,
    /// Bytes in the local cache, and its limit.
    pub cache_bytes: u64,
    /// The cache's limit.
    pub cache_limit: u64,
    /// Cache lookups that hit, missed, and chunks evicted.
    pub cache_hits: u64,
    /// Cache lookups that missed.
    pub cache_misses: u64,
    /// Chunks evicted for the limit.
    pub cache_evictions: u64,
    /// GET requests and their bytes.
    pub gets: u64,
    /// Bytes fetched.
    pub get_bytes: u64,
    /// PUT requests (segments, leases) and their bytes.
    pub puts: u64,
    /// Bytes uploaded.
    pub put_bytes: u64,
    /// Objects deleted.
    pub deletes: u64,
    /// The last upload error, if uploads are failing now.
    pub last_error: Option<String>,
}

/// One segment's usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentUsage {
    /// The segment number.
    pub segment: u32,
    /// Bytes of its object (0 while open).
    pub object_len: u64,
    /// Live extent bytes in it.
    pub live: u64,
    /// Whether its object is in the bucket.
    pub in_bucket: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct SegInfo {
    object_len: u64,
    live: u64,
    in_bucket: bool,
}

struct Sealed {
    bytes: Bytes,
    entries: Arc<Vec<Entry>>,
}

struct State {
    open_seg: u32,
    open: Builder,
    pending: BTreeMap<u32, Arc<Sealed>>,
    segs: BTreeMap<u32, SegInfo>,
    /// Segment indexes with their last use, at most `Config::index_cache` of them.
    indexes: HashMap<u32, (Arc<Vec<Entry>>, u64)>,
    index_tick: u64,
    last_error: Option<String>,
    last_read: Option<(u32, u32)>,
    prefetching: HashSet<Key>,
    /// A segment another writer had already put under our number: this store stops writing.
    conflict: Option<u32>,
}

#[derive(Default)]
struct Counters {
    gets: AtomicU64,
    get_bytes: AtomicU64,
    puts: AtomicU64,
    put_bytes: AtomicU64,
    deletes: AtomicU64,
    in_flight: AtomicUsize,
}

struct Inner {
    store: Arc<dyn ObjectStore>,
    cfg: Config,
    handle: Handle,
    state: Mutex<State>,
    changed: Condvar,
    cache: Mutex<Cache>,
    permits: Arc<Semaphore>,
    closing: AtomicBool,
    n: Counters,
}

/// The segment store of one filesystem (`s3://BUCKET/PREFIX`).
pub struct ObjStore {
    inner: Arc<Inner>,
    rt: Option<Runtime>,
}

impl std::fmt::Debug for ObjStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjStore")
            .field("bucket", &self.inner.cfg.bucket)
            .field("prefix", &self.inner.cfg.prefix)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The S3 client for `cfg`.
fn build_client(cfg: &Config) -> Result<Arc<dyn ObjectStore>> {
    let c = &cfg.credentials;
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(&cfg.bucket)
        .with_region(&cfg.region)
        .with_access_key_id(&c.access_key_id)
        .with_secret_access_key(c.secret_access_key.expose())
        .with_virtual_hosted_style_request(false)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(RetryConfig {
            max_retries: 2,
            retry_timeout: cfg.request_timeout,
            ..RetryConfig::default()
        })
        .with_client_options(
            ClientOptions::new()
                .with_timeout(cfg.request_timeout)
                .with_connect_timeout(Duration::from_secs(5)),
        );
    if let Some(t) = &c.session_token {
        b = b.with_token(t.expose());
    }
    if let Some(e) = &cfg.endpoint {
        b = b.with_endpoint(e).with_allow_http(allow_http(e)?);
    }
    let s3 = b
        .build()
        .map_err(|e| Error::Config(format!("building the S3 client: {e}")))?;
    Ok(Arc::new(s3))
}

impl ObjStore {
    /// Open the store at `cfg`: lists the segments in the bucket and counts `live`, the
    /// (address, length) of every extent the caller's metadata refers to. Segments in the
    /// bucket with no live extent (left by a crash or a compaction whose delete did not
    /// happen) show as all dead and are the compactor's first candidates. New segments are
    /// numbered after the highest one in the bucket.
    pub fn open(cfg: Config, live: impl IntoIterator<Item = (Addr, u64)>) -> Result<ObjStore> {
        cfg.check()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wring-objstore")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let store = build_client(&cfg)?;
        let key0 = segment_key(&cfg.prefix, 0);
        let list_at = ObjPath::from(key0.rsplit_once('/').map_or("seg", |(dir, _)| dir));
        let what = format!("listing s3://{}/{list_at}", cfg.bucket);
        let objects: Vec<_> = rt
            .block_on(store.list(Some(&list_at)).try_collect::<Vec<_>>())
            .map_err(|source| Error::Request { what, source })?;
        let mut segs = BTreeMap::new();
        for o in objects {
            if let Some(n) = o.location.filename().and_then(parse_segment_name) {
                let info = SegInfo {
                    object_len: o.size,
                    live: 0,
                    in_bucket: true,
                };
                segs.insert(n, info);
            }
        }
        let mut missing = 0u64;
        let mut highest = segs.keys().next_back().copied().unwrap_or(0);
        for (a, len) in live {
            highest = highest.max(a.segment());
            match segs.get_mut(&a.segment()) {
                Some(s) => s.live += len,
                None => missing += 1,
            }
        }
        if missing > 0 {
            log::warn!(
                "s3://{}/{}: {missing} live extents name segments that are not in the bucket",
                cfg.bucket,
                cfg.prefix
            );
        }
        // Past every number in the bucket and in the caller's metadata: an address the
        // metadata holds must never come to name a new segment.
        let Some(open_seg) = highest.checked_add(1) else {
            return Err(Error::TooLarge(format!(
                "s3://{}/{} names segment {highest:#x}, the last segment number: no new \
                 segment can be numbered after it (a foreign object in the bucket, or corrupt \
                 metadata)",
                cfg.bucket, cfg.prefix
            )));
        };
        let state = State {
            open_seg,
            open: Builder::default(),
            pending: BTreeMap::new(),
            segs,
            indexes: HashMap::new(),
            index_tick: 0,
            last_error: None,
            last_read: None,
            prefetching: HashSet::new(),
            conflict: None,
        };
        let inner = Inner {
            store,
            handle: rt.handle().clone(),
            state: Mutex::new(state),
            changed: Condvar::new(),
            cache: Mutex::new(Cache::new(cfg.cache_bytes)),
            permits: Arc::new(Semaphore::new(cfg.max_uploads)),
            closing: AtomicBool::new(false),
            n: Counters::default(),
            cfg,
        };
        Ok(ObjStore {
            inner: Arc::new(inner),
            rt: Some(rt),
        })
    }

    fn block<F: Future>(&self, f: F) -> F::Output {
        self.inner.handle.block_on(f)
    }

    fn key(&self, segment: u32) -> ObjPath {
        ObjPath::from(segment_key(&self.inner.cfg.prefix, segment))
    }

    fn url(&self, path: &ObjPath) -> String {
        format!("s3://{}/{path}", self.inner.cfg.bucket)
    }

    /// Append an extent's stored bytes; returns its address. Seals and queues the open
    /// segment first when the extent would make it pass the segment size; waits (up to the
    /// configured wait) while the upload queue is full.
    pub fn append(&self, bytes: &[u8]) -> Result<Addr> {
        let room = MAX_EXTENT;
        if bytes.len() as u64 > room {
            return Err(Error::TooLarge(format!(
                "an extent of {} bytes does not fit in a segment (at most {room})",
                bytes.len()
            )));
        }
        let inner = &self.inner;
        let mut st = lock(&inner.state);
        self.check_conflict(&st)?;
        let full = |st: &State| {
            !st.open.data.is_empty()
                && st.open.data.len() + bytes.len() > inner.cfg.segment_bytes as usize
        };
        if full(&st) {
            st = self.wait_for(st, "appending an extent", |st| {
                st.pending.len() < inner.cfg.queue_segments
            })?;
            if full(&st) {
                self.seal(&mut st);
            }
        }
        if st.open_seg == u32::MAX {
            return Err(Error::TooLarge(
                "segment numbers are used up (the next segment would be the last number)".into(),
            ));
        }
        let offset = st.open.push(bytes);
        let seg = st.open_seg;
        st.segs.entry(seg).or_default().live += bytes.len() as u64;
        Ok(Addr::new(seg, offset))
    }

    /// Wait on the state until `ready`, or fail after the configured wait naming the
    /// upload error that keeps it from being ready.
    fn wait_for<'a>(
        &self,
        mut st: MutexGuard<'a, State>,
        what: &str,
        ready: impl Fn(&State) -> bool,
    ) -> Result<MutexGuard<'a, State>> {
        let wait = self.inner.cfg.wait;
        let deadline = Instant::now() + wait;
        while !ready(&st) {
            self.check_conflict(&st)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Unavailable {
                    what: what.to_string(),
                    waited: wait,
                    pending: st.pending.len(),
                    last_error: st.last_error.clone().unwrap_or_else(|| "none".into()),
                });
            }
            st = self
                .inner
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Ok(st)
    }

    /// Fail once another writer's segment was found under one of our numbers.
    fn check_conflict(&self, st: &State) -> Result<()> {
        match st.conflict {
            Some(segment) => Err(Error::AnotherWriter {
                segment,
                prefix: format!("s3://{}/{}", self.inner.cfg.bucket, self.inner.cfg.prefix),
            }),
            None => Ok(()),
        }
    }

    /// Seal the open segment (if it holds anything) and start its upload.
    fn seal(&self, st: &mut State) {
        if st.open.data.is_empty() {
            return;
        }
        let seg = st.open_seg;
        let (bytes, entries) = std::mem::take(&mut st.open).finish(seg as u64);
        let entries = Arc::new(entries);
        let sealed = Arc::new(Sealed {
            bytes: Bytes::from(bytes),
            entries: entries.clone(),
        });
        st.segs.entry(seg).or_default().object_len = sealed.bytes.len() as u64;
        remember_index(st, seg, entries, self.inner.cfg.index_cache);
        st.pending.insert(seg, sealed.clone());
        st.open_seg += 1;
        let inner = self.inner.clone();
        let path = self.key(seg);
        self.inner
            .handle
            .spawn(upload(inner, seg, path, sealed.bytes.clone()));
    }

    /// Return once every byte appended so far is in the bucket: seals the open segment, waits
    /// for its upload and every one before it. Fails with [`Error::Unavailable`] after the
    /// configured wait; the segments stay queued and keep being retried, so a later `sync`
    /// can succeed.
    pub fn sync(&self) -> Result<()> {
        let mut st = lock(&self.inner.state);
        self.seal(&mut st);
        let upto = st.open_seg;
        let _st = self.wait_for(st, "sync", |st| st.pending.range(..upto).next().is_none())?;
        Ok(())
    }

    /// The caller's metadata no longer refers to the extent at `addr` (`len` bytes): its bytes
    /// count as dead from now on.
    pub fn free(&self, addr: Addr, len: u64) {
        let mut st = lock(&self.inner.state);
        if let Some(s) = st.segs.get_mut(&addr.segment()) {
            s.live = s.live.saturating_sub(len);
        }
    }

    /// Read the extent at `addr` into `buf` (its whole stored length), verified against its
    /// checksum in the segment's index.
    pub fn read(&self, addr: Addr, buf: &mut [u8]) -> Result<()> {
        let (seg, off, len) = (addr.segment(), addr.offset(), buf.len() as u64);
        let object_len = {
            let st = lock(&self.inner.state);
            if let Some(done) = self.read_unsealed(&st, addr, buf) {
                return done;
            }
            match st.segs.get(&seg) {
                Some(s) if s.in_bucket => s.object_len,
                _ => return Err(self.missing(seg)),
            }
        };
        let entries = self.index(seg, object_len)?;
        let e = find(&entries, off)
            .filter(|e| e.len as u64 == len)
            .ok_or_else(|| self.no_extent(addr, len))?;
        self.read_range(seg, object_len, off as u64, buf)?;
        if crc32fast::hash(buf) != e.crc {
            // Not kept: a later read fetches the bytes again (the object may be repaired).
            self.forget_chunks(seg, off as u64, len);
            return Err(Error::Corrupt {
                object: self.url(&self.key(seg)),
                why: format!("the extent at offset {off} ({len} bytes) fails its checksum"),
            });
        }
        self.prefetch(seg, object_len, off as u64, len);
        Ok(())
    }

    /// Drop the cached chunks holding `[off, off + len)` of segment `seg`.
    fn forget_chunks(&self, seg: u32, off: u64, len: u64) {
        let chunk = self.inner.cfg.chunk_bytes as u64;
        let (first, last) = (off / chunk, (off + len.max(1) - 1) / chunk);
        let mut cache = lock(&self.inner.cache);
        for c in first..=last {
            cache.remove((seg, c as u32));
        }
    }

    /// Serve a read from the open segment or a segment still in the upload queue.
    fn read_unsealed(&self, st: &State, addr: Addr, buf: &mut [u8]) -> Option<Result<()>> {
        let (seg, off, len) = (addr.segment(), addr.offset(), buf.len() as u64);
        let (data, entries): (&[u8], &[Entry]) = if seg == st.open_seg {
            (&st.open.data, &st.open.entries)
        } else if let Some(s) = st.pending.get(&seg) {
            (&s.bytes, &s.entries)
        } else {
            return None;
        };
        let Some(e) = find(entries, off).filter(|e| e.len as u64 == len) else {
            return Some(Err(self.no_extent(addr, len)));
        };
        buf.copy_from_slice(&data[e.offset as usize..(e.offset + e.len) as usize]);
        Some(Ok(()))
    }

    fn missing(&self, segment: u32) -> Error {
        Error::MissingSegment {
            segment,
            object: self.url(&self.key(segment)),
        }
    }

    fn no_extent(&self, addr: Addr, len: u64) -> Error {
        Error::NoExtent {
            addr,
            len,
            object: self.url(&self.key(addr.segment())),
        }
    }

    /// A segment's index, fetched (trailer, then index) the first time.
    fn index(&self, seg: u32, object_len: u64) -> Result<Arc<Vec<Entry>>> {
        {
            let mut st = lock(&self.inner.state);
            st.index_tick += 1;
            let tick = st.index_tick;
            if let Some((i, used)) = st.indexes.get_mut(&seg) {
                *used = tick;
                return Ok(i.clone());
            }
        }
        let path = self.key(seg);
        let corrupt = |why: String| Error::Corrupt {
            object: self.url(&path),
            why,
        };
        let Some(tail_at) = object_len.checked_sub(TRAILER_LEN as u64) else {
            return Err(corrupt(format!(
                "the object is {object_len} bytes, shorter than a segment trailer"
            )));
        };
        let tail = self.get_range(&path, tail_at, object_len)?;
        let trailer = Trailer::parse(&tail, object_len).map_err(|e| corrupt(e.0))?;
        if trailer.segment != seg as u64 {
            return Err(corrupt(format!(
                "its trailer names segment {}",
                trailer.segment
            )));
        }
        let index = self.get_range(&path, trailer.data_len as u64, tail_at)?;
        let entries = Arc::new(segment::parse_index(&index, &trailer).map_err(|e| corrupt(e.0))?);
        let cap = self.inner.cfg.index_cache;
        remember_index(&mut lock(&self.inner.state), seg, entries.clone(), cap);
        Ok(entries)
    }

    /// One ranged GET of `[start, end)`; a short answer is corruption.
    fn get_range(&self, path: &ObjPath, start: u64, end: u64) -> Result<Bytes> {
        self.block(get_range(&self.inner, path, start, end))
    }

    /// Fill `buf` from `[start, start + buf.len())` of segment `seg` through the cache:
    /// missing chunks are fetched with one ranged GET per run of them, in parallel.
    fn read_range(&self, seg: u32, object_len: u64, start: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let chunk = self.inner.cfg.chunk_bytes as u64;
        let end = start + buf.len() as u64;
        if end > object_len {
            return Err(Error::Corrupt {
                object: self.url(&self.key(seg)),
                why: format!("a read of [{start}, {end}) passes the object's end ({object_len})"),
            });
        }
        let (first, last) = ((start / chunk) as u32, ((end - 1) / chunk) as u32);
        let mut got: BTreeMap<u32, Bytes> = BTreeMap::new();
        let mut runs: Vec<(u32, u32)> = Vec::new();
        {
            let mut cache = lock(&self.inner.cache);
            for c in first..=last {
                match cache.get((seg, c)) {
                    Some(b) => {
                        got.insert(c, b);
                    }
                    None => match runs.last_mut() {
                        Some(r) if r.1 + 1 == c => r.1 = c,
                        _ => runs.push((c, c)),
                    },
                }
            }
        }
        let path = self.key(seg);
        let fetched = self.block(futures::future::try_join_all(runs.iter().map(|&(a, b)| {
            let hi = ((b as u64 + 1) * chunk).min(object_len);
            get_range(&self.inner, &path, a as u64 * chunk, hi)
        })))?;
        for (&(a, b), bytes) in runs.iter().zip(fetched) {
            let chunks = split_chunks(&bytes, chunk);
            let mut cache = lock(&self.inner.cache);
            for (c, piece) in (a..=b).zip(chunks) {
                cache.insert((seg, c), piece.clone());
                got.insert(c, piece);
            }
        }
        for (c, b) in got {
            let cs = c as u64 * chunk;
            let (lo, hi) = (start.max(cs), end.min(cs + b.len() as u64));
            if lo < hi {
                buf[(lo - start) as usize..(hi - start) as usize]
                    .copy_from_slice(&b[(lo - cs) as usize..(hi - cs) as usize]);
            }
        }
        Ok(())
    }

    /// After a read of `[off, off + len)`: when reads of this segment go forward, fetch the
    /// next chunks (into the next segment past this one's end) in the background.
    fn prefetch(&self, seg: u32, object_len: u64, off: u64, len: u64) {
        let inner = &self.inner;
        let n = inner.cfg.prefetch_chunks;
        let chunk = inner.cfg.chunk_bytes as u64;
        let (first, last) = (
            (off / chunk) as u32,
            ((off + len.max(1) - 1) / chunk) as u32,
        );
        let mut st = lock(&inner.state);
        let sequential = st
            .last_read
            .is_some_and(|(s, c)| s == seg && (c == first || c + 1 == first));
        st.last_read = Some((seg, last));
        if !sequential || n == 0 {
            return;
        }
        let chunks_in = |len: u64| len.div_ceil(chunk) as u32;
        let mut want: Vec<(u32, u32, u64)> = Vec::new();
        for i in 1..=n {
            let c = last + i;
            if c < chunks_in(object_len) {
                want.push((seg, c, object_len));
            } else if let Some((nseg, next)) = seg
                .checked_add(1)
                .and_then(|n| Some((n, st.segs.get(&n)?)))
                .filter(|(_, s)| s.in_bucket)
            {
                let c = c - chunks_in(object_len);
                if c < chunks_in(next.object_len) {
                    want.push((nseg, c, next.object_len));
                }
            }
        }
        let cache = lock(&inner.cache);
        want.retain(|&(s, c, _)| !cache.contains((s, c)) && !st.prefetching.contains(&(s, c)));
        drop(cache);
        for &(s, c, _) in &want {
            st.prefetching.insert((s, c));
        }
        drop(st);
        for (s, c, olen) in want {
            let inner = self.inner.clone();
            let path = self.key(s);
            self.inner.handle.spawn(async move {
                let hi = ((c as u64 + 1) * chunk).min(olen);
                let r = get_range(&inner, &path, c as u64 * chunk, hi).await;
                if let Ok(b) = r {
                    // Its own allocation: the body may sit in a larger receive buffer.
                    lock(&inner.cache).insert((s, c), Bytes::copy_from_slice(&b));
                }
                lock(&inner.state).prefetching.remove(&(s, c));
            });
        }
    }

    /// Whether the cache holds the chunk with the byte at `addr` (for `wring stat` and tests).
    pub fn is_cached(&self, addr: Addr) -> bool {
        let chunk = addr.offset() / self.inner.cfg.chunk_bytes;
        lock(&self.inner.cache).contains((addr.segment(), chunk))
    }

    /// Fetch segment `seg` whole and verify its trailer, index and every extent's checksum
    /// (fsck).
    pub fn verify_segment(&self, seg: u32) -> Result<Vec<Entry>> {
        let path = self.key(seg);
        // Never more than the listing said: an object replaced by something larger is refused
        // before its bytes are read.
        let object_len = match lock(&self.inner.state).segs.get(&seg) {
            Some(s) if s.in_bucket => s.object_len,
            _ => return Err(self.missing(seg)),
        };
        let bytes = match self.block(get_capped(&self.inner, &path, object_len, "segment"))? {
            Some((b, _)) => b,
            None => return Err(self.missing(seg)),
        };
        let corrupt = |why: String| Error::Corrupt {
            object: self.url(&path),
            why,
        };
        let (t, entries) = segment::verify_object(&bytes).map_err(|e| corrupt(e.0))?;
        if t.segment != seg as u64 {
            return Err(corrupt(format!("its trailer names segment {}", t.segment)));
        }
        Ok(entries)
    }

    /// Counters for `wring status`.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let st = lock(&inner.state);
        let mut s = Stats::default();
        for info in st.segs.values() {
            s.live_bytes += info.live;
            if info.in_bucket {
                s.bucket_bytes += info.object_len;
                s.bucket_segments += 1;
                s.dead_bytes += info.object_len.saturating_sub(info.live);
            }
        }
        s.pending_segments = st.pending.len() as u64;
        s.indexes_cached = st.indexes.len() as u64;
        s.pending_bytes = st.open.data.len() as u64
            + st.pending
                .values()
                .map(|p| p.bytes.len() as u64)
                .sum::<u64>();
        s.last_error = st.last_error.clone();
        drop(st);
        let cache = lock(&inner.cache);
        (s.cache_bytes, s.cache_limit) = (cache.bytes(), inner.cfg.cache_bytes);
        (s.cache_hits, s.cache_misses, s.cache_evictions) =
            (cache.hits, cache.misses, cache.evictions);
        drop(cache);
        let n = &inner.n;
        s.uploads_in_flight = n.in_flight.load(Ordering::Relaxed) as u64;
        s.gets = n.gets.load(Ordering::Relaxed);
        s.get_bytes = n.get_bytes.load(Ordering::Relaxed);
        s.puts = n.puts.load(Ordering::Relaxed);
        s.put_bytes = n.put_bytes.load(Ordering::Relaxed);
        s.deletes = n.deletes.load(Ordering::Relaxed);
        s
    }

    /// Every known segment's usage, by number.
    pub fn segments(&self) -> Vec<SegmentUsage> {
        let st = lock(&self.inner.state);
        st.segs
            .iter()
            .map(|(&segment, i)| SegmentUsage {
                segment,
                object_len: i.object_len,
                live: i.live,
                in_bucket: i.in_bucket,
            })
            .collect()
    }

    /// Segments in the bucket whose live bytes are under `threshold` (0.0 to 1.0) of their
    /// object's size, emptiest first: the compactor's candidates.
    pub fn compaction_candidates(&self, threshold: f64) -> Vec<u32> {
        let mut c: Vec<SegmentUsage> = self
            .segments()
            .into_iter()
            .filter(|s| s.in_bucket && (s.live as f64) < threshold * s.object_len as f64)
            .collect();
        c.sort_by_key(|s| (s.live, s.segment));
        c.into_iter().map(|s| s.segment).collect()
    }

    /// Copy the live extents `extents` (address, length — every live extent of the segments
    /// being compacted) into new segments and sync them; returns what moved, as (old address,
    /// new address, length). Both copies count as live until the caller has committed the new
    /// addresses durably and then calls [`ObjStore::commit_rewrite`] with the map; only after
    /// that does [`ObjStore::delete_segments`] take the old segments (see docs/objstore.md for
    /// why this order is crash-safe). On an error nothing moved: the copies made so far are
    /// freed and the old extents stay as they were.
    pub fn rewrite(&self, extents: &[(Addr, u64)]) -> Result<Vec<(Addr, Addr, u64)>> {
        let mut map = Vec::with_capacity(extents.len());
        if let Err(e) = self.copy_extents(extents, &mut map) {
            for &(_, new, len) in &map {
                self.free(new, len);
            }
            return Err(e);
        }
        Ok(map)
    }

    /// `rewrite`'s copying: read, append, then sync the lot.
    fn copy_extents(
        &self,
        extents: &[(Addr, u64)],
        map: &mut Vec<(Addr, Addr, u64)>,
    ) -> Result<()> {
        let mut buf = Vec::new();
        for &(old, len) in extents {
            if len > MAX_EXTENT {
                return Err(Error::TooLarge(format!(
                    "an extent of {len} bytes at {old} is over the limit of {MAX_EXTENT}: the \
                     metadata naming it is corrupt"
                )));
            }
            buf.resize(len as usize, 0);
            self.read(old, &mut buf)?;
            map.push((old, self.append(&buf)?, len));
        }
        self.sync()
    }

    /// The caller has durably committed the new addresses of a [`ObjStore::rewrite`]: the old
    /// extents count as dead from now on, and segments left with no live bytes may be deleted.
    pub fn commit_rewrite(&self, map: &[(Addr, Addr, u64)]) {
        for &(old, _, len) in map {
            self.free(old, len);
        }
    }

    /// Delete segment objects the caller's durable metadata no longer points at. Refuses a
    /// segment that still has live bytes, or that is open or not uploaded yet.
    pub fn delete_segments(&self, segs: &[u32]) -> Result<()> {
        for &seg in segs {
            {
                let st = lock(&self.inner.state);
                match st.segs.get(&seg) {
                    Some(i) if i.live > 0 => {
                        return Err(Error::InUse {
                            segment: seg,
                            live: i.live,
                        })
                    }
                    Some(i) if i.in_bucket => {}
                    _ => return Err(self.missing(seg)),
                }
            }
            let path = self.key(seg);
            let what = format!("deleting {}", self.url(&path));
            match self.block(self.inner.store.delete(&path)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => return Err(Error::Request { what, source }),
            }
            self.inner.n.deletes.fetch_add(1, Ordering::Relaxed);
            let mut st = lock(&self.inner.state);
            st.segs.remove(&seg);
            st.indexes.remove(&seg);
            drop(st);
            lock(&self.inner.cache).remove_segment(seg);
        }
        Ok(())
    }

    /// `PREFIX/meta/NAME`: where the filesystem keeps metadata snapshots for handover.
    fn meta_path(&self, name: &str) -> Result<ObjPath> {
        let ok = !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && !name.starts_with('.');
        if !ok {
            return Err(Error::Config(format!(
                "`{name}` is not a metadata object name (1 to 128 of A-Z a-z 0-9 - _ ., not \
                 starting with .)"
            )));
        }
        let p = self.inner.cfg.prefix.trim_matches('/');
        Ok(ObjPath::from(if p.is_empty() {
            format!("meta/{name}")
        } else {
            format!("{p}/meta/{name}")
        }))
    }

    /// Store `bytes` as the metadata object `PREFIX/meta/NAME` (a snapshot of the redb store
    /// for handover), replacing what was there.
    pub fn put_meta(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        let path = self.meta_path(name)?;
        let len = bytes.len() as u64;
        match self.block(self.inner.store.put(&path, PutPayload::from(bytes))) {
            Ok(_) => {
                self.inner.n.puts.fetch_add(1, Ordering::Relaxed);
                self.inner.n.put_bytes.fetch_add(len, Ordering::Relaxed);
                Ok(())
            }
            Err(source) => Err(Error::Request {
                what: format!("writing {}", self.url(&path)),
                source,
            }),
        }
    }

    /// The metadata object `PREFIX/meta/NAME`, or None when there is none; an object larger
    /// than `limit` bytes is refused ([`Error::TooLarge`]) before it is read.
    pub fn get_meta(&self, name: &str, limit: u64) -> Result<Option<Bytes>> {
        let path = self.meta_path(name)?;
        let got = self.block(get_capped(&self.inner, &path, limit, "metadata object"))?;
        Ok(got.map(|(b, _)| b))
    }

    fn lease_path(&self) -> ObjPath {
        let p = self.inner.cfg.prefix.trim_matches('/');
        ObjPath::from(if p.is_empty() {
            "lease".to_string()
        } else {
            format!("{p}/lease")
        })
    }

    /// The lease as it is in the bucket (None when nobody holds it), with its version.
    fn lease_now(&self) -> Result<Option<(Lease, UpdateVersion)>> {
        let path = self.lease_path();
        let corrupt = |why: String| Error::Corrupt {
            object: self.url(&path),
            why: format!("{why} (break the lease to replace it)"),
        };
        let got = match self.block(get_capped(&self.inner, &path, MAX_LEASE, "lease record")) {
            Ok(g) => g,
            Err(Error::TooLarge(why)) => return Err(corrupt(why)),
            Err(e) => return Err(e),
        };
        let Some((bytes, version)) = got else {
            return Ok(None);
        };
        let lease = Lease::parse(&bytes).map_err(|e| corrupt(e.0))?;
        Ok(Some((lease, version)))
    }

    /// Who holds the lease, if anyone.
    pub fn lease(&self) -> Result<Option<Lease>> {
        Ok(self.lease_now()?.map(|(l, _)| l))
    }

    /// Take the lease for `holder`: created only if absent (a conditional put, If-None-Match),
    /// renewed if `holder` already holds it, refused with [`Error::LeaseHeld`] naming the
    /// holder otherwise.
    pub fn acquire_lease(&self, holder: &str) -> Result<Lease> {
        valid_holder(holder).map_err(|e| Error::Config(e.0))?;
        let path = self.lease_path();
        let lease = Lease {
            holder: holder.to_string(),
            since: now_unix(),
        };
        for _ in 0..3 {
            let mode = match self.lease_now()? {
                None => PutMode::Create,
                Some((l, version)) if l.holder == holder => PutMode::Update(version),
                Some((l, _)) => {
                    return Err(Error::LeaseHeld {
                        object: self.url(&path),
                        holder: l.holder,
                        since: l.since,
                    })
                }
            };
            let opts = PutOptions::from(mode);
            let body = PutPayload::from(lease.encode());
            match self.block(self.inner.store.put_opts(&path, body, opts)) {
                Ok(_) => {
                    self.inner.n.puts.fetch_add(1, Ordering::Relaxed);
                    return Ok(lease);
                }
                // Someone else wrote it between our read and our put: look again.
                Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. }) => continue,
                Err(source) => {
                    let what = format!("writing {}", self.url(&path));
                    return Err(Error::Request { what, source });
                }
            }
        }
        match self.lease()? {
            Some(l) if l.holder != holder => Err(Error::LeaseHeld {
                object: self.url(&path),
                holder: l.holder,
                since: l.since,
            }),
            _ => Err(Error::Config(format!(
                "{} changed under every attempt to take it; try again",
                self.url(&path)
            ))),
        }
    }

    /// Give the lease up. Refused when someone else holds it; nothing to do when nobody does.
    pub fn release_lease(&self, holder: &str) -> Result<()> {
        let path = self.lease_path();
        match self.lease_now()? {
            None => Ok(()),
            Some((l, _)) if l.holder != holder => Err(Error::LeaseHeld {
                object: self.url(&path),
                holder: l.holder,
                since: l.since,
            }),
            Some(_) => self.delete_lease(&path),
        }
    }

    /// Break the lease whoever holds it (a stale one: its holder is gone). Returns the lease
    /// that was broken; a corrupt record is removed as well.
    pub fn break_lease(&self) -> Result<Option<Lease>> {
        let path = self.lease_path();
        let old = match self.lease_now() {
            Ok(l) => l.map(|(l, _)| l),
            Err(Error::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        self.delete_lease(&path)?;
        Ok(old)
    }

    fn delete_lease(&self, path: &ObjPath) -> Result<()> {
        match self.block(self.inner.store.delete(path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                self.inner.n.deletes.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(source) => Err(Error::Request {
                what: format!("deleting {}", self.url(path)),
                source,
            }),
        }
    }

    /// Sync, then stop the runtime.
    pub fn close(self) -> Result<()> {
        self.sync()
    }
}

impl Drop for ObjStore {
    /// Stops the runtime: uploads not finished are abandoned (as at a crash: only what `sync`
    /// returned for is promised).
    fn drop(&mut self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// Keep `seg`'s index, dropping the least recently used ones past `cap` (a scan: `cap` is
/// small, and this runs once per index fetched).
fn remember_index(st: &mut State, seg: u32, entries: Arc<Vec<Entry>>, cap: usize) {
    st.index_tick += 1;
    st.indexes.insert(seg, (entries, st.index_tick));
    while st.indexes.len() > cap {
        let oldest = st
            .indexes
            .iter()
            .min_by_key(|(_, (_, t))| *t)
            .map(|(&s, _)| s);
        match oldest {
            Some(s) => st.indexes.remove(&s),
            None => break,
        };
    }
}

/// `bytes` cut into `chunk`-sized pieces (the last one shorter), each a copy in its own
/// allocation: a slice would keep the whole parent buffer (a segment, or a run of chunks)
/// alive as long as any one piece is cached, and the cache's limit would not limit memory.
fn split_chunks(bytes: &[u8], chunk: u64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let end = (at + chunk as usize).min(bytes.len());
        out.push(Bytes::copy_from_slice(&bytes[at..end]));
        at = end;
    }
    out
}

/// The most a lease record may be (its holder is at most 256 bytes).
const MAX_LEASE: u64 = 4096;

/// A whole object of at most `cap` bytes, with its version; None when there is none. A larger
/// one is refused from its size before the body is read, and the body is not read past `cap`
/// whatever the size said.
async fn get_capped(
    inner: &Inner,
    path: &ObjPath,
    cap: u64,
    what: &str,
) -> Result<Option<(Bytes, UpdateVersion)>> {
    let url = format!("s3://{}/{path}", inner.cfg.bucket);
    let too_big = |size: u64| {
        Error::TooLarge(format!(
            "{url} is {size} bytes or more, more than the {cap} a {what} may have here; \
             refusing to read it"
        ))
    };
    let request = |source| Error::Request {
        what: format!("reading {url}"),
        source,
    };
    let r = match inner.store.get(path).await {
        Ok(r) => r,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(source) => return Err(request(source)),
    };
    inner.n.gets.fetch_add(1, Ordering::Relaxed);
    if r.meta.size > cap {
        return Err(too_big(r.meta.size));
    }
    let version = UpdateVersion {
        e_tag: r.meta.e_tag.clone(),
        version: r.meta.version.clone(),
    };
    let mut out = Vec::with_capacity(r.meta.size as usize);
    let mut body = r.into_stream();
    while let Some(piece) = body.try_next().await.map_err(request)? {
        if (out.len() + piece.len()) as u64 > cap {
            return Err(too_big((out.len() + piece.len()) as u64));
        }
        out.extend_from_slice(&piece);
        inner
            .n
            .get_bytes
            .fetch_add(piece.len() as u64, Ordering::Relaxed);
    }
    Ok(Some((Bytes::from(out), version)))
}

/// One ranged GET; an answer shorter than asked is corruption, not a panic.
async fn get_range(inner: &Inner, path: &ObjPath, start: u64, end: u64) -> Result<Bytes> {
    let url = || format!("s3://{}/{path}", inner.cfg.bucket);
    let bytes = inner
        .store
        .get_range(path, start..end)
        .await
        .map_err(|source| match source {
            object_store::Error::NotFound { .. } => Error::Corrupt {
                object: url(),
                why: "the object is gone".into(),
            },
            source => Error::Request {
                what: format!("reading [{start}, {end}) of {}", url()),
                source,
            },
        })?;
    inner.n.gets.fetch_add(1, Ordering::Relaxed);
    inner
        .n
        .get_bytes
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    if bytes.len() as u64 != end - start {
        return Err(Error::Corrupt {
            object: url(),
            why: format!(
                "asked for [{start}, {end}) and got {} bytes (the object is short)",
                bytes.len()
            ),
        });
    }
    Ok(bytes)
}

/// Upload one sealed segment, retrying with backoff until it is in the bucket or the store
/// closes; the segment stays readable from memory meanwhile. On success its chunks go into
/// the cache (written segments are read back soon, as the page cache keeps written pages).
async fn upload(inner: Arc<Inner>, seg: u32, path: ObjPath, bytes: Bytes) {
    let Ok(_permit) = inner.permits.clone().acquire_owned().await else {
        return;
    };
    inner.n.in_flight.fetch_add(1, Ordering::SeqCst);
    let mut backoff = Duration::from_millis(50);
    while !inner.closing.load(Ordering::SeqCst) {
        // Create only: a segment object is never replaced, whoever wrote it.
        let opts = PutOptions::from(PutMode::Create);
        let body = PutPayload::from(bytes.clone());
        let err = match inner.store.put_opts(&path, body, opts).await {
            Ok(_) => {
                uploaded(&inner, seg, &bytes);
                break;
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                match same_object(&inner, &path, &bytes).await {
                    // Our own earlier attempt went in and only its answer was lost.
                    Ok(true) => {
                        uploaded(&inner, seg, &bytes);
                        break;
                    }
                    Ok(false) => {
                        conflict(&inner, seg, &path);
                        break;
                    }
                    Err(e) => e.to_string(),
                }
            }
            Err(e) => e.to_string(),
        };
        let msg = format!("uploading s3://{}/{path}: {err}", inner.cfg.bucket);
        log::warn!("{msg}; retrying in {backoff:?}");
        lock(&inner.state).last_error = Some(msg);
        inner.changed.notify_all();
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
    inner.n.in_flight.fetch_sub(1, Ordering::SeqCst);
    inner.changed.notify_all();
}

/// Segment `seg` is in the bucket: count the put, cache its chunks, take it off the queue.
fn uploaded(inner: &Inner, seg: u32, bytes: &Bytes) {
    inner.n.puts.fetch_add(1, Ordering::Relaxed);
    inner
        .n
        .put_bytes
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    let chunk = inner.cfg.chunk_bytes as u64;
    {
        let mut cache = lock(&inner.cache);
        for (c, piece) in split_chunks(bytes, chunk).into_iter().enumerate() {
            cache.insert((seg, c as u32), piece);
        }
    }
    let mut st = lock(&inner.state);
    st.pending.remove(&seg);
    if let Some(i) = st.segs.get_mut(&seg) {
        i.in_bucket = true;
    }
    if st.pending.is_empty() {
        st.last_error = None;
    }
}

/// Another writer's object is at `path`: stop writing (the segment stays queued, so nothing
/// appended since is promised, and `sync`/`append` fail naming the conflict).
fn conflict(inner: &Inner, seg: u32, path: &ObjPath) {
    let msg = format!(
        "s3://{}/{path} exists and is not ours: another writer holds s3://{}/{}",
        inner.cfg.bucket, inner.cfg.bucket, inner.cfg.prefix
    );
    log::error!("{msg}");
    let mut st = lock(&inner.state);
    st.conflict.get_or_insert(seg);
    st.last_error = Some(msg);
}

/// Whether the object at `path` is `bytes` as we would have written it (a retried PUT whose
/// first attempt went in): same size, and the same index and trailer (every extent's crc32,
/// the segment number, the index's crc32).
async fn same_object(inner: &Inner, path: &ObjPath, bytes: &Bytes) -> Result<bool> {
    let head = inner
        .store
        .head(path)
        .await
        .map_err(|source| Error::Request {
            what: format!("looking at s3://{}/{path}", inner.cfg.bucket),
            source,
        })?;
    let len = bytes.len() as u64;
    if head.size != len {
        return Ok(false);
    }
    let tail_at = len.saturating_sub(TRAILER_LEN as u64);
    let Ok(t) = Trailer::parse(&bytes[tail_at as usize..], len) else {
        return Ok(false);
    };
    let from = t.data_len as u64;
    match get_range(inner, path, from, len).await {
        Ok(theirs) => Ok(theirs[..] == bytes[from as usize..]),
        Err(Error::Corrupt { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_pieces_do_not_keep_their_parent_alive() {
        let parent = Bytes::from(vec![7u8; 10_000]);
        let range = parent.as_ptr() as usize..parent.as_ptr() as usize + parent.len();
        let pieces = split_chunks(&parent, 4096);
        assert_eq!(
            pieces.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [4096, 4096, 1808]
        );
        for p in &pieces {
            assert!(
                !range.contains(&(p.as_ptr() as usize)),
                "a cached piece points into its parent buffer (which stays allocated whole)"
            );
        }
        assert!(pieces.concat() == parent[..]);
    }
}
