//! Mirrors btrfs's compressibility heuristic, `btrfs_compress_heuristic()` in fs/btrfs/compression.c;
//! wring differs in judging a byte slice instead of a page-cache range, and in never reading
//! past that slice (the kernel samples past a range of 16 bytes or less; see [`heuristic`]).
//!
//! The heuristic decides cheaply whether an extent is worth handing to a compressor. It copies
//! a systematic sample of the extent (16 bytes out of every 256, at most 8 KiB from the first
//! 128 KiB) into a reused workspace and runs, in the kernel's order:
//!
//! 1. **repeated pattern**: the sample's two halves are identical → compress;
//! 2. **byte set**: fewer than 64 distinct byte values (text, configs) → compress;
//! 3. **core byte set**: how many of the most frequent byte values cover 90% of the sample;
//!    at most 64 → compress, 200 or more (uniform, encrypted, already compressed) → skip;
//! 4. **Shannon entropy** in percent of 8 bits per byte: at most 65 → compress, below 80 →
//!    compress, otherwise skip.
//!
//! The integer arithmetic is the kernel's, including its quirks, so the decisions match
//! btrfs's for the same bytes: entropy uses `ilog2(n⁴)` as a log₂ with two fractional bits;
//! the byte counts are ordered by the kernel's 4-bit radix sort, which for a largest count of
//! 1 sorts nothing and for a largest count in 256..=511 sorts on the low 8 bits only; and the
//! core-set and entropy walks stop at the first empty bucket of that order.

use std::fmt;

/// Bytes copied per sample (the kernel's `SAMPLING_READ_SIZE`).
const SAMPLING_READ_SIZE: usize = 16;
/// Distance between the starts of two samples (`SAMPLING_INTERVAL`).
const SAMPLING_INTERVAL: usize = 256;
/// Most bytes one heuristic run looks at (`BTRFS_MAX_UNCOMPRESSED`).
const MAX_UNCOMPRESSED: usize = 128 * 1024;
/// Largest sample: 16 bytes from each of 512 places (`MAX_SAMPLE_SIZE`).
const MAX_SAMPLE_SIZE: usize = MAX_UNCOMPRESSED * SAMPLING_READ_SIZE / SAMPLING_INTERVAL;
/// The page size the kernel's sampling walks; the sample offsets do not depend on it.
const PAGE_SIZE: usize = 4096;
/// One counter per byte value (`BUCKET_SIZE`).
const BUCKET_SIZE: usize = 256;
/// Fewer distinct byte values than this: compressible (`BYTE_SET_THRESHOLD`).
const BYTE_SET_THRESHOLD: u32 = 64;
/// A core set of at most this many values: compressible (`BYTE_CORE_SET_LOW`).
const BYTE_CORE_SET_LOW: u32 = 64;
/// A core set of at least this many values: not compressible (`BYTE_CORE_SET_HIGH`).
const BYTE_CORE_SET_HIGH: u32 = 200;
/// Entropy (percent) at or below which data compresses (`ENTROPY_LVL_ACEPTABLE`).
const ENTROPY_LVL_ACCEPTABLE: u32 = 65;
/// Entropy (percent) at or above which data does not compress (`ENTROPY_LVL_HIGH`).
const ENTROPY_LVL_HIGH: u32 = 80;
/// Bits per radix-sort digit (`RADIX_BASE`).
const RADIX_BASE: u32 = 4;
/// Counters per radix-sort pass (`COUNTERS_SIZE`).
const COUNTERS_SIZE: usize = 1 << RADIX_BASE;

/// Scratch the heuristic reuses between calls (the kernel's heuristic workspace): sample buffer
/// and buckets.
pub struct HeuristicWorkspace {
    /// Partial copy of the input; the first `sample_size` bytes are valid.
    sample: Box<[u8; MAX_SAMPLE_SIZE]>,
    /// Bytes collected into `sample` by the last run.
    sample_size: u32,
    /// How often each byte value occurs in the sample; sorted in place by the core-set step.
    bucket: [u32; BUCKET_SIZE],
    /// The radix sort's second buffer.
    bucket_b: [u32; BUCKET_SIZE],
}

