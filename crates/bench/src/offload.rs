//! `wring bench offload`: seed 004's kind of table (the 2024 RFC "btrfs: offload zlib-deflate to
//! accelerators", which put the kernel's acomp API in front of Intel QAT) on wring's one
//! asynchronous API, `wring_engine::offload` — per request size, the CPU provider against the
//! simulated device at a few latencies, one run with the device's threshold (`min_len`) and one
//! with every device request failing.
//!
//! The simulated device ([`SimDevice`]) is a **test double, not an accelerator**: it runs the
//! CPU's codecs on its own threads, on this machine's cores, and sleeps to a latency per
//! submission and per byte. Its rows show what the submission path, the threshold and the
//! software fallback cost and that the bytes stay right, never a speed any device has.
//!
//! The corpus is concatenated and cut into requests of exactly the row's size (the last one
//! shorter). Every request is compressed through a completion queue that keeps at most
//! `window` requests in flight ([`Op::CompressInto`] with an output as long as the input: a
//! request whose result does not fit is stored raw), then every compressed request is
//! decompressed through the same API and compared byte for byte with its input. Latency is
//! each request's submit-to-completion time, measured here, exact percentiles over all of
//! them, and includes the wait behind the other requests of the window. An untimed warm-up
//! of a few requests per provider comes first. Who ran each request is read from its
//! completion and checked against the offload's own per-provider counters.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use wring_engine::offload::sim::{Fault, SimConfig, SimDevice};
use wring_engine::offload::{
    Completed, Device, DeviceCaps, Done, Fallback, Offload, OffloadConfig, Op, Ran, Request,
    SubmitError,
};
use wring_engine::{CompressSpec, Engine, EngineConfig};

use crate::corpus::{Corpus, CorpusInfo};
use crate::machine::Machine;
use crate::metrics::{mb_per_s, quotient, ratio};
use crate::progress::Progress;
use crate::report::csv_text;
use crate::{interrupt, BenchError};

/// Request sizes measured by default: 4 KiB to 1 MiB.
pub const DEFAULT_SIZES: [usize; 6] = [4 << 10, 16 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20];

/// Simulated latencies per submission measured by default.
pub const DEFAULT_LATENCIES: [Duration; 3] = [
    Duration::from_micros(5),
    Duration::from_micros(50),
    Duration::from_micros(500),
];

/// Simulated latency per byte by default: 0.1 ns, a 10 GB/s link.
pub const DEFAULT_PER_BYTE_NS: f64 = 0.1;

/// The device threshold of the threshold row by default.
pub const DEFAULT_THRESHOLD: usize = 64 << 10;

/// The engine's and the device's largest extent (requests above 128 KiB need more than btrfs's).
pub const MAX_EXTENT: usize = 1 << 20;

/// One provider configuration: a row per request size.
#[derive(Debug, Clone, PartialEq)]
pub enum Provider {
    /// CPU workers only.
    Cpu,
    /// CPU workers and the simulated device.
    Sim(SimProvider),
}

/// The simulated device's settings in one provider configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SimProvider {
    /// Latency of one submission (a batch).
    pub per_submission: Duration,
    /// Added latency per input byte, in nanoseconds.
    pub per_byte_ns: f64,
    /// The device's threshold: shorter inputs stay on the CPU.
    pub min_len: usize,
    /// Injected fault for the whole run.
    pub fault: Fault,
}

impl Provider {
    /// How the table names it.
    pub fn label(&self) -> String {
        match self {
            Provider::Cpu => "cpu".into(),
            Provider::Sim(s) => {
                let mut out = format!("sim {}", duration_text(s.per_submission));
                if s.min_len > 0 {
                    let _ = write!(out, ", min {}", size_text(s.min_len));
                }
                match s.fault {
                    Fault::None => {}
                    Fault::Fail => out.push_str(", failing"),
                    Fault::Busy => out.push_str(", busy"),
                    Fault::Hang => out.push_str(", hung"),
                }
                out
            }
        }
    }
}

/// The default provider list: the CPU; the device at each latency with no threshold; the
/// device at the middle latency with `threshold`; and the device at the middle latency failing
/// every request.
pub fn default_providers(
    latencies: &[Duration],
    per_byte_ns: f64,
    threshold: usize,
) -> Vec<Provider> {
    let sim = |per_submission, min_len, fault| {
        Provider::Sim(SimProvider {
            per_submission,
            per_byte_ns,
            min_len,
            fault,
        })
    };
    let mut out = vec![Provider::Cpu];
    out.extend(latencies.iter().map(|&l| sim(l, 0, Fault::None)));
    let middle = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or(Duration::from_micros(50));
    if threshold > 0 {
        out.push(sim(middle, threshold, Fault::None));
    }
    out.push(sim(middle, 0, Fault::Fail));
    out
}

