//! wring's compressibility heuristic against the kernel's own, on real data (root).
//!
//! Mirrors what fs/btrfs/inode.c does under `-o compress` (not compress-force): before
//! compressing a delalloc range, `inode_need_compress()` runs `btrfs_compress_heuristic()` on
//! its first 128 KiB; a "no" writes the range raw and leaves the inode alone, while a "yes"
//! whose compression then fails to save a block writes it raw *and* sets the inode's
//! `BTRFS_INODE_NOCOMPRESS` (compress_file_range's `mark_incompressible`), which
//! `FS_IOC_GETFLAGS` reports as `FS_NOCOMP_FL`. So for a file that is one delalloc range, the
//! kernel's heuristic verdict is observable:
//!
//! * a compressed extent: the heuristic said yes (and compression paid);
//! * raw extents and `FS_NOCOMP_FL`: the heuristic said yes, compression did not pay;
//! * raw extents and no `FS_NOCOMP_FL`: the heuristic said no.
//!
//! Each test region is written as its own file (so the NOCOMPRESS mark of one cannot spill
//! onto the next), with one `write` of a whole number of pages (so the delalloc range ends
//! exactly where the data does, with no zero tail the kernel would sample), and `fdatasync`ed
//! at once (so the range is flushed whole). Every file's verdict from
//! `wring_engine::heuristic::heuristic` must equal the kernel's. Regions: 128 KiB extents
//! spread over every file of the shared corpus (`WRING_CORPUS`; else samples of system files),
//! plus generated data aimed at each of the heuristic's paths and thresholds (byte-set and
//! core-set sizes, entropy sweeps, the radix-sort quirk, repeated halves, and data whose sampled
//! bytes differ from the rest, so the heuristic and compression disagree).
//!
//! Only verdicts are observable, not the path taken: changing the byte-set threshold (64) or
//! `ENTROPY_LVL_ACCEPTABLE` (65) by one cannot change a verdict, and the kernel's entropy moves
//! in steps of 1/32 (…, 78%, 81%, …), so `ENTROPY_LVL_HIGH` is pinned only to 79..=81. Checked
//! to catch: `ENTROPY_LVL_HIGH` 78 or 82, `BYTE_CORE_SET_LOW` 65, the 90% core-set threshold at
//! 89%, and a true sort in place of the kernel's radix-sort quirk. On this machine (Linux 6.18,
//! the shared corpus): 966/966 verdicts agree.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use wring_btrfs::fsinfo::{inode_flags, FS_NOCOMP_FL};
use wring_btrfs::scratch::ScratchFs;
use wring_btrfs::search::{DiskCompression, ItemKind};
use wring_btrfs::stat::file_items;
use wring_engine::heuristic::{heuristic, HeuristicWorkspace, Verdict};
use wring_engine::{CompressSpec, Engine, EngineConfig, Outcome};
use wring_testing::{
    self as testing, random_bytes, samples, Need, SplitMix, CORPUS_ENV, CORPUS_FILES,
};

const KIB: usize = 1024;
const EXTENT: usize = 128 * KIB;
/// 128 KiB extents taken from each corpus file, spread evenly over it.
const PER_CORPUS_FILE: usize = 64;

/// One test region: a file name and its bytes (a whole number of 4 KiB pages).
struct Region {
    name: String,
    data: Vec<u8>,
}

/// What the kernel did with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Stored compressed: its heuristic said yes.
    Compressed,
    /// Stored raw with the inode marked NOCOMPRESS: its heuristic said yes, compression failed.
    RawMarked,
    /// Stored raw, inode unmarked: its heuristic said no.
    Rejected,
}

impl Kernel {
    fn heuristic_said_yes(self) -> bool {
        self != Kernel::Rejected
    }
}

