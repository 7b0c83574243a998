//! One-shot calls on buffers of any size, for the library bindings (Python, C): what
//! python-zstandard's `compress()`/`decompress()` and liblz4's one-shot calls are, through the
//! engine's one codec table.
//!
//! The output is each codec's own format, the one btrfs or zram stores: a zstd frame with its
//! content size, a zlib stream, btrfs's LZO framing, a raw lz4 block, raw deflate. An input of
//! at most [`Engine::max_extent`] bytes goes through the engine's workspace managers (a
//! 4 KiB call reuses a workspace, so it allocates nothing but its result); a larger one gets a
//! codec state of its own sized for it, as the filesystem's large extents do.
//!
//! Decompression takes the decoded size when the caller knows it. When it does not, a zstd
//! frame's declared content size is used, and otherwise the output grows geometrically until
//! the data fits or `max_size` is reached: any valid frame decodes, including frames that do
//! not record their size (python-zstandard #150), and corrupt input never allocates more than
//! `max_size`.

// Frames come from callers and from disk, possibly corrupt: decoding them must not panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use crate::codec;
use crate::dict::Dictionary;
use crate::engine::Engine;
use crate::error::Error;
use crate::offload::{BatchJob, Completed, Offload, Op};
use crate::spec::{Algorithm, CompressSpec};

/// The first guess at a decoded size, as a multiple of the compressed size.
const FIRST_GUESS_RATIO: usize = 4;
/// The smallest first guess.
const FIRST_GUESS_MIN: usize = 64 * 1024;

/// Inputs a batch call submits at a time, each with its reused scratch output (16 x 147 KiB).
pub const BATCH_CHUNK: usize = 16;

/// The most btrfs's LZO framing holds (wring_lzo's limit).
const LZO_MAX: usize = 4 << 20;