/// Settings of an offload run.
#[derive(Debug, Clone)]
pub struct OffloadBenchConfig {
    /// What to compress with.
    pub spec: CompressSpec,
    /// Request sizes, in report order.
    pub sizes: Vec<usize>,
    /// Provider configurations; ratios are against [`Provider::Cpu`] when it is among them.
    pub providers: Vec<Provider>,
    /// CPU worker threads (the engine's streams).
    pub streams: usize,
    /// Requests in flight at most (the completion queue's window and the offload's depth).
    pub window: usize,
    /// Requests the simulated device takes in one submission.
    pub batch: usize,
    /// Requests the simulated device holds at once; more fall back as busy.
    pub device_queue: usize,
    /// How long a device submission may take before its requests fall back.
    pub timeout: Duration,
    /// Time every run this many times and keep the fastest.
    pub repeat: usize,
}

impl OffloadBenchConfig {
    /// The default sizes and providers for `spec` on `streams` CPU workers: a window of 32,
    /// device batches of 8 and a device queue of 32 (so the device is never busy), a 1 s
    /// time-out.
    pub fn defaults(spec: CompressSpec, streams: usize) -> OffloadBenchConfig {
        OffloadBenchConfig {
            spec,
            sizes: DEFAULT_SIZES.to_vec(),
            providers: default_providers(
                &DEFAULT_LATENCIES,
                DEFAULT_PER_BYTE_NS,
                DEFAULT_THRESHOLD,
            ),
            streams: streams.max(1),
            window: 32,
            batch: 8,
            device_queue: 32,
            timeout: Duration::from_secs(1),
            repeat: 1,
        }
    }
}

/// Requests that fell back to the CPU, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Fallbacks {
    /// The device does not produce this algorithm or level.
    pub unsupported: u64,
    /// The input was below the device's threshold.
    pub below_threshold: u64,
    /// The device was full or refused it as busy.
    pub busy: u64,
    /// The device reported an error.
    pub failed: u64,
    /// The device did not answer in time.
    pub timed_out: u64,
}

impl Fallbacks {
    fn add(&mut self, why: Fallback) {
        *self.slot(why) += 1;
    }

    fn slot(&mut self, why: Fallback) -> &mut u64 {
        match why {
            Fallback::Unsupported => &mut self.unsupported,
            Fallback::BelowThreshold => &mut self.below_threshold,
            Fallback::Busy => &mut self.busy,
            Fallback::Failed => &mut self.failed,
            Fallback::TimedOut => &mut self.timed_out,
        }
    }

    /// Fallbacks for one reason.
    pub fn get(&self, why: Fallback) -> u64 {
        let mut copy = *self;
        *copy.slot(why)
    }

    /// Every fallback.
    pub fn total(&self) -> u64 {
        Fallback::ALL.iter().map(|&f| self.get(f)).sum()
    }

    /// `below_threshold 12, failed 3`, or `0`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = Fallback::ALL
            .iter()
            .filter(|&&f| self.get(f) > 0)
            .map(|&f| format!("{} {}", f.name(), self.get(f)))
            .collect();
        if parts.is_empty() {
            "0".into()
        } else {
            parts.join(", ")
        }
    }
}

/// One phase (compression or decompression) of one row.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PhaseFigures {
    /// Requests submitted.
    pub requests: u64,
    /// Their input bytes.
    pub input_bytes: u64,
    /// Wall-clock seconds from the first submission to the last completion.
    pub secs: f64,
    /// Original (uncompressed) bytes per second, in MB/s.
    pub mbps: f64,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Median submit-to-completion latency, µs.
    pub p50_us: f64,
    /// 99th percentile submit-to-completion latency, µs.
    pub p99_us: f64,
    /// Requests the device completed, from each completion.
    pub device: u64,
    /// Requests the CPU completed (fallbacks included), from each completion.
    pub cpu: u64,
    /// Of those, the ones that fell back from the device, by reason.
    pub fallbacks: Fallbacks,
    /// Requests the device completed, from the offload's own counters.
    pub stats_device_completed: u64,
    /// Requests the CPU completed, from the offload's own counters.
    pub stats_cpu_completed: u64,
}