/// Text from a small vocabulary: a small byte set.
fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "extent", "btrfs", "the", "compress", "sector", "of", "zstd", "and", "inode", "level",
        "kernel", "page",
    ];
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(WORDS[rng.below(12) as usize].as_bytes());
        out.push(if rng.below(9) == 0 { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// `len` bytes drawn from the first `k` byte values, uniformly.
fn alphabet(seed: u64, k: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix(seed);
    (0..len).map(|_| rng.below(k) as u8).collect()
}

/// `len` bytes with P(b) proportional to q^b: entropy from about 1 bit (q small) to 8 bits
/// (q near 1), so the sweep crosses the heuristic's entropy and core-set thresholds.
fn geometric(seed: u64, q: f64, len: usize) -> Vec<u8> {
    let weights: Vec<f64> = (0..256).map(|b| q.powi(b)).collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(256);
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cdf.push(acc);
    }
    let mut rng = SplitMix(seed);
    (0..len)
        .map(|_| {
            let u = rng.unit();
            cdf.iter().position(|&c| u < c).unwrap_or(255) as u8
        })
        .collect()
}

/// 4 KiB blocks, `random_blocks` of every 32 random and the rest text.
fn block_mix(seed: u64, random_blocks: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(EXTENT);
    for i in 0..EXTENT / (4 * KIB) {
        if (i * 7) % 32 < random_blocks {
            out.extend(random_bytes(seed + i as u64, 4 * KIB));
        } else {
            out.extend(text(seed + i as u64, 4 * KIB));
        }
    }
    out
}

/// An extent whose 16-byte windows at every 256 bytes (what the heuristic samples) come from
/// `sampled` and whose other bytes come from `rest`.
fn windows(sampled: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = rest[..EXTENT].to_vec();
    for at in (0..EXTENT).step_by(256) {
        out[at..at + 16].copy_from_slice(&sampled[at..at + 16]);
    }
    out
}

/// An extent whose sampled windows hold, shuffled, `count` copies of each byte in each range,
/// zeros elsewhere: the exact sample distributions of the heuristic's unit tests.
fn sample_shaped(seed: u64, counts: &[(std::ops::RangeInclusive<u8>, usize)]) -> Vec<u8> {
    let mut sample = Vec::new();
    for (bytes, count) in counts {
        for b in bytes.clone() {
            sample.resize(sample.len() + count, b);
        }
    }
    assert_eq!(sample.len(), 8192, "a sample is 512 windows of 16 bytes");
    let mut rng = SplitMix(seed);
    for i in (1..sample.len()).rev() {
        sample.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut out = vec![0u8; EXTENT];
    for (k, window) in sample.chunks(16).enumerate() {
        out[k * 256..k * 256 + 16].copy_from_slice(window);
    }
    out
}

/// Sample counts spreading `total` bytes evenly over the `m` values from `first` on (the first
/// `total % m` of them one more).
fn spread(first: u8, m: usize, total: usize) -> Vec<(std::ops::RangeInclusive<u8>, usize)> {
    let (q, r) = (total / m, total % m);
    let last = usize::from(first) + m - 1;
    assert!(last <= 255, "{m} values from {first} do not fit in a byte");
    let mut out = Vec::new();
    if r > 0 {
        out.push((first..=(usize::from(first) + r - 1) as u8, q + 1));
    }
    out.push(((usize::from(first) + r) as u8..=last as u8, q));
    out
}

fn generated() -> Vec<Region> {
    let mut out = Vec::new();
    let mut add = |name: String, data: Vec<u8>| out.push(Region { name, data });
    for seed in 1..=4 {
        add(format!("random-{seed}"), random_bytes(seed, EXTENT));
        add(format!("text-{seed}"), text(seed, EXTENT));
    }
    for k in [
        2, 16, 48, 62, 63, 64, 65, 72, 80, 96, 112, 128, 144, 160, 176, 192, 198, 199, 200, 201,
        208, 224, 240, 256,
    ] {
        add(format!("alphabet-{k}"), alphabet(k, k, EXTENT));
        add(format!("alphabet-{k}-64k"), alphabet(k + 1000, k, 64 * KIB));
        add(format!("alphabet-{k}-12k"), alphabet(k + 2000, k, 12 * KIB));
    }
    for step in 0..=60u32 {
        let q = 0.90 + 0.1 * f64::from(step) / 60.0;
        add(
            format!("geometric-{q:.4}"),
            geometric(step.into(), q, EXTENT),
        );
    }
    for r in 0..=32 {
        add(
            format!("blocks-{r}-of-32-random"),
            block_mix(r as u64 * 97, r),
        );
    }
    let random = random_bytes(77, EXTENT);
    let zeros = vec![0u8; EXTENT];
    let prose = text(78, EXTENT);
    // The heuristic sees only its windows: random windows in zeros (it says no, zstd would
    // save), text windows in random data (it says yes, zstd cannot save).
    add("random-windows-in-zeros".into(), windows(&random, &zeros));
    add("text-windows-in-random".into(), windows(&prose, &random));
    add("zero-windows-in-random".into(), windows(&zeros, &random));
    let half = random_bytes(79, EXTENT / 2);
    add("repeated-random-half".into(), [half.clone(), half].concat());
    let counting: Vec<u8> = (0..EXTENT).map(|i| (i % 256) as u8).collect();
    add("counting".into(), counting);
    for (name, counts) in [
        ("small-byte-set", vec![(0..=31, 256)]),
        ("byte-set-63", vec![(0..=61, 128), (62..=62, 256)]),
        ("byte-set-64", vec![(0..=63, 128)]),
        ("small-core-set", vec![(0..=63, 120), (64..=127, 8)]),
        ("large-core-set", vec![(0..=255, 32)]),
        ("low-entropy", vec![(0..=0, 4096), (1..=128, 32)]),
        ("moderate-entropy", vec![(0..=0, 2048), (1..=128, 48)]),
        ("high-entropy", vec![(0..=127, 64)]),
        ("radix-quirk-256", vec![(16..=143, 32), (240..=255, 256)]),
        (
            "radix-quirk-511",
            vec![(16..=143, 32), (241..=248, 511), (249..=249, 8)],
        ),
        ("radix-512", vec![(16..=143, 32), (248..=255, 512)]),
        ("radix-quirk-300", vec![(0..=199, 16), (200..=215, 312)]),
    ] {
        add(format!("sample-{name}"), sample_shaped(5, &counts));
    }
    // Samples spread evenly over m values: the byte-set (64), core-set (200) and entropy (80%)
    // thresholds are all crossed, one value at a time.
    for m in 60..=256 {
        add(
            format!("sample-uniform-{m}"),
            sample_shaped(m as u64, &spread(0, m, 8192)),
        );
    }
    // One value taking z of the 8192 sampled bytes, the rest spread over 128 others: the
    // entropy crosses 65% while the core set stays above 64.
    for z in (2048..=4608).step_by(32) {
        let mut counts = vec![(0..=0, z)];
        counts.extend(spread(1, 128, 8192 - z));
        add(
            format!("sample-zero-{z}-of-8192"),
            sample_shaped(z as u64, &counts),
        );
    }
    // 64 values taking x of the 8192 sampled bytes, the other 192 the rest: the core set
    // crosses 64 where the entropy is above 80%, so that threshold decides the verdict.
    for x in (7168..=7680).step_by(16).chain((7330..7390).step_by(2)) {
        let mut counts = spread(0, 64, x);
        counts.extend(spread(64, 192, 8192 - x));
        add(
            format!("sample-core-64-{x}-of-8192"),
            sample_shaped(x as u64, &counts),
        );
    }
    out
}

/// 128 KiB extents spread over every corpus file (`WRING_CORPUS`), or cut from samples of the
/// system's files when it is unset. Returns the regions and where they came from.
fn real_regions() -> (Vec<Region>, String) {
    let Some(dir) = std::env::var_os(CORPUS_ENV) else {
        let mut out = Vec::new();
        for s in samples(48 << 20) {
            for (i, chunk) in s.data.chunks_exact(EXTENT).enumerate() {
                out.push(Region {
                    name: format!("{}-{i}", s.name),
                    data: chunk.to_vec(),
                });
            }
        }
        return (out, format!("system files ({CORPUS_ENV} unset)"));
    };
    let dir = Path::new(&dir);
    let mut out = Vec::new();
    for name in CORPUS_FILES {
        let path = dir.join(name);
        let Ok(data) = fs::read(&path) else {
            continue;
        };
        let chunks = data.len() / EXTENT;
        let step = chunks.div_ceil(PER_CORPUS_FILE).max(1);
        for c in (0..chunks).step_by(step) {
            out.push(Region {
                name: format!("{name}-{c}"),
                data: data[c * EXTENT..(c + 1) * EXTENT].to_vec(),
            });
        }
    }
    assert!(
        !out.is_empty(),
        "{CORPUS_ENV}={} holds none of {}",
        dir.display(),
        CORPUS_FILES.join(", ")
    );
    (out, format!("{CORPUS_ENV}={}", dir.display()))
}

/// Write `data` as file `path` in one write, flushed at once.
fn write_flushed(path: &Path, data: &[u8]) {
    let mut f = File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.write_all(data)
        .and_then(|()| f.sync_data())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// What the kernel did with the file at `path`.
fn kernel_verdict(path: &Path) -> Kernel {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let items = file_items(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        !items.is_empty()
            && items
                .iter()
                .all(|i| i.kind == ItemKind::Regular && !i.is_hole()),
        "{}: expected regular extents only, got {items:?}",
        path.display()
    );
    let compressed = items
        .iter()
        .filter(|i| i.compression != DiskCompression::None)
        .count();
    let marked = inode_flags(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        & FS_NOCOMP_FL
        != 0;
    match (compressed, marked) {
        (0, true) => Kernel::RawMarked,
        (0, false) => Kernel::Rejected,
        (n, false) if n == items.len() => Kernel::Compressed,
        _ => panic!(
            "{}: {compressed} of {} extents compressed, NOCOMPRESS {marked}: one delalloc range \
             should give one verdict",
            path.display(),
            items.len()
        ),
    }
}

#[test]
fn wring_heuristic_decides_as_the_kernels_on_real_data() {
    if !testing::require(
        "wring_heuristic_decides_as_the_kernels_on_real_data",
        &[Need::Root],
    ) {
        return;
    }
    let (mut regions, source) = real_regions();
    let real = regions.len();
    regions.extend(generated());
    let scratch = ScratchFs::new("compress=zstd").unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch.path().join("regions");
    fs::create_dir(&dir).unwrap();
    for (i, r) in regions.iter().enumerate() {
        assert_eq!(r.data.len() % 4096, 0, "{}: not whole pages", r.name);
        write_flushed(&dir.join(format!("{i:04}")), &r.data);
    }
    scratch.sync().unwrap_or_else(|e| panic!("{e}"));

    let engine = Engine::new(EngineConfig::default());
    let zstd3: CompressSpec = "zstd:3".parse().unwrap();
    let mut ws = HeuristicWorkspace::new();
    let mut dst = vec![0u8; EXTENT];
    let mut disagree = Vec::new();
    let (mut rejected, mut compressed, mut marked) = (0, 0, 0);
    let mut outcome_agrees = 0;
    for (i, r) in regions.iter().enumerate() {
        let kernel = kernel_verdict(&dir.join(format!("{i:04}")));
        let wring = heuristic(&r.data, &mut ws);
        match kernel {
            Kernel::Compressed => compressed += 1,
            Kernel::RawMarked => marked += 1,
            Kernel::Rejected => rejected += 1,
        }
        if wring.worth_compressing() != kernel.heuristic_said_yes() {
            disagree.push(format!("{}: wring {wring:?}, kernel {kernel:?}", r.name));
        }
        // Secondary, reported only: where both said yes, whether wring's zstd:3 (byte-identical
        // to the kernel's) saving a block predicts compressed vs raw-and-marked.
        if let (Verdict::Compress(_), Kernel::Compressed | Kernel::RawMarked) = (wring, kernel) {
            let out = engine.compress(zstd3, &r.data, &mut dst).unwrap();
            let saves = matches!(out, Outcome::Compressed(_));
            outcome_agrees += usize::from(saves == (kernel == Kernel::Compressed));
        }
    }
    let n = regions.len();
    println!(
        "heuristic vs kernel: {}/{n} extents agree ({real} from {source}, {} generated); kernel: \
         {rejected} rejected by its heuristic, {compressed} compressed, {marked} raw after a \
         failed compression; zstd:3 predicts compressed vs raw for {outcome_agrees}/{} accepted",
        n - disagree.len(),
        n - real,
        compressed + marked
    );
    assert!(
        disagree.is_empty(),
        "{} of {n} heuristic verdicts differ from the kernel's:\n{}",
        disagree.len(),
        disagree.join("\n")
    );
    // The comparison only means something if the kernel's heuristic said no to some extents
    // and compression failed after a yes for others.
    assert!(
        rejected >= 10 && compressed >= 10 && marked >= 1,
        "too few of each verdict"
    );
}
