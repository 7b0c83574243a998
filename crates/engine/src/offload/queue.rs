//! The offload's shared state machine: a fixed array of request slots, the CPU and device run
//! queues, completion queues and statistics, all under one mutex, with four condition
//! variables (work for the CPU, work for the device, completions, free slots).
//!
//! A slot goes Free → Queued → Running → Done → Free. Fallback moves a device request from
//! Running back to Queued on the CPU queue. An abandoned slot (its ticket or queue dropped)
//! goes straight from Running to Free when its request finishes.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::device::{Device, DeviceCaps};
use super::stats::{Fallback, ProviderStats};
use super::{Complete, Completed, Done, Input, OffloadConfig, Op, Ran, Request, SubmitError};
use crate::dict::Dictionary;
use crate::engine::Engine;
use crate::error::Error;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{lock, wait, wait_timeout, Mutex, MutexGuard, Signal};

/// A slot and the generation it had when the request was submitted (guards against a stale
/// ticket reading a reused slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotId {
    pub(crate) index: usize,
    gen: u64,
}

/// Who collects a finished request.
#[derive(Clone)]
pub(super) enum Target {
    /// A [`super::Ticket`] or a batch job waits for it.
    Ticket,
    /// A completion queue.
    Queue(usize),
    /// A handler called on the provider's thread.
    Handler(Arc<dyn Complete>),
}

impl Target {
    fn queue(&self) -> Option<usize> {
        match self {
            Target::Queue(q) => Some(*q),
            _ => None,
        }
    }
}

/// Input bytes: the request's own, or borrowed by a running batch.
pub(super) enum Src {
    Request(Input),
    Borrowed { ptr: *const u8, len: usize },
}

/// Output bytes, likewise.
pub(super) enum Output {
    Owned(Vec<u8>),
    Borrowed { ptr: *mut u8, len: usize },
}

/// A request as the providers see it.
pub(crate) struct Job {
    pub(super) op: Op,
    pub(super) input: Src,
    pub(super) output: Output,
    /// The dictionary to use (borrowed batches only, for now; a job with one runs on the CPU).
    pub(super) dictionary: Option<Dictionary>,
    pub(super) tag: u64,
}

// SAFETY: owned buffers are Send. Borrowed pointers are made only by `batch::run`, which
// neither returns nor unwinds before every job it submitted has finished (it waits for each
// slot, in a drop guard too), and which gives each job a slice no other job or thread touches;
// so a job's pointers stay valid, and exclusively its own, wherever the job is run.
unsafe impl Send for Job {}

impl Job {
    pub(super) fn owned(r: Request, dictionary: Option<Dictionary>) -> Job {
        Job {
            op: r.op,
            input: Src::Request(r.input),
            output: Output::Owned(r.output),
            dictionary,
            tag: r.tag,
        }
    }