impl PhaseFigures {
    /// Share of the requests the device ran (0–1).
    pub fn device_share(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.device as f64 / self.requests as f64
    }
}

/// One request size and provider configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OffloadRow {
    /// Request size in bytes (the last request of the corpus may be shorter).
    pub size: usize,
    /// The provider configuration.
    pub provider: String,
    /// Whether a simulated device was in it.
    pub simulated: bool,
    /// Requests.
    pub requests: u64,
    /// Input bytes.
    pub bytes: u64,
    /// Compression through the API.
    pub compress: PhaseFigures,
    /// Decompression of every compressed request through the API (MB/s of decoded bytes).
    pub decompress: PhaseFigures,
    /// Requests whose result did not fit in their own size (stored raw, not decompressed).
    pub raw: u64,
    /// Bytes stored: compressed lengths plus raw requests.
    pub stored_bytes: u64,
    /// bytes / stored_bytes.
    pub ratio: f64,
    /// Requests that did not decompress to their input (a decompression error counts): 0.
    pub mismatches: u64,
    /// Compression MB/s over the CPU row of the same size.
    pub mbps_vs_cpu: Option<f64>,
    /// Compression p50 latency over the CPU row of the same size.
    pub p50_vs_cpu: Option<f64>,
}

/// Everything an offload run measured.
#[derive(Debug, Clone, Serialize)]
pub struct OffloadReport {
    /// `wring-bench VERSION`.
    pub tool: String,
    /// Seconds since the epoch when the run started.
    pub started_unix: u64,
    /// Where it ran.
    pub machine: Machine,
    /// On what.
    pub corpus: CorpusInfo,
    /// The method.
    pub spec: String,
    /// CPU workers.
    pub streams: usize,
    /// Requests in flight at most.
    pub window: usize,
    /// Device batch size.
    pub batch: usize,
    /// Device queue depth.
    pub device_queue: usize,
    /// Device time-out, ms.
    pub timeout_ms: u64,
    /// The engine's largest extent.
    pub max_extent: usize,
    /// The rows, size by size.
    pub rows: Vec<OffloadRow>,
    /// How each figure was obtained.
    pub notes: Vec<String>,
}

/// Run the benchmark: every size, every provider configuration.
pub fn run(
    corpus: &Corpus,
    cfg: &OffloadBenchConfig,
    progress: &Progress,
) -> Result<Vec<OffloadRow>, BenchError> {
    let algorithm = cfg
        .spec
        .algorithm
        .ok_or_else(|| BenchError::Spec("'no' compresses nothing to measure".into()))?;
    let max_extent = max_extent(&cfg.sizes)?;
    let engine = Arc::new(Engine::new(EngineConfig {
        max_extent,
        streams: cfg.streams.max(1),
        ..EngineConfig::default()
    }));
    let devices: Vec<Option<Arc<SimDevice>>> = cfg
        .providers
        .iter()
        .map(|p| match p {
            Provider::Cpu => None,
            Provider::Sim(s) => {
                let caps = DeviceCaps {
                    name: "sim",
                    compress: vec![(algorithm, cfg.spec.level..=cfg.spec.level)],
                    decompress: vec![algorithm],
                    batch: cfg.batch.max(1),
                    queue_depth: cfg.device_queue.max(1),
                    min_len: s.min_len,
                    timeout: cfg.timeout,
                };
                let device = SimDevice::new(
                    SimConfig {
                        caps,
                        per_submission: s.per_submission,
                        per_byte_ns: s.per_byte_ns,
                    },
                    max_extent,
                );
                device.set_fault(s.fault);
                Some(device)
            }
        })
        .collect();
    let data = corpus.concatenated(1);
    let data = &data[..(corpus.bytes() as usize).min(data.len())];
    progress.add_steps((cfg.sizes.len() * cfg.providers.len()) as u64);
    warm_up(&engine, &devices, cfg, data)?;
    let mut rows = Vec::new();
    for &size in &cfg.sizes {
        let chunks: Vec<&[u8]> = data.chunks(size.max(1)).collect();
        for (provider, device) in cfg.providers.iter().zip(&devices) {
            interrupt::check()?;
            progress.step(format!(
                "{}: {}, {}",
                cfg.spec,
                size_text(size),
                provider.label()
            ));
            let mut best: Option<OffloadRow> = None;
            for _ in 0..cfg.repeat.max(1) {
                interrupt::check()?;
                let row = measure(&engine, device.as_ref(), cfg, size, provider, &chunks)?;
                best = Some(match best {
                    None => row,
                    Some(b) => keep_fastest(b, row),
                });
            }
            if let Some(row) = best {
                rows.push(row);
            }
            progress.done();
        }
    }
    add_ratios(&mut rows);
    Ok(rows)
}

