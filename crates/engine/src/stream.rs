//! Parallel compression of a batch of extents on the offload API's CPU workers (zram's
//! multiple compression streams, applied to btrfs-style extents), results in input order.
//!
//! The concurrency limit lives in the offload's fixed worker pool and the workspace manager;
//! this only shapes a batch of borrowed extents into owned results.

use crate::engine::{compressed_limit, Outcome, Policy};
use crate::error::Error;
use crate::offload::{BatchJob, Completed, Offload, Op};
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

/// Compress every extent of `inputs` with `spec` under `policy` on `offload`'s providers,
/// the calling thread helping. Results come back in input order.
pub fn compress_batch(
    offload: &Offload,
    spec: CompressSpec,
    policy: Policy,
    inputs: &[&[u8]],
) -> Vec<Result<Extent, Error>> {
    let max = offload.engine().max_extent();
    // An input beyond max_extent gets an empty buffer and the engine's error for it.
    let mut outputs: Vec<Vec<u8>> = inputs
        .iter()
        .map(|s| match s.len() <= max {
            true => vec![0; compressed_limit(s.len())],
            false => Vec::new(),
        })
        .collect();
    let op = Op::Compress { spec, policy };
    let mut jobs: Vec<BatchJob<'_>> = inputs
        .iter()
        .zip(outputs.iter_mut())
        .map(|(src, dst)| BatchJob::new(op, src, dst))
        .collect();
    offload.run_batch(&mut jobs);
    let results: Vec<_> = jobs.into_iter().map(|j| j.result).collect();
    results
        .into_iter()
        .zip(outputs)
        .map(|(r, mut out)| match r {
            Some(Ok(Completed::Compressed(Outcome::Compressed(n)))) => {
                out.truncate(n);
                Ok(Extent::Compressed(out))
            }
            Some(Ok(Completed::Compressed(Outcome::Incompressible))) => Ok(Extent::Incompressible),
            Some(Ok(Completed::Compressed(Outcome::Skipped))) => Ok(Extent::Skipped),
            Some(Err(e)) => Err(e),
            Some(Ok(other)) => Err(Error::Library {
                algorithm: spec.algorithm.unwrap_or(crate::Algorithm::Zstd),
                reason: format!("a compression request completed as {other:?}"),
            }),
            None => Err(Error::ShutDown),
        })
        .collect()
}