impl HeuristicWorkspace {
    /// Allocate a workspace; [`heuristic`] allocates nothing more.
    pub fn new() -> Self {
        HeuristicWorkspace {
            sample: Box::new([0; MAX_SAMPLE_SIZE]),
            sample_size: 0,
            bucket: [0; BUCKET_SIZE],
            bucket_b: [0; BUCKET_SIZE],
        }
    }

    /// The bytes the last run sampled.
    fn sample(&self) -> &[u8] {
        &self.sample[..self.sample_size as usize]
    }

    /// Copy 16 bytes from every 256 of `data` into the sample, as
    /// `heuristic_collect_sample()` does for the range `[0, data.len() - 1]` (btrfs passes an
    /// inclusive end): at most the first 128 KiB + 1 byte are looked at, and a window is taken
    /// only if it starts at or before `end - 16`, so a window ending on the last byte is not.
    fn collect_sample(&mut self, data: &[u8]) {
        self.sample_size = 0;
        let Some(mut end) = data.len().checked_sub(1) else {
            return;
        };
        let mut start = 0usize;
        end = end.min(start + MAX_UNCOMPRESSED);
        let mut index = start / PAGE_SIZE;
        let mut index_end = end / PAGE_SIZE;
        if end % PAGE_SIZE != 0 {
            index_end += 1;
        }
        let mut pos = 0usize;
        while index < index_end {
            let mut i = start % PAGE_SIZE;
            while i < PAGE_SIZE - SAMPLING_READ_SIZE {
                // The kernel's `start > end - SAMPLING_READ_SIZE` wraps around for end < 16 and
                // then reads past the range; wring samples nothing there instead.
                match end.checked_sub(SAMPLING_READ_SIZE) {
                    Some(last) if start <= last => {}
                    _ => break,
                }
                let from = index * PAGE_SIZE + i;
                let (Some(src), Some(dst)) = (
                    data.get(from..from + SAMPLING_READ_SIZE),
                    self.sample.get_mut(pos..pos + SAMPLING_READ_SIZE),
                ) else {
                    break;
                };
                dst.copy_from_slice(src);
                i += SAMPLING_INTERVAL;
                start += SAMPLING_INTERVAL;
                pos += SAMPLING_READ_SIZE;
            }
            index += 1;
        }
        // pos <= MAX_SAMPLE_SIZE (8192): the cast cannot truncate.
        self.sample_size = pos as u32;
    }

    /// `sample_repeated_patterns()`: the first half of the sample equals the second. True for
    /// an empty sample, as in the kernel (`memcmp` of 0 bytes).
    fn sample_repeated_patterns(&self) -> bool {
        let sample = self.sample();
        let half = sample.len() / 2;
        sample[..half] == sample[half..2 * half]
    }

    /// Count each byte value of the sample into the buckets.
    fn fill_buckets(&mut self) {
        self.bucket = [0; BUCKET_SIZE];
        let size = self.sample_size as usize;
        for &byte in &self.sample[..size] {
            self.bucket[usize::from(byte)] += 1;
        }
    }

    /// `byte_set_size()`: distinct byte values in the sample, counting stops just past
    /// [`BYTE_SET_THRESHOLD`] once the first 64 buckets have been counted.
    fn byte_set_size(&self) -> u32 {
        let threshold = BYTE_SET_THRESHOLD as usize;
        let mut size = self.bucket[..threshold].iter().filter(|&&c| c > 0).count() as u32;
        for &count in &self.bucket[threshold..] {
            if count > 0 {
                size += 1;
                if size > BYTE_SET_THRESHOLD {
                    return size;
                }
            }
        }
        size
    }

    /// `byte_core_set_size()`: sort the buckets (kernel radix sort, descending) and count how
    /// many of the first ones it takes to exceed 90% of the sample, as the kernel counts: the
    /// first 64 together, then one by one up to [`BYTE_CORE_SET_HIGH`], stopping at an empty
    /// bucket and returning the index of the bucket that crossed the threshold.
    fn byte_core_set_size(&mut self) -> u32 {
        let threshold = self.sample_size * 90 / 100;
        radix_sort(&mut self.bucket, &mut self.bucket_b);
        let low = BYTE_CORE_SET_LOW as usize;
        let mut sum: u32 = self.bucket[..low].iter().sum();
        if sum > threshold {
            return BYTE_CORE_SET_LOW;
        }
        let mut i = low;
        while i < BYTE_CORE_SET_HIGH as usize && self.bucket[i] > 0 {
            sum += self.bucket[i];
            if sum > threshold {
                break;
            }
            i += 1;
        }
        i as u32
    }

