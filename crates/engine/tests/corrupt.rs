//! Damaged and hostile extents through every decoder: truncations, single bit flips, random
//! garbage (bare and behind a plausible header), empty input, zstd frames declaring more than
//! the destination holds, and destinations shorter than the content. Whatever the input,
//! `decompress` returns an error or `Ok(n)` with `n <= dst.len()` and a zeroed tail, never
//! panics and finishes within a deadline. The detections that the formats guarantee are
//! asserted too (every strict prefix of a zstd, zlib or lzo extent is an error, a damaged header
//! is an error, a short destination is `Oversized` for zstd and zlib), so that no test passes
//! because nothing was checked. Last, the zero padding btrfs stores after an extent is accepted.

mod common;
use common::SplitMix;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use wring_engine::{
    compressed_limit, Algorithm, CompressSpec, Engine, EngineConfig, Error, Outcome, BLOCK_SIZE,
    MAX_EXTENT,
};

/// Far more than any decode here needs, even at opt-level 1 on a busy 2-core machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// Garbage lengths: the sizes of headers and their neighbours, and whole extents.
const GARBAGE_LENGTHS: [usize; 18] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 31, 64, 255, 1000, 4097, 65536, MAX_EXTENT,
];

/// Destination sizes the garbage is decoded into.
const DST_LENGTHS: [usize; 4] = [0, 1, BLOCK_SIZE, MAX_EXTENT];

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(EngineConfig::default()))
}

/// Run `work` on its own thread and fail if it takes longer than [`DEADLINE`] (a decoder that
/// loops forever), passing its panics on.
fn within_deadline(what: &str, work: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let worker = thread::spawn(move || {
        work();
        let _ = done.send(());
    });
    match finished.recv_timeout(DEADLINE) {
        Ok(()) => worker.join().expect("the worker finished"),
        Err(RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished after {DEADLINE:?}: a decoder hangs")
        }
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker ended without reporting"),
        },
    }
}

/// 96 KiB of text with runs in it: compresses well with every algorithm.
fn sample() -> Vec<u8> {
    let words = [
        "sector ",
        "extent ",
        "zstd ",
        "inode ",
        "checksum ",
        "page ",
        "btrfs ",
        "zram ",
    ];
    let mut rng = SplitMix(42);
    let mut out = Vec::with_capacity(96 * 1024 + 600);
    while out.len() < 96 * 1024 {
        match rng.next() % 16 {
            0 => out.resize(out.len() + 300, b'='),
            n => out.extend_from_slice(words[n as usize % words.len()].as_bytes()),
        }
    }
    out.truncate(96 * 1024);
    out
}

/// A valid extent of `src` for `algorithm` at its default level.
fn compress(algorithm: Algorithm, src: &[u8]) -> Vec<u8> {
    let mut dst = vec![0; compressed_limit(src.len())];
    match engine().compress(CompressSpec::default_for(algorithm), src, &mut dst) {
        Ok(Outcome::Compressed(n)) => dst[..n].to_vec(),
        other => panic!("{algorithm}: the sample did not compress: {other:?}"),
    }
}

/// Decode `src` into a destination of `dst_len` bytes and check what holds for any input:
/// `Ok(n)` has `n <= dst_len` and zeros after `n`.
fn decode(algorithm: Algorithm, src: &[u8], dst_len: usize) -> Result<usize, Error> {
    let mut dst = vec![0x5A; dst_len];
    let result = engine().decompress(algorithm, src, &mut dst);
    if let Ok(n) = result {
        assert!(
            n <= dst_len,
            "{algorithm}: reported {n} bytes decoded into {dst_len}"
        );
        assert!(
            dst[n..].iter().all(|&b| b == 0),
            "{algorithm}: the tail after {n} bytes is not zeroed"
        );
    }
    result
}

