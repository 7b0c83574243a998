//! `wring bench levels`: seed 000's level table and seed 001's method table on wring's engine.
//!
//! The corpus is cut into independent extents of at most 128 KiB (per file, as btrfs cuts
//! them). For each algorithm and level the extents are compressed on the engine's streams
//! through the offload API and its workspace managers ([`compress_shared`]: the offload kept full, each result copied out as it completes), then decompressed on as many threads
//! and checked byte for byte. Then the same extents go through the bare library call — a codec
//! state per thread, made before the clock starts, no manager — so that the managers' overhead
//! shows as a ratio of times.
//!
//! Ratio is input bytes over stored bytes, every extent rounded up to whole 4 KiB blocks as
//! btrfs allocates it and an extent that does not save a block counted raw; the unrounded
//! ratio is given too. MB/s is input bytes over wall-clock time of all threads together.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use serde::Serialize;
use std::sync::Arc;
use wring_engine::codec::{standalone, CodecState};

use wring_engine::offload::{Offload, OffloadConfig};
use wring_engine::stream::{compress_shared_with, Extent};
use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig, Policy, Saving};

use crate::corpus::Corpus;
use crate::machine::LoadWatch;
use crate::metrics::{mb_per_s, median, overhead, spread, Stored};
use crate::progress::Progress;
use crate::{interrupt, BenchError};

/// What `wring bench levels` measures when no `--levels` is given: seed 000's zstd levels with
/// a negative one and 19 beyond btrfs's range, zlib's nine, lzo, lz4 and lz4hc's default.
pub const DEFAULT_LEVELS: &str = "zstd:-5,zstd:1..15,zstd:19,zlib:1..9,lzo,lz4,lz4hc:9";

/// Settings of a levels run.
#[derive(Debug, Clone)]
pub struct LevelsConfig {
    /// Algorithms and levels, in report order.
    pub specs: Vec<CompressSpec>,
    /// Engine streams, and threads compressing and decompressing.
    pub streams: usize,
    /// Also time the bare library call (the managers' overhead).
    pub bare: bool,
    /// Largest extent (128 KiB as btrfs).
    pub max_extent: usize,
    /// Measure every spec at least this many times (passes) and report the median.
    pub passes: usize,
    /// Then go on with more passes, up to [`MAX_PASSES`], while a spec has taken less than
    /// this many seconds: fast levels, whose single figures are the noisiest, get more passes
    /// at little cost. 0: exactly `passes`.
    pub pass_budget: f64,
    /// A spec whose passes have taken this many seconds stops after two of them, short of
    /// `passes`: the slowest levels (zstd:19's pass is half a minute) vary least, and their
    /// third pass would cost more than every fast level's extra passes. 0: no such stop.
    pub slow_after: f64,
    /// Time each decompression phase over at least this many seconds, repeating it within the
    /// pass (the figure is per repetition): lz4 decodes the corpus in 20 ms, too short for one
    /// clock reading to repeat. 0: once.
    pub min_phase: f64,
}

/// The most passes a spec gets from [`LevelsConfig::pass_budget`] (even: see `wants_another`).
pub const MAX_PASSES: usize = 16;

/// `wring bench levels`' default: three passes at least, fast levels until 2 s.
pub const DEFAULT_PASSES: usize = 3;
/// See [`DEFAULT_PASSES`].
pub const DEFAULT_PASS_BUDGET: f64 = 2.0;
/// `wring bench levels`' default [`LevelsConfig::slow_after`].
pub const DEFAULT_SLOW_AFTER: f64 = 20.0;
/// `wring bench levels`' default [`LevelsConfig::min_phase`].
pub const DEFAULT_MIN_PHASE: f64 = 0.15;

impl LevelsConfig {
    /// `specs` on `streams` streams, bare timing on, btrfs's 128 KiB extents.
    pub fn new(specs: Vec<CompressSpec>, streams: usize) -> LevelsConfig {
        LevelsConfig {
            specs,
            streams: streams.max(1),
            bare: true,
            max_extent: wring_engine::MAX_EXTENT,
            passes: 1,
            pass_budget: 0.0,
            slow_after: 0.0,
            min_phase: 0.0,
        }
    }
}