/// Run a few requests of the largest size through every provider configuration, untimed, so
/// that the first row does not pay for the engines' workspaces and the first page faults.
fn warm_up(
    engine: &Arc<Engine>,
    devices: &[Option<Arc<SimDevice>>],
    cfg: &OffloadBenchConfig,
    data: &[u8],
) -> Result<(), BenchError> {
    let size = cfg.sizes.iter().copied().max().unwrap_or(MAX_EXTENT);
    let chunks: Vec<&[u8]> = data.chunks(size).take(cfg.window.max(1) * 2).collect();
    for (provider, device) in cfg.providers.iter().zip(devices) {
        interrupt::check()?;
        measure(engine, device.as_ref(), cfg, size, provider, &chunks)?;
    }
    Ok(())
}

/// The largest size, at least [`MAX_EXTENT`]: the engine's largest extent.
fn max_extent(sizes: &[usize]) -> Result<usize, BenchError> {
    if sizes.is_empty() || sizes.contains(&0) {
        return Err(BenchError::Spec(
            "request sizes must be given and above 0 (e.g. --sizes 4K,64K,1M)".into(),
        ));
    }
    Ok(sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(MAX_EXTENT)
        .max(MAX_EXTENT))
}

/// The faster compression of two runs of the same row, with the faster decompression.
fn keep_fastest(a: OffloadRow, b: OffloadRow) -> OffloadRow {
    let (mut keep, other) = if b.compress.secs < a.compress.secs {
        (b, a)
    } else {
        (a, b)
    };
    if other.decompress.secs < keep.decompress.secs {
        keep.decompress = other.decompress;
    }
    keep.mismatches = keep.mismatches.max(other.mismatches);
    keep
}

/// Fill the ratios against the CPU row of the same size.
fn add_ratios(rows: &mut [OffloadRow]) {
    let cpu: Vec<(usize, f64, f64)> = rows
        .iter()
        .filter(|r| !r.simulated)
        .map(|r| (r.size, r.compress.mbps, r.compress.p50_us))
        .collect();
    for r in rows.iter_mut() {
        if let Some(&(_, mbps, p50)) = cpu.iter().find(|c| c.0 == r.size) {
            r.mbps_vs_cpu = quotient(r.compress.mbps, mbps);
            r.p50_vs_cpu = quotient(r.compress.p50_us, p50);
        }
    }
}

/// One request of a phase.
struct Job<'a> {
    op: Op,
    input: &'a [u8],
    out_len: usize,
    /// Original (decoded) bytes it stands for.
    original: usize,
    /// Index of the request in corpus order.
    index: usize,
}

/// What became of one request's compression.
#[derive(Debug, Clone, Copy)]
enum Stored {
    /// `len` bytes at `offset` of the arena.
    Compressed { offset: usize, len: usize },
    /// Did not fit: stored raw.
    Raw,
}