/// Algorithms whose extents end in something a strict prefix cannot have: zstd's last block,
/// zlib's adler32 trailer, lzo's total-length header, raw deflate's end-of-block code (its
/// last byte always holds part of it). lzo-rle's stream is not among them: its first bytes
/// alone can read as a stream of nothing (what it decodes to is still bounded, and a front end
/// that knows the size, as blk does, rejects it).
fn detects_truncation(algorithm: Algorithm) -> bool {
    matches!(
        algorithm,
        Algorithm::Zstd | Algorithm::Zlib | Algorithm::Lzo | Algorithm::Deflate
    )
}

/// Cut positions: every one near both ends, every `step`-th in between.
fn cut_positions(len: usize) -> Vec<usize> {
    let step = (len / 256).max(1);
    let mut cuts: Vec<usize> = (0..len)
        .step_by(step)
        .chain(0..len.min(24))
        .chain(len.saturating_sub(24)..len)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

fn truncations(algorithm: Algorithm) {
    let src = sample();
    let packed = compress(algorithm, &src);
    let cuts = cut_positions(packed.len());
    let mut rejected = 0;
    for &cut in &cuts {
        let result = decode(algorithm, &packed[..cut], src.len());
        if result.is_err() {
            rejected += 1;
        } else if detects_truncation(algorithm) {
            panic!(
                "{algorithm}: the first {cut} of {} bytes decoded: {result:?}",
                packed.len()
            );
        }
    }
    eprintln!(
        "{algorithm}: {rejected} of {} truncations rejected",
        cuts.len()
    );
    let half = decode(algorithm, &packed[..packed.len() / 2], src.len());
    if detects_truncation(algorithm) {
        assert!(
            half.is_err(),
            "{algorithm}: half an extent decoded: {half:?}"
        );
    }
    assert!(
        rejected * 10 >= cuts.len() * 9,
        "{algorithm}: only {rejected} of {} truncations rejected",
        cuts.len()
    );
}

#[test]
fn truncations_are_rejected_or_bounded() {
    for algorithm in Algorithm::ALL {
        within_deadline(algorithm.name(), move || truncations(algorithm));
    }
}

/// Flip one bit at sampled positions (every bit of the first 16 bytes); returns how many of the
/// flips were rejected and how many were tried.
fn bit_flips(algorithm: Algorithm, packed: &[u8], dst_len: usize) -> (usize, usize) {
    let step = (packed.len() / 400).max(1);
    let header = (0..packed.len().min(16)).flat_map(|i| (0..8).map(move |bit| (i, bit)));
    let body = (16..packed.len()).step_by(step).map(|i| (i, i % 8));
    let mut damaged = packed.to_vec();
    let (mut rejected, mut tried) = (0, 0);
    for (i, bit) in header.chain(body) {
        damaged[i] ^= 1 << bit;
        rejected += usize::from(decode(algorithm, &damaged, dst_len).is_err());
        tried += 1;
        damaged[i] ^= 1 << bit;
    }
    (rejected, tried)
}

/// Flips every bit of `bytes` of the extent one at a time; each must be rejected.
fn assert_header_flips_rejected(
    algorithm: Algorithm,
    packed: &[u8],
    dst_len: usize,
    bytes: std::ops::Range<usize>,
) {
    let mut damaged = packed.to_vec();
    for i in bytes {
        for bit in 0..8 {
            damaged[i] ^= 1 << bit;
            let result = decode(algorithm, &damaged, dst_len);
            assert!(
                result.is_err(),
                "{algorithm}: bit {bit} of byte {i} flipped, and it decoded: {result:?}"
            );
            damaged[i] ^= 1 << bit;
        }
    }
}

fn flips(algorithm: Algorithm) {
    let src = sample();
    let packed = compress(algorithm, &src);
    let (rejected, tried) = bit_flips(algorithm, &packed, src.len());
    eprintln!("{algorithm}: {rejected} of {tried} bit flips rejected");
    match algorithm {
        // The magic number.
        Algorithm::Zstd => assert_header_flips_rejected(algorithm, &packed, src.len(), 0..4),
        // The header check and the adler32 trailer catch nearly everything.
        Algorithm::Zlib => {
            assert_header_flips_rejected(algorithm, &packed, src.len(), 0..2);
            assert!(
                rejected * 10 >= tried * 9,
                "zlib: only {rejected} of {tried} bit flips rejected"
            );
        }
        // The high bytes of the total length: 64 KiB or more away from the real size.
        Algorithm::Lzo => assert_header_flips_rejected(algorithm, &packed, src.len(), 2..4),
        // No header or checksum to speak of (lzo-rle's two version bytes aside).
        Algorithm::Lz4 | Algorithm::Lz4hc | Algorithm::LzoRle | Algorithm::Deflate => {}
    }
    assert!(
        rejected > 0,
        "{algorithm}: none of {tried} bit flips rejected"
    );
}

#[test]
fn bit_flips_are_rejected_or_bounded() {
    for algorithm in Algorithm::ALL {
        within_deadline(algorithm.name(), move || flips(algorithm));
    }
}

/// Headers that get garbage past the first checks of each format.
fn plausible_header(algorithm: Algorithm, len: usize) -> Vec<u8> {
    match algorithm {
        // Magic, then a frame header descriptor for a single-segment frame with a 2-byte size.
        Algorithm::Zstd => vec![0x28, 0xB5, 0x2F, 0xFD, 0x60],
        // CMF/FLG of a default-level stream.
        Algorithm::Zlib => vec![0x78, 0x9C],
        // The total length, matching the input's size, then a first segment of 100 bytes.
        Algorithm::Lzo => [(len as u32).to_le_bytes(), 100u32.to_le_bytes()].concat(),
        Algorithm::Lz4 | Algorithm::Lz4hc => vec![0xF0],
        // lzo-rle's version header.
        Algorithm::LzoRle => vec![17, 1],
        // A final block with fixed Huffman codes.
        Algorithm::Deflate => vec![0x03],
    }
}

fn garbage(algorithm: Algorithm) {
    let mut rng = SplitMix(algorithm as u64);
    for len in GARBAGE_LENGTHS {
        for round in 0..3 {
            let mut input = rng.bytes(len);
            if round > 0 {
                let header = plausible_header(algorithm, len);
                let n = header.len().min(len);
                input[..n].copy_from_slice(&header[..n]);
            }
            for dst_len in DST_LENGTHS {
                let _ = decode(algorithm, &input, dst_len);
            }
        }
    }
}

#[test]
fn garbage_is_rejected_or_bounded() {
    for algorithm in Algorithm::ALL {
        within_deadline(algorithm.name(), move || garbage(algorithm));
    }
}

/// lz4 has no header or checksum, so its detections are shown on blocks that break the format:
/// a match at offset 0, a match reaching before the start of the output, literals announced
/// but missing.
#[test]
fn invalid_lz4_blocks_are_rejected() {
    let blocks: [&[u8]; 3] = [
        &[0x1F, b'a', 0x00, 0x00],
        &[0x10, b'a', 0x02, 0x00, 0x00],
        &[0xF0],
    ];
    for algorithm in [Algorithm::Lz4, Algorithm::Lz4hc] {
        for block in blocks {
            assert!(
                decode(algorithm, block, BLOCK_SIZE).is_err(),
                "{algorithm}: {block:02x?} decoded"
            );
        }
    }
}

#[test]
fn empty_input_is_an_error() {
    for algorithm in Algorithm::ALL {
        for dst_len in DST_LENGTHS {
            let result = decode(algorithm, &[], dst_len);
            assert!(
                result.is_err(),
                "{algorithm}: empty input into {dst_len} bytes gave {result:?}"
            );
        }
    }
}

/// A single-segment zstd frame declaring `content_size` bytes, holding one raw block of `data`.
fn zstd_frame(content_size: u64, data: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0xE0];
    frame.extend_from_slice(&content_size.to_le_bytes());
    let block_header = ((data.len() as u32) << 3) | 1;
    frame.extend_from_slice(&block_header.to_le_bytes()[..3]);
    frame.extend_from_slice(data);
    frame
}

