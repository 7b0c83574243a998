//! The engine's fixed cost per extent (`wring bench levels`' second table): time per extent
//! through the engine and through the bare library call, at 4, 16, 64 and 128 KiB and the fast
//! levels. A cost that does not grow with the extent shows here as a difference in
//! microseconds that stays put while the extent grows; it is what zram's 4 KiB pages and a
//! filesystem's small files pay most, and what a 128 KiB average hides.
//!
//! Each size takes whole extents of exactly that size spread evenly over the corpus, up to
//! [`BYTES_PER_SIZE`] of input, under the packed store's rule ([`Saving::Bytes`]: a 4 KiB
//! extent is tried, where btrfs's rule would skip it). Engine and bare run back to back in
//! each pass and the passes of the levels are interleaved, as in [`crate::levels::run`].

use serde::Serialize;
use wring_engine::{CompressSpec, Saving};

use crate::corpus::Corpus;
use crate::levels::{LevelBench, LevelRow, LevelsConfig, NOISY_SPREAD};
use crate::machine::LoadWatch;
use crate::progress::Progress;
use crate::BenchError;

/// The extent sizes measured by default.
pub const DEFAULT_SIZES: [usize; 4] = [4 << 10, 16 << 10, 64 << 10, 128 << 10];

/// The levels measured per size: the fast ones, where a fixed cost weighs most.
pub const FAST_LEVELS: &str = "zstd:-5,zstd:1,zstd:3,lz4,lzo";

/// Input bytes per size.
pub const BYTES_PER_SIZE: usize = 16 << 20;

/// One level at one extent size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeRow {
    /// The spec as btrfs spells it.
    pub spec: String,
    /// Extent size in bytes.
    pub size: usize,
    /// Extents timed.
    pub extents: usize,
    /// Streams (threads) compressing and decompressing.
    pub streams: usize,
    /// Passes; every figure is their median.
    pub passes: usize,
    /// Thread time per extent through the engine, compressing, in µs (wall time × streams ÷
    /// extents).
    pub compress_us: f64,
    /// The same through the bare library call.
    pub bare_compress_us: f64,
    /// Thread time per extent through the engine, decompressing, in µs.
    pub decompress_us: f64,
    /// The same through the bare library call.
    pub bare_decompress_us: f64,
    /// Engine time over bare time per pass, median.
    pub compress_overhead: f64,
    /// See `compress_overhead`.
    pub decompress_overhead: f64,
    /// Some figure's passes lay more than [`NOISY_SPREAD`] apart.
    pub noisy: bool,
}

impl SizeRow {
    fn of(size: usize, row: &LevelRow) -> Option<SizeRow> {
        let bare = row.bare?;
        let n = row.stored.extents.max(1) as f64;
        let us = |secs: f64| secs * row.streams as f64 / n * 1e6;
        Some(SizeRow {
            spec: row.spec.clone(),
            size,
            extents: row.stored.extents as usize,
            streams: row.streams,
            passes: row.passes,
            compress_us: us(row.compress_secs),
            bare_compress_us: us(bare.compress_secs),
            decompress_us: us(row.decompress_secs),
            bare_decompress_us: us(bare.decompress_secs),
            compress_overhead: bare.compress_overhead,
            decompress_overhead: bare.decompress_overhead,
            noisy: row.widest_spread() > NOISY_SPREAD,
        })
    }

    /// Microseconds per extent the engine adds, compressing.
    pub fn compress_fixed_us(&self) -> f64 {
        self.compress_us - self.bare_compress_us
    }

    /// Microseconds per extent the engine adds, decompressing.
    pub fn decompress_fixed_us(&self) -> f64 {
        self.decompress_us - self.bare_decompress_us
    }
}

/// The specs of `specs` that the size table measures: those in [`FAST_LEVELS`].
pub fn fast_specs(specs: &[CompressSpec]) -> Vec<CompressSpec> {
    let fast: Vec<String> = FAST_LEVELS.split(',').map(str::to_string).collect();
    specs
        .iter()
        .copied()
        .filter(|s| fast.contains(&s.to_string()))
        .collect()
}

/// Whole extents of exactly `size` bytes, spread evenly over the corpus, up to `budget` bytes.
pub fn extents_of(corpus: &Corpus, size: usize, budget: usize) -> Vec<&[u8]> {
    let whole: Vec<&[u8]> = corpus
        .extents(size)
        .into_iter()
        .filter(|e| e.len() == size)
        .collect();
    let want = (budget / size.max(1)).max(1);
    if whole.len() <= want {
        return whole;
    }
    (0..want).map(|i| whole[i * whole.len() / want]).collect()
}

/// Measure every spec at every size (`cfg` gives streams, passes and budgets; its specs are
/// ignored). `load`, when given, is sampled after every round.
pub fn run(
    corpus: &Corpus,
    specs: &[CompressSpec],
    sizes: &[usize],
    cfg: &LevelsConfig,
    progress: &Progress,
    mut load: Option<&mut LoadWatch>,
) -> Result<Vec<SizeRow>, BenchError> {
    let cfg = LevelsConfig {
        bare: true,
        ..cfg.clone()
    };
    let mut out = Vec::new();
    for &size in sizes {
        if size == 0 || size > cfg.max_extent {
            return Err(BenchError::Spec(format!(
                "--extent-sizes: {size} bytes is not between 1 and the largest extent, {}",
                cfg.max_extent
            )));
        }
        let extents = extents_of(corpus, size, BYTES_PER_SIZE);
        if extents.is_empty() {
            continue;
        }
        let mut bench = LevelBench::over(extents, &cfg, Saving::Bytes)?;
        progress.add_steps(bench.steps() * specs.len() as u64);
        let rows = bench.interleaved(specs, progress, load.as_deref_mut())?;
        out.extend(rows.iter().filter_map(|r| SizeRow::of(size, r)));
    }
    Ok(out)
}

/// `4K`, `16k`, `64KiB`, `131072` → bytes.
pub fn parse_size(text: &str) -> Result<usize, BenchError> {
    let t = text.trim();
    let bad = || {
        BenchError::Spec(format!(
            "--extent-sizes: '{t}' is not a size (4K, 16K, 64K, 128K or bytes)"
        ))
    };
    let lower = t.to_ascii_lowercase();
    let (num, mult) = match lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix('k'))
    {
        Some(n) => (n, 1024),
        None => (lower.as_str(), 1),
    };
    let n: usize = num.trim().parse().map_err(|_| bad())?;
    n.checked_mul(mult).filter(|&b| b > 0).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_users_write_them() {
        assert_eq!(parse_size("4K").ok(), Some(4096));
        assert_eq!(parse_size("16k").ok(), Some(16384));
        assert_eq!(parse_size("64KiB").ok(), Some(65536));
        assert_eq!(parse_size("131072").ok(), Some(131072));
        for bad in ["", "0", "K", "4M", "-4K", "4.5K"] {
            let e = parse_size(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("--extent-sizes"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn fast_specs_keep_the_fast_levels_in_order() {
        let specs: Vec<CompressSpec> = ["zstd:9", "lzo", "zstd:1", "zlib:6", "lz4"]
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect();
        let names: Vec<String> = fast_specs(&specs).iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["lzo", "zstd:1", "lz4"]);
    }
}
