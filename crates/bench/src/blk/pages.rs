//! The block device's page path against the bare library: every 4 KiB page of the input
//! compressed, then decompressed, one thread, once through the device's streams
//! ([`OffloadStreams`]: the offload API's batch of one on the calling thread, a workspace leased
//! from the engine's manager, the device's counters) and once through a codec state made
//! before the clock starts ([`standalone`], the library call a program would make itself).
//! Engine time over bare time is what wring adds per page (issue 31's bar: 1.1× at lz4); the
//! median of the passes, each pass timing both paths back to back.

use std::time::Instant;

use serde::Serialize;
use wring_blk::{OffloadStreams, PageJob, Streams, PAGE_SIZE};
use wring_engine::codec::standalone;
use wring_engine::CompressSpec;

use crate::metrics::{mb_per_s, median};
use crate::BenchError;

/// Pages handed to the streams at once, as the device's write path hands them a request's.
const CHUNK: usize = 64;

/// One algorithm's page path against the bare library.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageOverhead {
    /// The device's algorithm (zram's name, a level for zstd).
    pub method: String,
    /// Pages compressed per pass.
    pub pages: usize,
    /// Engine time over bare time, compressing (1.00 = nothing added).
    pub compress: f64,
    /// Engine time over bare time, decompressing.
    pub decompress: f64,
    /// The bare library's MB/s on one thread, compressing.
    pub bare_compress_mbps: f64,
    /// The bare library's MB/s on one thread, decompressing.
    pub bare_decompress_mbps: f64,
}

/// Compressed pages: each page's bytes at `at[i]` in `bytes` (`None`: it did not fit).
struct Packed {
    bytes: Vec<u8>,
    at: Vec<Option<(usize, usize)>>,
}

/// Measure `method` (`lz4`, `zstd:3`; 4 KiB slots, no dictionary) over `data`'s pages.
pub fn measure(method: &str, data: &[u8], passes: usize) -> Result<PageOverhead, BenchError> {
    let bad = |e: String| BenchError::Spec(format!("{method}: {e}"));
    let (spec, _) = CompressSpec::parse(method).map_err(|e| bad(e.to_string()))?;
    let algorithm = spec
        .algorithm
        .ok_or_else(|| bad("not an algorithm".into()))?;
    let streams = OffloadStreams::new(spec, method, 1).map_err(|e| bad(e.to_string()))?;
    let mut bare = standalone(algorithm, spec.level, PAGE_SIZE).map_err(|e| bad(e.to_string()))?;
    let pages: Vec<&[u8]> = data.chunks_exact(PAGE_SIZE).collect();
    let mut out = vec![0u8; pages.len() * PAGE_SIZE];
    let (mut c, mut d) = (Vec::new(), Vec::new());
    let (mut bare_c, mut bare_d) = (Vec::new(), Vec::new());
    for _ in 0..passes.max(1) {
        crate::interrupt::check()?;
        let t = Instant::now();
        let packed = engine_compress(&streams, &pages, &mut out)?;
        let engine_c = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let bare_packed = bare_compress(&mut *bare, spec.level, &pages, &mut out)?;
        let b_c = t.elapsed().as_secs_f64();
        if bare_packed.at.iter().filter(|a| a.is_some()).count()
            != packed.at.iter().filter(|a| a.is_some()).count()
        {
            return Err(bad("the engine and the library kept different pages".into()));
        }
        let t = Instant::now();
        engine_decompress(&streams, &packed, &pages, &mut out)?;
        let engine_d = t.elapsed().as_secs_f64();
        let t = Instant::now();
        bare_decompress(&mut *bare, &packed, &pages, &mut out)?;
        let b_d = t.elapsed().as_secs_f64();
        c.push(engine_c / b_c.max(1e-9));
        d.push(engine_d / b_d.max(1e-9));
        bare_c.push(b_c);
        bare_d.push(b_d);
    }
    let bytes = (pages.len() * PAGE_SIZE) as u64;
    Ok(PageOverhead {
        method: method.to_string(),
        pages: pages.len(),
        compress: median(&c),
        decompress: median(&d),
        bare_compress_mbps: mb_per_s(bytes, median(&bare_c)),
        bare_decompress_mbps: mb_per_s(bytes, median(&bare_d)),
    })
}

