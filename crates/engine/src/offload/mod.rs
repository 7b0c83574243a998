//! The one asynchronous way to compress and decompress: requests submitted to a provider and
//! completed later, as the kernel's acomp API (`crypto_acomp_compress`, seed 004's btrfs
//! offload RFC).
//!
//! * A [`Request`] is an extent to compress (spec + policy) or to decompress, its input, an
//!   output buffer and a user tag. [`Offload::submit`] blocks while the queue is full and
//!   [`Offload::try_submit`] hands the request back instead: the number of requests in flight
//!   (submitted and not yet collected) never exceeds the configured depth, so memory is
//!   bounded by backpressure, never by hope.
//! * Completion four ways: wait on the [`Ticket`], poll a [`CompletionQueue`], `.await` the
//!   ticket (a runtime-agnostic [`std::future::Future`]; any executor's waker works), or have
//!   a [`Complete`] handler called on the provider's thread ([`Offload::submit_with`]: the
//!   acomp callback, which lets a front end run event-driven with no threads of its own).
//! * An input is the request's own buffer or a shared one ([`Input::Shared`]): a front end
//!   compresses the dirty extent its readers still see without copying it.
//! * [`Offload::run_batch`] runs borrowed jobs to completion on the workers; it
//!   is what a front end uses to spread one read's extents over the streams.
//! * Providers: the CPU (the engine's workspace managers on one fixed pool of worker threads,
//!   one per stream, resized live with [`Offload::set_streams`]) and at most one [`Device`].
//!   A request goes to the device only if the device produces that algorithm at that level
//!   and the input is at least its minimum size; a request it cannot take, or that fails, times
//!   out or is refused while the device is busy, runs on the CPU with the same result (the
//!   seed's software fallback). Unlike the seed's RFC, levels are honoured.
//!
//! Everything is preallocated at creation (slots, queues, histograms), and buffers travel with
//! the request and come back with its completion, so a steady state of submit/complete makes no
//! heap allocation. All shared state sits under one mutex, which is what the shuttle model
//! (`tests/model.rs`) explores.
//!
//! Differs from the kernel: the kernel's acomp completes through a callback in softirq
//! context; here completion is a state change that a waiter, a queue or a future observes.

mod batch;
mod device;
mod queue;
pub mod sim;
mod stats;
mod workers;

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

pub use batch::BatchJob;
pub use device::{Device, DeviceCaps, DeviceError, DeviceWork};
pub use stats::{CodecWork, Fallback, Histogram, OffloadStats, ProviderStats};

use crate::dict::Dictionary;
use crate::engine::{Engine, Outcome, Policy, Saving};
use crate::error::Error;
use crate::spec::{Algorithm, CompressSpec};
use queue::{Shared, Target};

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Compress one extent under a storage rule (btrfs's: it must save a block).
    Compress {
        /// Algorithm and level.
        spec: CompressSpec,
        /// compress-force, the heuristic or early abort.
        policy: Policy,
        /// What it must save to be stored compressed.
        saving: Saving,
    },
    /// Compress one page or extent with no storage rule: the result only has to fit in the
    /// output buffer (zram's rule is the caller's).
    CompressInto {
        /// Algorithm and level.
        spec: CompressSpec,
    },
    /// Decompress one extent whose decoded size is `len`.
    Decompress {
        /// The extent's algorithm.
        algorithm: Algorithm,
        /// Its declared decoded size.
        len: usize,
    },
}

impl Op {
    /// The algorithm and level a provider must produce for this request (decompression has
    /// no level).
    pub fn algorithm_level(&self) -> Option<(Algorithm, Option<i32>)> {
        match *self {
            Op::Compress { spec, .. } | Op::CompressInto { spec } => {
                spec.algorithm.map(|a| (a, Some(spec.level)))
            }
            Op::Decompress { algorithm, .. } => Some((algorithm, None)),
        }
    }

    /// Output bytes this request needs for an input of `input_len` bytes.
    fn output_len(&self, input_len: usize, given: usize) -> usize {
        match *self {
            Op::Compress { saving, .. } => saving.limit(input_len),
            Op::CompressInto { .. } => given,
            Op::Decompress { len, .. } => len,
        }
    }
}

