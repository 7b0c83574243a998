//! Round trips through the engine: for every algorithm at every level, whatever `compress`
//! reports as `Compressed(n)` obeys btrfs's block rule (it saves at least one 4 KiB block) and
//! decompresses to exactly the input, for random, compressible and real-file data of every size
//! from 0 to 128 KiB (with the block edges 1, 4095, 4096, 4097, 131071, 131072 always covered).
//! `Incompressible` and `Skipped` appear only where they are allowed: random data never
//! compresses, highly redundant data always does once a block can be saved, and only a policy
//! other than compress-force ever skips. Also proves that `compress_batch` gives the sequential
//! results in input order and that `decompress_pages` agrees with `decompress`.
//!
//! Real files: every regular file in the directory named by `WRING_CORPUS` (its first MiB, in
//! 128 KiB extents), or else a few files of the system when they exist.

mod common;
use common::SplitMix;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use wring_engine::offload::{Offload, OffloadConfig};
use wring_engine::stream::{compress_batch, Extent};
use wring_engine::{
    compressed_limit, Algorithm, CompressSpec, Engine, EngineConfig, Error, Outcome, Policy,
    BLOCK_SIZE, MAX_EXTENT,
};

/// Sizes every level sees: empty, one byte, both sides of the first block, both ends of 128 KiB.
const EDGE_SIZES: [usize; 7] = [0, 1, 4095, 4096, 4097, 131071, 131072];

/// Proptest cases per level unless `PROPTEST_CASES` says otherwise (zstd alone has 37 levels).
const CASES_PER_LEVEL: u32 = 12;

/// Files used as a corpus when `WRING_CORPUS` is not set (those that exist).
const SYSTEM_CORPUS: [&str; 5] = [
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/share/common-licenses/GPL-3",
    "/usr/share/common-licenses/Apache-2.0",
    "/etc/services",
    "/usr/bin/bash",
];

/// How much of each corpus file is used.
const CORPUS_HEAD: u64 = 1 << 20;

/// The kinds of data the properties draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Uniformly random bytes: never compressible.
    Random,
    /// All zeros.
    Zeros,
    /// Runs of 32..=512 equal bytes.
    Runs,
    /// One short paragraph of words repeated over and over.
    Repeated,
    /// Words drawn at random from a small vocabulary.
    Words,
    /// Random letters of a four-letter alphabet.
    SmallAlphabet,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Random,
        Kind::Zeros,
        Kind::Runs,
        Kind::Repeated,
        Kind::Words,
        Kind::SmallAlphabet,
    ];

    /// Whether every algorithm at every level must save a block on this data when its size
    /// allows saving one.
    fn must_compress(self) -> bool {
        matches!(self, Kind::Zeros | Kind::Runs | Kind::Repeated)
    }
}

const WORDS: [&str; 16] = [
    "the",
    "extent",
    "block",
    "compress",
    "sector",
    "btrfs",
    "zram",
    "page",
    "of",
    "and",
    "workspace",
    "level",
    "stream",
    "inode",
    "a",
    "metadata",
];

/// `len` bytes of `kind`, determined by `seed`.
fn generate(kind: Kind, seed: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix(seed);
    let mut out = match kind {
        Kind::Random => {
            let mut v = vec![0; len];
            rng.fill(&mut v);
            v
        }
        Kind::Zeros => vec![0; len],
        Kind::Runs => runs(&mut rng, len),
        Kind::Repeated => {
            let paragraph_len = 200 + rng.index(800);
            let paragraph = words(&mut rng, paragraph_len);
            paragraph.iter().copied().cycle().take(len).collect()
        }
        Kind::Words => words(&mut rng, len),
        Kind::SmallAlphabet => (0..len).map(|_| b"ACGT"[rng.index(4)]).collect(),
    };
    out.truncate(len);
    out
}

/// Text of at least `len` bytes: random words separated by spaces and the odd newline.
fn words(rng: &mut SplitMix, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(WORDS[rng.index(WORDS.len())].as_bytes());
        out.push(if rng.index(12) == 0 { b'\n' } else { b' ' });
    }
    out
}

