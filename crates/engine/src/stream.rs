//! Parallel compression of a batch of extents on the offload API's CPU workers (zram's
//! multiple compression streams, applied to btrfs-style extents), results in input order.
//!
//! The concurrency limit lives in the offload's fixed worker pool and the workspace manager;
//! this only shapes a batch of borrowed extents into owned results.

use crate::engine::{compressed_limit, Outcome, Policy};
use crate::error::Error;
use std::sync::Arc;

use crate::offload::{BatchJob, Completed, Input, Offload, Op, Request, SubmitError};
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

/// Extents a batch has in flight at once: the staging buffers it reuses. Fresh buffers for
/// every extent of a large batch cost a page fault per 4 KiB touched (measured: compression
/// at less than half the bare library's speed); a window of reused ones costs a bubble of at
/// most one extent per worker at its end.
const WINDOW: usize = 64;

/// Compress every extent of `inputs` with `spec` under `policy` on `offload`'s providers,
/// in windows of reused staging buffers. Results come back in input order.
pub fn compress_batch(
    offload: &Offload,
    spec: CompressSpec,
    policy: Policy,
    inputs: &[&[u8]],
) -> Vec<Result<Extent, Error>> {
    let max = offload.engine().max_extent();
    let longest = inputs.iter().map(|s| s.len()).filter(|&l| l <= max).max();
    let mut staging: Vec<Vec<u8>> = (0..inputs.len().min(WINDOW))
        .map(|_| vec![0; longest.map_or(0, compressed_limit)])
        .collect();
    let mut out = Vec::with_capacity(inputs.len());
    for window in inputs.chunks(WINDOW) {
        let op = Op::Compress { spec, policy };
        let mut jobs: Vec<BatchJob<'_>> = window
            .iter()
            .zip(staging.iter_mut())
            .map(|(src, dst)| {
                // An input beyond max_extent gets the engine's error before its output is used.
                let limit = compressed_limit(src.len()).min(dst.len());
                BatchJob::new(op, src, &mut dst[..limit])
            })
            .collect();
        offload.run_batch(&mut jobs);
        let results: Vec<_> = jobs.into_iter().map(|j| j.result).collect();
        out.extend(
            results
                .into_iter()
                .zip(&staging)
                .map(|(r, dst)| extent(spec, r, dst)),
        );
    }
    out
}

/// Compress every extent of `inputs` (shared, not copied) with `spec` under `policy` on
/// `offload`'s providers, keeping the offload full through a completion queue and copying
/// each result out as it completes, while the workers go on with the next extents. Results in
/// input order. Unlike [`compress_batch`], the copy-out overlaps the compression instead of
/// running between windows.
pub fn compress_shared(
    offload: &Offload,
    spec: CompressSpec,
    policy: Policy,
    inputs: &[Arc<Vec<u8>>],
) -> Vec<Result<Extent, Error>> {
    let op = Op::Compress { spec, policy };
    let queue = offload.completion_queue();
    let mut out: Vec<Option<Result<Extent, Error>>> = (0..inputs.len()).map(|_| None).collect();
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(offload.depth());
    let mut next = 0;
    while next < inputs.len() || queue.outstanding() > 0 {
        while next < inputs.len() && queue.outstanding() < offload.depth() {
            let request = Request {
                op,
                input: Input::Shared(Arc::clone(&inputs[next])),
                // Grown by the worker to the compressed limit the first time only.
                output: spare.pop().unwrap_or_default(),
                tag: next as u64,
            };
            match queue.try_submit(request) {
                Ok(()) => next += 1,
                Err(SubmitError::Full { request, .. }) => {
                    spare.push(request.output);
                    break;
                }
                Err(SubmitError::ShutDown { .. }) => {
                    out[next] = Some(Err(Error::ShutDown));
                    next += 1;
                }
            }
        }
        if let Some(done) = queue.wait(None) {
            let slot = out.get_mut(done.tag as usize);
            if let Some(slot) = slot {
                *slot = Some(extent(spec, Some(done.result), &done.output));
            }
            spare.push(done.output);
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or(Err(Error::ShutDown)))
        .collect()
}

/// One job's result as a batch returns it, the compressed bytes copied out of `dst`.
fn extent(
    spec: CompressSpec,
    result: Option<Result<Completed, Error>>,
    dst: &[u8],
) -> Result<Extent, Error> {
    match result {
        Some(Ok(Completed::Compressed(Outcome::Compressed(n)))) => {
            Ok(Extent::Compressed(dst[..n].to_vec()))
        }
        Some(Ok(Completed::Compressed(Outcome::Incompressible))) => Ok(Extent::Incompressible),
        Some(Ok(Completed::Compressed(Outcome::Skipped))) => Ok(Extent::Skipped),
        Some(Err(e)) => Err(e),
        Some(Ok(other)) => Err(Error::Library {
            algorithm: spec.algorithm.unwrap_or(crate::Algorithm::Zstd),
            reason: format!("a compression request completed as {other:?}"),
        }),
        None => Err(Error::ShutDown),
    }
}