/// A request's input bytes.
#[derive(Debug, Clone)]
pub enum Input {
    /// The request's own buffer, handed back in the completion for reuse.
    Owned(Vec<u8>),
    /// A buffer shared with others (a dirty extent that reads still see), not copied.
    Shared(Arc<Vec<u8>>),
}

impl Input {
    /// The owned buffer back for reuse (a shared one gives an empty vector: nothing to reuse).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Input::Owned(v) => v,
            Input::Shared(a) => Arc::try_unwrap(a).unwrap_or_default(),
        }
    }
}

impl std::ops::Deref for Input {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Input::Owned(v) => v,
            Input::Shared(a) => a,
        }
    }
}

impl From<Vec<u8>> for Input {
    fn from(v: Vec<u8>) -> Input {
        Input::Owned(v)
    }
}

impl From<Arc<Vec<u8>>> for Input {
    fn from(a: Arc<Vec<u8>>) -> Input {
        Input::Shared(a)
    }
}

/// One request: an operation, its input, an output buffer and a tag the caller chooses.
/// Both buffers come back in the [`Done`]; reusing them keeps the steady state allocation-free.
#[derive(Debug)]
pub struct Request {
    /// What to do.
    pub op: Op,
    /// The bytes to compress or decompress.
    pub input: Input,
    /// Where the result goes. Grown (with an allocation) only if shorter than the operation
    /// needs: the compressed limit of the input, or the decoded size. For
    /// [`Op::CompressInto`] its length is the limit.
    pub output: Vec<u8>,
    /// The caller's own identifier, returned unchanged.
    pub tag: u64,
}

/// What a finished request produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completed {
    /// [`Op::Compress`]: what became of the extent; compressed bytes are `output[..n]`.
    Compressed(Outcome),
    /// [`Op::CompressInto`]: `Some(n)` compressed bytes in `output[..n]`, `None` if the
    /// result did not fit.
    CompressedInto(Option<usize>),
    /// [`Op::Decompress`]: the bytes the stream held; `output[..len]` is the extent, its
    /// tail past them zero-filled.
    Decompressed(usize),
}

/// Which provider ran a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// The CPU workers; `Some` when the request fell back from the device, and why.
    Cpu(Option<Fallback>),
    /// The device.
    Device,
}

/// A finished request: its tag, its buffers back, and the result.
#[derive(Debug)]
pub struct Done {
    /// The request's tag.
    pub tag: u64,
    /// The input buffer, as submitted.
    pub input: Input,
    /// The output buffer, holding the result.
    pub output: Vec<u8>,
    /// What the provider produced, or why it could not.
    pub result: Result<Completed, Error>,
    /// Who ran it.
    pub ran: Ran,
}

/// Receives the completions of requests submitted with [`Offload::submit_with`]: the acomp
/// callback. It runs on the provider's thread (a CPU worker or a device thread) after the
/// request's slot is free, with no lock held; while it runs, that thread compresses nothing,
/// so a handler does its follow-up work (a commit) and returns. It must not wait for a slot
/// with [`Offload::submit`] or [`Offload::submit_with`] — with every worker inside a handler
/// nothing would free one — but may use the `try_` forms. A handler that panics loses that
/// completion (logged); the thread goes on.
pub trait Complete: Send + Sync {
    /// Take one completion.
    fn complete(&self, done: Done);
}

/// Why a request was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// Every slot is in flight ([`Offload::try_submit`] only); the request comes back.
    #[error("the offload queue is full ({depth} requests in flight)")]
    Full {
        /// The request, unchanged.
        request: Box<Request>,
        /// The queue depth.
        depth: usize,
    },
    /// The offload is shutting down; the request comes back.
    #[error("the offload queue is shut down")]
    ShutDown {
        /// The request, unchanged.
        request: Box<Request>,
    },
}

impl SubmitError {
    /// The request that was not accepted, unchanged, whatever the reason.
    pub fn into_request(self) -> Box<Request> {
        match self {
            SubmitError::Full { request, .. } | SubmitError::ShutDown { request } => request,
        }
    }
}

/// Settings of an [`Offload`].
#[derive(Clone)]
pub struct OffloadConfig {
    /// Requests in flight at most (submitted and not yet collected), at least 1.
    pub depth: usize,
    /// CPU worker threads; normally the engine's stream limit.
    pub workers: usize,
    /// An optional device provider.
    pub device: Option<Arc<dyn Device>>,
}