/// The bare library call on the same extents, and the managers' overhead against it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BareFigures {
    /// Wall-clock seconds to compress every extent.
    pub compress_secs: f64,
    /// Wall-clock seconds to decompress every extent.
    pub decompress_secs: f64,
    /// Input MB/s compressing.
    pub compress_mbps: f64,
    /// Input MB/s decompressing.
    pub decompress_mbps: f64,
    /// Engine time over bare time, compressing (1.00 = no overhead).
    pub compress_overhead: f64,
    /// Engine time over bare time, decompressing.
    pub decompress_overhead: f64,
    /// Spread of the per-pass compress overheads (see [`crate::metrics::spread`]).
    pub compress_overhead_spread: f64,
    /// Spread of the per-pass decompress overheads.
    pub decompress_overhead_spread: f64,
}

/// One algorithm and level through wring's engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelRow {
    /// The spec as btrfs spells it (`zstd:3`, `lzo`).
    pub spec: String,
    /// The algorithm.
    pub algorithm: String,
    /// The level (0 for lzo and lz4).
    pub level: i32,
    /// Whether the kernel's btrfs has this algorithm and level.
    pub in_btrfs: bool,
    /// Streams and threads used.
    pub streams: usize,
    /// Extents, input and stored bytes.
    pub stored: Stored,
    /// Input over stored bytes, extents rounded up to 4 KiB.
    pub ratio: f64,
    /// Input over stored bytes, unrounded.
    pub ratio_unrounded: f64,
    /// Passes measured; every time below is their median.
    pub passes: usize,
    /// Wall-clock seconds to compress every extent.
    pub compress_secs: f64,
    /// Wall-clock seconds to decompress every extent (raw extents are copied).
    pub decompress_secs: f64,
    /// Spread of the compress times over the passes (see [`crate::metrics::spread`]).
    pub compress_spread: f64,
    /// Spread of the decompress times.
    pub decompress_spread: f64,
    /// Input MB/s compressing.
    pub compress_mbps: f64,
    /// Input MB/s decompressing.
    pub decompress_mbps: f64,
    /// A workspace serving this level: codec memory plus its extent buffer, in KiB.
    pub workspace_kb: u64,
    /// The codec's part of it, in KiB.
    pub codec_kb: u64,
    /// Times a compressing thread waited for a workspace (stream limit or memory).
    pub waits: u64,
    /// The bare library call, when timed.
    pub bare: Option<BareFigures>,
    /// Some figure's passes lay more than [`NOISY_SPREAD`] apart: other work moved it, and
    /// the table and the plot say so.
    pub noisy: bool,
}

/// A spread (half the range of the passes over their median) above which a row is marked
/// as noisy.
pub const NOISY_SPREAD: f64 = 0.10;

impl LevelRow {
    /// The widest spread of the row's figures: times and overheads.
    pub fn widest_spread(&self) -> f64 {
        let bare = self.bare.map_or(0.0, |b| {
            b.compress_overhead_spread.max(b.decompress_overhead_spread)
        });
        self.compress_spread.max(self.decompress_spread).max(bare)
    }
}

/// A spec being measured: its passes so far.
pub(crate) struct Measuring {
    spec: CompressSpec,
    alg: Algorithm,
    name: String,
    passes: Passes,
    /// Seconds its passes took, warm-up and checks included.
    secs: f64,
    /// Waits for a workspace over all passes.
    waits: u64,
    /// What the engine stored per extent in the last pass (`None`: raw).
    compressed: Vec<Option<Vec<u8>>>,
}

/// Algorithms named in `--algorithms` (empty: all of them).
pub fn parse_algorithms(names: &[String]) -> Result<Vec<Algorithm>, BenchError> {
    names
        .iter()
        .map(|n| {
            n.trim()
                .parse::<Algorithm>()
                .map_err(|e| BenchError::Spec(format!("--algorithms: {e}")))
        })
        .collect()
}