    /// `shannon_entropy()`: the sample's entropy in percent of 8 bits per byte, with
    /// `ilog2(n⁴)` for `4·log₂ n`, summed over the sorted buckets up to the first empty one.
    fn shannon_entropy(&self) -> u32 {
        if self.sample_size == 0 {
            return 0;
        }
        let entropy_max = 8 * ilog2_w(2);
        let sz_base = ilog2_w(self.sample_size);
        let mut entropy_sum: u32 = 0;
        for &p in self.bucket.iter().take_while(|&&c| c > 0) {
            // p <= sample_size, so p_base <= sz_base; the sum stays below 8192 * 52.
            entropy_sum += p * (sz_base - ilog2_w(p));
        }
        entropy_sum /= self.sample_size;
        entropy_sum * 100 / entropy_max
    }
}

impl Default for HeuristicWorkspace {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for HeuristicWorkspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeuristicWorkspace")
            .field("sample_size", &self.sample_size)
            .finish_non_exhaustive()
    }
}

/// `ilog2_w()`: `ilog2(n⁴)`, i.e. `⌊4·log₂ n⌋`, in 64-bit arithmetic like the kernel
/// (exact for n ≤ 65535; the heuristic's n never exceeds 8192). 0 for n = 0.
fn ilog2_w(n: u32) -> u32 {
    let n = u64::from(n);
    n.wrapping_mul(n)
        .wrapping_mul(n)
        .wrapping_mul(n)
        .checked_ilog2()
        .unwrap_or(0)
}

/// `get4bits()`: the 4-bit digit of `num` at `shift`, reversed so that ascending digit order
/// sorts the counts in descending order.
fn get4bits(num: u32, shift: u32) -> usize {
    (COUNTERS_SIZE - 1) - ((num >> shift) as usize % COUNTERS_SIZE)
}

/// One stable counting-sort pass of `src` into `dst` on the digit at `shift`.
fn radix_pass(src: &[u32; BUCKET_SIZE], dst: &mut [u32; BUCKET_SIZE], shift: u32) {
    let mut counters = [0usize; COUNTERS_SIZE];
    for &num in src {
        counters[get4bits(num, shift)] += 1;
    }
    for i in 1..COUNTERS_SIZE {
        counters[i] += counters[i - 1];
    }
    for &num in src.iter().rev() {
        let addr = get4bits(num, shift);
        counters[addr] -= 1;
        dst[counters[addr]] = num;
    }
}

/// `radix_sort()`: sort `array` descending, two 4-bit passes at a time (into `buf` and back),
/// over `ALIGN(ilog2(max), 8)` bits — which is 0 bits when the largest count is 1 and only
/// 8 bits when it is 256..=511, exactly as in the kernel.
fn radix_sort(array: &mut [u32; BUCKET_SIZE], buf: &mut [u32; BUCKET_SIZE]) {
    let max = array.iter().copied().max().unwrap_or(0);
    let bits = max.checked_ilog2().unwrap_or(0);
    let bitlen = bits.next_multiple_of(RADIX_BASE * 2);
    let mut shift = 0;
    while shift < bitlen {
        radix_pass(array, buf, shift);
        shift += RADIX_BASE;
        radix_pass(buf, array, shift);
        shift += RADIX_BASE;
    }
}

/// Why the heuristic decided as it did: one variant per return path of
/// `btrfs_compress_heuristic()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The two halves of the sample are identical (kernel return 1). Also the verdict for an
    /// empty sample — data of 16 bytes or less — as in the kernel.
    RepeatedPattern,
    /// Fewer than 64 distinct byte values in the sample (kernel return 2).
    SmallByteSet,
    /// At most 64 byte values cover 90% of the sample (kernel return 3).
    SmallCoreSet,
    /// 200 or more byte values are needed to cover 90% of the sample (kernel return 0).
    LargeCoreSet,
    /// Entropy at most 65% of 8 bits per byte (kernel return 4).
    LowEntropy,
    /// Entropy above 65% but below 80% (kernel return 5): the kernel compresses.
    ModerateEntropy,
    /// Entropy of 80% or more (kernel return 0).
    HighEntropy,
}