impl std::fmt::Debug for OffloadConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffloadConfig")
            .field("depth", &self.depth)
            .field("workers", &self.workers)
            .field("device", &self.device.as_ref().map(|d| d.caps().name))
            .finish()
    }
}

impl OffloadConfig {
    /// A CPU-only offload with one worker per stream of `engine` and a depth of 4 requests per
    /// worker.
    pub fn for_engine(engine: &Engine) -> OffloadConfig {
        let workers = engine.config().streams.max(1);
        OffloadConfig {
            depth: workers * 4,
            workers,
            device: None,
        }
    }
}

/// The submission API. Dropping it finishes every request already accepted, then stops the
/// workers (tickets still held complete normally).
pub struct Offload {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offload")
            .field("depth", &self.shared.depth())
            .finish()
    }
}

impl Offload {
    /// Start the workers (and the device's submission threads) on `engine`.
    pub fn new(engine: Arc<Engine>, config: OffloadConfig) -> Result<Offload, Error> {
        let shared = Shared::new(engine, config)?;
        Ok(Offload { shared })
    }

    /// The engine the CPU provider runs on.
    pub fn engine(&self) -> &Engine {
        self.shared.engine()
    }

    /// Submit a request, waiting while the queue is full. Fails only after shutdown. Slots
    /// are freed when completions are collected, so a thread already holding `depth`
    /// uncollected tickets must collect one before submitting again.
    pub fn submit(&self, request: Request) -> Result<Ticket, SubmitError> {
        let slot = self.shared.submit(request, Target::Ticket, true)?;
        Ok(Ticket::new(Arc::clone(&self.shared), slot))
    }

    /// Submit a request if a slot is free now; otherwise hand it back.
    pub fn try_submit(&self, request: Request) -> Result<Ticket, SubmitError> {
        let slot = self.shared.submit(request, Target::Ticket, false)?;
        Ok(Ticket::new(Arc::clone(&self.shared), slot))
    }

    /// Submit a request whose completion goes to `handler`, waiting while the queue is full.
    /// Not from inside a handler (see [`Complete`]).
    pub fn submit_with(
        &self,
        request: Request,
        handler: &Arc<dyn Complete>,
    ) -> Result<(), SubmitError> {
        self.shared.submit_with(request, handler, true)
    }

    /// As [`Offload::submit_with`], but hands the request back when the queue is full.
    pub fn try_submit_with(
        &self,
        request: Request,
        handler: &Arc<dyn Complete>,
    ) -> Result<(), SubmitError> {
        self.shared.submit_with(request, handler, false)
    }

    /// As [`Offload::try_submit_with`], with `dictionary` when one is given (zstd only, as
    /// [`BatchJob::with_dictionary`]; a request with one runs on the CPU).
    pub fn try_submit_dict_with(
        &self,
        request: Request,
        dictionary: Option<&Dictionary>,
        handler: &Arc<dyn Complete>,
    ) -> Result<(), SubmitError> {
        self.shared
            .submit_dict_with(request, dictionary.cloned(), handler, false)
    }