/// At least `len` bytes of runs of a random byte.
fn runs(rng: &mut SplitMix, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 512);
    while out.len() < len {
        let byte = rng.next() as u8;
        let run = 32 + rng.index(481);
        out.resize(out.len() + run, byte);
    }
    out
}

/// Every algorithm at every one of its levels.
fn every_spec() -> impl Iterator<Item = CompressSpec> {
    Algorithm::ALL
        .into_iter()
        .flat_map(|alg| alg.levels().map(move |level| CompressSpec::new(alg, level)))
}

fn engine() -> Engine {
    Engine::new(EngineConfig::default())
}

/// The offload API on an engine of its own with `workers` CPU workers, and a queue shallower
/// than the batches so that a batch has to wait for its own slots.
fn offload(workers: usize) -> Offload {
    let cfg = OffloadConfig {
        depth: 2,
        workers,
        device: None,
    };
    Offload::new(std::sync::Arc::new(engine()), cfg).expect("offload starts")
}

/// Compress `src` under `policy` into a buffer of exactly the size the block rule allows; when
/// it compressed, check the block rule and the decoded bytes. Returns the outcome and the
/// compressed bytes (empty unless compressed).
fn round_trip_with(
    engine: &Engine,
    spec: CompressSpec,
    policy: Policy,
    src: &[u8],
) -> Result<(Outcome, Vec<u8>), String> {
    let algorithm = spec.algorithm.expect("the spec names an algorithm");
    let mut packed = vec![0; compressed_limit(src.len())];
    let outcome = engine
        .compress_with(spec, policy, src, &mut packed)
        .map_err(|e| format!("{spec}: compressing {} bytes failed: {e}", src.len()))?;
    match outcome {
        Outcome::Compressed(n) => {
            packed.truncate(n);
            check_block_rule(n, src.len()).map_err(|e| format!("{spec}: {e}"))?;
            check_decodes_to(engine, algorithm, &packed, src)
                .map_err(|e| format!("{spec}: {e}"))?;
        }
        Outcome::Incompressible | Outcome::Skipped => packed.clear(),
    }
    Ok((outcome, packed))
}

/// [`round_trip_with`] under compress-force.
fn round_trip(engine: &Engine, spec: CompressSpec, src: &[u8]) -> Result<Outcome, String> {
    round_trip_with(engine, spec, Policy::Force, src).map(|(outcome, _)| outcome)
}

/// btrfs's rule: round_up(compressed) + one block <= round_up(input).
fn check_block_rule(n: usize, len: usize) -> Result<(), String> {
    if n.next_multiple_of(BLOCK_SIZE) + BLOCK_SIZE <= len.next_multiple_of(BLOCK_SIZE) {
        Ok(())
    } else {
        Err(format!(
            "{len} bytes compressed to {n}, which saves no block"
        ))
    }
}

/// `packed` decodes into a buffer of `src.len()` bytes, reporting and producing exactly `src`.
fn check_decodes_to(
    engine: &Engine,
    algorithm: Algorithm,
    packed: &[u8],
    src: &[u8],
) -> Result<(), String> {
    let mut out = vec![0xA5; src.len()];
    let n = engine
        .decompress(algorithm, packed, &mut out)
        .map_err(|e| {
            format!(
                "{} compressed bytes of a {}-byte extent fail to decode: {e}",
                packed.len(),
                src.len()
            )
        })?;
    if n != src.len() {
        return Err(format!(
            "decoding reported {n} bytes for a {}-byte extent",
            src.len()
        ));
    }
    match first_difference(&out, src) {
        Some(i) => Err(format!(
            "the decoded {}-byte extent differs from the input at offset {i}",
            src.len()
        )),
        None => Ok(()),
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

/// Under compress-force: skipped exactly when no block can be saved (one block or less);
/// otherwise incompressible always for random data, compressed whenever a block can be saved
/// on redundant data.
fn expect_outcome(kind: Kind, len: usize, outcome: Outcome) -> Result<(), String> {
    let can_save = compressed_limit(len) > 0;
    let allowed = match outcome {
        Outcome::Skipped => !can_save,
        Outcome::Incompressible => can_save && !kind.must_compress(),
        Outcome::Compressed(_) => kind != Kind::Random && can_save,
    };
    if allowed {
        Ok(())
    } else {
        Err(format!(
            "{kind:?} data of {len} bytes gave {outcome:?} under compress-force"
        ))
    }
}

fn sizes() -> impl Strategy<Value = usize> {
    prop_oneof![
        select(EDGE_SIZES.to_vec()),
        0..=MAX_EXTENT,
        (1..=MAX_EXTENT / BLOCK_SIZE, 0..3usize)
            .prop_map(|(blocks, d)| (blocks * BLOCK_SIZE + d - 1).min(MAX_EXTENT)),
    ]
}

fn proptest_config() -> Config {
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        Config::default().cases
    } else {
        CASES_PER_LEVEL
    };
    Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    }
}

