//! zstd's window beyond btrfs's extents. Frames of at most 128 KiB stay byte-identical to what
//! the kernel's btrfs writes, checked against parameters recomputed here the old way
//! (ZSTD_getCParams with the window capped at 2^17). Larger extents (wring-fs's, up to 4 MiB)
//! get a window that covers them, compress in a workspace sized as for 128 KiB, and decode.
//!
//! `cargo test -p wring-engine --release --test zstd_window -- --ignored --nocapture` measures
//! what 1 MiB extents gain over 128 KiB ones on the files in `WRING_CORPUS` (default
//! /tmp/wring-corpus), and what the larger window adds over the old 2^17 one.

mod common;
use common::SplitMix;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::time::Instant;

use wring_engine::codec::{
    btrfs_cparams, extent_cparams, standalone, ZstdParams, LARGE_MAX_WINDOW_LOG, MAX_WINDOW_LOG,
};
use wring_engine::{
    compressed_limit, Algorithm, CompressSpec, Engine, EngineConfig, Outcome, BLOCK_SIZE,
    MAX_EXTENT,
};
use zstd_sys as z;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Levels whose frames are compared byte for byte (the parameters are compared for all).
const FRAME_LEVELS: [i32; 15] = [-15, -5, -1, 1, 2, 3, 4, 5, 7, 9, 12, 15, 16, 19, 22];

/// Sizes whose frames are compared byte for byte.
const FRAME_SIZES: [usize; 9] = [
    1,
    1000,
    4 * KIB,
    4 * KIB + 1,
    64 * KIB,
    100 * KIB,
    100 * KIB + 7,
    MAX_EXTENT - 1,
    MAX_EXTENT,
];

/// The parameters the engine used for every size before windows grew past 2^17: btrfs's
/// zstd_get_btrfs_parameters, written out again so the test does not trust the code it checks.
fn old_cparams(level: i32, len: usize) -> z::ZSTD_compressionParameters {
    // SAFETY: a pure function of its arguments.
    let mut p = unsafe { z::ZSTD_getCParams(level, len as u64, 0) };
    p.windowLog = p.windowLog.min(17);
    p
}

/// ZSTD_getCParams for the size, window at most 4 MiB: the library's own choice of tables.
fn natural_cparams(level: i32, len: usize) -> z::ZSTD_compressionParameters {
    // SAFETY: a pure function of its arguments.
    let mut p = unsafe { z::ZSTD_getCParams(level, len as u64, 0) };
    p.windowLog = p.windowLog.min(22);
    p
}

/// Every field, comparable.
fn fields(p: &z::ZSTD_compressionParameters) -> [u32; 7] {
    [
        p.windowLog,
        p.chainLog,
        p.hashLog,
        p.searchLog,
        p.minMatch,
        p.targetLength,
        p.strategy as u32,
    ]
}

/// A heap compression context set up the way the engine's zstd codec sets up its static one.
struct Reference(NonNull<z::ZSTD_CCtx>);

impl Reference {
    fn new() -> Reference {
        // SAFETY: allocates a fresh context.
        Reference(NonNull::new(unsafe { z::ZSTD_createCCtx() }).expect("ZSTD_createCCtx"))
    }

    fn set(&mut self, param: z::ZSTD_cParameter, value: u32) {
        // SAFETY: live context owned by self.
        let r = unsafe { z::ZSTD_CCtx_setParameter(self.0.as_ptr(), param, value as i32) };
        // SAFETY: pure.
        assert_eq!(unsafe { z::ZSTD_isError(r) }, 0, "setParameter {param:?}");
    }