/// The heuristic's decision for one extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Worth handing to the compressor.
    Compress(Reason),
    /// Store as is: compression would most likely not pay.
    Skip(Reason),
}

impl Verdict {
    /// Whether to compress (the kernel's non-zero return).
    pub fn worth_compressing(self) -> bool {
        matches!(self, Verdict::Compress(_))
    }

    /// The path the decision took.
    pub fn reason(self) -> Reason {
        match self {
            Verdict::Compress(reason) | Verdict::Skip(reason) => reason,
        }
    }

    /// What `btrfs_compress_heuristic()` returns on this path (0 = do not compress).
    pub fn kernel_return(self) -> i32 {
        match self.reason() {
            Reason::RepeatedPattern => 1,
            Reason::SmallByteSet => 2,
            Reason::SmallCoreSet => 3,
            Reason::LowEntropy => 4,
            Reason::ModerateEntropy => 5,
            Reason::LargeCoreSet | Reason::HighEntropy => 0,
        }
    }
}

/// Decide whether `data` (one extent, up to 128 KiB; any length) is worth compressing, as btrfs
/// does.
///
/// `data` stands for a page-aligned range `[start, start + data.len() - 1]`; only its first
/// 128 KiB (+1 byte) are sampled. Data of 16 bytes or less yields an empty sample and so
/// `Compress(RepeatedPattern)`; the kernel, never called on such ranges by btrfs, would there
/// sample bytes past the range.
pub fn heuristic(data: &[u8], ws: &mut HeuristicWorkspace) -> Verdict {
    ws.collect_sample(data);
    if ws.sample_repeated_patterns() {
        return Verdict::Compress(Reason::RepeatedPattern);
    }
    ws.fill_buckets();
    if ws.byte_set_size() < BYTE_SET_THRESHOLD {
        return Verdict::Compress(Reason::SmallByteSet);
    }
    let core = ws.byte_core_set_size();
    if core <= BYTE_CORE_SET_LOW {
        return Verdict::Compress(Reason::SmallCoreSet);
    }
    if core >= BYTE_CORE_SET_HIGH {
        return Verdict::Skip(Reason::LargeCoreSet);
    }
    let entropy = ws.shannon_entropy();
    if entropy <= ENTROPY_LVL_ACCEPTABLE {
        Verdict::Compress(Reason::LowEntropy)
    } else if entropy < ENTROPY_LVL_HIGH {
        Verdict::Compress(Reason::ModerateEntropy)
    } else {
        Verdict::Skip(Reason::HighEntropy)
    }
}

