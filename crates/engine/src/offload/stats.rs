//! Offload statistics per provider: requests submitted, completed and in flight, fallbacks to
//! the CPU by reason, queue-wait and service-time distributions in fixed log-scale
//! histograms (no allocation when a sample is recorded), and each algorithm's work: bytes in
//! and out and time, compressing and decompressing.

use std::time::Duration;

use super::{Completed, Op};
use crate::engine::Outcome;
use crate::error::Error;
use crate::spec::Algorithm;

/// The work one algorithm's codec did on a provider (requests that finished without an
/// error). Kept under the provider's state lock with the rest, so recording it takes none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodecWork {
    /// Compression requests.
    pub compress_requests: u64,
    /// Bytes they were given.
    pub compress_in_bytes: u64,
    /// Bytes their results take: the compressed bytes, or the input for an extent left raw
    /// (it did not save a block, or was not tried).
    pub compress_out_bytes: u64,
    /// Time compressing, in nanoseconds (a device's: its batch's round trip).
    pub compress_nanos: u64,
    /// Decompression requests.
    pub decompress_requests: u64,
    /// Bytes they produced.
    pub decompress_out_bytes: u64,
    /// Time decompressing, in nanoseconds.
    pub decompress_nanos: u64,
}

impl CodecWork {
    fn record(&mut self, op: Op, input_len: usize, done: &Completed, service: Duration) {
        let nanos = u64::try_from(service.as_nanos()).unwrap_or(u64::MAX);
        let out = match (op, *done) {
            (Op::Decompress { len, .. }, _) => {
                self.decompress_requests += 1;
                self.decompress_out_bytes += len as u64;
                self.decompress_nanos = self.decompress_nanos.saturating_add(nanos);
                return;
            }
            (_, Completed::Compressed(Outcome::Compressed(n))) => n,
            (_, Completed::CompressedInto(Some(n))) => n,
            _ => input_len,
        };
        self.compress_requests += 1;
        self.compress_in_bytes += input_len as u64;
        self.compress_out_bytes += out as u64;
        self.compress_nanos = self.compress_nanos.saturating_add(nanos);
    }
}

/// Why a request ran on the CPU instead of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fallback {
    /// The device does not produce this algorithm, level or policy.
    Unsupported = 0,
    /// The input is below the device's minimum request size.
    BelowThreshold = 1,
    /// The device's queue was full, or it refused the request as busy.
    Busy = 2,
    /// The device reported an error or left the request without a result.
    Failed = 3,
    /// The device did not answer by the deadline.
    TimedOut = 4,
}

impl Fallback {
    /// Every reason, in counter order.
    pub const ALL: [Fallback; 5] = [
        Fallback::Unsupported,
        Fallback::BelowThreshold,
        Fallback::Busy,
        Fallback::Failed,
        Fallback::TimedOut,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Fallback::Unsupported => "unsupported",
            Fallback::BelowThreshold => "below_threshold",
            Fallback::Busy => "busy",
            Fallback::Failed => "failed",
            Fallback::TimedOut => "timed_out",
        }
    }
}

/// log2 of the sub-buckets per power of two: bucket bounds grow by 2^(1/4), about 19%.
const SUB_BITS: u32 = 2;
const SUB: u32 = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB as usize;

/// A log-scale histogram of durations in nanoseconds; percentiles are exact to a bucket
/// (the upper bound of the bucket holding the rank).
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.total)
            .field("p50", &self.percentile(50.0))
            .field("p99", &self.percentile(99.0))
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

/// The bucket of `ns`: the power of two below it, then the next SUB_BITS bits.
fn bucket(ns: u64) -> usize {
    if ns < 2 {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros();
    let frac = if exp >= SUB_BITS {
        (ns >> (exp - SUB_BITS)) & u64::from(SUB - 1)
    } else {
        (ns << (SUB_BITS - exp)) & u64::from(SUB - 1)
    };
    (exp * SUB) as usize + frac as usize
}

/// The largest value bucket `b` holds.
fn upper_bound(b: usize) -> u64 {
    if b < 2 {
        return b as u64;
    }
    let exp = b as u32 / SUB;
    let frac = u128::from(b as u32 % SUB);
    let base = 1u128 << exp;
    // The bucket holds [base + frac·base/SUB, base + (frac+1)·base/SUB).
    let end = base + ((frac + 1) * base).div_ceil(u128::from(SUB));
    u64::try_from(end - 1).unwrap_or(u64::MAX)
}

impl Histogram {
    /// Add one sample.
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[bucket(ns)] += 1;
        self.total += 1;
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `p`th percentile (0–100), `None` without samples.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Duration::from_nanos(upper_bound(b)));
            }
        }
        None
    }
}