#[test]
fn zstd_declared_size_beyond_dst_is_rejected() {
    let src = sample();
    let packed = compress(Algorithm::Zstd, &src);
    for dst_len in [0, 1, BLOCK_SIZE, src.len() - 1] {
        let result = decode(Algorithm::Zstd, &packed, dst_len);
        assert_eq!(
            result,
            Err(Error::Oversized {
                algorithm: Algorithm::Zstd,
                limit: dst_len
            })
        );
    }
    // The hand-made frame is valid as declared...
    assert_eq!(decode(Algorithm::Zstd, &zstd_frame(5, b"hello"), 5), Ok(5));
    // ...but not when it declares more than the destination or than it holds.
    // (u64::MAX is zstd's "size unknown", so it is not among them.)
    for declared in [6, MAX_EXTENT as u64 + 1, 1 << 40, 1 << 63] {
        let result = decode(Algorithm::Zstd, &zstd_frame(declared, b"hello"), MAX_EXTENT);
        assert!(
            result.is_err(),
            "a frame declaring {declared} bytes gave {result:?}"
        );
    }
}

/// Data of several shapes, for the short-destination test.
fn short_dst_inputs() -> Vec<Vec<u8>> {
    vec![
        sample(),
        vec![0; MAX_EXTENT],
        sample()
            .into_iter()
            .cycle()
            .take(BLOCK_SIZE * 3 + 7)
            .collect(),
    ]
}