/// Convenience: allocate a workspace and decide.
pub fn worth_compressing(data: &[u8]) -> bool {
    heuristic(data, &mut HeuristicWorkspace::new()).worth_compressing()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Small deterministic PRNG (xorshift64).
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn bytes(&mut self, len: usize) -> Vec<u8> {
            (0..len).map(|_| self.next() as u8).collect()
        }

        fn shuffle<T>(&mut self, v: &mut [T]) {
            for i in (1..v.len()).rev() {
                v.swap(i, self.below(i + 1));
            }
        }
    }

    fn decide(data: &[u8]) -> Verdict {
        heuristic(data, &mut HeuristicWorkspace::new())
    }

    /// A shuffled 8 KiB sample holding each `(byte, count)`.
    fn sample_of(counts: &[(std::ops::RangeInclusive<u8>, usize)], seed: u64) -> Vec<u8> {
        let mut sample = Vec::new();
        for (bytes, count) in counts {
            for b in bytes.clone() {
                sample.resize(sample.len() + count, b);
            }
        }
        assert_eq!(sample.len(), MAX_SAMPLE_SIZE);
        XorShift(seed).shuffle(&mut sample);
        sample
    }

    /// A 128 KiB extent whose sampled windows hold exactly `sample`; the rest is noise that
    /// the heuristic never looks at.
    fn extent_with_sample(sample: &[u8]) -> Vec<u8> {
        let mut data = XorShift(99).bytes(MAX_UNCOMPRESSED);
        for (k, window) in sample.chunks(SAMPLING_READ_SIZE).enumerate() {
            let at = k * SAMPLING_INTERVAL;
            data[at..at + window.len()].copy_from_slice(window);
        }
        let mut ws = HeuristicWorkspace::new();
        ws.collect_sample(&data);
        assert_eq!(ws.sample(), sample, "sampling picked other bytes");
        data
    }

    fn decide_sample(counts: &[(std::ops::RangeInclusive<u8>, usize)]) -> Verdict {
        decide(&extent_with_sample(&sample_of(counts, 7)))
    }

    fn english(len: usize, seed: u64) -> Vec<u8> {
        const WORDS: &[&str] = &[
            "the",
            "quick",
            "brown",
            "fox",
            "jumps",
            "over",
            "lazy",
            "dog",
            "and",
            "then",
            "compression",
            "of",
            "text",
            "is",
            "usually",
            "worth",
            "it",
            "because",
            "a",
            "small",
            "alphabet",
            "repeats",
            "often",
            "while",
            "files",
            "grow",
            "Linux",
            "btrfs",
            "extent",
        ];
        let mut rng = XorShift(seed);
        let mut text = Vec::with_capacity(len + 16);
        while text.len() < len {
            text.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
            text.push(if rng.below(12) == 0 { b'\n' } else { b' ' });
        }
        text.truncate(len);
        text
    }

    #[test]
    fn zeros_compress() {
        for len in [4096, 65536, MAX_UNCOMPRESSED, 3 * MAX_UNCOMPRESSED] {
            let v = decide(&vec![0; len]);
            assert_eq!(v, Verdict::Compress(Reason::RepeatedPattern), "len {len}");
            assert!(worth_compressing(&vec![0; len]));
        }
    }

    #[test]
    fn random_bytes_skip() {
        for (seed, len) in [(1, 4096), (2, 65536), (3, MAX_UNCOMPRESSED), (4, 200_000)] {
            let data = XorShift(seed).bytes(len);
            assert!(!worth_compressing(&data), "seed {seed}");
        }
        let full = XorShift(5).bytes(MAX_UNCOMPRESSED);
        assert_eq!(decide(&full), Verdict::Skip(Reason::LargeCoreSet));
    }

    #[test]
    fn english_text_compresses() {
        for (seed, len) in [(1, 4096), (2, 100_000), (3, MAX_UNCOMPRESSED)] {
            let v = decide(&english(len, seed));
            assert_eq!(v, Verdict::Compress(Reason::SmallByteSet), "seed {seed}");
        }
    }

    #[test]
    fn repeated_pattern_path() {
        // Every sampled window identical but the window itself has 16 distinct values.
        let data: Vec<u8> = (0..MAX_UNCOMPRESSED).map(|i| (i % 256) as u8).collect();
        assert_eq!(decide(&data), Verdict::Compress(Reason::RepeatedPattern));
        // Halves of random data, repeated: the second 64 KiB copies the first.
        let half = XorShift(11).bytes(MAX_UNCOMPRESSED / 2);
        let data = [half.clone(), half].concat();
        assert_eq!(decide(&data), Verdict::Compress(Reason::RepeatedPattern));
        assert_eq!(decide(&data).kernel_return(), 1);
    }

    #[test]
    fn small_byte_set_path() {
        let v = decide_sample(&[(0..=31, 256)]);
        assert_eq!(v, Verdict::Compress(Reason::SmallByteSet));
        assert_eq!(v.kernel_return(), 2);
        // 63 values is still small; 64 is not (strictly below the threshold).
        let v = decide_sample(&[(0..=61, 128), (62..=62, 256)]);
        assert_eq!(v.reason(), Reason::SmallByteSet);
        let v = decide_sample(&[(0..=63, 128)]);
        assert_eq!(v, Verdict::Compress(Reason::SmallCoreSet));
    }

    #[test]
    fn small_core_set_path() {
        // 64 values hold 93.75% of the sample, 64 others the rest.
        let v = decide_sample(&[(0..=63, 120), (64..=127, 8)]);
        assert_eq!(v, Verdict::Compress(Reason::SmallCoreSet));
        assert_eq!(v.kernel_return(), 3);
    }

    #[test]
    fn large_core_set_path() {
        let v = decide_sample(&[(0..=255, 32)]);
        assert_eq!(v, Verdict::Skip(Reason::LargeCoreSet));
        assert_eq!(v.kernel_return(), 0);
    }

    /// Shannon entropy of `sample` in percent of 8 bits per byte, in floating point.
    fn true_entropy(sample: &[u8]) -> f64 {
        let mut counts = [0u64; BUCKET_SIZE];
        for &b in sample {
            counts[usize::from(b)] += 1;
        }
        let n = sample.len() as f64;
        let bits: f64 = counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / n;
                -p * p.log2()
            })
            .sum();
        bits * 100.0 / 8.0
    }

    /// The kernel's integer entropy of a 2^k-byte sample is the true entropy within its
    /// rounding: each `ilog2_w(p)` rounds 4·log₂p down by less than one quarter bit (raising the
    /// sum by less than 1/32 of 100%), then two divisions round down (by less than 1/32 and 1%).
    fn assert_entropy_near_true(ws: &HeuristicWorkspace) {
        let kernel = f64::from(ws.shannon_entropy());
        let truth = true_entropy(ws.sample());
        assert!(
            kernel >= truth - 100.0 / 32.0 - 1.0 && kernel < truth + 100.0 / 32.0,
            "kernel entropy {kernel}% vs true {truth:.2}%"
        );
    }

    /// Decide `sample_of(counts)` and check that the entropy the verdict rests on is the true
    /// entropy of the sample; the caller states which band the true entropy puts it in.
    fn entropy_case(counts: &[(std::ops::RangeInclusive<u8>, usize)]) -> (Verdict, f64) {
        let mut ws = HeuristicWorkspace::new();
        let data = extent_with_sample(&sample_of(counts, 3));
        let v = heuristic(&data, &mut ws);
        assert_entropy_near_true(&ws);
        (v, true_entropy(ws.sample()))
    }

    #[test]
    fn low_entropy_path() {
        // Half one value, half spread over 128: 4.5 bits, 56% — well under 65% - 4.
        let (v, truth) = entropy_case(&[(0..=0, 4096), (1..=128, 32)]);
        assert!(truth + 100.0 / 32.0 < 65.0, "{truth}");
        assert_eq!(v, Verdict::Compress(Reason::LowEntropy));
        assert_eq!(v.kernel_return(), 4);
    }

    #[test]
    fn moderate_entropy_path() {
        // A quarter one value, the rest over 128 values: about 75%, clear of 65% and 80%.
        let (v, truth) = entropy_case(&[(0..=0, 2048), (1..=128, 48)]);
        assert!(
            truth - 100.0 / 32.0 - 1.0 > 65.0 && truth + 100.0 / 32.0 < 80.0,
            "{truth}"
        );
        assert_eq!(v, Verdict::Compress(Reason::ModerateEntropy));
        assert_eq!(v.kernel_return(), 5);
    }

    #[test]
    fn high_entropy_path() {
        // 128 values, uniform: 7 bits, 87.5%; the 90% core set is 115 values, under 200.
        let (v, truth) = entropy_case(&[(0..=127, 64)]);
        assert!(truth - 100.0 / 32.0 - 1.0 >= 80.0, "{truth}");
        assert_eq!(v, Verdict::Skip(Reason::HighEntropy));
        assert_eq!(v.kernel_return(), 0);
    }

    #[test]
    fn kernel_radix_sort_quirk_is_kept() {
        // Largest count 256: the kernel sorts on the low 8 bits only, so the 256s sort with the
        // empty buckets, behind empty buckets of lower byte value. The core-set and entropy
        // walks stop at the first empty bucket: only the 128 counts of 32 are summed, so the
        // entropy comes out far below the sample's true entropy (81%) and the extent is
        // compressed where a true sort would skip it. (heuristic_kernel.rs in wring-btrfs shows
        // the kernel doing the same.)
        let mut ws = HeuristicWorkspace::new();
        let data = extent_with_sample(&sample_of(&[(16..=143, 32), (240..=255, 256)], 5));
        let v = heuristic(&data, &mut ws);
        // Half the sample at 8 bits per byte, half at 5: 6.5 bits, exactly 81.25%.
        let truth = true_entropy(ws.sample());
        assert!((truth - 81.25).abs() < 1e-9, "{truth}");
        assert!(v.worth_compressing(), "{v:?}");
        // What is summed: each 32-count bucket contributes 32 * (52 - 20) quarter bits.
        assert!(f64::from(ws.shannon_entropy()) < truth - 20.0);
        // With a true sort the same sample is skipped.
        ws.bucket.sort_unstable_by(|a, b| b.cmp(a));
        assert!(f64::from(ws.shannon_entropy()) >= 80.0);
    }

    #[test]
    fn empty_and_tiny_inputs() {
        for len in 0..=16 {
            let data = XorShift(len as u64 + 1).bytes(len);
            let mut ws = HeuristicWorkspace::new();
            assert_eq!(
                heuristic(&data, &mut ws),
                Verdict::Compress(Reason::RepeatedPattern),
                "len {len}"
            );
            assert_eq!(ws.sample_size, 0);
        }
        // 17 bytes: one window of 16 distinct-ish bytes.
        let data: Vec<u8> = (100..117).collect();
        let mut ws = HeuristicWorkspace::new();
        assert_eq!(
            heuristic(&data, &mut ws),
            Verdict::Compress(Reason::SmallByteSet)
        );
        assert_eq!(ws.sample(), &data[..16]);
    }

    /// The sample as the kernel's loop amounts to, in closed form: the 16 bytes at every
    /// multiple of 256 whose window starts at or before `end - 16`, where `end` is the inclusive
    /// range end `len - 1`, cut to 128 KiB.
    fn closed_form_sample(data: &[u8]) -> Vec<u8> {
        let Some(end) = data.len().checked_sub(1) else {
            return Vec::new();
        };
        let end = end.min(MAX_UNCOMPRESSED);
        (0..)
            .map(|k| k * SAMPLING_INTERVAL)
            .take_while(|&at| at + SAMPLING_READ_SIZE <= end)
            .flat_map(|at| data[at..at + SAMPLING_READ_SIZE].iter().copied())
            .collect()
    }

    #[test]
    fn sampling_matches_kernel_offsets() {
        let mut rng = XorShift(31);
        let data = rng.bytes(MAX_UNCOMPRESSED + 4096);
        let mut ws = HeuristicWorkspace::new();
        for len in (0..=600)
            .chain((3800..=4400).step_by(7))
            .chain([MAX_UNCOMPRESSED - 1, MAX_UNCOMPRESSED, MAX_UNCOMPRESSED + 1])
            .chain((0..200).map(|_| rng.below(MAX_UNCOMPRESSED + 4096)))
        {
            ws.collect_sample(&data[..len]);
            assert_eq!(ws.sample(), closed_form_sample(&data[..len]), "len {len}");
        }
        // Only the first 128 KiB matter.
        let mut data = XorShift(8).bytes(MAX_UNCOMPRESSED);
        let verdict = decide(&data);
        data.resize(data.len() + 64 * 1024, 0);
        assert_eq!(decide(&data), verdict);
    }

    #[test]
    fn ilog2_w_is_four_fractional_bits() {
        assert_eq!(ilog2_w(0), 0);
        for n in 1..=65535u32 {
            let expected = (4.0 * f64::from(n).log2()).floor() as u32;
            assert_eq!(ilog2_w(n), expected, "n = {n}");
        }
    }

    #[test]
    fn workspace_is_reusable() {
        let mut ws = HeuristicWorkspace::default();
        let random = XorShift(21).bytes(MAX_UNCOMPRESSED);
        let text = english(MAX_UNCOMPRESSED, 22);
        for _ in 0..3 {
            assert_eq!(
                heuristic(&random, &mut ws),
                Verdict::Skip(Reason::LargeCoreSet)
            );
            assert_eq!(
                heuristic(&text, &mut ws),
                Verdict::Compress(Reason::SmallByteSet)
            );
        }
    }

    /// The kernel's radix sort is a stable descending sort on the low `ALIGN(ilog2(max), 8)`
    /// bits of each count.
    fn reference_sort(counts: &[u32; BUCKET_SIZE]) -> Vec<u32> {
        let max = counts.iter().copied().max().unwrap_or(0);
        let bits = max.checked_ilog2().unwrap_or(0).next_multiple_of(8);
        let mask = if bits >= 32 {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        };
        let mut v = counts.to_vec();
        v.sort_by_key(|&c| std::cmp::Reverse(c & mask));
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..=MAX_UNCOMPRESSED)) {
            let mut ws = HeuristicWorkspace::new();
            let v = heuristic(&data, &mut ws);
            prop_assert_eq!(v.worth_compressing(), v.kernel_return() != 0);
        }

        #[test]
        fn never_panics_on_skewed_data(
            len in 0..=MAX_UNCOMPRESSED,
            alphabet in 1usize..=256,
            seed in 1u64..,
        ) {
            let mut rng = XorShift(seed);
            let data: Vec<u8> = (0..len).map(|_| rng.below(alphabet) as u8).collect();
            let _ = decide(&data);
        }

        /// On samples the kernel's sort orders fully (no count of 256..=511 beside smaller
        /// ones), the integer entropy is the true entropy within its rounding, and the core set
        /// is what its definition says: index c (64 < c < 200) means c + 1 values are needed to
        /// pass 90% of the sample and c are not enough.
        #[test]
        fn entropy_and_core_set_follow_their_definitions(
            skew in 0.0f64..0.999,
            alphabet in 64usize..=256,
            seed in 1u64..,
        ) {
            let mut rng = XorShift(seed);
            // P(i) proportional to (1 - skew)^i over the alphabet, drawn by inverse CDF.
            let weights: Vec<f64> = (0..alphabet).map(|i| (1.0 - skew).powi(i as i32)).collect();
            let total: f64 = weights.iter().sum();
            let sample: Vec<u8> = (0..MAX_SAMPLE_SIZE)
                .map(|_| {
                    let mut u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
                    let mut i = 0;
                    while i + 1 < alphabet && u >= weights[i] {
                        u -= weights[i];
                        i += 1;
                    }
                    i as u8
                })
                .collect();
            let mut ws = HeuristicWorkspace::new();
            ws.collect_sample(&extent_with_sample(&sample));
            ws.fill_buckets();
            let mut sorted = ws.bucket;
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            prop_assume!(!(256..512).contains(&sorted[0]) && sorted[0] > 1);
            let core = ws.byte_core_set_size();
            prop_assert_eq!(ws.bucket, sorted);
            let threshold = MAX_SAMPLE_SIZE as u32 * 90 / 100;
            let top = |k: usize| sorted[..k].iter().sum::<u32>();
            if core > BYTE_CORE_SET_LOW && core < BYTE_CORE_SET_HIGH {
                prop_assert!(top(core as usize) <= threshold && top(core as usize + 1) > threshold);
            } else if core == BYTE_CORE_SET_LOW {
                prop_assert!(top(65) > threshold);
            }
            let kernel = f64::from(ws.shannon_entropy());
            let truth = true_entropy(&sample);
            prop_assert!(
                kernel >= truth - 100.0 / 32.0 - 1.0 && kernel < truth + 100.0 / 32.0,
                "kernel {}% vs true {:.2}%", kernel, truth
            );
        }

        #[test]
        fn radix_sort_matches_reference(
            counts in proptest::collection::vec(
                prop_oneof![Just(0u32), 0u32..=2, 0u32..=600, 0u32..=8192], BUCKET_SIZE),
        ) {
            let mut array = [0u32; BUCKET_SIZE];
            array.copy_from_slice(&counts);
            let expected = reference_sort(&array);
            let mut buf = [0u32; BUCKET_SIZE];
            radix_sort(&mut array, &mut buf);
            prop_assert_eq!(array.to_vec(), expected);
        }
    }
}
