//! The arithmetic every table shares: block rounding, ratios, MB/s, overhead and speed-up.
//! Kept apart so that it can be tested without timing anything.

use serde::Serialize;

/// btrfs's block (sector) size: extents take whole blocks on disk.
pub const BLOCK: u64 = 4096;

/// Bytes per MB in every MB/s figure (10^6, as the seeds and lzbench).
pub const MB: f64 = 1_000_000.0;

/// `n` rounded up to whole blocks, as btrfs allocates an extent.
pub fn round_up_block(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// Compression ratio: input bytes over stored bytes. 0 when there is no input; infinite when
/// input takes no space (zram's same-filled pages).
pub fn ratio(input: u64, stored: u64) -> f64 {
    match (input, stored) {
        (0, _) => 0.0,
        (_, 0) => f64::INFINITY,
        (i, s) => i as f64 / s as f64,
    }
}

/// Throughput in MB/s (10^6 bytes per second) of `bytes` processed in `secs` of wall clock.
pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 / MB / secs
}

/// The managers' overhead: time through the engine over time through the bare library call
/// on the same extents (1.00 = none; 1.05 = the managed path takes 5% longer).
pub fn overhead(managed_secs: f64, bare_secs: f64) -> f64 {
    if bare_secs <= 0.0 {
        return 0.0;
    }
    managed_secs / bare_secs
}

/// Speed-up of `mbps` over `base_mbps` (2.0 = twice as fast).
pub fn speedup(mbps: f64, base_mbps: f64) -> f64 {
    if base_mbps <= 0.0 {
        return 0.0;
    }
    mbps / base_mbps
}

/// `a / b` for the wring/kernel columns; `None` when `b` is not a positive finite number.
pub fn quotient(a: f64, b: f64) -> Option<f64> {
    (b.is_finite() && b > 0.0 && a.is_finite()).then(|| a / b)
}

/// The median of `v` (the mean of the middle two when even); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// How far repeated measurements `v` lie apart: half the range between the largest and the
/// smallest, relative to the median (0.02 = the passes lie within ±2% of it). 0 for fewer
/// than two values or a median that is not positive.
pub fn spread(v: &[f64]) -> f64 {
    let m = median(v);
    if v.len() < 2 || m.is_nan() || m <= 0.0 {
        return 0.0;
    }
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    (hi - lo) / 2.0 / m
}

/// What a set of extents takes on disk, counted both ways: each extent rounded up to whole
/// blocks (what btrfs allocates) and unrounded. An extent that was not compressed counts at its
/// raw size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stored {
    /// Extents counted.
    pub extents: u64,
    /// Extents stored raw (compression did not save a block).
    pub incompressible: u64,
    /// Input bytes.
    pub input: u64,
    /// Stored bytes, each extent rounded up to whole blocks.
    pub stored: u64,
    /// Stored bytes, unrounded.
    pub stored_unrounded: u64,
}

impl Stored {
    /// Count one extent of `input_len` bytes stored as `compressed_len` bytes (`None`: raw).
    pub fn add(&mut self, input_len: usize, compressed_len: Option<usize>) {
        let input = input_len as u64;
        let on_disk = match compressed_len {
            Some(n) => n as u64,
            None => {
                self.incompressible += 1;
                input
            }
        };
        self.extents += 1;
        self.input += input;
        self.stored += round_up_block(on_disk);
        self.stored_unrounded += on_disk;
    }

    /// Add another tally to this one.
    pub fn merge(&mut self, other: &Stored) {
        self.extents += other.extents;
        self.incompressible += other.incompressible;
        self.input += other.input;
        self.stored += other.stored;
        self.stored_unrounded += other.stored_unrounded;
    }

    /// Ratio with every extent rounded up to whole blocks.
    pub fn ratio(&self) -> f64 {
        ratio(self.input, self.stored)
    }

    /// Ratio of the unrounded sizes.
    pub fn ratio_unrounded(&self) -> f64 {
        ratio(self.input, self.stored_unrounded)
    }
}

/// wring's figures over the kernel's for the same method: ratio, compression and
/// decompression speed (above 1: wring compresses better or runs faster).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Versus {
    /// wring's ratio over the kernel's.
    pub ratio: Option<f64>,
    /// wring's compression (write) MB/s over the kernel's.
    pub compress: Option<f64>,
    /// wring's decompression (read) MB/s over the kernel's.
    pub decompress: Option<f64>,
}

impl Versus {
    /// Each of wring's figures over the kernel's.
    pub fn of(wring: [f64; 3], kernel: [f64; 3]) -> Versus {
        Versus {
            ratio: quotient(wring[0], kernel[0]),
            compress: quotient(wring[1], kernel[1]),
            decompress: quotient(wring[2], kernel[2]),
        }
    }
}
