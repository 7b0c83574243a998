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

mod measure;
mod plot;
mod report;

pub use measure::decoded_matches;
use measure::measure;
pub use plot::plot;
pub use report::{duration_text, parse_latency, percentile_us, size_text, CSV_HEADER};

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
