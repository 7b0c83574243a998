//! What wring's fuzz targets share: one engine per process, the split of a decoder input into
//! a destination length and the bytes to decode, and the checks each kind of target makes.
//!
//! A decoder input is two little-endian bytes choosing the destination length (scaled onto
//! `0..=MAX_EXTENT`) followed by the compressed bytes; anything shorter than two bytes is decoded
//! whole into a full-size destination. A round-trip input is an algorithm/policy byte, a level
//! byte, then the data. The dictionary target's input is a decoder input, whose bytes after the
//! selector are also compressed with the dictionary and decoded back.

use std::sync::OnceLock;

use wring_engine::dict::Dictionary;
use wring_engine::{
    compressed_limit, Algorithm, CompressSpec, Engine, EngineConfig, Outcome, Policy, BLOCK_SIZE,
    MAX_EXTENT,
};

/// The engine every target of a process uses, created on first use (with the page pool on, so
/// `decompress_pages` goes through it).
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        Engine::new(EngineConfig {
            page_pool: 64,
            ..EngineConfig::default()
        })
    })
}

/// The destination length a selector stands for: `0..=u16::MAX` scaled onto `0..=MAX_EXTENT`.
pub fn dst_len_from(selector: u16) -> usize {
    usize::from(selector) * MAX_EXTENT / usize::from(u16::MAX)
}

/// The selector bytes whose destination holds at least `len` bytes (at most `MAX_EXTENT`).
pub fn selector_for(len: usize) -> [u8; 2] {
    let selector = (len.min(MAX_EXTENT) * usize::from(u16::MAX)).div_ceil(MAX_EXTENT);
    u16::try_from(selector).unwrap_or(u16::MAX).to_le_bytes()
}

/// Splits a decoder input into the destination length and the bytes to decode.
pub fn split_input(data: &[u8]) -> (usize, &[u8]) {
    match data {
        [a, b, rest @ ..] => (dst_len_from(u16::from_le_bytes([*a, *b])), rest),
        _ => (MAX_EXTENT, data),
    }
}

/// Decodes with the engine and checks: `Ok(n)` has `n <= dst.len()` and a zeroed tail, and
/// `decompress_pages` agrees with `decompress` (same success, same bytes).
pub fn fuzz_decoder(algorithm: Algorithm, data: &[u8]) {
    let (dst_len, src) = split_input(data);
    let mut dst = vec![0x5A; dst_len];
    let result = engine().decompress(algorithm, src, &mut dst);
    if let Ok(n) = result {
        assert!(
            n <= dst_len,
            "{algorithm}: {n} bytes reported for a {dst_len}-byte destination"
        );
        assert!(
            dst[n..].iter().all(|&b| b == 0),
            "{algorithm}: the tail after {n} bytes is not zeroed"
        );
    }
    match (result, engine().decompress_pages(algorithm, src, dst_len)) {
        (Ok(_), Ok(pages)) => assert!(
            pages.to_vec() == dst,
            "{algorithm}: decompress_pages gave other bytes"
        ),
        (Err(_), Err(_)) => {}
        (plain, pages) => panic!(
            "{algorithm}: decompress gave {plain:?}, decompress_pages {:?}",
            pages.map(|p| p.len())
        ),
    }
}

/// Decodes a raw LZO1X stream and checks: `Ok(n)` has `n <= dst.len()`, and a stream that fits
/// decodes the same into a larger destination.
pub fn fuzz_lzo1x(data: &[u8]) {
    let (dst_len, src) = split_input(data);
    let mut dst = vec![0x5A; dst_len];
    let Ok(n) = wring_lzo::decompress(src, &mut dst) else {
        return;
    };
    assert!(
        n <= dst_len,
        "{n} bytes reported for a {dst_len}-byte destination"
    );
    let mut wide = vec![0xA5; MAX_EXTENT + BLOCK_SIZE];
    let wide_result = wring_lzo::decompress(src, &mut wide);
    assert_eq!(
        wide_result,
        Ok(n),
        "a larger destination changes the result"
    );
    assert!(
        wide[..n] == dst[..n],
        "a larger destination changes the bytes"
    );
}

const POLICIES: [Policy; 3] = [Policy::Force, Policy::Heuristic, Policy::EarlyAbort];