/// The round-trip property at every level of `algorithm`, a few cases per level.
fn every_level_round_trips(algorithm: Algorithm) {
    let engine = engine();
    let inputs = (select(Kind::ALL.to_vec()), any::<u64>(), sizes());
    for level in algorithm.levels() {
        let spec = CompressSpec::new(algorithm, level);
        let mut runner = TestRunner::new(proptest_config());
        let result = runner.run(&inputs, |(kind, seed, len)| {
            let src = generate(kind, seed, len);
            let outcome = round_trip(&engine, spec, &src).map_err(TestCaseError::fail)?;
            expect_outcome(kind, len, outcome)
                .map_err(|e| TestCaseError::fail(format!("{spec}: {e}")))
        });
        if let Err(e) = result {
            panic!("{spec}: {e}");
        }
    }
}

#[test]
fn zstd_every_level_round_trips() {
    every_level_round_trips(Algorithm::Zstd);
}

#[test]
fn zlib_every_level_round_trips() {
    every_level_round_trips(Algorithm::Zlib);
}

#[test]
fn lzo_round_trips() {
    every_level_round_trips(Algorithm::Lzo);
}

#[test]
fn lz4_round_trips() {
    every_level_round_trips(Algorithm::Lz4);
}

#[test]
fn lz4hc_every_level_round_trips() {
    every_level_round_trips(Algorithm::Lz4hc);
}

/// Every edge size at every level, for random data, zeros and text; 128 KiB of zeros or text
/// always compresses.
#[test]
fn edge_sizes_at_every_level() {
    let engine = engine();
    let kinds = [Kind::Random, Kind::Zeros, Kind::Words];
    let inputs: Vec<(Kind, Vec<u8>)> = EDGE_SIZES
        .iter()
        .flat_map(|&len| kinds.map(|kind| (kind, generate(kind, len as u64, len))))
        .collect();
    for spec in every_spec() {
        for (kind, src) in &inputs {
            let outcome = round_trip(&engine, spec, src).unwrap_or_else(|e| panic!("{e}"));
            expect_outcome(*kind, src.len(), outcome).unwrap_or_else(|e| panic!("{spec}: {e}"));
            if *kind != Kind::Random && src.len() >= MAX_EXTENT - 1 {
                assert!(
                    matches!(outcome, Outcome::Compressed(_)),
                    "{spec}: {} bytes of {kind:?} gave {outcome:?}",
                    src.len()
                );
            }
        }
    }
}