/// The specs to measure. `levels` is a comma-separated list whose items are either a level
/// or range for every algorithm in `algorithms` that has it (`3`, `1..9`, `1-9`, `-5`), or
/// an algorithm with a level or range (`zstd:-5`, `zstd:1..15`, `lzo`). Without `levels`,
/// [`DEFAULT_LEVELS`]. `algorithms` (empty: all) filters either way. Duplicates are dropped.
pub fn parse_specs(
    algorithms: &[Algorithm],
    levels: Option<&str>,
) -> Result<Vec<CompressSpec>, BenchError> {
    let wanted = |a: Algorithm| algorithms.is_empty() || algorithms.contains(&a);
    let mut out = Vec::new();
    for item in levels
        .unwrap_or(DEFAULT_LEVELS)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match item.split_once(':') {
            Some((name, range)) => {
                let alg = parse_algorithm(name)?;
                for level in parse_range(range)? {
                    if level < alg.min_level() || level > alg.max_level() || level == 0 {
                        return Err(BenchError::Spec(format!(
                            "--levels: {alg} has levels {}..={}, not {level}",
                            alg.min_level(),
                            alg.max_level()
                        )));
                    }
                    if wanted(alg) {
                        out.push(CompressSpec::new(alg, level));
                    }
                }
            }
            None if item.parse::<Algorithm>().is_ok() => {
                let alg = parse_algorithm(item)?;
                if wanted(alg) {
                    out.push(CompressSpec::default_for(alg));
                }
            }
            None => {
                let range = parse_range(item)?;
                let selected = if algorithms.is_empty() {
                    Algorithm::ALL.to_vec()
                } else {
                    algorithms.to_vec()
                };
                for alg in selected {
                    if !alg.has_levels() {
                        out.push(CompressSpec::default_for(alg));
                        continue;
                    }
                    for &level in &range {
                        if level != 0 && level >= alg.min_level() && level <= alg.max_level() {
                            out.push(CompressSpec::new(alg, level));
                        }
                    }
                }
            }
        }
    }
    let mut seen = HashSet::new();
    out.retain(|s| seen.insert(*s));
    if out.is_empty() {
        return Err(BenchError::Spec(
            "--levels/--algorithms select nothing to measure".into(),
        ));
    }
    Ok(out)
}

fn parse_algorithm(name: &str) -> Result<Algorithm, BenchError> {
    name.trim()
        .parse::<Algorithm>()
        .map_err(|e| BenchError::Spec(format!("--levels: {e}")))
}

/// `3` → [3]; `1..9` or `1-9` → 1..=9; `-5` → [-5]; `-15..-1` → -15..=-1.
pub fn parse_range(text: &str) -> Result<Vec<i32>, BenchError> {
    let bad = || {
        BenchError::Spec(format!(
            "--levels: '{text}' is not a level or range (3, -5, 1..9, 1-9)"
        ))
    };
    let num = |s: &str| s.trim().parse::<i32>().map_err(|_| bad());
    let text = text.trim();
    let (lo, hi) = if let Some((a, b)) = text.split_once("..") {
        (num(a)?, num(b.trim_start_matches('='))?)
    } else if let Some(pos) = text.get(1..).and_then(|rest| rest.find('-')) {
        (num(&text[..=pos])?, num(&text[pos + 2..])?)
    } else {
        let n = num(text)?;
        (n, n)
    };
    if lo > hi {
        return Err(bad());
    }
    Ok((lo..=hi).collect())
}

/// Measures specs one after another on the same engine and corpus.
pub struct LevelBench<'c> {
    /// The engine's offload API, the way the front ends compress.
    offload: Offload,
    extents: Vec<&'c [u8]>,
    /// The same extents as shared buffers, which the offload takes without a copy.
    shared: Vec<Arc<Vec<u8>>>,
    streams: usize,
    bare: bool,
    max_extent: usize,
    passes: usize,
    pass_budget: f64,
    slow_after: f64,
    min_phase: f64,
    /// What compression must save (btrfs's block, or the packed store's bytes).
    saving: Saving,
    out: Vec<u8>,
}