/// Why a one-shot call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The codec refused: corrupt input, a short buffer, a library failure.
    #[error(transparent)]
    Codec(#[from] Error),
    /// The decoded data would exceed the caller's `max_size`.
    #[error("the data decodes to more than max_size ({max_size} bytes)")]
    TooLarge {
        /// The caller's limit.
        max_size: usize,
    },
    /// btrfs's LZO framing holds at most 4 MiB, and its encoder gives up on data that grows
    /// (the kernel then stores the extent raw): such data has no lzo frame.
    #[error("lzo (btrfs's LZO framing) cannot hold this input: {0}")]
    NotInLzo(&'static str),
    /// A batch item's decoded size is needed and neither given nor in its header.
    #[error("the decoded size is not known: {algorithm} data does not record it; pass it")]
    UnknownSize {
        /// The data's algorithm.
        algorithm: Algorithm,
    },
    /// A codec state for a large input could not be allocated.
    #[error("could not allocate {bytes} bytes of codec memory")]
    NoMemory {
        /// Bytes asked for.
        bytes: usize,
    },
}

impl From<codec::AllocError> for FrameError {
    fn from(e: codec::AllocError) -> FrameError {
        FrameError::NoMemory { bytes: e.bytes }
    }
}

/// Most bytes [`compress`] can produce for `len` input bytes under `spec`: the output buffer
/// [`compress_into`] always succeeds with.
pub fn compress_bound(spec: CompressSpec, len: usize) -> usize {
    match spec.algorithm {
        None => len,
        // The largest bound of the codecs (lzo's framing: 4 bytes per segment on top of
        // lzo1x's len + len/16 + 64 + 3), plus a header; generous for the others.
        Some(_) => len + len / 8 + 1024,
    }
}

/// Compress `src` of any size under `spec` (no storage rule: the result may be larger than
/// the input), with `dictionary` when one is given (zstd only). `no` copies the input.
pub fn compress(
    engine: &Engine,
    spec: CompressSpec,
    dictionary: Option<&Dictionary>,
    src: &[u8],
) -> Result<Vec<u8>, FrameError> {
    let mut dst = vec![0u8; compress_bound(spec, src.len())];
    let n = compress_into(engine, spec, dictionary, src, &mut dst)?;
    dst.truncate(n);
    Ok(dst)
}

/// As [`compress`], into `dst`; returns the bytes written. A `dst` shorter than the result is
/// [`Error::ShortBuffer`] (with [`compress_bound`] as what it needs).
pub fn compress_into(
    engine: &Engine,
    spec: CompressSpec,
    dictionary: Option<&Dictionary>,
    src: &[u8],
    dst: &mut [u8],
) -> Result<usize, FrameError> {
    let got = dst.len();
    let short = || Error::ShortBuffer {
        got,
        need: compress_bound(spec, src.len()),
    };
    let Some(algorithm) = spec.algorithm else {
        let out = dst.get_mut(..src.len()).ok_or_else(short)?;
        out.copy_from_slice(src);
        return Ok(src.len());
    };
    if dictionary.is_some() && !algorithm.takes_dictionary() {
        return Err(Error::NoDictionary(algorithm).into());
    }
    if algorithm == Algorithm::Lzo && src.len() > LZO_MAX {
        return Err(FrameError::NotInLzo("it is larger than 4 MiB"));
    }
    let done = match src.len() <= engine.max_extent() {
        true => engine.compress_into_dict(spec, dictionary, src, dst)?,
        false => {
            let mut state = codec::standalone(algorithm, spec.level, src.len())?;
            match dictionary {
                None => state.compress(spec.level, src, dst)?,
                Some(d) => state
                    .compress_dict(spec.level, d, src, dst)
                    .unwrap_or(Err(Error::NoDictionary(algorithm)))?,
            }
        }
    };
    match done {
        Some(n) => Ok(n),
        None if algorithm == Algorithm::Lzo && got >= compress_bound(spec, src.len()) => Err(
            FrameError::NotInLzo("it does not compress (the kernel stores such data raw)"),
        ),
        None => Err(short().into()),
    }
}

/// Decode `src` (`algorithm`'s format) into `dst`; returns the bytes produced. Output that
/// would not fit is [`Error::Oversized`]; the rest of `dst` is left as the codec left it.
pub fn decompress_into(
    engine: &Engine,
    algorithm: Algorithm,
    dictionary: Option<&Dictionary>,
    src: &[u8],
    dst: &mut [u8],
) -> Result<usize, FrameError> {
    if dictionary.is_some() && !algorithm.takes_dictionary() {
        return Err(Error::NoDictionary(algorithm).into());
    }
    Ok(engine.decompress_dict(algorithm, dictionary, src, dst)?)
}

/// Decode `src` of `algorithm`'s format. `size` is the decoded size when the caller knows it
/// (the result is then at most that long); without it the output grows, up to `max_size`
/// bytes (see the module's notes).
pub fn decompress(
    engine: &Engine,
    algorithm: Algorithm,
    dictionary: Option<&Dictionary>,
    src: &[u8],
    size: Option<usize>,
    max_size: usize,
) -> Result<Vec<u8>, FrameError> {
    if let Some(size) = size {
        if size > max_size {
            return Err(FrameError::TooLarge { max_size });
        }
        let mut dst = vec![0u8; size];
        let n = decompress_into(engine, algorithm, dictionary, src, &mut dst)?;
        dst.truncate(n);
        return Ok(dst);
    }
    let mut guess = first_guess(algorithm, src).min(max_size);
    loop {
        let mut dst = vec![0u8; guess];
        match decompress_into(engine, algorithm, dictionary, src, &mut dst) {
            Ok(n) => {
                dst.truncate(n);
                confirm_exact(engine, algorithm, src, &mut dst)?;
                return Ok(dst);
            }
            Err(FrameError::Codec(Error::Oversized { .. })) if guess < max_size => {
                // From at least FIRST_GUESS_MIN: a zstd frame may declare 0 bytes and hold
                // more (or be followed by another frame), and twice 0 is 0 (the fuzzer's hang).
                guess = guess.saturating_mul(2).max(FIRST_GUESS_MIN).min(max_size);
            }
            Err(FrameError::Codec(Error::Oversized { .. })) => {
                return Err(FrameError::TooLarge { max_size })
            }
            Err(e) => return Err(e),
        }
    }
}

/// Compress every input (each at most the engine's `max_extent`) on the offload's streams, as
/// borrowed batches of [`BATCH_CHUNK`]: the inputs are not copied, and the calling thread
/// compresses nothing. One result per input, in order.
pub fn compress_many(
    offload: &Offload,
    spec: CompressSpec,
    dictionary: Option<&Dictionary>,
    inputs: &[&[u8]],
) -> Vec<Result<Vec<u8>, FrameError>> {
    let mut scratch = Scratch::for_inputs(spec, inputs);
    let mut results = Vec::with_capacity(inputs.len());
    for part in inputs.chunks(BATCH_CHUNK) {
        let done = compress_chunk(offload, spec, dictionary, part, &mut scratch);
        results.extend(done.into_iter().map(|r| r.map(<[u8]>::to_vec)));
    }
    results
}

/// Reused outputs for [`compress_chunk`]: one bound-sized buffer per input of a chunk.
///
/// One fresh buffer per input faults in new pages for every extent: `bench.py` measured 0.82x
/// (zstd:3) and 0.78x (lz4) the fastest peer that way, 0.86x and 0.73x with chunks of 256,
/// and 0.98-0.99x and 0.98-1.01x with chunks of 16 or 64 (crates/python/bench).
#[derive(Debug, Default)]
pub struct Scratch(Vec<Vec<u8>>);

impl Scratch {
    /// Buffers for chunks of `inputs` under `spec`.
    pub fn for_inputs(spec: CompressSpec, inputs: &[&[u8]]) -> Scratch {
        let widest = inputs.iter().map(|i| i.len()).max().unwrap_or(0);
        let bound = compress_bound(spec, widest);
        Scratch(vec![vec![0u8; bound]; BATCH_CHUNK.min(inputs.len())])
    }

    /// Output buffer `i` of the last chunk: input i's result is its first bytes, as many as
    /// [`compress_chunk`] said.
    pub fn buffer(&self, i: usize) -> &[u8] {
        self.0.get(i).map_or(&[], Vec::as_slice)
    }
}

/// Compress one chunk (at most [`BATCH_CHUNK`] inputs, none wider than `scratch` was made
/// for) as one borrowed batch: each result is its compressed bytes in `scratch`, valid until
/// the next chunk. Front ends that keep results in their own objects (the Python package)
/// convert one chunk while the next compresses.
pub fn compress_chunk<'s>(
    offload: &Offload,
    spec: CompressSpec,
    dictionary: Option<&Dictionary>,
    inputs: &[&[u8]],
    scratch: &'s mut Scratch,
) -> Vec<Result<&'s [u8], FrameError>> {
    let Some(algorithm) = spec.algorithm else {
        for (out, input) in scratch.0.iter_mut().zip(inputs) {
            out.clear();
            out.extend_from_slice(input);
        }
        return scratch
            .0
            .iter()
            .take(inputs.len())
            .map(|o| Ok(o.as_slice()))
            .collect();
    };
    if inputs.len() > scratch.0.len() {
        let need = compress_bound(spec, inputs.iter().map(|i| i.len()).max().unwrap_or(0));
        scratch.0.resize(inputs.len(), vec![0u8; need]);
    }
    let mut jobs: Vec<BatchJob<'_>> = inputs
        .iter()
        .zip(scratch.0.iter_mut())
        .map(|(input, output)| {
            let op = Op::CompressInto { spec };
            BatchJob::new(op, input, output).with_dictionary(dictionary)
        })
        .collect();
    offload.run_batch(&mut jobs);
    let outcomes: Vec<_> = jobs.into_iter().map(|j| j.result).collect();
    outcomes
        .into_iter()
        .zip(scratch.0.iter())
        .zip(inputs)
        .map(|((result, output), input)| {
            let short = || {
                FrameError::from(Error::ShortBuffer {
                    got: output.len(),
                    need: compress_bound(spec, input.len()),
                })
            };
            match result {
                Some(Ok(Completed::CompressedInto(Some(n)))) => output.get(..n).ok_or_else(short),
                Some(Ok(_)) if algorithm == Algorithm::Lzo => Err(FrameError::NotInLzo(
                    "it does not compress (the kernel stores such data raw)",
                )),
                Some(Err(e)) => Err(e.into()),
                _ => Err(short()),
            }
        })
        .collect()
}

