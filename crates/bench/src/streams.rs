//! `wring bench streams`: seed 002's experiment — W concurrent writers under stream limits
//! 1, 2, … up to the machine's parallelism, and the speed-up over one stream.
//!
//! As in the seed (four `dd` writers, each writing the same 200 MB file to zram), every writer
//! compresses the whole corpus, extent by extent, through one shared offload — the API every
//! front end compresses through — whose stream limit (zram's max_comp_streams: its CPU workers
//! and the engine's workspaces) is changed between runs. A writer keeps [`IN_FLIGHT`] extents
//! in flight as one borrowed batch, as a front end's write does. Writer `j` starts at its own
//! offset in the corpus so that writers do not move in lockstep.

use std::time::Instant;

use serde::Serialize;
use std::sync::Arc;

use wring_engine::offload::{BatchJob, Completed, Offload, OffloadConfig, Op};
use wring_engine::{compressed_limit, CompressSpec, Engine, EngineConfig, Outcome, Policy, Saving};

use crate::corpus::Corpus;
use crate::metrics::{mb_per_s, speedup, Stored};
use crate::progress::Progress;
use crate::{interrupt, BenchError};

/// Extents a writer has in flight at once (one batch).
pub const IN_FLIGHT: usize = 4;

/// Specs `wring bench streams` measures by default: zram's lzo and btrfs's default zstd:3.
pub const DEFAULT_SPECS: &str = "lzo,zstd:3";

/// Settings of a streams run.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// What to compress with.
    pub specs: Vec<CompressSpec>,
    /// Numbers of concurrent writers.
    pub writers: Vec<usize>,
    /// Stream limits; speed-ups are over the first.
    pub limits: Vec<usize>,
    /// Time every run this many times and keep the fastest.
    pub repeat: usize,
}

impl StreamsConfig {
    /// Writers 1, P and 2P and limits 1, 2, … P (doubling past 8), P = `parallelism`.
    pub fn defaults(specs: Vec<CompressSpec>, parallelism: usize) -> StreamsConfig {
        let p = parallelism.max(1);
        let mut writers = vec![1, p, 2 * p];
        writers.dedup();
        StreamsConfig {
            specs,
            writers,
            limits: default_limits(p),
            repeat: 1,
        }
    }
}

/// Stream limits 1, 2, … `parallelism`: every count up to 8, then doubling, always ending at
/// `parallelism`.
pub fn default_limits(parallelism: usize) -> Vec<usize> {
    let p = parallelism.max(1);
    let mut out: Vec<usize> = (1..=p.min(8)).collect();
    let mut n = 16;
    while n < p {
        out.push(n);
        n *= 2;
    }
    if out.last() != Some(&p) {
        out.push(p);
    }
    out
}

/// One spec, writer count and stream limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamsRow {
    /// The spec.
    pub spec: String,
    /// Concurrent writers.
    pub writers: usize,
    /// The stream limit.
    pub streams: usize,
    /// Input bytes compressed (writers × corpus).
    pub bytes: u64,
    /// Wall-clock seconds.
    pub secs: f64,
    /// Input MB/s over all writers.
    pub mbps: f64,
    /// Over the first stream limit with as many writers.
    pub speedup: f64,
    /// Times a writer waited for a stream.
    pub waits: u64,
    /// Compression ratio (same for every row of a spec; a sanity check).
    pub ratio: f64,
}