impl<'c> LevelBench<'c> {
    /// An engine with `cfg.streams` streams (and as many offload workers) over the extents of
    /// `corpus`, under btrfs's rule that compression must save a block.
    pub fn new(corpus: &'c Corpus, cfg: &LevelsConfig) -> Result<LevelBench<'c>, BenchError> {
        LevelBench::over(corpus.extents(cfg.max_extent), cfg, Saving::Block)
    }

    /// As [`LevelBench::new`], over the given extents and under the storage rule `saving`.
    pub fn over(
        extents: Vec<&'c [u8]>,
        cfg: &LevelsConfig,
        saving: Saving,
    ) -> Result<LevelBench<'c>, BenchError> {
        let engine = Arc::new(Engine::new(EngineConfig {
            streams: cfg.streams.max(1),
            max_extent: cfg.max_extent,
            ..Default::default()
        }));
        let offload = Offload::new(Arc::clone(&engine), OffloadConfig::for_engine(&engine))
            .map_err(BenchError::Workers)?;
        let shared = extents.iter().map(|e| Arc::new(e.to_vec())).collect();
        // One destination for every decompressed extent, touched now so that page faults
        // stay out of the timings.
        let out = vec![0xa5u8; extents.iter().map(|e| e.len()).sum()];
        Ok(LevelBench {
            offload,
            extents,
            shared,
            streams: cfg.streams.max(1),
            bare: cfg.bare,
            max_extent: cfg.max_extent,
            passes: cfg.passes.max(1),
            pass_budget: cfg.pass_budget,
            slow_after: cfg.slow_after,
            min_phase: cfg.min_phase,
            saving,
            out,
        })
    }

    /// Number of extents.
    pub fn extent_count(&self) -> usize {
        self.extents.len()
    }

    /// The engine (for its statistics).
    pub fn engine(&self) -> &Engine {
        self.offload.engine()
    }

    /// Steps [`LevelBench::measure`] reports to a progress bar.
    pub fn steps(&self) -> u64 {
        if self.bare {
            4
        } else {
            2
        }
    }

    /// Compress, decompress and check every extent with `spec`, and, when configured, the same
    /// through the bare library call, for as many passes as the settings give. Each pass runs
    /// engine and bare back to back, so that other load on the machine falls on both alike,
    /// and the overheads are taken per pass. Every figure is the median of the passes; the
    /// spreads say how far the passes lay apart. [`run`] interleaves the specs' passes instead.
    pub fn measure(
        &mut self,
        spec: CompressSpec,
        progress: &Progress,
    ) -> Result<LevelRow, BenchError> {
        let mut m = self.start(spec)?;
        while self.wants_another(&m) {
            self.pass(&mut m, progress)?;
        }
        Ok(self.row(m))
    }

    /// A spec about to be measured, with no pass yet.
    pub(crate) fn start(&self, spec: CompressSpec) -> Result<Measuring, BenchError> {
        let Some(alg) = spec.algorithm else {
            return Err(BenchError::Spec(
                "'no' compresses nothing to measure".into(),
            ));
        };
        Ok(Measuring {
            spec,
            alg,
            name: spec.to_string(),
            passes: Passes::default(),
            secs: 0.0,
            waits: 0,
            compressed: Vec::new(),
        })
    }