/// The corpus files: `WRING_CORPUS`'s regular files, or the system files that exist.
fn corpus_files() -> Vec<PathBuf> {
    let Some(dir) = std::env::var_os("WRING_CORPUS") else {
        return SYSTEM_CORPUS
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .collect();
    };
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("WRING_CORPUS={}: {e}", Path::new(&dir).display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The first MiB of `path`, cut into extents of at most 128 KiB.
fn corpus_extents(path: &Path) -> Vec<Vec<u8>> {
    let mut head = Vec::new();
    File::open(path)
        .and_then(|f| f.take(CORPUS_HEAD).read_to_end(&mut head))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    head.chunks(MAX_EXTENT).map(<[u8]>::to_vec).collect()
}

/// A handful of levels: the lowest, the default, the highest, and some between for zstd.
fn sample_levels(algorithm: Algorithm) -> Vec<i32> {
    let mut levels = vec![
        algorithm.min_level(),
        algorithm.default_level(),
        algorithm.max_level(),
    ];
    if algorithm == Algorithm::Zstd {
        levels.extend([1, 9, 15]);
    }
    levels.sort_unstable();
    levels.dedup();
    levels
}

#[test]
fn corpus_extents_round_trip() {
    let files = corpus_files();
    if !common::require_corpus(
        "corpus_extents_round_trip",
        !files.is_empty(),
        "no files: WRING_CORPUS is unset or empty and none of the system fallback files exist",
    ) {
        return;
    }
    let engine = engine();
    let extents: Vec<(PathBuf, Vec<u8>)> = files
        .iter()
        .flat_map(|path| {
            corpus_extents(path)
                .into_iter()
                .map(move |e| (path.clone(), e))
        })
        .collect();
    let mut compressed = 0;
    for alg in Algorithm::ALL {
        for level in sample_levels(alg) {
            let spec = CompressSpec::new(alg, level);
            for (path, extent) in &extents {
                match round_trip(&engine, spec, extent) {
                    Ok(Outcome::Compressed(_)) => compressed += 1,
                    Ok(Outcome::Incompressible) => {}
                    // One block or less (a file's short tail) cannot save a block.
                    Ok(Outcome::Skipped) if compressed_limit(extent.len()) == 0 => {}
                    Ok(Outcome::Skipped) => panic!(
                        "{spec}: {} was skipped under compress-force",
                        path.display()
                    ),
                    Err(e) => panic!("{}: {e}", path.display()),
                }
            }
        }
    }
    eprintln!(
        "corpus: {} files, {} extents, {compressed} compressed round trips",
        files.len(),
        extents.len()
    );
}

/// Inputs of every kind and a spread of sizes, for the batch test.
fn batch_inputs() -> Vec<Vec<u8>> {
    let shapes = [
        (Kind::Words, 0),
        (Kind::Random, 1),
        (Kind::Words, 4097),
        (Kind::Random, MAX_EXTENT),
        (Kind::Words, MAX_EXTENT),
        (Kind::Runs, 65536),
        (Kind::SmallAlphabet, 100_000),
        (Kind::Zeros, 8192),
        (Kind::Repeated, MAX_EXTENT - 1),
        (Kind::Random, 20_000),
        (Kind::Words, 12_345),
    ];
    shapes
        .iter()
        .enumerate()
        .map(|(i, &(kind, len))| generate(kind, i as u64, len))
        .collect()
}

/// What the engine gives for one extent when called directly, as a batch would report it.
fn sequential_extent(
    engine: &Engine,
    spec: CompressSpec,
    policy: Policy,
    src: &[u8],
) -> Result<Extent, Error> {
    let mut dst = vec![0; compressed_limit(src.len())];
    Ok(match engine.compress_with(spec, policy, src, &mut dst)? {
        Outcome::Compressed(n) => Extent::Compressed(dst[..n].to_vec()),
        Outcome::Incompressible => Extent::Incompressible,
        Outcome::Skipped => Extent::Skipped,
    })
}

fn describe(r: &Result<Extent, Error>) -> String {
    match r {
        Ok(Extent::Compressed(v)) => format!("Compressed({} bytes)", v.len()),
        other => format!("{other:?}"),
    }
}

/// An input beyond max_extent is that input's error; the others in the batch still compress.
#[test]
fn batch_reports_an_oversized_input_and_keeps_the_rest() {
    let words = generate(Kind::Words, 3, MAX_EXTENT);
    let big = generate(Kind::Words, 4, 2 * MAX_EXTENT);
    let small = generate(Kind::Words, 5, 4 * BLOCK_SIZE);
    let refs: Vec<&[u8]> = vec![&words, &big, &small];
    let spec = CompressSpec::new(Algorithm::Zstd, 3);
    let batch = compress_batch(&offload(2), spec, Policy::Force, &refs);
    assert!(
        matches!(batch[0], Ok(Extent::Compressed(_))),
        "{:?}",
        batch[0].as_ref().err()
    );
    assert!(
        matches!(batch[1], Err(wring_engine::Error::ExtentTooLarge { .. })),
        "{:?}",
        batch[1].as_ref().err()
    );
    assert!(
        matches!(batch[2], Ok(Extent::Compressed(_))),
        "{:?}",
        batch[2].as_ref().err()
    );
}

#[test]
fn batch_matches_sequential_in_order() {
    let engine = engine();
    let offload = offload(3);
    let inputs = batch_inputs();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let specs = [
        "zstd:-5", "zstd:3", "zstd:19", "zlib:9", "lzo", "lz4", "lz4hc:12",
    ];
    for text in specs {
        let spec: CompressSpec = text.parse().expect("a valid spec");
        for policy in [Policy::Force, Policy::Heuristic, Policy::EarlyAbort] {
            let batch = compress_batch(&offload, spec, policy, &refs);
            assert_eq!(
                batch.len(),
                refs.len(),
                "{spec} {policy:?}: one result per input"
            );
            for (i, (got, src)) in batch.iter().zip(&refs).enumerate() {
                let want = sequential_extent(&engine, spec, policy, src);
                assert!(
                    *got == want,
                    "{spec} {policy:?}: input {i} ({} bytes): batch gave {}, sequential {}",
                    src.len(),
                    describe(got),
                    describe(&want)
                );
            }
        }
    }
}

/// Extents for the page test: sizes on and off block boundaries.
fn page_inputs() -> Vec<Vec<u8>> {
    vec![
        generate(Kind::Words, 1, 4097),
        generate(Kind::Runs, 2, 65536 + 123),
        generate(Kind::Words, 3, MAX_EXTENT),
        generate(Kind::Repeated, 4, MAX_EXTENT - 1),
    ]
}

/// `decompress_pages` gives the bytes `decompress` gives, for the exact length and for a length
/// rounded up to a block (zero tail), with the page pool off and on; both reject a truncation.
#[test]
fn decompress_pages_equals_decompress() {
    for page_pool in [0, 64] {
        let engine = Engine::new(EngineConfig {
            page_pool,
            ..EngineConfig::default()
        });
        for alg in Algorithm::ALL {
            for src in page_inputs() {
                let (outcome, packed) =
                    round_trip_with(&engine, CompressSpec::default_for(alg), Policy::Force, &src)
                        .unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    matches!(outcome, Outcome::Compressed(_)),
                    "{alg}: {outcome:?}"
                );
                for len in [src.len(), src.len().next_multiple_of(BLOCK_SIZE)] {
                    check_pages(&engine, alg, &packed, len);
                }
                let half = &packed[..packed.len() / 2];
                assert!(
                    engine.decompress_pages(alg, half, src.len()).is_err(),
                    "{alg}: truncated extent accepted"
                );
            }
        }
    }
}

fn check_pages(engine: &Engine, alg: Algorithm, packed: &[u8], len: usize) {
    let mut dst = vec![0xEE; len];
    engine
        .decompress(alg, packed, &mut dst)
        .unwrap_or_else(|e| panic!("{alg}: decompress: {e}"));
    let pages = engine
        .decompress_pages(alg, packed, len)
        .unwrap_or_else(|e| panic!("{alg}: decompress_pages: {e}"));
    assert_eq!(pages.len(), len, "{alg}: page buffer length");
    let got = pages.to_vec();
    assert!(
        first_difference(&got, &dst).is_none(),
        "{alg}: pages differ from decompress at length {len}"
    );
}

#[test]
fn heuristic_skips_random_data() {
    let engine = engine();
    let random = generate(Kind::Random, 7, MAX_EXTENT);
    let text = generate(Kind::Words, 7, MAX_EXTENT);
    for alg in Algorithm::ALL {
        let spec = CompressSpec::default_for(alg);
        let (outcome, _) = round_trip_with(&engine, spec, Policy::Heuristic, &random)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            outcome,
            Outcome::Skipped,
            "{spec}: random data under the heuristic"
        );
        let (outcome, _) = round_trip_with(&engine, spec, Policy::Heuristic, &text)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(outcome, Outcome::Compressed(_)),
            "{spec}: text under the heuristic gave {outcome:?}"
        );
    }
}

