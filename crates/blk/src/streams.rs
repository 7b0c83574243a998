//! Compression streams: zram's zcomp (drivers/block/zram/zcomp.c), here the engine's one
//! asynchronous API. A [`Streams`] compresses and decompresses a batch of pages;
//! [`OffloadStreams`] runs them through an [`Offload`](wring_engine::offload::Offload) with
//! `streams` workers and workspaces (`max_comp_streams`, resized live with
//! [`Streams::set_streams`]).
//!
//! Each page goes to the offload as a batch of one, which the engine runs on the calling thread
//! under one of its `streams` workspaces — as zram compresses on the CPU that submitted the bio,
//! holding a per-CPU stream. The calling threads are the NBD server's request threads (nbdkit's
//! parallel thread model), so they already spread the work; handing each 4 KiB page to a worker
//! thread and waiting for it cost more in wake-ups than the compression itself. Measured with
//! nbdcopy of 120 MB of the corpus (executables, dictionary, package text) over a Unix socket,
//! lz4, 2 streams, release build, this 2-core machine: 133 MB/s written and 361 MB/s read with
//! whole-request batches on the workers (68% of the time in futex wait/wake), 353-368 and
//! 798-958 with batches of one. The offload's workers stay in place for front ends that submit
//! larger extents and for a device provider.
//!
//! A trait rather than the `Offload` itself so that the shuttle model and the property tests can
//! drive the store with [`ToyStreams`], a deterministic run-length coder with no threads. The
//! compressors the engine lacks (lzo-rle, raw deflate, zstd with a dictionary) implement
//! [`PageCodec`], one page at a time with a borrowed workspace, and get `Streams` from it.

use std::sync::Arc;

use wring_engine::offload::{BatchJob, Completed, Offload, OffloadConfig, Op};
use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::arena::PAGE_SIZE;
use crate::error::BlkError;
use crate::stats::StreamStat;

/// One slot's job: compress `input` (one slot) into `output` (its length is the limit), or
/// decompress `input` into `output` (one slot: its length is what the object must give).
#[derive(Debug)]
pub struct PageJob<'a> {
    /// The bytes to work on.
    pub input: &'a [u8],
    /// Where the result goes.
    pub output: &'a mut [u8],
    /// Compression: `Some(n)` bytes written, `None` when the result did not fit.
    /// Decompression: `Some(output.len())`.
    pub result: Option<Result<Option<usize>, BlkError>>,
}

impl<'a> PageJob<'a> {
    /// A job not yet run.
    pub fn new(input: &'a [u8], output: &'a mut [u8]) -> PageJob<'a> {
        PageJob {
            input,
            output,
            result: None,
        }
    }
}