    /// The row of a spec whose passes are done.
    pub(crate) fn row(&self, m: Measuring) -> LevelRow {
        let Measuring {
            spec,
            alg,
            name,
            passes,
            waits,
            compressed,
            ..
        } = m;
        let waits = waits / passes.len().max(1) as u64;
        let mut stored = Stored::default();
        for (e, c) in self.extents.iter().zip(&compressed) {
            stored.add(e.len(), c.as_ref().map(Vec::len));
        }
        let input = stored.input;
        let [compress_secs, decompress_secs, bare_c, bare_d] = passes.medians();
        let bare = self.bare.then(|| BareFigures {
            compress_mbps: mb_per_s(input, bare_c),
            decompress_mbps: mb_per_s(input, bare_d),
            compress_overhead: median(&passes.overheads(0)),
            decompress_overhead: median(&passes.overheads(1)),
            compress_overhead_spread: spread(&passes.overheads(0)),
            decompress_overhead_spread: spread(&passes.overheads(1)),
            compress_secs: bare_c,
            decompress_secs: bare_d,
        });
        let manager = self.engine().manager(alg);
        let mut row = LevelRow {
            spec: name,
            algorithm: alg.name().to_string(),
            level: spec.level,
            in_btrfs: spec.in_btrfs(),
            streams: self.streams,
            ratio: stored.ratio(),
            ratio_unrounded: stored.ratio_unrounded(),
            stored,
            passes: passes.len(),
            compress_mbps: mb_per_s(input, compress_secs),
            decompress_mbps: mb_per_s(input, decompress_secs),
            compress_secs,
            decompress_secs,
            compress_spread: spread(&passes.column(0)),
            decompress_spread: spread(&passes.column(1)),
            workspace_kb: kib(manager.workspace_bytes(spec.level)),
            codec_kb: kib(manager.level_bytes(spec.level)),
            waits,
            bare,
            noisy: false,
        };
        row.noisy = row.widest_spread() > NOISY_SPREAD;
        row
    }