/// One run of one row: compress every chunk, decompress every compressed one, compare.
fn measure(
    engine: &Arc<Engine>,
    device: Option<&Arc<SimDevice>>,
    cfg: &OffloadBenchConfig,
    size: usize,
    provider: &Provider,
    chunks: &[&[u8]],
) -> Result<OffloadRow, BenchError> {
    let spec = cfg.spec;
    let jobs: Vec<Job<'_>> = chunks
        .iter()
        .enumerate()
        .map(|(index, c)| Job {
            op: Op::CompressInto { spec },
            input: c,
            out_len: c.len(),
            original: c.len(),
            index,
        })
        .collect();
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let mut arena: Vec<u8> = Vec::with_capacity(total);
    let mut stored = vec![Stored::Raw; chunks.len()];
    let compress = run_phase(engine, device, cfg, &jobs, |job, done| match &done.result {
        Ok(Completed::CompressedInto(Some(n))) => {
            let bytes = done.output.get(..*n).ok_or_else(|| {
                BenchError::Spec(format!(
                    "{spec}: request {} claims {n} compressed bytes in a shorter buffer",
                    job.index
                ))
            })?;
            stored[job.index] = Stored::Compressed {
                offset: arena.len(),
                len: *n,
            };
            arena.extend_from_slice(bytes);
            Ok(())
        }
        Ok(Completed::CompressedInto(None)) => Ok(()),
        Ok(other) => Err(BenchError::Spec(format!(
            "{spec}: request {} completed as {other:?}, not as a compression",
            job.index
        ))),
        Err(e) => Err(BenchError::Engine {
            spec: spec.to_string(),
            index: job.index,
            source: e.clone(),
        }),
    })?;
    let mut raw = 0u64;
    let mut stored_bytes = 0u64;
    let mut djobs = Vec::new();
    for (index, s) in stored.iter().enumerate() {
        match *s {
            Stored::Compressed { offset, len } => {
                stored_bytes += len as u64;
                djobs.push(Job {
                    op: Op::Decompress {
                        algorithm: engine_algorithm(spec)?,
                        len: chunks[index].len(),
                    },
                    input: &arena[offset..offset + len],
                    out_len: chunks[index].len(),
                    original: chunks[index].len(),
                    index,
                });
            }
            Stored::Raw => {
                raw += 1;
                stored_bytes += chunks[index].len() as u64;
            }
        }
    }
    let mut mismatches = 0u64;
    let decompress = run_phase(engine, device, cfg, &djobs, |job, done| {
        if !decoded_matches(done, chunks[job.index]) {
            mismatches += 1;
        }
        Ok(())
    })?;
    Ok(OffloadRow {
        size,
        provider: provider.label(),
        simulated: device.is_some(),
        requests: chunks.len() as u64,
        bytes: total as u64,
        compress,
        decompress,
        raw,
        stored_bytes,
        ratio: ratio(total as u64, stored_bytes),
        mismatches,
        mbps_vs_cpu: None,
        p50_vs_cpu: None,
    })
}

fn engine_algorithm(spec: CompressSpec) -> Result<wring_engine::Algorithm, BenchError> {
    spec.algorithm
        .ok_or_else(|| BenchError::Spec("'no' compresses nothing to measure".into()))
}

/// Whether a decompression completed with exactly `original`'s bytes.
pub fn decoded_matches(done: &Done, original: &[u8]) -> bool {
    match done.result {
        Ok(Completed::Decompressed(n)) => {
            n == original.len() && done.output.get(..n).is_some_and(|out| out == original)
        }
        _ => false,
    }
}