fn engine_compress(
    streams: &OffloadStreams,
    pages: &[&[u8]],
    out: &mut [u8],
) -> Result<Packed, BenchError> {
    let mut at = Vec::with_capacity(pages.len());
    for (chunk, outs) in pages.chunks(CHUNK).zip(out.chunks_mut(CHUNK * PAGE_SIZE)) {
        let mut jobs: Vec<PageJob<'_>> = chunk
            .iter()
            .zip(outs.chunks_mut(PAGE_SIZE))
            .map(|(p, o)| PageJob::new(p, o))
            .collect();
        streams.compress(&mut jobs);
        for job in jobs {
            let n = match job.result {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(BenchError::Spec(e.to_string())),
                None => None,
            };
            at.push(n);
        }
    }
    Ok(pack(out, at))
}

fn bare_compress(
    state: &mut dyn wring_engine::codec::CodecState,
    level: i32,
    pages: &[&[u8]],
    out: &mut [u8],
) -> Result<Packed, BenchError> {
    let mut at = Vec::with_capacity(pages.len());
    for (p, o) in pages.iter().zip(out.chunks_mut(PAGE_SIZE)) {
        let n = state
            .compress(level, p, o)
            .map_err(|e| BenchError::Spec(e.to_string()))?;
        at.push(n);
    }
    Ok(pack(out, at))
}

/// Gather the compressed pages (page `i`'s first `n` bytes of its slot in `out`).
fn pack(out: &[u8], sizes: Vec<Option<usize>>) -> Packed {
    let mut bytes = Vec::new();
    let mut at = Vec::with_capacity(sizes.len());
    for (i, n) in sizes.into_iter().enumerate() {
        at.push(n.map(|n| {
            let start = bytes.len();
            bytes.extend_from_slice(&out[i * PAGE_SIZE..i * PAGE_SIZE + n]);
            (start, n)
        }));
    }
    Packed { bytes, at }
}

fn engine_decompress(
    streams: &OffloadStreams,
    packed: &Packed,
    pages: &[&[u8]],
    out: &mut [u8],
) -> Result<(), BenchError> {
    let mut jobs: Vec<PageJob<'_>> = Vec::with_capacity(CHUNK);
    let mut want: Vec<usize> = Vec::with_capacity(CHUNK);
    let mut slots = out.chunks_mut(PAGE_SIZE).enumerate();
    loop {
        jobs.clear();
        want.clear();
        for (i, o) in slots.by_ref() {
            if let Some((s, n)) = packed.at[i] {
                jobs.push(PageJob::new(&packed.bytes[s..s + n], o));
                want.push(i);
                if jobs.len() == CHUNK {
                    break;
                }
            }
        }
        if jobs.is_empty() {
            return Ok(());
        }
        streams.decompress(&mut jobs);
        for (job, &i) in jobs.iter().zip(&want) {
            match &job.result {
                Some(Ok(_)) if job.output[..] == pages[i][..] => {}
                Some(Err(e)) => return Err(BenchError::Spec(e.to_string())),
                _ => return Err(BenchError::Spec(format!("page {i} decoded wrong"))),
            }
        }
    }
}

fn bare_decompress(
    state: &mut dyn wring_engine::codec::CodecState,
    packed: &Packed,
    pages: &[&[u8]],
    out: &mut [u8],
) -> Result<(), BenchError> {
    for (i, o) in out.chunks_mut(PAGE_SIZE).enumerate() {
        if let Some((s, n)) = packed.at[i] {
            state
                .decompress(&packed.bytes[s..s + n], o)
                .map_err(|e| BenchError::Spec(e.to_string()))?;
            if o[..] != pages[i][..] {
                return Err(BenchError::Spec(format!("page {i} decoded wrong (bare)")));
            }
        }
    }
    Ok(())
}