    /// One pass: engine and bare compress, then engine and bare decompress, each checked; the
    /// bare library goes first in every second pass. Keeps what the engine stored per extent.
    /// The first pass reports progress.
    pub(crate) fn pass(
        &mut self,
        m: &mut Measuring,
        progress: &Progress,
    ) -> Result<(), BenchError> {
        let started = Instant::now();
        let (alg, spec, first) = (m.alg, m.spec, m.passes.is_empty());
        let name = m.name.as_str();
        if first {
            interrupt::check()?;
            progress.step(format!("{name}: compressing"));
        }
        // Other specs' passes may have run since this one's last: let the manager allocate
        // or find this level's workspaces before the clock runs.
        self.warm_up(spec)?;
        let waits_before = self.waits(alg);
        let step = |what: &str| {
            if first {
                progress.step(format!("{name}: {what}"));
            }
        };
        let done = || {
            if first {
                progress.done();
            }
        };
        let mut secs = [0.0; 4];
        // Which of the two runs first alternates from pass to pass, so that whatever the
        // order itself costs (a clock ramping up, caches warmed by the first) cancels.
        let bare_first = self.bare && m.passes.len() % 2 == 1;
        let mut bare_sizes = None;
        if bare_first {
            let (t, sizes) = self.bare_compress(spec, name)?;
            (secs[2], bare_sizes) = (t, Some(sizes));
        }
        interrupt::check()?;
        let t = Instant::now();
        let batch = compress_shared_with(
            &self.offload,
            spec,
            Policy::Force,
            self.saving,
            &self.shared,
        );
        secs[0] = t.elapsed().as_secs_f64();
        let compressed = self.collect(name, batch)?;
        done();
        if self.bare && !bare_first {
            interrupt::check()?;
            step("bare library");
            let (t, sizes) = self.bare_compress(spec, name)?;
            (secs[2], bare_sizes) = (t, Some(sizes));
        }
        if let Some(sizes) = bare_sizes {
            same_sizes(name, &sizes, &compressed);
        }
        interrupt::check()?;
        step("decompressing");
        let min_phase = self.min_phase;
        if bare_first {
            secs[3] = per_repetition(min_phase, || self.bare_decompress(spec, name, &compressed))?;
        }
        secs[1] = per_repetition(min_phase, || {
            let engine = self.offload.engine();
            decompress_all(
                &self.extents,
                &mut self.out,
                self.streams,
                name,
                &compressed,
                || Ok(()),
                |_, c, dst| engine.decompress(alg, c, dst),
            )
        })?;
        done();
        if self.bare && !bare_first {
            interrupt::check()?;
            secs[3] = per_repetition(min_phase, || self.bare_decompress(spec, name, &compressed))?;
            done();
            done();
        }
        m.passes.0.push(secs);
        m.waits += self.waits(alg) - waits_before;
        m.compressed = compressed;
        m.secs += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// Whether a spec gets another pass, after its passes so far and the seconds they took.
    pub(crate) fn wants_another(&self, m: &Measuring) -> bool {
        let (done, secs) = (m.passes.len(), m.secs);
        if done < self.passes {
            !(self.slow_after > 0.0 && done >= 2 && secs >= self.slow_after)
        } else {
            // An even count when repeated, so that engine-first and bare-first passes
            // (see `pass`) weigh alike in the median.
            let unpaired = self.bare && self.passes > 1 && done % 2 == 1;
            done < MAX_PASSES && (secs < self.pass_budget || unpaired)
        }
    }

    /// Let the manager allocate its workspaces for this level before the clock runs.
    fn warm_up(&self, spec: CompressSpec) -> Result<(), BenchError> {
        let n = self.shared.len().min(self.streams * 2);
        let name = spec.to_string();
        let batch = compress_shared_with(
            &self.offload,
            spec,
            Policy::Force,
            self.saving,
            &self.shared[..n],
        );
        for (index, r) in batch.into_iter().enumerate() {
            r.map_err(|source| BenchError::Engine {
                spec: name.clone(),
                index,
                source,
            })?;
        }
        Ok(())
    }

    fn waits(&self, alg: Algorithm) -> u64 {
        self.engine().manager(alg).stats().waits
    }

    /// Compressed bytes per extent (`None`: stored raw).
    fn collect(
        &self,
        name: &str,
        batch: Vec<Result<Extent, wring_engine::Error>>,
    ) -> Result<Vec<Option<Vec<u8>>>, BenchError> {
        batch
            .into_iter()
            .enumerate()
            .map(|(index, r)| match r {
                Ok(Extent::Compressed(v)) => Ok(Some(v)),
                Ok(Extent::Incompressible | Extent::Skipped) => Ok(None),
                Err(source) => Err(BenchError::Engine {
                    spec: name.to_string(),
                    index,
                    source,
                }),
            })
            .collect()
    }

    /// Seconds to compress every extent through bare codec states, one per thread, and what
    /// each extent stored (`usize::MAX`: raw).
    fn bare_compress(
        &self,
        spec: CompressSpec,
        name: &str,
    ) -> Result<(f64, Vec<usize>), BenchError> {
        let Some(alg) = spec.algorithm else {
            return Ok((0.0, Vec::new()));
        };
        let (max_extent, saving) = (self.max_extent, self.saving);
        // The engine's own input buffers; each result is copied out, as the engine's batch
        // does, and kept until the pass ends, as the batch keeps its results: a copy dropped
        // at once reuses one warm heap chunk, where kept ones take fresh memory and its page
        // faults (measured: zstd:-5 read 1.12-1.21x "overhead" from that alone).
        let inputs = &self.shared;
        let outputs: Vec<Mutex<Option<Vec<u8>>>> =
            inputs.iter().map(|_| Mutex::new(None)).collect();
        let secs = parallel(
            self.streams,
            inputs.len(),
            || {
                Ok((
                    bare_state(alg, spec.level, max_extent)?,
                    vec![0u8; max_extent],
                ))
            },
            |(state, dst): &mut (Box<dyn CodecState>, Vec<u8>), i| {
                let src: &[u8] = &inputs[i];
                let limit = saving.limit(src.len());
                let r = if limit == 0 {
                    None
                } else {
                    state
                        .compress(spec.level, src, &mut dst[..limit])
                        .map_err(|source| BenchError::Engine {
                            spec: name.to_string(),
                            index: i,
                            source,
                        })?
                };
                *wring_sync::lock(&outputs[i]) = r.map(|n| dst[..n].to_vec());
                Ok(())
            },
        )?;
        let sizes = outputs
            .into_iter()
            .map(|o| {
                o.into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .map_or(usize::MAX, |v| v.len())
            })
            .collect();
        Ok((secs, sizes))
    }

    /// Seconds to decompress every extent through bare codec states, one per thread.
    fn bare_decompress(
        &mut self,
        spec: CompressSpec,
        name: &str,
        managed: &[Option<Vec<u8>>],
    ) -> Result<f64, BenchError> {
        let Some(alg) = spec.algorithm else {
            return Ok(0.0);
        };
        let max_extent = self.max_extent;
        decompress_all(
            &self.extents,
            &mut self.out,
            self.streams,
            name,
            managed,
            || bare_state(alg, spec.level, max_extent),
            |state, c, dst| {
                let n = state.decompress(c, dst)?;
                dst[n..].fill(0);
                Ok(n)
            },
        )
    }
}

/// Warn of an extent the bare library stored at another size than the engine did.
fn same_sizes(name: &str, bare: &[usize], managed: &[Option<Vec<u8>>]) {
    for (index, (&bare, m)) in bare.iter().zip(managed).enumerate() {
        let engine = m.as_ref().map_or(usize::MAX, Vec::len);
        if bare != engine {
            log::warn!("{name}: extent {index}: bare library gave {bare} bytes, engine {engine}");
        }
    }
}

/// The seconds of one run of `phase` (which times itself), run again until the runs add up
/// to `min` seconds: the mean of the runs.
fn per_repetition(
    min: f64,
    mut phase: impl FnMut() -> Result<f64, BenchError>,
) -> Result<f64, BenchError> {
    let (mut total, mut runs) = (0.0, 0u32);
    loop {
        interrupt::check()?;
        total += phase()?;
        runs += 1;
        if total >= min {
            return Ok(total / f64::from(runs));
        }
    }
}

/// The seconds of each pass: engine compress, engine decompress, bare compress, bare
/// decompress.
#[derive(Default)]
struct Passes(Vec<[f64; 4]>);

impl Passes {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One figure over all passes.
    fn column(&self, i: usize) -> Vec<f64> {
        self.0.iter().map(|p| p[i]).collect()
    }