    /// A completion queue: requests submitted to it are collected with
    /// [`CompletionQueue::poll`] or [`CompletionQueue::wait`], in completion order.
    pub fn completion_queue(&self) -> CompletionQueue {
        CompletionQueue {
            id: self.shared.new_queue(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Run borrowed jobs to completion on the providers (a batch of one CPU job on this
    /// thread); each job's `result` is set. Returns once every job is finished, also when one
    /// fails.
    pub fn run_batch(&self, jobs: &mut [BatchJob<'_>]) {
        batch::run(&self.shared, jobs)
    }

    /// Change the number of CPU workers and the engine's stream limit together (zram's
    /// `max_comp_streams`). Shrinking lets surplus workers finish their request and exit.
    pub fn set_streams(&self, streams: usize) -> Result<(), Error> {
        let streams = streams.max(1);
        self.shared.engine().set_streams(streams);
        self.shared.set_workers(streams)
    }

    /// A handle for submitting from inside completion handlers (see [`Submitter`]).
    pub fn submitter(&self) -> Submitter {
        Submitter {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Requests in flight at most.
    pub fn depth(&self) -> usize {
        self.shared.depth()
    }

    /// CPU worker threads running now.
    pub fn workers(&self) -> usize {
        self.shared.workers()
    }

    /// Statistics per provider.
    pub fn stats(&self) -> OffloadStats {
        self.shared.stats()
    }

    /// Refuse new requests, finish those accepted, stop every thread and wait for them.
    pub fn shutdown(&self) {
        self.shared.shutdown();
    }
}

impl Drop for Offload {
    fn drop(&mut self) {
        self.shared.shutdown();
    }
}

/// A handle that submits to an offload from inside a completion handler — a chain, where each
/// completion submits the next request on the worker that finished the last one, with no other
/// thread woken in between. It never waits for a slot (see [`Complete`]); once the offload is
/// dropped, what it submits is refused as shut down.
#[derive(Debug, Clone)]
pub struct Submitter {
    shared: Arc<Shared>,
}

impl Submitter {
    /// As [`Offload::try_submit_with`].
    pub fn try_submit_with(
        &self,
        request: Request,
        handler: &Arc<dyn Complete>,
    ) -> Result<(), SubmitError> {
        self.shared.submit_with(request, handler, false)
    }
}

/// A submitted request, completed by [`Ticket::wait`], [`Ticket::try_take`] or `.await`.
/// Dropping an unfinished ticket abandons the request: it still runs, and its slot is freed
/// when it finishes.
#[derive(Debug)]
pub struct Ticket {
    shared: Arc<Shared>,
    slot: queue::SlotId,
    taken: bool,
}

impl Ticket {
    fn new(shared: Arc<Shared>, slot: queue::SlotId) -> Ticket {
        Ticket {
            shared,
            slot,
            taken: false,
        }
    }

    /// Wait for the request to finish and take its completion.
    pub fn wait(mut self) -> Done {
        self.taken = true;
        self.shared.wait(self.slot)
    }

    /// The completion if the request has finished, else the ticket back.
    pub fn try_take(mut self) -> Result<Done, Ticket> {
        match self.shared.try_take(self.slot, None) {
            Some(done) => {
                self.taken = true;
                Ok(done)
            }
            None => Err(self),
        }
    }
}

impl std::future::Future for Ticket {
    type Output = Done;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Done> {
        match self.shared.try_take(self.slot, Some(cx.waker())) {
            Some(done) => {
                self.taken = true;
                Poll::Ready(done)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.taken {
            self.shared.abandon(self.slot);
        }
    }
}

/// Completions of the requests submitted through it, in the order they finish. A request's
/// slot stays in flight until its completion is collected here, so an unread queue holds
/// back submitters rather than growing. Dropping the queue abandons what it still holds.
#[derive(Debug)]
pub struct CompletionQueue {
    shared: Arc<Shared>,
    id: usize,
}

impl CompletionQueue {
    /// Submit a request whose completion this queue collects, waiting while the offload is
    /// full — except when this queue holds completions not yet collected (only its owner can
    /// free those slots): then [`SubmitError::Full`] hands the request back, and the caller
    /// collects before submitting again.
    pub fn submit(&self, request: Request) -> Result<(), SubmitError> {
        self.shared
            .submit(request, Target::Queue(self.id), true)
            .map(|_| ())
    }

    /// As [`CompletionQueue::submit`], but hands the request back when the offload is full.
    pub fn try_submit(&self, request: Request) -> Result<(), SubmitError> {
        self.shared
            .submit(request, Target::Queue(self.id), false)
            .map(|_| ())
    }

    /// The next completion, if one is ready.
    pub fn poll(&self) -> Option<Done> {
        self.shared.poll_queue(self.id, None)
    }

    /// The next completion, waiting up to `timeout` (forever with `None`); `None` if nothing
    /// this queue submitted is outstanding, or on time-out.
    pub fn wait(&self, timeout: Option<Duration>) -> Option<Done> {
        self.shared.poll_queue(self.id, Some(timeout))
    }

    /// Requests submitted through this queue and not yet collected.
    pub fn outstanding(&self) -> usize {
        self.shared.queue_outstanding(self.id)
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        self.shared.close_queue(self.id);
    }
}

#[cfg(test)]
mod tests;