/// Decode every input on the offload's streams. `sizes[i]` is input i's decoded size; `None`
/// takes a zstd frame's declared size, and is [`FrameError::UnknownSize`] for data that
/// records none. A size over `max_size` is [`FrameError::TooLarge`].
pub fn decompress_many(
    offload: &Offload,
    algorithm: Algorithm,
    dictionary: Option<&Dictionary>,
    inputs: &[&[u8]],
    sizes: &[Option<usize>],
    max_size: usize,
) -> Vec<Result<Vec<u8>, FrameError>> {
    let wanted: Vec<Result<usize, FrameError>> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let size = sizes.get(i).copied().flatten();
            let size = size
                .or_else(|| {
                    (algorithm == Algorithm::Zstd)
                        .then(|| codec::zstd::content_size(input))
                        .flatten()
                })
                .ok_or(FrameError::UnknownSize { algorithm })?;
            match size <= max_size {
                true => Ok(size),
                false => Err(FrameError::TooLarge { max_size }),
            }
        })
        .collect();
    let mut outputs: Vec<Vec<u8>> = wanted
        .iter()
        .map(|w| vec![0u8; *w.as_ref().unwrap_or(&0)])
        .collect();
    let mut jobs = Vec::new();
    let mut index = Vec::new();
    for (i, ((input, output), w)) in inputs
        .iter()
        .zip(outputs.iter_mut())
        .zip(&wanted)
        .enumerate()
    {
        if let Ok(len) = w {
            let op = Op::Decompress {
                algorithm,
                len: *len,
            };
            jobs.push(BatchJob::new(op, input, output).with_dictionary(dictionary));
            index.push(i);
        }
    }
    offload.run_batch(&mut jobs);
    let mut results: Vec<Option<Result<Completed, Error>>> = vec![None; inputs.len()];
    for (job, i) in jobs.into_iter().zip(index) {
        if let Some(slot) = results.get_mut(i) {
            *slot = job.result;
        }
    }
    wanted
        .into_iter()
        .zip(results)
        .zip(outputs)
        .map(|((w, result), mut out)| {
            w?;
            match result {
                Some(Ok(Completed::Decompressed(n))) => {
                    out.truncate(n);
                    Ok(out)
                }
                Some(Err(e)) => Err(e.into()),
                _ => Err(Error::Library {
                    algorithm,
                    reason: "the batch returned no decompression".into(),
                }
                .into()),
            }
        })
        .collect()
}