    /// The median of every figure.
    fn medians(&self) -> [f64; 4] {
        [0, 1, 2, 3].map(|i| median(&self.column(i)))
    }

    /// Engine over bare time per pass, compressing (0) or decompressing (1).
    fn overheads(&self, phase: usize) -> Vec<f64> {
        self.0
            .iter()
            .map(|p| overhead(p[phase], p[phase + 2]))
            .collect()
    }
}

/// A codec state outside any manager.
fn bare_state(
    alg: Algorithm,
    level: i32,
    max_extent: usize,
) -> Result<Box<dyn CodecState>, BenchError> {
    standalone(alg, level, max_extent).map_err(|e| BenchError::Spec(e.to_string()))
}

/// Run a levels benchmark: one row per spec, in order. The passes are interleaved — pass 1 of
/// every spec, then pass 2 of every spec that wants another, and so on — so that a drift of the
/// machine's load over minutes falls on every level alike instead of moving whole levels
/// against each other. `load`, when given, is sampled after every round.
pub fn run(
    corpus: &Corpus,
    cfg: &LevelsConfig,
    progress: &Progress,
    load: Option<&mut LoadWatch>,
) -> Result<Vec<LevelRow>, BenchError> {
    let mut bench = LevelBench::new(corpus, cfg)?;
    progress.add_steps(bench.steps() * cfg.specs.len() as u64);
    bench.interleaved(&cfg.specs, progress, load)
}

impl LevelBench<'_> {
    /// Measure `specs` with their passes interleaved (see [`run`]): one row per spec, in order.
    pub fn interleaved(
        &mut self,
        specs: &[CompressSpec],
        progress: &Progress,
        mut load: Option<&mut LoadWatch>,
    ) -> Result<Vec<LevelRow>, BenchError> {
        let mut all = specs
            .iter()
            .map(|&spec| self.start(spec))
            .collect::<Result<Vec<_>, _>>()?;
        loop {
            let mut any = false;
            for m in &mut all {
                if self.wants_another(m) {
                    self.pass(m, progress)?;
                    any = true;
                }
            }
            if let Some(l) = load.as_deref_mut() {
                l.sample();
            }
            if !any {
                break;
            }
        }
        Ok(all.into_iter().map(|m| self.row(m)).collect())
    }
}