/// Run the experiment: for every spec and writer count, every stream limit.
pub fn run(
    corpus: &Corpus,
    cfg: &StreamsConfig,
    progress: &Progress,
) -> Result<Vec<StreamsRow>, BenchError> {
    let max_streams = cfg.limits.iter().copied().max().unwrap_or(1);
    let engine = Arc::new(Engine::new(EngineConfig {
        streams: max_streams,
        ..Default::default()
    }));
    let offload = Offload::new(Arc::clone(&engine), OffloadConfig::for_engine(&engine))
        .map_err(BenchError::Workers)?;
    let extents = corpus.extents(engine.max_extent());
    progress.add_steps((cfg.specs.len() * cfg.writers.len() * cfg.limits.len()) as u64);
    let mut rows = Vec::new();
    for &spec in &cfg.specs {
        let Some(alg) = spec.algorithm else {
            return Err(BenchError::Spec(
                "'no' compresses nothing to measure".into(),
            ));
        };
        for &writers in &cfg.writers {
            let mut base = None;
            for &limit in &cfg.limits {
                interrupt::check()?;
                progress.step(format!("{spec}: {writers} writers, {limit} streams"));
                offload.set_streams(limit).map_err(BenchError::Workers)?;
                let waits_before = engine.manager(alg).stats().waits;
                let mut best: Option<(f64, Stored)> = None;
                for _ in 0..cfg.repeat.max(1) {
                    interrupt::check()?;
                    let run = write_all(&offload, spec, &extents, writers.max(1))?;
                    if best.as_ref().is_none_or(|b| run.0 < b.0) {
                        best = Some(run);
                    }
                }
                let (secs, stored) = best.unwrap_or_default();
                let waits =
                    (engine.manager(alg).stats().waits - waits_before) / cfg.repeat.max(1) as u64;
                let mbps = mb_per_s(stored.input, secs);
                let base_mbps = *base.get_or_insert(mbps);
                rows.push(StreamsRow {
                    spec: spec.to_string(),
                    writers,
                    streams: limit,
                    bytes: stored.input,
                    secs,
                    mbps,
                    speedup: speedup(mbps, base_mbps),
                    waits,
                    ratio: stored.ratio(),
                });
                progress.done();
            }
        }
    }
    Ok(rows)
}

/// `writers` threads each compress every extent once through `offload`; wall-clock seconds
/// and what was stored.
fn write_all(
    offload: &Offload,
    spec: CompressSpec,
    extents: &[&[u8]],
    writers: usize,
) -> Result<(f64, Stored), BenchError> {
    let ready = std::sync::Barrier::new(writers + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|j| {
                let ready = &ready;
                s.spawn(move || {
                    let max = offload.engine().max_extent();
                    let mut dst = vec![vec![0u8; compressed_limit(max)]; IN_FLIGHT];
                    let order = writer_order(extents.len(), j, writers);
                    ready.wait();
                    let mut stored = Stored::default();
                    for batch in order.chunks(IN_FLIGHT) {
                        write_batch(offload, spec, extents, batch, &mut dst, &mut stored)?;
                    }
                    Ok::<Stored, BenchError>(stored)
                })
            })
            .collect();
        ready.wait();
        let t = Instant::now();
        let mut total = Stored::default();
        let mut first_error = None;
        for h in handles {
            match h.join() {
                Ok(Ok(s)) => total.merge(&s),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(BenchError::Spec("a writer thread panicked".into()));
                }
            }
        }
        let secs = t.elapsed().as_secs_f64();
        match first_error {
            Some(e) => Err(e),
            None => Ok((secs, total)),
        }
    })
}

/// The extents writer `j` of `writers` compresses, in its order: all of them, from its own
/// offset.
fn writer_order(n: usize, j: usize, writers: usize) -> Vec<usize> {
    (0..n).map(|k| (k + j * n / writers) % n).collect()
}

/// Compress the extents at `batch` as one borrowed batch on the offload.
fn write_batch(
    offload: &Offload,
    spec: CompressSpec,
    extents: &[&[u8]],
    batch: &[usize],
    dst: &mut [Vec<u8>],
    stored: &mut Stored,
) -> Result<(), BenchError> {
    let op = Op::Compress {
        spec,
        policy: Policy::Force,
        saving: Saving::Block,
    };
    let mut jobs: Vec<BatchJob<'_>> = batch
        .iter()
        .zip(dst.iter_mut())
        .map(|(&i, d)| {
            let src = extents[i];
            BatchJob::new(op, src, &mut d[..compressed_limit(src.len())])
        })
        .collect();
    offload.run_batch(&mut jobs);
    for (job, &index) in jobs.iter().zip(batch) {
        let len = match &job.result {
            Some(Ok(Completed::Compressed(Outcome::Compressed(c)))) => Some(*c),
            Some(Ok(_)) => None,
            Some(Err(e)) => {
                return Err(BenchError::Engine {
                    spec: spec.to_string(),
                    index,
                    source: e.clone(),
                })
            }
            None => return Err(BenchError::Workers(wring_engine::Error::ShutDown)),
        };
        stored.add(extents[index].len(), len);
    }
    Ok(())
}