/// One provider's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStats {
    /// `cpu`, or the device's name.
    pub name: &'static str,
    /// Requests queued for this provider (a fallback counts again on the CPU).
    pub submitted: u64,
    /// Requests it finished (successfully or with the codec's error).
    pub completed: u64,
    /// Queued for it or running on it now.
    pub in_flight: u64,
    /// CPU only: requests that came to it from the device, by [`Fallback`] reason.
    pub fallbacks: [u64; 5],
    /// Time from being queued to starting.
    pub queue_wait: Histogram,
    /// Time running (for a device, a whole batch's round trip).
    pub service: Histogram,
    /// CPU only: worker threads running.
    pub workers: usize,
    /// Each algorithm's work, in [`Algorithm::ALL`]'s order ([`ProviderStats::codec`]).
    pub codecs: [CodecWork; Algorithm::ALL.len()],
}

impl ProviderStats {
    pub(super) fn new(name: &'static str) -> ProviderStats {
        ProviderStats {
            name,
            submitted: 0,
            completed: 0,
            in_flight: 0,
            fallbacks: [0; 5],
            queue_wait: Histogram::default(),
            service: Histogram::default(),
            workers: 0,
            codecs: [CodecWork::default(); Algorithm::ALL.len()],
        }
    }

    /// The work `algorithm`'s codec did here.
    pub fn codec(&self, algorithm: Algorithm) -> CodecWork {
        Algorithm::ALL
            .iter()
            .position(|&a| a == algorithm)
            .and_then(|i| self.codecs.get(i))
            .copied()
            .unwrap_or_default()
    }

    /// Count a finished request's work under its algorithm (a failed one counts nothing).
    pub(super) fn record_work(
        &mut self,
        op: Op,
        input_len: usize,
        result: &Result<Completed, Error>,
        service: Duration,
    ) {
        let (Ok(done), Some((algorithm, _))) = (result, op.algorithm_level()) else {
            return;
        };
        let i = Algorithm::ALL.iter().position(|&a| a == algorithm);
        if let Some(w) = i.and_then(|i| self.codecs.get_mut(i)) {
            w.record(op, input_len, done, service);
        }
    }

    /// Fallbacks for one reason.
    pub fn fallbacks(&self, why: Fallback) -> u64 {
        self.fallbacks[why as usize]
    }
}

/// Every provider's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadStats {
    /// Requests in flight at most.
    pub depth: usize,
    /// Slots in use now (submitted and not yet collected).
    pub in_flight: usize,
    /// The CPU workers.
    pub cpu: ProviderStats,
    /// The device, if there is one.
    pub device: Option<ProviderStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_bounds_cover_their_samples() {
        let mut last = 0;
        for ns in (0..20_000u64).chain([1 << 20, 1 << 40, u64::MAX / 3, u64::MAX]) {
            let b = bucket(ns);
            assert!(b >= last, "bucket({ns}) = {b} < {last}");
            assert!(upper_bound(b) >= ns, "bound of {b} below {ns}");
            if b > 0 {
                assert!(upper_bound(b - 1) < ns, "{ns} belongs in an earlier bucket");
            }
            last = b;
        }
    }

    #[test]
    fn percentiles_are_within_a_bucket_of_the_exact_rank() {
        let mut h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        for p in [50.0, 90.0, 99.0, 99.9] {
            let exact = Duration::from_micros((p * 10.0_f64).ceil() as u64);
            let got = h.percentile(p).unwrap_or_default();
            assert!(got >= exact, "p{p}: {got:?} < {exact:?}");
            assert!(
                got.as_nanos() * 100 <= exact.as_nanos() * 120,
                "p{p}: {got:?} ≫ {exact:?}"
            );
        }
        assert_eq!(Histogram::default().percentile(50.0), None);
    }
}