/// Submit every job through a completion queue of a fresh offload, at most `cfg.window` in
/// flight, calling `check` on each completion; the phase's figures.
fn run_phase(
    engine: &Arc<Engine>,
    device: Option<&Arc<SimDevice>>,
    cfg: &OffloadBenchConfig,
    jobs: &[Job<'_>],
    mut check: impl FnMut(&Job<'_>, &Done) -> Result<(), BenchError>,
) -> Result<PhaseFigures, BenchError> {
    let window = cfg.window.max(1);
    let offload = Offload::new(
        Arc::clone(engine),
        OffloadConfig {
            depth: window,
            workers: cfg.streams.max(1),
            device: device.map(|d| Arc::clone(d) as Arc<dyn Device>),
        },
    )
    .map_err(|e| BenchError::Spec(format!("starting the offload: {e}")))?;
    let queue = offload.completion_queue();
    let mut pool: Vec<(Vec<u8>, Vec<u8>)> = (0..window.min(jobs.len()))
        .map(|_| (Vec::new(), Vec::new()))
        .collect();
    let mut started = vec![Instant::now(); jobs.len()];
    let mut latencies: Vec<Duration> = Vec::with_capacity(jobs.len());
    let mut fig = PhaseFigures {
        requests: jobs.len() as u64,
        input_bytes: jobs.iter().map(|j| j.input.len() as u64).sum(),
        ..PhaseFigures::default()
    };
    let t0 = Instant::now();
    let mut next = 0;
    while latencies.len() < jobs.len() {
        while next < jobs.len() && queue.outstanding() < window {
            let Some((mut input, mut output)) = pool.pop() else {
                break;
            };
            let job = &jobs[next];
            input.clear();
            input.extend_from_slice(job.input);
            output.clear();
            output.resize(job.out_len, 0);
            started[next] = Instant::now();
            let request = Request {
                op: job.op,
                input: input.into(),
                output,
                tag: next as u64,
            };
            match queue.submit(request) {
                Ok(()) => next += 1,
                Err(SubmitError::Full { request, .. }) => {
                    pool.push((request.input.into_vec(), request.output));
                    break;
                }
                Err(SubmitError::ShutDown { .. }) => {
                    return Err(BenchError::Spec(
                        "the offload shut down while the benchmark was submitting".into(),
                    ))
                }
            }
        }
        let Some(done) = queue.wait(None) else {
            return Err(BenchError::Spec(format!(
                "the completion queue returned nothing with {} of {} requests outstanding",
                next - latencies.len(),
                jobs.len()
            )));
        };
        let i = done.tag as usize;
        let job = jobs.get(i).ok_or_else(|| {
            BenchError::Spec(format!("a completion came back with unknown tag {i}"))
        })?;
        latencies.push(started[i].elapsed());
        match done.ran {
            Ran::Device => fig.device += 1,
            Ran::Cpu(why) => {
                fig.cpu += 1;
                if let Some(why) = why {
                    fig.fallbacks.add(why);
                }
            }
        }
        check(job, &done)?;
        pool.push((done.input.into_vec(), done.output));
    }
    fig.secs = t0.elapsed().as_secs_f64();
    let stats = offload.stats();
    fig.stats_cpu_completed = stats.cpu.completed;
    fig.stats_device_completed = stats.device.map(|d| d.completed).unwrap_or(0);
    let original: u64 = jobs.iter().map(|j| j.original as u64).sum();
    fig.mbps = mb_per_s(original, fig.secs);
    fig.requests_per_s = if fig.secs > 0.0 {
        jobs.len() as f64 / fig.secs
    } else {
        0.0
    };
    latencies.sort_unstable();
    fig.p50_us = percentile_us(&latencies, 50.0);
    fig.p99_us = percentile_us(&latencies, 99.0);
    Ok(fig)
}

/// The `p`th percentile (nearest rank) of sorted durations, in µs; 0 without any.
pub fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    let d = sorted[rank.min(sorted.len()) - 1];
    d.as_secs_f64() * 1e6
}

/// `4 KiB`, `1 MiB`, or bytes.
pub fn size_text(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// `5 µs`, `2 ms`, `300 ns`.
pub fn duration_text(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns >= 1_000_000 && ns.is_multiple_of(1_000_000) {
        format!("{} ms", ns / 1_000_000)
    } else if ns >= 1_000 && ns.is_multiple_of(1_000) {
        format!("{} µs", ns / 1_000)
    } else {
        format!("{ns} ns")
    }
}

/// A latency such as `5us`, `50µs`, `2ms`, `300ns` or `1s`.
pub fn parse_latency(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a latency (e.g. 5us, 50us, 2ms)"))?;
    let ns_per = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(format!(
                "'{text}': give the latency's unit (ns, us, ms or s), e.g. 50us"
            ))
        }
    };
    Ok(Duration::from_nanos((value * ns_per).round() as u64))
}

impl OffloadReport {
    /// A report of `rows` measured with `cfg`.
    pub fn new(
        machine: Machine,
        corpus: CorpusInfo,
        cfg: &OffloadBenchConfig,
        rows: Vec<OffloadRow>,
    ) -> OffloadReport {
        let max_extent = max_extent(&cfg.sizes).unwrap_or(MAX_EXTENT);
        OffloadReport {
            tool: format!("wring-bench {}", env!("CARGO_PKG_VERSION")),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            machine,
            corpus,
            spec: cfg.spec.to_string(),
            streams: cfg.streams,
            window: cfg.window,
            batch: cfg.batch,
            device_queue: cfg.device_queue,
            timeout_ms: cfg.timeout.as_millis() as u64,
            max_extent,
            rows,
            notes: Vec::new(),
        }
    }