/// Decompress every extent into its place in `out` on `threads` threads, each with a state
/// from `init`; raw extents are copied. Returns the wall-clock seconds, after checking every
/// extent against its input (outside the timing).
#[allow(clippy::too_many_arguments)]
fn decompress_all<S, I, F>(
    extents: &[&[u8]],
    out: &mut [u8],
    threads: usize,
    name: &str,
    compressed: &[Option<Vec<u8>>],
    init: I,
    decode: F,
) -> Result<f64, BenchError>
where
    I: Fn() -> Result<S, BenchError> + Sync,
    F: Fn(&mut S, &[u8], &mut [u8]) -> Result<usize, wring_engine::Error> + Sync,
{
    out.fill(0);
    let slots = split_slots(out, extents.iter().map(|e| e.len()));
    let secs = parallel(threads, extents.len(), init, |state, i| {
        let mut slot = wring_sync::lock(&slots[i]);
        match &compressed[i] {
            Some(c) => {
                decode(state, c, &mut slot).map_err(|source| BenchError::Engine {
                    spec: name.to_string(),
                    index: i,
                    source,
                })?;
            }
            None => slot.copy_from_slice(extents[i]),
        }
        Ok(())
    })?;
    drop(slots);
    check(extents, out, name)?;
    Ok(secs)
}

/// Every extent in `out` equals its input.
fn check(extents: &[&[u8]], out: &[u8], name: &str) -> Result<(), BenchError> {
    let mut pos = 0;
    for (index, e) in extents.iter().enumerate() {
        if out.get(pos..pos + e.len()) != Some(*e) {
            return Err(BenchError::Mismatch {
                spec: name.to_string(),
                index,
            });
        }
        pos += e.len();
    }
    Ok(())
}

fn kib(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(1024)
}

/// `buf` cut into consecutive slices of the given lengths, each behind its own lock so that
/// threads can fill them in any order.
pub(crate) fn split_slots(
    buf: &mut [u8],
    lens: impl Iterator<Item = usize>,
) -> Vec<Mutex<&mut [u8]>> {
    let mut rest = buf;
    let mut slots = Vec::new();
    for len in lens {
        let n = len.min(rest.len());
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        slots.push(Mutex::new(head));
        rest = tail;
    }
    slots
}

/// Run `work(state, i)` for every `i < n` on `threads` threads, each with a state from `init`
/// made before the clock starts. Returns the wall-clock seconds from the moment all threads
/// are ready until the last one finishes; the first error wins.
pub(crate) fn parallel<S, I, W>(
    threads: usize,
    n: usize,
    init: I,
    work: W,
) -> Result<f64, BenchError>
where
    I: Fn() -> Result<S, BenchError> + Sync,
    W: Fn(&mut S, usize) -> Result<(), BenchError> + Sync,
{
    let threads = threads.clamp(1, n.max(1));
    let next = AtomicUsize::new(0);
    let ready = Barrier::new(threads + 1);
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let state = init();
                    ready.wait();
                    let mut state = state?;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n || failed.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        if let Err(e) = work(&mut state, i) {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                })
            })
            .collect();
        ready.wait();
        let t = Instant::now();
        let mut first_error = None;
        for w in workers {
            let r = w
                .join()
                .unwrap_or_else(|_| Err(BenchError::Spec("a benchmark thread panicked".into())));
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        match first_error {
            Some(e) => Err(e),
            None => Ok(secs),
        }
    })
}