    pub(super) fn input(&self) -> &[u8] {
        match &self.input {
            Src::Request(v) => v,
            // SAFETY: see `unsafe impl Send for Job`: the batch that made the pointer keeps the
            // slice alive and unaliased until this job has finished.
            Src::Borrowed { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }

    /// The output, at least `need` bytes long (an owned buffer grows; a borrowed one that is
    /// too short is an error), cut to `need`.
    pub(super) fn output(&mut self, need: usize) -> Result<&mut [u8], Error> {
        match &mut self.output {
            Output::Owned(v) => {
                if v.len() < need {
                    v.resize(need, 0);
                }
                Ok(&mut v[..need])
            }
            Output::Borrowed { ptr, len } if *len >= need => {
                // SAFETY: as for the input; the batch job's output slice is exclusively ours.
                Ok(unsafe { std::slice::from_raw_parts_mut(*ptr, need) })
            }
            Output::Borrowed { len, .. } => Err(Error::ShortBuffer { got: *len, need }),
        }
    }

    fn into_request(self) -> Request {
        let op = self.op;
        let done = self.into_done(Err(Error::ShutDown), Ran::Cpu(None));
        Request {
            op,
            input: done.input,
            output: done.output,
            tag: done.tag,
        }
    }

    fn into_done(self, result: Result<Completed, Error>, ran: Ran) -> Done {
        let vec_in = match self.input {
            Src::Request(v) => v,
            Src::Borrowed { .. } => Input::Owned(Vec::new()),
        };
        let vec_out = match self.output {
            Output::Owned(v) => v,
            Output::Borrowed { .. } => Vec::new(),
        };
        Done {
            tag: self.tag,
            input: vec_in,
            output: vec_out,
            result,
            ran,
        }
    }

    fn given_output_len(&self) -> usize {
        match &self.output {
            Output::Owned(v) => v.len(),
            Output::Borrowed { len, .. } => *len,
        }
    }
}

/// Run one request on `engine` (the CPU provider, and the simulated device's reference). A
/// panic in a codec becomes an error of this request.
pub(crate) fn execute(engine: &Engine, job: &mut Job) -> Result<Completed, Error> {
    catch_unwind(AssertUnwindSafe(|| run(engine, job))).unwrap_or(Err(Error::Panicked))
}

fn run(engine: &Engine, job: &mut Job) -> Result<Completed, Error> {
    let op = job.op;
    let input_len = job.input().len();
    let need = op.output_len(input_len, job.given_output_len());
    // The extent's size bounds the output: check it before sizing any buffer.
    let len = match op {
        Op::Decompress { len, .. } => len,
        Op::Compress { .. } | Op::CompressInto { .. } => input_len,
    };
    if len > engine.max_extent() {
        return Err(Error::ExtentTooLarge {
            len,
            max: engine.max_extent(),
        });
    }
    // The input is read through a raw pointer copy so that the output can be borrowed
    // mutably at the same time; they never overlap (distinct buffers).
    let input: *const [u8] = job.input();
    let dictionary = job.dictionary.clone();
    let dictionary = dictionary.as_ref();
    let out = job.output(need)?;
    // SAFETY: `input` points at the job's input buffer, which `output` does not touch and
    // which lives as long as the job.
    let src = unsafe { &*input };
    match op {
        Op::Compress {
            spec,
            policy,
            saving,
        } => engine
            .compress_with_dict(spec, policy, saving, dictionary, src, out)
            .map(Completed::Compressed),
        Op::CompressInto { spec } => engine
            .compress_into_dict(spec, dictionary, src, out)
            .map(Completed::CompressedInto),
        Op::Decompress { algorithm, .. } => engine
            .decompress_dict(algorithm, dictionary, src, out)
            .map(Completed::Decompressed),
    }
}

/// What a finished request still needs once the state lock is released.
#[must_use]
pub(super) enum Notify {
    /// Nothing: a waiter was signalled, or the request was abandoned.
    Nothing,
    /// Wake a future's task.
    Wake(Waker),
    /// Hand the completion to its handler.
    Call(Arc<dyn Complete>, Done),
}

impl Notify {
    /// Do it (on the provider's thread, with no lock held). A handler that panics loses only
    /// its own completion; the provider thread goes on.
    pub(super) fn run(self) {
        match self {
            Notify::Nothing => {}
            Notify::Wake(w) => w.wake(),
            Notify::Call(handler, done) => {
                let tag = done.tag;
                if catch_unwind(AssertUnwindSafe(|| handler.complete(done))).is_err() {
                    log::error!("offload: the completion handler of request {tag} panicked");
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Free,
    Queued,
    Running,
    Done,
}

pub(super) struct Slot {
    pub(super) gen: u64,
    pub(super) phase: Phase,
    pub(super) job: Option<Job>,
    pub(super) result: Option<(Result<Completed, Error>, Ran)>,
    pub(super) target: Target,
    pub(super) abandoned: bool,
    pub(super) waker: Option<Waker>,
    pub(super) since: Instant,
    pub(super) fallback: Option<Fallback>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            gen: 0,
            phase: Phase::Free,
            job: None,
            result: None,
            target: Target::Ticket,
            abandoned: false,
            waker: None,
            since: Instant::now(),
            fallback: None,
        }
    }
}

pub(super) struct CompletionList {
    pub(super) ready: VecDeque<usize>,
    pub(super) outstanding: usize,
    pub(super) open: bool,
}

pub(super) struct State {
    pub(super) slots: Vec<Slot>,
    pub(super) free: Vec<usize>,
    pub(super) cpu: VecDeque<usize>,
    pub(super) device: VecDeque<usize>,
    /// Device requests taken by a device thread and not yet back.
    pub(super) on_device: usize,
    pub(super) queues: Vec<CompletionList>,
    pub(super) workers_wanted: usize,
    pub(super) workers_running: usize,
    pub(super) device_threads: usize,
    pub(super) shutdown: bool,
    pub(super) cpu_stats: ProviderStats,
    pub(super) device_stats: Option<ProviderStats>,
}

pub(crate) struct Shared {
    pub(super) engine: Arc<Engine>,
    pub(super) device: Option<(Arc<dyn Device>, DeviceCaps)>,
    pub(super) depth: usize,
    pub(super) state: Mutex<State>,
    /// `state.shutdown`, readable without the lock: a job run on the caller's thread
    /// ([`Shared::run_here`]) checks it, then takes the lock once, after the work.
    pub(super) stopped: AtomicBool,
    pub(super) cpu_work: Signal,
    pub(super) device_work: Signal,
    pub(super) done: Signal,
    pub(super) space: Signal,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("depth", &self.depth)
            .finish()
    }
}

/// Where a new request goes.
enum Route {
    Cpu(Option<Fallback>),
    Device,
}

impl Shared {
    pub(super) fn new(engine: Arc<Engine>, cfg: OffloadConfig) -> Result<Arc<Shared>, Error> {
        let depth = cfg.depth.max(1);
        let device = cfg.device.map(|d| {
            let caps = d.caps();
            (d, caps)
        });
        let state = State {
            slots: (0..depth).map(|_| Slot::new()).collect(),
            free: (0..depth).rev().collect(),
            cpu: VecDeque::with_capacity(depth),
            device: VecDeque::with_capacity(depth),
            on_device: 0,
            queues: Vec::new(),
            workers_wanted: 0,
            workers_running: 0,
            device_threads: 0,
            shutdown: false,
            cpu_stats: ProviderStats::new("cpu"),
            device_stats: device.as_ref().map(|(_, c)| ProviderStats::new(c.name)),
        };
        let shared = Arc::new(Shared {
            engine,
            device,
            depth,
            state: Mutex::new(state),
            stopped: AtomicBool::new(false),
            cpu_work: Signal::new(),
            device_work: Signal::new(),
            done: Signal::new(),
            space: Signal::new(),
        });
        let started = shared
            .set_workers(cfg.workers.max(1))
            .and_then(|()| shared.start_device_threads());
        if let Err(e) = started {
            shared.shutdown();
            return Err(e);
        }
        Ok(shared)
    }

    pub(super) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(super) fn depth(&self) -> usize {
        self.depth
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn route(&self, st: &State, job: &Job) -> Route {
        let (op, input_len) = (&job.op, job.input().len());
        let Some((_, caps)) = &self.device else {
            return Route::Cpu(None);
        };
        // A device takes no dictionary.
        if !caps.produces(op) || job.dictionary.is_some() {
            return Route::Cpu(Some(Fallback::Unsupported));
        }
        // The threshold is on the extent's size: the input when compressing, the decoded
        // size when decompressing (a 64 KiB extent is still 64 KiB of work when it is stored
        // in 20).
        let size = match *op {
            Op::Decompress { len, .. } => len,
            Op::Compress { .. } | Op::CompressInto { .. } => input_len,
        };
        if size < caps.min_len {
            return Route::Cpu(Some(Fallback::BelowThreshold));
        }
        if st.device.len() + st.on_device >= caps.queue_depth {
            return Route::Cpu(Some(Fallback::Busy));
        }
        Route::Device
    }

    /// Accept an owned request.
    pub(super) fn submit(
        &self,
        request: Request,
        target: Target,
        block: bool,
    ) -> Result<SlotId, SubmitError> {
        self.submit_dict(request, None, target, block)
    }

    /// Accept an owned request, with `dictionary` when one is given.
    pub(super) fn submit_dict(
        &self,
        request: Request,
        dictionary: Option<Dictionary>,
        target: Target,
        block: bool,
    ) -> Result<SlotId, SubmitError> {
        self.submit_job(Job::owned(request, dictionary), target, block)
            .map_err(|(job, full)| {
                let request = Box::new(job.into_request());
                match full {
                    true => SubmitError::Full {
                        request,
                        depth: self.depth,
                    },
                    false => SubmitError::ShutDown { request },
                }
            })
    }

    /// Accept an owned request whose completion goes to `handler`.
    pub(super) fn submit_with(
        &self,
        request: Request,
        handler: &Arc<dyn Complete>,
        block: bool,
    ) -> Result<(), SubmitError> {
        self.submit_dict_with(request, None, handler, block)
    }

    /// Accept an owned request, with `dictionary` when one is given, whose completion goes to
    /// `handler`.
    pub(super) fn submit_dict_with(
        &self,
        request: Request,
        dictionary: Option<Dictionary>,
        handler: &Arc<dyn Complete>,
        block: bool,
    ) -> Result<(), SubmitError> {
        let target = Target::Handler(Arc::clone(handler));
        self.submit_dict(request, dictionary, target, block)
            .map(|_| ())
    }

    /// Accept a job: take a free slot (waiting for one if `block`), route it, queue it.
    /// Refused: the job back, and `true` if the queue was full (else shut down).
    pub(super) fn submit_job(
        &self,
        job: Job,
        target: Target,
        block: bool,
    ) -> Result<SlotId, (Job, bool)> {
        let mut st = self.state();
        let index = loop {
            if st.shutdown {
                return Err((job, false));
            }
            if let Some(i) = st.free.pop() {
                break i;
            }
            // A queue that holds completions it has not collected must collect them rather
            // than wait: two queues each waiting for the other's slots would never wake.
            let own = target.queue().is_some_and(|q| {
                let list = &st.queues[q];
                list.outstanding >= self.depth || !list.ready.is_empty()
            });
            if !block || own {
                return Err((job, true));
            }
            st = wait(&self.space, st);
        };
        let route = self.route(&st, &job);
        let st = &mut *st;
        let slot = &mut st.slots[index];
        slot.gen += 1;
        slot.phase = Phase::Queued;
        slot.job = Some(job);
        slot.result = None;
        slot.target = target;
        slot.abandoned = false;
        slot.waker = None;
        slot.since = Instant::now();
        let id = SlotId {
            index,
            gen: slot.gen,
        };
        if let Some(q) = slot.target.queue() {
            st.queues[q].outstanding += 1;
        }
        match route {
            Route::Device => {
                slot.fallback = None;
                if let Some(s) = st.device_stats.as_mut() {
                    s.submitted += 1;
                }
                st.device.push_back(index);
                self.device_work.notify_one();
            }
            Route::Cpu(fallback) => {
                slot.fallback = fallback;
                st.cpu_stats.submitted += 1;
                if let Some(f) = fallback {
                    st.cpu_stats.fallbacks[f as usize] += 1;
                }
                st.cpu.push_back(index);
                self.cpu_work.notify_one();
            }
        }
        Ok(id)
    }

    /// Take the next CPU job, marking it running.
    pub(super) fn take_cpu(&self, st: &mut State) -> Option<(usize, Job, Option<Fallback>)> {
        let index = st.cpu.pop_front()?;
        let slot = &mut st.slots[index];
        slot.phase = Phase::Running;
        let waited = slot.since.elapsed();
        let fallback = slot.fallback;
        let job = slot.job.take()?;
        st.cpu_stats.queue_wait.record(waited);
        Some((index, job, fallback))
    }

    pub(super) fn has_device(&self) -> bool {
        self.device.is_some()
    }

    /// Run a job on the calling thread as a CPU request (counted as one), unless shut down.
    /// The state lock is taken once, after the work, to count it submitted and completed: a
    /// block device runs every 4 KiB page through here from its request threads, and a second
    /// lock per page was a contended one (issue 31's profile). A shutdown that begins while
    /// the job runs lets it finish, as it lets accepted requests finish.
    pub(super) fn run_here(&self, job: &mut Job) -> Result<Completed, Error> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let start = Instant::now();
        let result = execute(&self.engine, job);
        let service = start.elapsed();
        let mut st = self.state();
        st.cpu_stats.submitted += 1;
        st.cpu_stats.queue_wait.record(Duration::ZERO);
        st.cpu_stats.completed += 1;
        st.cpu_stats.service.record(service);
        let input_len = job.input().len();
        st.cpu_stats
            .record_work(job.op, input_len, &result, service);
        result
    }

    /// Run a CPU job taken from the queue and finish it.
    pub(super) fn run_cpu(&self, index: usize, mut job: Job, fallback: Option<Fallback>) {
        let start = Instant::now();
        let result = execute(&self.engine, &mut job);
        let service = start.elapsed();
        let notify = self.finish(
            &mut self.state(),
            index,
            job,
            result,
            Ran::Cpu(fallback),
            service,
        );
        notify.run();
    }

    /// Record a finished request and hand it to whoever collects it; what the returned
    /// [`Notify`] says must be done once the state lock is released.
    pub(super) fn finish(
        &self,
        st: &mut State,
        index: usize,
        job: Job,
        result: Result<Completed, Error>,
        ran: Ran,
        service: Duration,
    ) -> Notify {
        let stats = match ran {
            Ran::Device => st.device_stats.as_mut().unwrap_or(&mut st.cpu_stats),
            Ran::Cpu(_) => &mut st.cpu_stats,
        };
        stats.completed += 1;
        stats.service.record(service);
        stats.record_work(job.op, job.input().len(), &result, service);
        let slot = &mut st.slots[index];
        if slot.abandoned {
            slot.phase = Phase::Free;
            st.free.push(index);
            self.space.notify_one();
            drop(job);
            return Notify::Nothing;
        }
        if let Target::Handler(handler) = &slot.target {
            let handler = Arc::clone(handler);
            slot.target = Target::Ticket;
            // Collected at once: the slot is free before the handler runs, so the handler may
            // submit again.
            slot.phase = Phase::Free;
            slot.waker = None;
            st.free.push(index);
            self.space.notify_one();
            self.done.notify_all();
            return Notify::Call(handler, job.into_done(result, ran));
        }
        slot.phase = Phase::Done;
        slot.job = Some(job);
        slot.result = Some((result, ran));
        let waker = slot.waker.take();
        if let Some(q) = slot.target.queue() {
            st.queues[q].ready.push_back(index);
            // Its submitter may be waiting for a slot: it now has one to collect instead.
            self.space.notify_all();
        }
        self.done.notify_all();
        waker.map_or(Notify::Nothing, Notify::Wake)
    }

    /// Free a Done slot and return its completion.
    fn collect(&self, st: &mut State, index: usize) -> Option<Done> {
        let slot = &mut st.slots[index];
        let (result, ran) = slot.result.take()?;
        let job = slot.job.take()?;
        slot.phase = Phase::Free;
        slot.waker = None;
        st.free.push(index);
        self.space.notify_one();
        Some(job.into_done(result, ran))
    }

    pub(super) fn try_take(&self, id: SlotId, waker: Option<&Waker>) -> Option<Done> {
        let mut st = self.state();
        let slot = &mut st.slots[id.index];
        if slot.gen != id.gen {
            return None;
        }
        if slot.phase == Phase::Done {
            return self.collect(&mut st, id.index);
        }
        if let Some(w) = waker {
            if !slot.waker.as_ref().is_some_and(|old| old.will_wake(w)) {
                slot.waker = Some(w.clone());
            }
        }
        None
    }

    pub(super) fn wait(&self, id: SlotId) -> Done {
        let mut st = self.state();
        loop {
            let slot = &st.slots[id.index];
            if slot.gen == id.gen && slot.phase == Phase::Done {
                if let Some(done) = self.collect(&mut st, id.index) {
                    return done;
                }
            }
            st = wait(&self.done, st);
        }
    }

    pub(super) fn abandon(&self, id: SlotId) {
        let mut st = self.state();
        let slot = &mut st.slots[id.index];
        if slot.gen != id.gen || slot.phase == Phase::Free {
            return;
        }
        if slot.phase == Phase::Done {
            let _ = self.collect(&mut st, id.index);
        } else {
            slot.abandoned = true;
        }
    }

    /// A completion list for a new queue: a closed, drained one again, or a new one.
    pub(super) fn new_queue(&self) -> usize {
        let mut st = self.state();
        if let Some(i) = st.queues.iter().position(|q| !q.open && q.outstanding == 0) {
            st.queues[i].open = true;
            return i;
        }
        st.queues.push(CompletionList {
            ready: VecDeque::with_capacity(self.depth),
            outstanding: 0,
            open: true,
        });
        st.queues.len() - 1
    }

    pub(super) fn poll_queue(&self, q: usize, wait_for: Option<Option<Duration>>) -> Option<Done> {
        let deadline = wait_for.flatten().map(|t| Instant::now() + t);
        let mut st = self.state();
        loop {
            if let Some(index) = st.queues[q].ready.pop_front() {
                st.queues[q].outstanding -= 1;
                return self.collect(&mut st, index);
            }
            if wait_for.is_none() || st.queues[q].outstanding == 0 {
                return None;
            }
            st = match deadline {
                None => wait(&self.done, st),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    wait_timeout(&self.done, st, d - now).0
                }
            };
        }
    }

    pub(super) fn queue_outstanding(&self, q: usize) -> usize {
        self.state().queues[q].outstanding
    }

    pub(super) fn close_queue(&self, q: usize) {
        let mut st = self.state();
        while let Some(index) = st.queues[q].ready.pop_front() {
            st.queues[q].outstanding -= 1;
            let _ = self.collect(&mut st, index);
        }
        let st = &mut *st;
        for slot in st.slots.iter_mut() {
            if slot.target.queue() == Some(q)
                && matches!(slot.phase, Phase::Queued | Phase::Running)
            {
                slot.abandoned = true;
            }
        }
        // Abandoned slots are freed without passing through the queue's ready list.
        st.queues[q].outstanding = 0;
        st.queues[q].open = false;
    }
}