#[test]
fn early_abort_skips_random_data_at_zstd_9() {
    let engine = engine();
    let random = generate(Kind::Random, 8, MAX_EXTENT);
    let text = generate(Kind::Words, 8, MAX_EXTENT);
    let run = |spec: &str, src: &[u8]| {
        let spec: CompressSpec = spec.parse().expect("a valid spec");
        round_trip_with(&engine, spec, Policy::EarlyAbort, src)
            .unwrap_or_else(|e| panic!("{e}"))
            .0
    };
    assert_eq!(run("zstd:9", &random), Outcome::Skipped);
    assert!(matches!(run("zstd:9", &text), Outcome::Compressed(_)));
    // A cheap level is not probed first: it is tried, and fails to save a block.
    assert_eq!(run("zstd:1", &random), Outcome::Incompressible);
}

/// A zlib:1 workspace that just gave up on an incompressible extent (its output buffer filled)
/// must still write valid extents afterwards.
#[test]
fn zlib_level_1_after_an_incompressible_extent() {
    let engine = Engine::new(EngineConfig {
        streams: 1,
        ..EngineConfig::default()
    });
    let spec = CompressSpec::new(Algorithm::Zlib, 1);
    let random = generate(Kind::Random, 1, MAX_EXTENT - 1);
    for kind in [Kind::Zeros, Kind::Words] {
        assert_eq!(
            round_trip(&engine, spec, &random),
            Ok(Outcome::Incompressible)
        );
        let src = generate(kind, 2, MAX_EXTENT - 1);
        let outcome = round_trip(&engine, spec, &src).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert!(
            matches!(outcome, Outcome::Compressed(_)),
            "{kind:?}: {outcome:?}"
        );
    }
}