/// What compresses and decompresses pages.
pub trait Streams: Send + Sync {
    /// Compress every job (each fits or reports `None`).
    fn compress(&self, jobs: &mut [PageJob<'_>]);
    /// Decompress every job into a whole page.
    fn decompress(&self, jobs: &mut [PageJob<'_>]);
    /// Streams configured (`max_comp_streams`).
    fn streams(&self) -> usize;
    /// Change the number of streams live.
    fn set_streams(&self, n: usize) -> Result<(), BlkError>;
    /// The algorithm's name for reports.
    fn algorithm(&self) -> String;
    /// Figures for `stat` (priority left 0 for the store to fill in).
    fn figures(&self) -> StreamStat {
        StreamStat {
            algorithm: self.algorithm(),
            streams: self.streams(),
            ..StreamStat::default()
        }
    }
}

/// The counters every set of streams keeps for `stat`'s per-stream figures.
#[derive(Debug, Default)]
pub(crate) struct Figures {
    compressed: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    did_not_fit: AtomicU64,
    decompressed: AtomicU64,
    failures: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Figures {
    /// One page of `input` bytes compressed: `Some(n)` stored bytes, `None` when it did not
    /// fit; an error is a failure.
    pub(crate) fn compressed<E>(&self, input: usize, r: &Result<Option<usize>, E>) {
        match r {
            Ok(n) => {
                bump(&self.compressed, 1);
                bump(&self.bytes_in, input as u64);
                match n {
                    Some(n) => bump(&self.bytes_out, *n as u64),
                    None => bump(&self.did_not_fit, 1),
                }
            }
            Err(_) => bump(&self.failures, 1),
        }
    }

    /// One page decompressed, or a failure.
    pub(crate) fn decompressed<T, E>(&self, r: &Result<T, E>) {
        bump(
            if r.is_ok() {
                &self.decompressed
            } else {
                &self.failures
            },
            1,
        );
    }

    /// `base` (algorithm, streams, workspaces) with these counters.
    pub(crate) fn stat(&self, base: StreamStat) -> StreamStat {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StreamStat {
            compressed: g(&self.compressed),
            bytes_in: g(&self.bytes_in),
            bytes_out: g(&self.bytes_out),
            did_not_fit: g(&self.did_not_fit),
            decompressed: g(&self.decompressed),
            failures: g(&self.failures),
            ..base
        }
    }
}

/// Workspaces that callers borrow for one page, as zram's per-CPU `zcomp_strm`: at most
/// `keep` (the streams) are kept between calls; more callers at once make extra ones, which
/// are dropped when given back.
#[derive(Debug)]
pub(crate) struct Workspaces<T> {
    free: std::sync::Mutex<Vec<T>>,
}

impl<T> Default for Workspaces<T> {
    fn default() -> Self {
        Workspaces {
            free: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl<T> Workspaces<T> {
    fn free(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        wring_sync::lock(&self.free)
    }

    /// A kept workspace, if there is one.
    pub(crate) fn take(&self) -> Option<T> {
        self.free().pop()
    }

    /// Give `w` back; it is kept if fewer than `keep` are.
    pub(crate) fn give(&self, w: T, keep: usize) {
        let mut free = self.free();
        if free.len() < keep {
            free.push(w);
        }
    }

    /// Workspaces kept.
    pub(crate) fn len(&self) -> usize {
        self.free().len()
    }

    /// Keep at most `n`.
    pub(crate) fn truncate(&self, n: usize) {
        self.free().truncate(n);
    }
}

/// What every [`PageCodec`] keeps: the streams asked for and the counters.
#[derive(Debug, Default)]
pub struct PerPage {
    streams: std::sync::atomic::AtomicUsize,
    figures: Figures,
}

impl PerPage {
    /// For `streams` streams (at least one).
    pub fn new(streams: usize) -> PerPage {
        PerPage {
            streams: std::sync::atomic::AtomicUsize::new(streams.max(1)),
            figures: Figures::default(),
        }
    }
}

/// A compressor that works one page at a time on the calling thread, borrowing a workspace per
/// page, as zram's backends do (lzo-rle, raw deflate, zstd with a dictionary): it gets
/// [`Streams`] — the batches, the counters, the stream count — from this trait.
pub trait PageCodec: Send + Sync {
    /// The algorithm's name for reports.
    fn name(&self) -> String;
    /// Its stream count and counters.
    fn per_page(&self) -> &PerPage;
    /// Compress `input` into `output`: `Some(n)` bytes, `None` when it does not fit.
    fn compress_one(&self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, BlkError>;
    /// Decompress `input` into the whole of `output`, or fail as corrupt.
    fn decompress_one(&self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, BlkError>;
    /// Workspaces kept now.
    fn workspaces(&self) -> usize;
    /// Keep at most `n` workspaces (the streams were set to `n`).
    fn keep(&self, _n: usize) {}
}

impl<T: PageCodec> Streams for T {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        for job in jobs {
            let r = self.compress_one(job.input, job.output);
            self.per_page().figures.compressed(job.input.len(), &r);
            job.result = Some(r);
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for job in jobs {
            let r = self.decompress_one(job.input, job.output);
            self.per_page().figures.decompressed(&r);
            job.result = Some(r);
        }
    }

    fn streams(&self) -> usize {
        self.per_page().streams.load(Ordering::Acquire)
    }

    fn set_streams(&self, n: usize) -> Result<(), BlkError> {
        let n = n.max(1);
        self.per_page().streams.store(n, Ordering::Release);
        self.keep(n);
        Ok(())
    }

    fn algorithm(&self) -> String {
        self.name()
    }

    fn figures(&self) -> StreamStat {
        self.per_page().figures.stat(StreamStat {
            algorithm: self.name(),
            streams: self.streams(),
            workspaces: self.workspaces(),
            ..StreamStat::default()
        })
    }
}

/// Streams on the engine's offload.
#[derive(Debug)]
pub struct OffloadStreams {
    offload: Offload,
    /// The streams asked for (the workers converge on it: a shrink lets busy ones finish).
    streams: std::sync::atomic::AtomicUsize,
    spec: CompressSpec,
    algorithm: Algorithm,
    name: String,
    figures: Figures,
}

impl OffloadStreams {
    /// An offload with `streams` CPU workers compressing 4 KiB slots with `spec`; `name` is
    /// zram's name for the algorithm.
    pub fn new(spec: CompressSpec, name: &str, streams: usize) -> Result<OffloadStreams, BlkError> {
        OffloadStreams::for_slots(spec, name, streams, PAGE_SIZE)
    }

    /// As [`OffloadStreams::new`] for slots of `slot_size` bytes (the engine's largest extent).
    pub fn for_slots(
        spec: CompressSpec,
        name: &str,
        streams: usize,
        slot_size: usize,
    ) -> Result<OffloadStreams, BlkError> {
        let Some(algorithm) = spec.algorithm else {
            return Err(BlkError::Option(
                "comp_algorithm must name an algorithm; 'no' is not one".into(),
            ));
        };
        let streams = streams.max(1);
        let engine = Arc::new(Engine::new(EngineConfig {
            max_extent: slot_size.max(wring_engine::BLOCK_SIZE),
            streams,
            ..EngineConfig::default()
        }));
        let config = OffloadConfig::for_engine(&engine);
        let offload = Offload::new(engine, config).map_err(|e| BlkError::Compress {
            algorithm: name.to_string(),
            message: format!("could not start the streams: {e}"),
        })?;
        Ok(OffloadStreams {
            offload,
            streams: std::sync::atomic::AtomicUsize::new(streams),
            spec,
            algorithm,
            name: name.to_string(),
            figures: Figures::default(),
        })
    }

    fn failed(&self, e: impl std::fmt::Display) -> BlkError {
        BlkError::Compress {
            algorithm: self.name.clone(),
            message: e.to_string(),
        }
    }
}

impl OffloadStreams {
    /// Run one page as a batch of one: the engine runs it on the calling thread, under one of
    /// its `streams` workspaces.
    fn run_one(
        &self,
        op: Op,
        job: &mut PageJob<'_>,
    ) -> Option<Result<Completed, wring_engine::Error>> {
        let mut one = [BatchJob::new(op, job.input, job.output)];
        self.offload.run_batch(&mut one);
        let [b] = one;
        b.result
    }
}

impl Streams for OffloadStreams {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        let op = Op::CompressInto { spec: self.spec };
        for job in jobs {
            let result = match self.run_one(op, job) {
                Some(Ok(Completed::CompressedInto(n))) => Ok(n),
                Some(Ok(other)) => Err(self.failed(format!("unexpected completion {other:?}"))),
                Some(Err(e)) => Err(self.failed(e)),
                None => Err(self.failed("the batch did not run the job")),
            };
            self.figures.compressed(job.input.len(), &result);
            job.result = Some(result);
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for job in jobs {
            // The output is one whole slot: what the object decompresses to.
            let op = Op::Decompress {
                algorithm: self.algorithm,
                len: job.output.len(),
            };
            let result = match self.run_one(op, job) {
                Some(Ok(Completed::Decompressed(n))) if n == job.output.len() => Ok(Some(n)),
                Some(Ok(Completed::Decompressed(n))) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("decompressed to {n} bytes, not a slot"),
                }),
                Some(Ok(other)) => Err(self.failed(format!("unexpected completion {other:?}"))),
                Some(Err(e)) => Err(BlkError::Corrupt {
                    page: 0,
                    message: e.to_string(),
                }),
                None => Err(self.failed("the batch did not run the job")),
            };
            self.figures.decompressed(&result);
            job.result = Some(result);
        }
    }

    fn streams(&self) -> usize {
        self.streams.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_streams(&self, n: usize) -> Result<(), BlkError> {
        let n = n.max(1);
        self.offload.set_streams(n).map_err(|e| self.failed(e))?;
        self.streams.store(n, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn algorithm(&self) -> String {
        self.name.clone()
    }

    fn figures(&self) -> StreamStat {
        let ws = self
            .offload
            .engine()
            .stats()
            .managers
            .into_iter()
            .find(|(a, _)| *a == self.algorithm)
            .map(|(_, m)| m)
            .unwrap_or_default();
        self.figures.stat(StreamStat {
            algorithm: self.name.clone(),
            streams: self.streams(),
            workspaces: ws.workspaces,
            busy: ws.busy,
            waits: ws.waits,
            ..StreamStat::default()
        })
    }
}

/// A deterministic run-length coder on the calling thread, for models and property tests:
/// pairs of (run length, byte).
#[derive(Debug, Default)]
pub struct ToyStreams;

impl ToyStreams {
    fn encode(input: &[u8], out: &mut [u8]) -> Option<usize> {
        let mut n = 0;
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            let mut run = 1;
            while i + run < input.len() && input[i + run] == b && run < 255 {
                run += 1;
            }
            if n + 2 > out.len() {
                return None;
            }
            out[n] = run as u8;
            out[n + 1] = b;
            n += 2;
            i += run;
        }
        Some(n)
    }

    fn decode(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
        let mut n = 0;
        for pair in input.chunks(2) {
            let [run, b] = pair else {
                return Err("odd length".into());
            };
            let end = n + *run as usize;
            if end > out.len() {
                return Err("longer than a page".into());
            }
            out[n..end].fill(*b);
            n = end;
        }
        Ok(n)
    }
}

impl Streams for ToyStreams {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        for j in jobs {
            j.result = Some(Ok(ToyStreams::encode(j.input, j.output)));
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for j in jobs {
            let want = j.output.len();
            j.result = Some(match ToyStreams::decode(j.input, j.output) {
                Ok(n) if n == want => Ok(Some(n)),
                Ok(n) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("{n} bytes"),
                }),
                Err(m) => Err(BlkError::Corrupt {
                    page: 0,
                    message: m,
                }),
            });
        }
    }

    fn streams(&self) -> usize {
        1
    }

    fn set_streams(&self, _n: usize) -> Result<(), BlkError> {
        Ok(())
    }

    fn algorithm(&self) -> String {
        "toy-rle".into()
    }
}