    /// Pretty-printed JSON of everything.
    pub fn json(&self) -> Result<String, BenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Markdown: a header naming machine, corpus and what "sim" is, then the table.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## wring bench offload\n");
        let _ = writeln!(s, "- machine: {}", self.machine.summary());
        let c = &self.corpus;
        let _ = writeln!(
            s,
            "- corpus: {} — {} files, {} bytes; sha256 of the file list {}; of the contents {}",
            c.source, c.files, c.bytes, c.list_sha256, c.content_sha256
        );
        let _ = writeln!(s, "- **sim = a SIMULATED device (`offload::sim::SimDevice`), a test double, not an accelerator**: it runs the CPU's codecs on its own {} thread{} on this machine's cores and sleeps to its latency per submission (the row's µs) plus per byte. Its rows measure the submission path, the threshold and the fallback, not any device's speed; its outputs are the CPU's. On a shared machine its threads and the CPU workers compete for the same cores (and more threads get a larger share of a loaded machine), so a sim row faster than the cpu row says nothing about a device.", self.device_queue.div_ceil(self.batch.max(1)), if self.device_queue.div_ceil(self.batch.max(1)) == 1 { "" } else { "s" });
        let _ = writeln!(
            s,
            "- {} through `wring_engine::offload` (CompressInto, output as long as the input; a request that does not fit is stored raw): the corpus concatenated and cut into requests of the row's size (the last one shorter), at most {} in flight through a completion queue, {} CPU worker{}; device batches of {}, device queue {}, time-out {} ms; engine max_extent {}",
            self.spec,
            self.window,
            self.streams,
            if self.streams == 1 { "" } else { "s" },
            self.batch,
            self.device_queue,
            self.timeout_ms,
            size_text(self.max_extent)
        );
        let _ = writeln!(s, "- MB/s = 10^6 input bytes per second of wall clock from the first submission to the last completion; latency = each request's submit-to-completion time, exact percentiles (it includes the wait behind the other requests of the window); × cpu = over the cpu row of the same size; device share and fallbacks are from each completion (compression / decompression); mismatches = compressed requests that did not decompress, through the same providers, to their input byte for byte");
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
        s.push_str(&table(&self.rows));
        s
    }

    /// One CSV line per row, with [`CSV_HEADER`] (through [`csv_text`]: a provider label with
    /// commas is quoted).
    pub fn csv(&self) -> Result<String, BenchError> {
        let mut lines = Vec::with_capacity(self.rows.len());
        for r in &self.rows {
            let f = |x: f64| {
                if x.is_finite() {
                    format!("{x:.4}")
                } else {
                    String::new()
                }
            };
            let o = |x: Option<f64>| x.map(f).unwrap_or_default();
            let c = &r.compress;
            let d = &r.decompress;
            let cells = [
                r.size.to_string(),
                r.provider.clone(),
                r.simulated.to_string(),
                r.requests.to_string(),
                r.bytes.to_string(),
                f(c.mbps),
                f(c.requests_per_s),
                f(c.p50_us),
                f(c.p99_us),
                c.device.to_string(),
                c.cpu.to_string(),
                c.fallbacks.unsupported.to_string(),
                c.fallbacks.below_threshold.to_string(),
                c.fallbacks.busy.to_string(),
                c.fallbacks.failed.to_string(),
                c.fallbacks.timed_out.to_string(),
                f(d.mbps),
                f(d.p50_us),
                f(d.p99_us),
                d.device.to_string(),
                d.cpu.to_string(),
                d.fallbacks.total().to_string(),
                r.raw.to_string(),
                r.stored_bytes.to_string(),
                f(r.ratio),
                r.mismatches.to_string(),
                o(r.mbps_vs_cpu),
                o(r.p50_vs_cpu),
            ];
            lines.push(cells.into());
        }
        csv_text(CSV_HEADER, lines)
    }
}

/// Header of the CSV rendering.
pub const CSV_HEADER: &str = "size,provider,simulated,requests,input_bytes,compress_mbps,compress_requests_per_s,compress_p50_us,compress_p99_us,compress_device,compress_cpu,fallback_unsupported,fallback_below_threshold,fallback_busy,fallback_failed,fallback_timed_out,decompress_mbps,decompress_p50_us,decompress_p99_us,decompress_device,decompress_cpu,decompress_fallbacks,raw_requests,stored_bytes,ratio,mismatches,mbps_vs_cpu,p50_vs_cpu";

fn times(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.2}×"))
        .unwrap_or_else(|| "n/a".into())
}

