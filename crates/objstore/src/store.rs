//! The segment store: extents appended into an open segment, sealed segments uploaded as
//! immutable objects in parallel (a bounded queue), ranged reads through the chunk cache with
//! sequential read-ahead, live/dead accounting per segment, the compactor's primitives and the
//! lease. Mirrors btrfs's data block groups and its relocation: extents live in large
//! containers, a container whose extents died is emptied by copying what is left and freed
//! once nothing refers to it.
//!
//! This file holds the store's state, open, append/seal/sync and the uploads; `read`, `compact`,
//! `meta` and `lease` (submodules) add the rest of `ObjStore`'s methods.
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
use crate::refusal::{self, Refusals};
use crate::segment::{self, find, Builder, Entry, Trailer, TRAILER_LEN};

mod compact;
mod lease;
mod meta;
mod read;

use read::{get_capped, get_range, remember_index, split_chunks};

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
    /// Whether the bucket refuses uploads (see [`crate::refusal`]).
    refusals: Refusals,
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

use wring_sync::lock;

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
        // SigV4 signs the headers, not the body (UNSIGNED-PAYLOAD): no SHA-256 of every
        // segment here nor in the server. The body's integrity on the wire is TLS's (plain
        // http only on loopback); every extent's crc32 is checked on every read.
        .with_unsigned_payload(true)
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
            refusals: Refusals::default(),
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
        // The object (data, index and trailer) stays within the segment size, unless one
        // extent alone is larger.
        let full = |st: &State| {
            let index = (st.open.entries.len() + 1) * segment::ENTRY_LEN + TRAILER_LEN;
            !st.open.data.is_empty()
                && st.open.data.len() + bytes.len() + index > inner.cfg.segment_bytes as usize
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
        let start = Instant::now();
        let deadline = start + wait;
        while !ready(&st) {
            self.check_conflict(&st)?;
            if let Some((errno, answer)) = st.refusals.since(start) {
                return Err(Error::Refused {
                    what: what.to_string(),
                    bucket: format!("s3://{}", self.inner.cfg.bucket),
                    errno,
                    pending: st.pending.len(),
                    answer: answer.to_string(),
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Unavailable {
                    what: what.to_string(),
                    waited: wait,
                    pending: st.pending.len(),
                    last_error: st.last_error.clone().unwrap_or_else(|| "none".into()),
                });
            }
            st = wring_sync::wait_timeout(&self.inner.changed, st, left).0;
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
            Err(e) => {
                refused(&inner, &e);
                e.to_string()
            }
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

/// An upload failed with `e`: judge what it says of the bucket (see [`crate::refusal`]),
/// logging the first time the bucket counts as refusing writes.
fn refused(inner: &Inner, e: &object_store::Error) {
    let verdict = refusal::judge(e);
    let mut st = lock(&inner.state);
    let before = st.refusals.refusing.is_some();
    st.refusals.failed(verdict, &e.to_string(), Instant::now());
    if let (false, Some((errno, answer, _))) = (before, &st.refusals.refusing) {
        log::error!(
            "s3://{} refuses writes: syncs fail with {} until it takes them again (the \
             uploads are retried); its answer: {answer}",
            inner.cfg.bucket,
            std::io::Error::from_raw_os_error(*errno)
        );
    }
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
    if st.refusals.refusing.is_some() {
        log::info!("s3://{} takes writes again", inner.cfg.bucket);
    }
    st.refusals.succeeded();
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
    let Some(Ok(t)) = bytes
        .last_chunk::<TRAILER_LEN>()
        .map(|tail| Trailer::parse(tail, len))
    else {
        return Ok(false);
    };
    let from = t.data_len as u64;
    match get_range(inner, path, from, len).await {
        Ok(theirs) => Ok(bytes.get(from as usize..) == Some(&theirs[..])),
        Err(Error::Corrupt { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