/// The spec and policy a round-trip input's first two bytes choose.
pub fn round_trip_choice(algorithm_byte: u8, level_byte: u8) -> (CompressSpec, Policy) {
    let count = Algorithm::ALL.len();
    let algorithm = Algorithm::ALL[usize::from(algorithm_byte) % count];
    let policy = POLICIES[usize::from(algorithm_byte) / count % POLICIES.len()];
    let levels = algorithm.levels().count();
    let level = algorithm
        .levels()
        .nth(usize::from(level_byte) % levels)
        .unwrap_or(0);
    (CompressSpec::new(algorithm, level), policy)
}

/// Compresses the data under the chosen spec and policy and checks: compress-force never
/// skips, a compressed extent saves a block and decodes to exactly the data.
pub fn fuzz_round_trip(data: &[u8]) {
    let [algorithm_byte, level_byte, rest @ ..] = data else {
        return;
    };
    let (spec, policy) = round_trip_choice(*algorithm_byte, *level_byte);
    let src = &rest[..rest.len().min(MAX_EXTENT)];
    let mut packed = vec![0; compressed_limit(src.len())];
    let outcome = engine()
        .compress_with(spec, policy, src, &mut packed)
        .unwrap_or_else(|e| {
            panic!(
                "{spec} {policy:?}: compressing {} bytes failed: {e}",
                src.len()
            )
        });
    match outcome {
        Outcome::Compressed(n) => check_compressed(spec, &packed[..n], src),
        // Under compress-force only an extent of one block or less (it cannot save one).
        Outcome::Skipped => assert!(
            policy != Policy::Force || compressed_limit(src.len()) == 0,
            "{spec}: {} bytes skipped under compress-force",
            src.len()
        ),
        Outcome::Incompressible => {}
    }
}

fn check_compressed(spec: CompressSpec, packed: &[u8], src: &[u8]) {
    let n = packed.len();
    assert!(
        n.next_multiple_of(BLOCK_SIZE) + BLOCK_SIZE <= src.len().next_multiple_of(BLOCK_SIZE),
        "{spec}: {} bytes compressed to {n}, which saves no block",
        src.len()
    );
    let algorithm = spec.algorithm.expect("a spec with an algorithm");
    let mut out = vec![0xA5; src.len()];
    let got = engine()
        .decompress(algorithm, packed, &mut out)
        .unwrap_or_else(|e| {
            panic!(
                "{spec}: {n} compressed bytes of {} fail to decode: {e}",
                src.len()
            )
        });
    assert_eq!(got, src.len(), "{spec}: decoded length");
    assert!(out == src, "{spec}: decoded bytes differ from the input");
}

/// The dictionary of the dictionary target: raw content like the seeds' text.
pub fn dictionary() -> &'static Dictionary {
    static DICT: OnceLock<Dictionary> = OnceLock::new();
    DICT.get_or_init(|| {
        let text = b"btrfs stores compressed extents of at most 128 KiB; zram a page. ";
        Dictionary::new(text.repeat(64)).expect("raw content is a dictionary")
    })
}

/// zstd with [`dictionary`]: decoding arbitrary bytes with it is bounded (`Ok(n)` has
/// `n <= dst.len()` and a zeroed tail), and the bytes after the selector, compressed with it
/// into a destination the selector sizes, decode back to themselves with it.
pub fn fuzz_dict(data: &[u8]) {
    let dict = Some(dictionary());
    let (dst_len, src) = split_input(data);
    let mut dst = vec![0x5A; dst_len];
    if let Ok(n) = engine().decompress_dict(Algorithm::Zstd, dict, src, &mut dst) {
        assert!(n <= dst_len, "zstd+dict: {n} bytes reported for {dst_len}");
        assert!(
            dst[n..].iter().all(|&b| b == 0),
            "zstd+dict: tail not zeroed"
        );
    }
    let spec = CompressSpec::new(Algorithm::Zstd, 3);
    let mut packed = vec![0; dst_len];
    let compressed = engine()
        .compress_into_dict(spec, dict, src, &mut packed)
        .unwrap_or_else(|e| panic!("zstd+dict: compressing {} bytes failed: {e}", src.len()));
    if let Some(n) = compressed {
        let mut out = vec![0xA5; src.len()];
        let got = engine()
            .decompress_dict(Algorithm::Zstd, dict, &packed[..n], &mut out)
            .unwrap_or_else(|e| panic!("zstd+dict: {n} bytes fail to decode: {e}"));
        assert_eq!(got, src.len(), "zstd+dict: decoded length");
        assert!(out == src, "zstd+dict: decoded bytes differ from the input");
    }
}