    /// Compress with exactly `p`, content size on, no checksum; `None` when `dst` is too small.
    fn compress(
        &mut self,
        p: z::ZSTD_compressionParameters,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<usize> {
        use z::ZSTD_cParameter::*;
        // SAFETY: live context owned by self.
        let r = unsafe {
            z::ZSTD_CCtx_reset(
                self.0.as_ptr(),
                z::ZSTD_ResetDirective::ZSTD_reset_session_and_parameters,
            )
        };
        // SAFETY: pure.
        assert_eq!(unsafe { z::ZSTD_isError(r) }, 0);
        self.set(ZSTD_c_windowLog, p.windowLog);
        self.set(ZSTD_c_chainLog, p.chainLog);
        self.set(ZSTD_c_hashLog, p.hashLog);
        self.set(ZSTD_c_searchLog, p.searchLog);
        self.set(ZSTD_c_minMatch, p.minMatch);
        self.set(ZSTD_c_targetLength, p.targetLength);
        self.set(ZSTD_c_strategy, p.strategy as u32);
        self.set(ZSTD_c_contentSizeFlag, 1);
        self.set(ZSTD_c_checksumFlag, 0);
        // As the kernel's zstd (no SIMD) does for windows of at most 2^17.
        if p.windowLog <= MAX_WINDOW_LOG {
            let off = z::ZSTD_ParamSwitch_e::ZSTD_ps_disable as u32;
            self.set(ZSTD_c_experimentalParam14, off);
        }
        // SAFETY: pointers and lengths from live slices.
        let r = unsafe {
            z::ZSTD_compress2(
                self.0.as_ptr(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        // SAFETY: pure.
        if unsafe { z::ZSTD_isError(r) } == 0 {
            return Some(r);
        }
        // SAFETY: pure.
        let code = unsafe { z::ZSTD_getErrorCode(r) };
        assert_eq!(code, z::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall);
        None
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCCtx, freed once.
        unsafe { z::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

/// Words with numbers and the odd random byte: compressible, but not trivially.
fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "extent ", "window ", "level ", "btrfs ", "zstd ", "frame ", "hash ", "chain ", "the ",
        "of ", "wring ", "\n",
    ];
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        let x = rng.next();
        match x % 16 {
            0 => out.extend_from_slice(format!("{} ", x >> 40).as_bytes()),
            1 => out.push((x >> 8) as u8),
            _ => out.extend_from_slice(WORDS[(x >> 4) as usize % WORDS.len()].as_bytes()),
        }
    }
    out.truncate(len);
    out
}

/// `period` random bytes repeated: only a window longer than `period` finds the repeats.
fn periodic(seed: u64, period: usize, len: usize) -> Vec<u8> {
    let mut rng = SplitMix(seed);
    let block: Vec<u8> = (0..period).map(|_| rng.next() as u8).collect();
    block.iter().copied().cycle().take(len).collect()
}

/// The window a frame declares (its content size when the window covers it: single segment).
fn frame_window(frame: &[u8]) -> u64 {
    // SAFETY: an all-zero header struct is a valid out-parameter; reads only within `frame`.
    let mut h: z::ZSTD_FrameHeader = unsafe { std::mem::zeroed() };
    // SAFETY: `h` is a valid out-parameter; zstd reads only `frame.len()` bytes of `frame`.
    let r = unsafe { z::ZSTD_getFrameHeader(&mut h, frame.as_ptr().cast(), frame.len()) };
    assert_eq!(r, 0, "frame header");
    h.windowSize
}

fn engine_with(max_extent: usize) -> Engine {
    Engine::new(EngineConfig {
        max_extent,
        ..EngineConfig::default()
    })
}

fn zstd(level: i32) -> CompressSpec {
    let spec = CompressSpec::new(Algorithm::Zstd, level);
    assert_eq!(spec.level, level, "level {level} is in the engine's range");
    spec
}

/// Up to 128 KiB the engine's parameters are btrfs's, for every level and every size.
#[test]
fn parameters_up_to_128k_are_btrfs_for_every_level_and_size() {
    for level in Algorithm::Zstd.levels() {
        for len in 0..=MAX_EXTENT {
            let old = fields(&old_cparams(level, len));
            assert_eq!(
                fields(&extent_cparams(level, len)),
                old,
                "zstd:{level} {len}"
            );
            assert_eq!(
                fields(&btrfs_cparams(level, len)),
                old,
                "zstd:{level} {len}"
            );
            assert!(old[0] <= MAX_WINDOW_LOG);
        }
    }
}

/// Frames of at most 128 KiB (what the kernel's btrfs reads) are made as btrfs makes them
/// (its parameters, no row-based match finder), also through an engine configured for 4 MiB
/// extents as wring-fs's is. Against the kernel itself: crates/btrfs/tests/zstd_identity.rs.
#[test]
fn frames_up_to_128k_are_made_with_btrfs_parameters() {
    let engine = engine_with(4 * MIB);
    let mut reference = Reference::new();
    for (i, &len) in FRAME_SIZES.iter().enumerate() {
        let src = text(i as u64, len);
        // SAFETY: pure.
        let bound = unsafe { z::ZSTD_compressBound(len) };
        for level in FRAME_LEVELS {
            let mut ours = vec![0u8; bound];
            let mut theirs = vec![0u8; bound];
            let n = engine
                .compress_into(zstd(level), &src, &mut ours)
                .unwrap()
                .expect("fits the bound");
            let m = reference
                .compress(old_cparams(level, len), &src, &mut theirs)
                .expect("fits the bound");
            assert!(
                ours[..n] == theirs[..m],
                "zstd:{level} on {len} bytes: {n} vs {m} bytes"
            );
        }
    }
}

/// Beyond 128 KiB the window covers the extent (as far as zstd would go for that size, at most
/// 4 MiB) and everything else is btrfs's 128 KiB choice, so the estimate does not move.
#[test]
fn larger_extents_get_a_covering_window_and_btrfs_128k_tables() {
    let sizes = [
        MAX_EXTENT + 1,
        200 * KIB,
        256 * KIB,
        256 * KIB + 1,
        MIB - 1,
        MIB,
        MIB + 1,
        2 * MIB,
        3 * MIB,
        4 * MIB,
    ];
    for level in Algorithm::Zstd.levels() {
        let small = fields(&btrfs_cparams(level, MAX_EXTENT));
        for len in sizes {
            let p = fields(&extent_cparams(level, len));
            assert_eq!(
                p[1..],
                small[1..],
                "zstd:{level} {len}: not the 128 KiB tables"
            );
            let cover = len.next_power_of_two().trailing_zeros();
            let natural = natural_cparams(level, len).windowLog;
            assert_eq!(
                p[0],
                cover.min(natural).min(LARGE_MAX_WINDOW_LOG),
                "zstd:{level} {len}"
            );
            assert!(p[0] > MAX_WINDOW_LOG, "zstd:{level} {len}: window {}", p[0]);
        }
        assert_eq!(
            ZstdParams::for_level(level, 4 * MIB).cstream_bytes,
            ZstdParams::for_level(level, MAX_EXTENT).cstream_bytes,
            "zstd:{level}"
        );
    }
    assert_eq!(extent_cparams(3, MIB).windowLog, 20);
    assert_eq!(extent_cparams(3, 4 * MIB).windowLog, 21);
    assert_eq!(extent_cparams(19, 4 * MIB).windowLog, 22);
    assert_eq!(extent_cparams(1, 4 * MIB).windowLog, 19);
}

/// 1, 2 and 4 MiB extents compress through an engine for 4 MiB extents with a window past
/// 2^17 (data repeating every 256 KiB shrinks to about one period), and decode. The static
/// contexts would fail with memory_allocation if the larger window needed more memory.
#[test]
fn large_extents_round_trip_through_the_engine() {
    let engine = engine_with(4 * MIB);
    for len in [MIB, 2 * MIB, 4 * MIB] {
        let src = periodic(len as u64, 256 * KIB, len);
        let mut dst = vec![0u8; len];
        let mut back = vec![0u8; len];
        for level in [1, 3, 9, 19, -5] {
            let outcome = engine.compress(zstd(level), &src, &mut dst).unwrap();
            let Outcome::Compressed(n) = outcome else {
                panic!("zstd:{level} on {len}: {outcome:?}");
            };
            assert!(n < 300 * KIB, "zstd:{level} on {len}: {n} bytes");
            let window = 1u64 << extent_cparams(level, len).windowLog;
            assert_eq!(frame_window(&dst[..n]), window.min(len as u64));
            back.fill(0xAA);
            let got = engine
                .decompress(Algorithm::Zstd, &dst[..n], &mut back)
                .unwrap();
            assert_eq!(got, len, "zstd:{level} on {len}");
            assert!(back == src, "zstd:{level} on {len}: round trip differs");
        }
    }
}

/// Every level compresses extents of every kind of size up to 4 MiB in a workspace of exactly
/// its class's size for 4 MiB extents (the engine may lend a larger one; `standalone` does not),
/// and decodes them.
#[test]
fn every_level_compresses_up_to_4mib_in_its_own_class_workspace() {
    let sizes = [
        4 * KIB,
        16 * KIB,
        100 * KIB,
        MAX_EXTENT,
        MAX_EXTENT + 4 * KIB,
        4 * MIB,
    ];
    let src = periodic(7, 64 * KIB, 4 * MIB);
    // SAFETY: pure.
    let mut dst = vec![0u8; unsafe { z::ZSTD_compressBound(4 * MIB) }];
    let mut back = vec![0u8; 4 * MIB];
    for level in Algorithm::Zstd.levels() {
        let mut state = standalone(Algorithm::Zstd, level, 4 * MIB).unwrap();
        for len in sizes {
            let src = &src[..len];
            let n = state
                .compress(level, src, &mut dst)
                .unwrap_or_else(|e| panic!("zstd:{level} on {len}: {e}"))
                .expect("fits the bound");
            let window = 1u64 << extent_cparams(level, len).windowLog;
            assert_eq!(frame_window(&dst[..n]), window.min(len as u64));
            assert_eq!(state.decompress(&dst[..n], &mut back).unwrap(), len);
            assert!(
                back[..len] == *src,
                "zstd:{level} on {len}: round trip differs"
            );
        }
    }
}

/// The control for the two tests above: in a static context of the workspace's size, buffered
/// streaming (which needs window-sized buffers) at the large windows fails with
/// memory_allocation, so those tests would catch a window that cost memory.
#[test]
fn workspace_is_too_small_for_window_sized_stream_buffers() {
    use z::ZSTD_cParameter::*;
    for level in [-5, 1, 3, 9, 19] {
        let bytes = ZstdParams::for_level(level, 4 * MIB).cstream_bytes;
        let mut arena = vec![0u64; bytes.div_ceil(8)];
        let p = extent_cparams(level, MIB);
        // SAFETY: the arena is 8-byte aligned, `bytes` long and outlives the context.
        let cctx = unsafe { z::ZSTD_initStaticCCtx(arena.as_mut_ptr().cast(), bytes) };
        assert!(!cctx.is_null());
        for (param, value) in [
            (ZSTD_c_windowLog, p.windowLog),
            (ZSTD_c_chainLog, p.chainLog),
            (ZSTD_c_hashLog, p.hashLog),
            (ZSTD_c_searchLog, p.searchLog),
            (ZSTD_c_minMatch, p.minMatch),
            (ZSTD_c_targetLength, p.targetLength),
            (ZSTD_c_strategy, p.strategy as u32),
        ] {
            // SAFETY: live static context.
            let r = unsafe { z::ZSTD_CCtx_setParameter(cctx, param, value as i32) };
            // SAFETY: pure.
            assert_eq!(unsafe { z::ZSTD_isError(r) }, 0);
        }
        let src = vec![7u8; 1000];
        let mut dst = vec![0u8; 4 * KIB];
        let mut input = z::ZSTD_inBuffer {
            src: src.as_ptr().cast(),
            size: src.len(),
            pos: 0,
        };
        let mut output = z::ZSTD_outBuffer {
            dst: dst.as_mut_ptr().cast(),
            size: dst.len(),
            pos: 0,
        };
        // SAFETY: buffers describe live slices; the context lives in `arena`.
        let r = unsafe {
            z::ZSTD_compressStream2(
                cctx,
                &mut output,
                &mut input,
                z::ZSTD_EndDirective::ZSTD_e_continue,
            )
        };
        assert_eq!(
            // SAFETY: ZSTD_getErrorCode is a pure function of its argument.
            unsafe { z::ZSTD_getErrorCode(r) },
            z::ZSTD_ErrorCode::ZSTD_error_memory_allocation,
            "zstd:{level}"
        );
    }
}

/// Totals of one way of storing the corpus.
#[derive(Default)]
struct Tally {
    input: u64,
    /// Frames (or raw extents) as produced, before rounding up to blocks.
    frames: u64,
    /// What the disk holds: each extent rounded up to 4 KiB blocks.
    stored: u64,
    secs: f64,
}

impl Tally {
    fn add(&mut self, len: usize, frame: Option<usize>) {
        self.input += len as u64;
        self.frames += frame.unwrap_or(len) as u64;
        self.stored += frame.unwrap_or(len).next_multiple_of(BLOCK_SIZE) as u64;
    }

    fn ratio(&self) -> f64 {
        self.input as f64 / self.stored as f64
    }
}

/// Measures the gain of 1 MiB extents on a corpus: stored bytes (frames rounded up to 4 KiB
/// blocks, raw when compression does not save a block) at zstd:3 and zstd:1 for 128 KiB extents,
/// 1 MiB extents as the engine now writes them, 1 MiB extents with the old 2^17 window, and
/// 1 MiB extents with the library's own tables for 1 MiB (what a larger workspace would buy).
#[test]
#[ignore = "measurement: needs a corpus; run in release with --ignored --nocapture"]
fn measure_window_gain_on_corpus() {
    let dir = PathBuf::from(
        std::env::var("WRING_CORPUS").unwrap_or_else(|_| "/tmp/wring-corpus".to_string()),
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let data: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(p).unwrap())
        })
        .collect();
    let total: usize = data.iter().map(|(_, d)| d.len()).sum();
    println!(
        "corpus {}: {} files, {} bytes",
        dir.display(),
        data.len(),
        total
    );

    let engine = engine_with(4 * MIB);
    let mut reference = Reference::new();
    let mut dst = vec![0u8; 4 * MIB];
    let mut back = vec![0u8; 4 * MIB];
    const WAYS: [&str; 4] = [
        "128K extents",
        "1M extents (new: window covers the extent, 128K tables)",
        "1M extents (old: window 2^17, 1M tables)",
        "1M extents (window covers the extent, 1M tables)",
    ];
    for level in [3, 1] {
        let spec = zstd(level);
        let mut tallies: Vec<Tally> = WAYS.iter().map(|_| Tally::default()).collect();
        let mut per_file = Vec::new();
        for (name, file) in &data {
            let mut file_tallies: Vec<Tally> = WAYS.iter().map(|_| Tally::default()).collect();
            for (way, tally) in file_tallies.iter_mut().enumerate() {
                let extent = if way == 0 { MAX_EXTENT } else { MIB };
                for src in file.chunks(extent) {
                    let limit = compressed_limit(src.len());
                    let start = Instant::now();
                    let frame = match way {
                        0 | 1 => match engine.compress(spec, src, &mut dst).unwrap() {
                            Outcome::Compressed(n) => Some(n),
                            _ => None,
                        },
                        2 => reference.compress(
                            old_cparams(level, src.len()),
                            src,
                            &mut dst[..limit],
                        ),
                        _ => {
                            let p = match src.len() > MAX_EXTENT {
                                true => natural_cparams(level, src.len()),
                                false => btrfs_cparams(level, src.len()),
                            };
                            reference.compress(p, src, &mut dst[..limit])
                        }
                    };
                    tally.secs += start.elapsed().as_secs_f64();
                    if let (1, Some(n)) = (way, frame) {
                        let got = engine
                            .decompress(Algorithm::Zstd, &dst[..n], &mut back[..src.len()])
                            .unwrap();
                        assert!(got == src.len() && back[..got] == *src, "{name}");
                    }
                    tally.add(src.len(), frame);
                }
            }
            for (t, f) in tallies.iter_mut().zip(&file_tallies) {
                t.input += f.input;
                t.frames += f.frames;
                t.stored += f.stored;
                t.secs += f.secs;
            }
            per_file.push((name.clone(), file.len(), file_tallies));
        }
        println!("\nzstd:{level}");
        println!(
            "  {:<16} {:>10}   {:>7} {:>7} {:>7} {:>7}   (ratio: 128K, 1M new, 1M old, 1M big tables)",
            "file", "bytes", "128K", "1M", "1M old", "1M big"
        );
        for (name, len, t) in &per_file {
            println!(
                "  {:<16} {:>10}   {:>7.3} {:>7.3} {:>7.3} {:>7.3}",
                name,
                len,
                t[0].ratio(),
                t[1].ratio(),
                t[2].ratio(),
                t[3].ratio()
            );
        }
        let frames_ratio = |t: &Tally| t.input as f64 / t.frames as f64;
        for (way, t) in WAYS.iter().zip(&tallies) {
            println!(
                "  {way:<56} stored {:>9} ratio {:.4} ({:+.2}% vs 128K) | frames {:>9} ratio {:.4} ({:+.2}%) | {:>4.0} MB/s",
                t.stored,
                t.ratio(),
                (t.ratio() / tallies[0].ratio() - 1.0) * 100.0,
                t.frames,
                frames_ratio(t),
                (frames_ratio(t) / frames_ratio(&tallies[0]) - 1.0) * 100.0,
                t.input as f64 / t.secs / 1e6,
            );
        }
        println!(
            "  1M new vs 1M old: {:+.2}% ratio stored, {:+.2}% frames only",
            (tallies[1].ratio() / tallies[2].ratio() - 1.0) * 100.0,
            (frames_ratio(&tallies[1]) / frames_ratio(&tallies[2]) - 1.0) * 100.0
        );
        // SAFETY: pure.
        let (small, big) = unsafe {
            (
                z::ZSTD_estimateCCtxSize_usingCParams(extent_cparams(level, MIB)),
                z::ZSTD_estimateCCtxSize_usingCParams(natural_cparams(level, MIB)),
            )
        };
        println!(
            "  tables at 1M (ZSTD_estimateCCtxSize): 128K tables {} KiB, 1M tables {} KiB; workspace estimate {} KiB",
            small / KIB,
            big / KIB,
            ZstdParams::for_level(level, 4 * MIB).wring_bytes() / KIB
        );
    }
}