fn micros(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn table(rows: &[OffloadRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| size | provider (sim = simulated) | requests | compress MB/s | × cpu | requests/s | p50 µs | p99 µs | p50 × cpu | device share (c / d) | fallbacks (compression) | fallbacks (decompression) | decompress MB/s | ratio | mismatches |");
    let _ = writeln!(
        s,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"
    );
    for r in rows {
        let c = &r.compress;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {} | {:.0} | {} | {} | {} | {:.0}% / {:.0}% | {} | {} | {:.1} | {:.3} | {} |",
            size_text(r.size),
            r.provider,
            r.requests,
            c.mbps,
            times(r.mbps_vs_cpu),
            c.requests_per_s,
            micros(c.p50_us),
            micros(c.p99_us),
            times(r.p50_vs_cpu),
            100.0 * c.device_share(),
            100.0 * r.decompress.device_share(),
            c.fallbacks.describe(),
            r.decompress.fallbacks.describe(),
            r.decompress.mbps,
            r.ratio,
            r.mismatches
        );
    }
    s
}

/// Draw compression MB/s and p50 latency against request size, one line per provider, into a
/// PNG at `path`; whether labels could be drawn (a font was found).
pub fn plot(report: &OffloadReport, path: &Path) -> Result<bool, BenchError> {
    use plotters::prelude::*;
    let labels = crate::plot::find_font().is_some();
    let err = |e: String| BenchError::Plot {
        path: path.to_path_buf(),
        reason: e,
    };
    let mut providers: Vec<&str> = Vec::new();
    for r in &report.rows {
        if !providers.contains(&r.provider.as_str()) {
            providers.push(&r.provider);
        }
    }
    let sizes: Vec<f64> = report.rows.iter().map(|r| r.size as f64).collect();
    let (xmin, xmax) = span(&sizes, (4096.0, 1048576.0));
    let root = BitMapBackend::new(path, (1400, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let panels = root.split_evenly((1, 2));
    type Pick = fn(&OffloadRow) -> f64;
    let picks: [(&str, Pick); 2] = [
        ("compression MB/s", |r| r.compress.mbps),
        ("p50 latency per request, µs", |r| r.compress.p50_us),
    ];
    for (panel, (name, pick)) in panels.iter().zip(picks) {
        let ys: Vec<f64> = report.rows.iter().map(pick).collect();
        let (ymin, ymax) = span(&ys, (1.0, 1000.0));
        let mut builder = ChartBuilder::on(panel);
        builder.margin(20);
        if labels {
            builder
                .caption(
                    format!("{name} (sim = simulated device)"),
                    ("sans-serif", 20),
                )
                .x_label_area_size(45)
                .y_label_area_size(60);
        }
        let mut chart = builder
            .build_cartesian_2d(
                (xmin * 0.8..xmax * 1.25).log_scale(),
                (ymin * 0.8..ymax * 1.25).log_scale(),
            )
            .map_err(|e| err(e.to_string()))?;
        let mut mesh = chart.configure_mesh();
        if labels {
            mesh.x_desc("request size (log scale)")
                .y_desc(name)
                .x_label_formatter(&|x| format!("{:.0} KiB", x / 1024.0))
                .label_style(("sans-serif", 14));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(|e| err(e.to_string()))?;
        for (i, p) in providers.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = report
                .rows
                .iter()
                .filter(|r| r.provider == *p)
                .map(|r| (r.size as f64, pick(r)))
                .filter(|q| q.1.is_finite() && q.1 > 0.0)
                .collect();
            chart
                .draw_series(pts.iter().map(|&q| Circle::new(q, 4, colour.filled())))
                .map_err(|e| err(e.to_string()))?;
            let anno = chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?;
            if labels {
                anno.label(p.to_string()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
        }
        if labels {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(e.to_string()))?;
        }
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(labels)
}

/// Smallest and largest positive finite value, or `default`.
fn span(values: &[f64], default: (f64, f64)) -> (f64, f64) {
    let good = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in good {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() || hi <= 0.0 {
        return default;
    }
    if hi <= lo {
        return (lo, lo * 2.0);
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_parse_with_their_unit() {
        assert_eq!(parse_latency("5us"), Ok(Duration::from_micros(5)));
        assert_eq!(parse_latency("50µs"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_latency("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse_latency("0.5ms"), Ok(Duration::from_micros(500)));
        assert!(parse_latency("50").is_err());
        assert!(parse_latency("fast").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&d, 50.0), 50.0);
        assert_eq!(percentile_us(&d, 99.0), 99.0);
        assert_eq!(percentile_us(&[], 50.0), 0.0);
    }

    #[test]
    fn labels_name_the_device_settings() {
        let p = default_providers(&DEFAULT_LATENCIES, 0.1, 64 << 10);
        let labels: Vec<String> = p.iter().map(Provider::label).collect();
        assert_eq!(
            labels,
            [
                "cpu",
                "sim 5 µs",
                "sim 50 µs",
                "sim 500 µs",
                "sim 50 µs, min 64 KiB",
                "sim 50 µs, failing"
            ]
        );
    }
}
