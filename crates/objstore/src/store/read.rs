//! Reads: verified ranged GETs of extents through the chunk cache, segment indexes (fetched
//! once, a bounded LRU), sequential read-ahead, and fsck's whole-segment check. Mirrors btrfs's
//! read path with its checksum verification (`btrfs_check_data_csum`) and readahead.

use super::*;

impl ObjStore {
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
    pub(super) fn forget_chunks(&self, seg: u32, off: u64, len: u64) {
        let chunk = self.inner.cfg.chunk_bytes as u64;
        let (first, last) = (off / chunk, (off + len.max(1) - 1) / chunk);
        let mut cache = lock(&self.inner.cache);
        for c in first..=last {
            cache.remove((seg, c as u32));
        }
    }

    /// Serve a read from the open segment or a segment still in the upload queue.
    pub(super) fn read_unsealed(
        &self,
        st: &State,
        addr: Addr,
        buf: &mut [u8],
    ) -> Option<Result<()>> {
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
        let Some(extent) = e.bytes(data) else {
            return Some(Err(self.no_extent(addr, len)));
        };
        buf.copy_from_slice(extent);
        Some(Ok(()))
    }

    /// A segment's index, fetched (trailer, then index) the first time.
    pub(super) fn index(&self, seg: u32, object_len: u64) -> Result<Arc<Vec<Entry>>> {
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
    pub(super) fn get_range(&self, path: &ObjPath, start: u64, end: u64) -> Result<Bytes> {
        self.block(get_range(&self.inner, path, start, end))
    }

    /// Fill `buf` from `[start, start + buf.len())` of segment `seg` through the cache:
    /// missing chunks are fetched with one ranged GET per run of them, in parallel.
    pub(super) fn read_range(
        &self,
        seg: u32,
        object_len: u64,
        start: u64,
        buf: &mut [u8],
    ) -> Result<()> {
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
                // [lo, hi) lies in [start, end), buf's range, and in chunk c's bytes.
                let to = buf.get_mut((lo - start) as usize..(hi - start) as usize);
                let from = b.get((lo - cs) as usize..(hi - cs) as usize);
                let (Some(to), Some(from)) = (to, from) else {
                    return Err(Error::Corrupt {
                        object: self.url(&path),
                        why: format!("chunk {c} does not hold [{lo}, {hi})"),
                    });
                };
                to.copy_from_slice(from);
            }
        }
        Ok(())
    }

    /// After a read of `[off, off + len)`: when reads of this segment go forward, fetch the
    /// next chunks (into the next segment past this one's end) in the background.
    pub(super) fn prefetch(&self, seg: u32, object_len: u64, off: u64, len: u64) {
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
}

/// Keep `seg`'s index, dropping the least recently used ones past `cap` (a scan: `cap` is
/// small, and this runs once per index fetched).
pub(super) fn remember_index(st: &mut State, seg: u32, entries: Arc<Vec<Entry>>, cap: usize) {
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
pub(super) fn split_chunks(bytes: &[u8], chunk: u64) -> Vec<Bytes> {
    // Config::check refuses a chunk size of 0 (`max(1)` keeps chunks() from panicking).
    bytes
        .chunks((chunk as usize).max(1))
        .map(Bytes::copy_from_slice)
        .collect()
}

/// A whole object of at most `cap` bytes, with its version; None when there is none. A larger
/// one is refused from its size before the body is read, and the body is not read past `cap`
/// whatever the size said.
pub(super) async fn get_capped(
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
pub(super) async fn get_range(
    inner: &Inner,
    path: &ObjPath,
    start: u64,
    end: u64,
) -> Result<Bytes> {
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