/// Decodes every [`short_dst_inputs`] extent into destinations shorter than its content and
/// checks each result.
fn short_dst(
    algorithm: Algorithm,
    check: impl Fn(usize, Result<usize, Error>) -> Result<(), String>,
) {
    for src in short_dst_inputs() {
        let packed = compress(algorithm, &src);
        for dst_len in [
            0,
            1,
            BLOCK_SIZE - 1,
            BLOCK_SIZE,
            src.len() / 2,
            src.len() - 1,
        ] {
            let result = decode(algorithm, &packed, dst_len);
            if let Err(e) = check(dst_len, result) {
                panic!("{algorithm}: {} bytes into {dst_len}: {e}", src.len());
            }
        }
    }
}

fn oversized(algorithm: Algorithm) -> impl Fn(usize, Result<usize, Error>) -> Result<(), String> {
    move |limit, result| match result {
        Err(Error::Oversized {
            algorithm: a,
            limit: l,
        }) if a == algorithm && l == limit => Ok(()),
        other => Err(format!("expected Oversized, got {other:?}")),
    }
}

#[test]
fn short_dst_is_oversized() {
    for algorithm in [
        Algorithm::Zstd,
        Algorithm::Zlib,
        Algorithm::Lz4,
        Algorithm::Lz4hc,
        Algorithm::Lzo,
    ] {
        within_deadline(algorithm.name(), move || {
            short_dst(algorithm, oversized(algorithm))
        });
    }
}

/// `packed` followed by zeros up to the next block boundary (a whole block if it ends on one).
fn padded(packed: &[u8]) -> Vec<u8> {
    let mut out = packed.to_vec();
    out.resize((packed.len() + 1).next_multiple_of(BLOCK_SIZE), 0);
    out
}

#[test]
fn btrfs_zero_padding_is_accepted() {
    let src = sample();
    for algorithm in [Algorithm::Zlib, Algorithm::Zstd, Algorithm::Lzo] {
        let stored = padded(&compress(algorithm, &src));
        let mut dst = vec![0; src.len()];
        let n = engine()
            .decompress(algorithm, &stored, &mut dst)
            .unwrap_or_else(|e| panic!("{algorithm}: the padded extent fails: {e}"));
        assert_eq!(n, src.len(), "{algorithm}");
        assert!(
            dst == src,
            "{algorithm}: the padded extent decodes to other bytes"
        );
    }
}