/// An lz4 block that breaks the format's end-of-block rules (the last literals, no match near
/// the end) can decode into a larger buffer and fail into one of its exact size, since lz4
/// checks those rules against the buffer's end (found by the frame_decompress fuzz target). A
/// valid block decodes into its exact size, so a grown lz4 decode is confirmed there; the other
/// decoders do not depend on the buffer's size.
fn confirm_exact(
    engine: &Engine,
    algorithm: Algorithm,
    src: &[u8],
    dst: &mut [u8],
) -> Result<(), FrameError> {
    if !matches!(algorithm, Algorithm::Lz4 | Algorithm::Lz4hc) {
        return Ok(());
    }
    match decompress_into(engine, algorithm, None, src, dst) {
        Ok(n) if n == dst.len() => Ok(()),
        _ => Err(Error::corrupt(
            algorithm,
            "malformed block: it breaks lz4's end-of-block rules",
        )
        .into()),
    }
}

/// The first output size to try: a zstd frame's declared content size, else a multiple of
/// the input.
fn first_guess(algorithm: Algorithm, src: &[u8]) -> usize {
    if algorithm == Algorithm::Zstd {
        if let Some(n) = codec::zstd::content_size(src) {
            return n;
        }
    }
    src.len()
        .saturating_mul(FIRST_GUESS_RATIO)
        .max(FIRST_GUESS_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineConfig;

    fn text(n: usize) -> Vec<u8> {
        let words = b"wring squeezes extents the way btrfs and zram do; ";
        (0..n)
            .map(|i| words[i % words.len()] ^ (i / 7919) as u8)
            .collect()
    }

    fn noise(n: usize) -> Vec<u8> {
        wring_testing::random_bytes(7, n)
    }

    fn engine() -> Engine {
        Engine::new(EngineConfig::default())
    }

    #[test]
    fn every_algorithm_round_trips_every_size_with_and_without_the_size() {
        let engine = engine();
        for algorithm in Algorithm::ALL {
            let sizes = [0, 1, 4096, 128 * 1024, 128 * 1024 + 1, 3 << 20];
            for (n, data) in sizes.iter().flat_map(|&n| [(n, text(n)), (n, noise(n))]) {
                let spec = CompressSpec::default_for(algorithm);
                let packed = match compress(&engine, spec, None, &data) {
                    Err(FrameError::NotInLzo(_)) if algorithm == Algorithm::Lzo => continue,
                    r => r.unwrap(),
                };
                let known = decompress(&engine, algorithm, None, &packed, Some(n), usize::MAX);
                assert_eq!(known.unwrap(), data, "{algorithm} {n} with the size");
                let grown = decompress(&engine, algorithm, None, &packed, None, usize::MAX);
                assert_eq!(grown.unwrap(), data, "{algorithm} {n} without the size");
            }
        }
    }

    /// A zstd frame that declares 0 bytes and holds a block of 5: decoding without a size
    /// starts from the declared 0 and must grow from there (twice 0 was 0: the fuzzer's
    /// hang). The input is also `fuzz/regressions/frame_decompress-zstd-declares-nothing`,
    /// after the byte that picks zstd.
    #[test]
    fn a_zstd_frame_that_declares_nothing_and_holds_more_ends() {
        let engine = engine();
        // Magic; a single-segment frame with a 1-byte content size of 0; one last raw block
        // of 5 bytes.
        let mut src = vec![0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x29, 0x00, 0x00];
        src.extend(b"hello");
        assert_eq!(codec::zstd::content_size(&src), Some(0));
        let mut empty = [0u8; 0];
        let at_zero = decompress_into(&engine, Algorithm::Zstd, None, &src, &mut empty);
        assert!(
            matches!(at_zero, Err(FrameError::Codec(Error::Oversized { .. }))),
            "{at_zero:?}: the input no longer reaches the growth"
        );
        match decompress(&engine, Algorithm::Zstd, None, &src, None, 1 << 20) {
            Ok(out) => assert_eq!(out, b"hello"),
            Err(e) => assert!(!matches!(e, FrameError::TooLarge { .. }), "{e}"),
        }
        let pick = Algorithm::ALL
            .iter()
            .position(|&a| a == Algorithm::Zstd)
            .unwrap();
        let mut input = vec![pick as u8];
        input.extend(&src);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/regressions");
        let file = format!("{path}/frame_decompress-zstd-declares-nothing");
        if std::env::var_os("WRING_WRITE_REGRESSION").is_some() {
            std::fs::write(&file, &input).unwrap();
        }
        assert_eq!(
            std::fs::read(&file).unwrap(),
            input,
            "the saved regression input"
        );
    }

    #[test]
    fn batches_round_trip_in_order_with_errors_in_place() {
        use crate::offload::OffloadConfig;
        use std::sync::Arc;
        let engine = Arc::new(Engine::new(EngineConfig::default()));
        let offload = Offload::new(engine.clone(), OffloadConfig::for_engine(&engine)).unwrap();
        let data: Vec<Vec<u8>> = (0..40).map(|i| text(1000 + i * 3000)).collect();
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        for name in ["zstd:3", "lz4", "zlib:6", "lzo"] {
            let spec: CompressSpec = name.parse().unwrap();
            let packed: Vec<Vec<u8>> = compress_many(&offload, spec, None, &refs)
                .into_iter()
                .map(Result::unwrap)
                .collect();
            let prefs: Vec<&[u8]> = packed.iter().map(Vec::as_slice).collect();
            let sizes: Vec<Option<usize>> = data.iter().map(|d| Some(d.len())).collect();
            let algorithm = spec.algorithm.unwrap();
            let back = decompress_many(&offload, algorithm, None, &prefs, &sizes, 1 << 20);
            for (b, d) in back.into_iter().zip(&data) {
                assert_eq!(&b.unwrap(), d, "{name}");
            }
        }
        let zstd: CompressSpec = "zstd:1".parse().unwrap();
        let frames = compress_many(&offload, zstd, None, &refs);
        let mut prefs: Vec<&[u8]> = frames
            .iter()
            .map(|f| f.as_ref().unwrap().as_slice())
            .collect();
        prefs[3] = b"not a frame";
        let back = decompress_many(&offload, Algorithm::Zstd, None, &prefs, &[], 1 << 20);
        assert!(back[3].is_err());
        assert_eq!(back[4].as_ref().unwrap(), &data[4], "sizes from the frames");
        let lz4 = decompress_many(&offload, Algorithm::Lz4, None, &prefs[..1], &[], 1 << 20);
        let want = FrameError::UnknownSize {
            algorithm: Algorithm::Lz4,
        };
        assert_eq!(lz4[0], Err(want));
        let huge = vec![0u8; engine.max_extent() + 1];
        assert!(compress_many(&offload, zstd, None, &[&huge])[0].is_err());
    }

    #[test]
    fn lzo_refuses_what_its_framing_cannot_hold() {
        let engine = engine();
        let spec = CompressSpec::default_for(Algorithm::Lzo);
        let err = compress(&engine, spec, None, &noise(100_000)).unwrap_err();
        assert!(err.to_string().contains("does not compress"), "{err}");
        let err = compress(&engine, spec, None, &text(5 << 20)).unwrap_err();
        assert!(err.to_string().contains("larger than 4 MiB"), "{err}");
        assert!(compress(&engine, spec, None, &noise(4096)).is_ok());
    }

    #[test]
    fn no_copies_and_a_short_buffer_says_what_it_needs() {
        let engine = engine();
        let none = CompressSpec::parse("no").unwrap().0;
        assert_eq!(compress(&engine, none, None, b"abc").unwrap(), b"abc");
        let spec = CompressSpec::default_for(Algorithm::Zstd);
        let mut small = [0u8; 4];
        let err = compress_into(&engine, spec, None, &text(10_000), &mut small).unwrap_err();
        assert!(matches!(
            err,
            FrameError::Codec(Error::ShortBuffer { got: 4, .. })
        ));
    }

    #[test]
    fn growth_stops_at_max_size_and_corrupt_input_is_an_error() {
        let engine = engine();
        let spec = CompressSpec::default_for(Algorithm::Zlib);
        let packed = compress(&engine, spec, None, &vec![0u8; 1 << 20]).unwrap();
        let err = decompress(&engine, Algorithm::Zlib, None, &packed, None, 100_000);
        assert_eq!(err.unwrap_err(), FrameError::TooLarge { max_size: 100_000 });
        for algorithm in Algorithm::ALL {
            let r = decompress(&engine, algorithm, None, &[0xff; 100], None, 1 << 20);
            assert!(r.is_err(), "{algorithm} accepted garbage");
        }
    }

    #[test]
    fn dictionaries_round_trip_and_other_algorithms_refuse_them() {
        let engine = engine();
        let samples: Vec<Vec<u8>> = (0..400).map(|i| text(300 + i)).collect();
        let refs: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
        let dict = Dictionary::train(&refs, 16 * 1024).unwrap();
        let spec = CompressSpec::default_for(Algorithm::Zstd);
        for n in [500, 300 * 1024] {
            let data = text(n);
            let packed = compress(&engine, spec, Some(&dict), &data).unwrap();
            let back = decompress(
                &engine,
                Algorithm::Zstd,
                Some(&dict),
                &packed,
                None,
                1 << 30,
            );
            assert_eq!(back.unwrap(), data);
        }
        let lz4 = CompressSpec::default_for(Algorithm::Lz4);
        let err = compress(&engine, lz4, Some(&dict), b"x").unwrap_err();
        assert_eq!(err, FrameError::Codec(Error::NoDictionary(Algorithm::Lz4)));
    }
}
