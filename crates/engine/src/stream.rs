//! Parallel compression of a batch of extents on the offload API's CPU workers (zram's
//! multiple compression streams, applied to btrfs-style extents), results in input order.
//!
//! The concurrency limit lives in the offload's fixed worker pool and the workspace manager;
//! this only shapes a batch of borrowed extents into owned results.

use crate::engine::{compressed_limit, Outcome, Policy, Saving};
use crate::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use crate::offload::{
    BatchJob, Complete, Completed, Done, Input, Offload, Op, Request, SubmitError, Submitter,
};
use crate::spec::CompressSpec;
use crate::sync::{lock, wait, Condvar, Mutex};

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
        let op = Op::Compress {
            spec,
            policy,
            saving: Saving::Block,
        };
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
/// `offload`'s providers. Results in input order.
///
/// Unlike [`compress_batch`], nothing waits between extents: the calling thread fills the
/// offload once, and from then on each completion's handler copies its result out and submits
/// the next extent on the worker that finished it, reusing the output buffer — the calling
/// thread is not woken per extent (on two cores a third thread woken for every completion
/// preempts a worker), and the copy-out runs on the workers in parallel, as a bare loop would.
pub fn compress_shared(
    offload: &Offload,
    spec: CompressSpec,
    policy: Policy,
    inputs: &[Arc<Vec<u8>>],
) -> Vec<Result<Extent, Error>> {
    compress_shared_with(offload, spec, policy, Saving::Block, inputs)
}

/// [`compress_shared`] under another storage rule: [`Saving::Bytes`] is the packed store's
/// (wring's filesystem), which tries extents of one block too.
pub fn compress_shared_with(
    offload: &Offload,
    spec: CompressSpec,
    policy: Policy,
    saving: Saving,
    inputs: &[Arc<Vec<u8>>],
) -> Vec<Result<Extent, Error>> {
    let chain = Arc::new_cyclic(|me| Chain {
        me: me.clone(),
        inputs: inputs.to_vec(),
        op: Op::Compress {
            spec,
            policy,
            saving,
        },
        spec,
        submitter: offload.submitter(),
        next: AtomicUsize::new(0),
        state: Mutex::new(ChainState {
            out: (0..inputs.len()).map(|_| None).collect(),
            left: inputs.len(),
            parked: Vec::new(),
        }),
        changed: Condvar::new(),
    });
    let handler: Arc<dyn Complete> = chain.clone();
    let mut parked: Vec<(usize, Vec<u8>)> = (0..offload.depth())
        .map_while(|_| chain.take_next().map(|i| (i, Vec::new())))
        .collect();
    loop {
        // Requests the handlers could not submit (the offload was full of others' requests),
        // and the first fill: this thread may wait for a slot.
        for (i, output) in parked.drain(..) {
            if let Err(e) = offload.submit_with(chain.request(i, output), &handler) {
                chain.refused(i, e);
            }
        }
        let mut st = lock(&chain.state);
        while st.left > 0 && st.parked.is_empty() {
            st = wait(&chain.changed, st);
        }
        if st.left == 0 {
            let out = std::mem::take(&mut st.out);
            return out
                .into_iter()
                .map(|r| r.unwrap_or(Err(Error::ShutDown)))
                .collect();
        }
        parked = std::mem::take(&mut st.parked);
    }
}

/// The state of one [`compress_shared`] call, shared with its completion handlers.
struct Chain {
    me: Weak<Chain>,
    inputs: Vec<Arc<Vec<u8>>>,
    op: Op,
    spec: CompressSpec,
    submitter: Submitter,
    /// The next extent to submit.
    next: AtomicUsize,
    state: Mutex<ChainState>,
    /// Signalled when the last result arrives or a request is parked.
    changed: Condvar,
}

struct ChainState {
    out: Vec<Option<Result<Extent, Error>>>,
    /// Results still to come.
    left: usize,
    /// Extents (with their output buffers) a handler could not submit.
    parked: Vec<(usize, Vec<u8>)>,
}

impl Chain {
    fn take_next(&self) -> Option<usize> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.inputs.len()).then_some(i)
    }

    fn request(&self, i: usize, output: Vec<u8>) -> Request {
        Request {
            op: self.op,
            input: Input::Shared(Arc::clone(&self.inputs[i])),
            // Grown by the worker to the compressed limit the first time only.
            output,
            tag: i as u64,
        }
    }

    /// Record the result of extent `i`.
    fn set(&self, i: usize, result: Result<Extent, Error>) {
        let mut st = lock(&self.state);
        if let Some(slot) = st.out.get_mut(i) {
            *slot = Some(result);
        }
        st.left -= 1;
        if st.left == 0 {
            self.changed.notify_all();
        }
    }

    /// A request the offload refused: a full queue parks it for the calling thread, a shut
    /// down one is that extent's error.
    fn refused(&self, i: usize, e: SubmitError) {
        match e {
            SubmitError::Full { request, .. } => {
                lock(&self.state).parked.push((i, request.output));
                self.changed.notify_all();
            }
            SubmitError::ShutDown { .. } => self.set(i, Err(Error::ShutDown)),
        }
    }
}

impl Complete for Chain {
    fn complete(&self, done: Done) {
        let i = done.tag as usize;
        self.set(i, extent(self.spec, Some(done.result), &done.output));
        let (Some(next), Some(me)) = (self.take_next(), self.me.upgrade()) else {
            return;
        };
        let me: Arc<dyn Complete> = me;
        if let Err(e) = self
            .submitter
            .try_submit_with(self.request(next, done.output), &me)
        {
            self.refused(next, e);
        }
    }
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