/// wring's larger extents (max_extent up to 4 MiB, for its own filesystem) round-trip for every
/// algorithm, including lzo's btrfs framing beyond the kernel's 128 KiB.
#[test]
fn extents_larger_than_btrfs_allows_round_trip() {
    let engine = Engine::new(EngineConfig {
        max_extent: 4 << 20,
        ..EngineConfig::default()
    });
    for len in [1 << 20, (4 << 20) - 4095] {
        let src = generate(Kind::Words, len as u64, len);
        for algorithm in Algorithm::ALL {
            let spec = CompressSpec::default_for(algorithm);
            let outcome = round_trip(&engine, spec, &src).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                matches!(outcome, Outcome::Compressed(_)),
                "{spec} on {len}: {outcome:?}"
            );
        }
    }
}

/// `compress_shared` keeps the offload full through a completion queue: with far more inputs
/// than the queue's depth, it gives exactly what `compress_batch` gives, in input order,
/// including an oversized input's error.
#[test]
fn shared_inputs_compress_as_a_batch_does() {
    let inputs: Vec<Vec<u8>> = (0..9u64)
        .map(|i| match i {
            4 => generate(Kind::Words, i, 2 * MAX_EXTENT),
            7 => generate(Kind::Random, i, MAX_EXTENT),
            _ => generate(Kind::Words, i, MAX_EXTENT / (1 + i as usize % 3)),
        })
        .collect();
    let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
    let shared: Vec<std::sync::Arc<Vec<u8>>> =
        inputs.iter().cloned().map(std::sync::Arc::new).collect();
    let spec = CompressSpec::new(Algorithm::Zstd, 3);
    let o = offload(2);
    let batch = compress_batch(&o, spec, Policy::Force, &refs);
    let streamed = wring_engine::stream::compress_shared(&o, spec, Policy::Force, &shared);
    assert_eq!(batch.len(), streamed.len());
    for (i, (b, s)) in batch.iter().zip(&streamed).enumerate() {
        match (b, s) {
            (Ok(b), Ok(s)) => assert_eq!(b, s, "extent {i}"),
            (Err(b), Err(s)) => assert_eq!(b.to_string(), s.to_string(), "extent {i}"),
            _ => panic!("extent {i}: {b:?} against {s:?}"),
        }
    }
    assert!(
        matches!(streamed[7], Ok(Extent::Incompressible)),
        "{:?}",
        streamed[7]
    );
    assert!(streamed[4].is_err());
}
