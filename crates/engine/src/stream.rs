//! Parallel compression of a batch of extents on up to `streams` threads, results in order:
//! zram's multiple compression streams (zcomp), applied to btrfs-style extents.
//!
//! The concurrency limit itself lives in the workspace manager; this only fans the work out.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::engine::{compressed_limit, Engine, Outcome, Policy};
use crate::error::Error;
use crate::spec::CompressSpec;

/// One extent's result from a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extent {
    /// The compressed bytes.
    Compressed(Vec<u8>),
    /// Store the input raw: compression did not save a block.
    Incompressible,
    /// Store the input raw: the policy chose not to try.
    Skipped,
}

impl Extent {
    /// Bytes this extent takes when stored: compressed length, or the input's length.
    pub fn stored_len(&self, input_len: usize) -> usize {
        match self {
            Extent::Compressed(v) => v.len(),
            Extent::Incompressible | Extent::Skipped => input_len,
        }
    }
}

/// Compress every extent of `inputs` with `spec` under `policy`, on at most `threads` threads
/// (at least one). Results come back in input order.
pub fn compress_batch(
    engine: &Engine,
    spec: CompressSpec,
    policy: Policy,
    inputs: &[&[u8]],
    threads: usize,
) -> Vec<Result<Extent, Error>> {
    let threads = threads.clamp(1, inputs.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Result<Extent, Error>>> = (0..inputs.len()).map(|_| None).collect();
    let done: Vec<Vec<(usize, Result<Extent, Error>)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| worker(engine, spec, policy, inputs, &next)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    for (i, r) in done.into_iter().flatten() {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(Error::Library {
                    algorithm: spec.algorithm.unwrap_or(crate::Algorithm::Zstd),
                    reason: "a compression thread panicked".into(),
                })
            })
        })
        .collect()
}

fn worker(
    engine: &Engine,
    spec: CompressSpec,
    policy: Policy,
    inputs: &[&[u8]],
    next: &AtomicUsize,
) -> Vec<(usize, Result<Extent, Error>)> {
    let mut out = Vec::new();
    let longest = inputs.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut dst = vec![0u8; compressed_limit(longest.min(engine.max_extent()))];
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(src) = inputs.get(i) else { return out };
        // An input beyond max_extent gets the whole buffer and compress_with's error for it.
        let limit = compressed_limit(src.len()).min(dst.len());
        let r = engine
            .compress_with(spec, policy, src, &mut dst[..limit])
            .map(|o| match o {
                Outcome::Compressed(n) => Extent::Compressed(dst[..n].to_vec()),
                Outcome::Incompressible => Extent::Incompressible,
                Outcome::Skipped => Extent::Skipped,
            });
        out.push((i, r));
    }
}
