//! zlib, as fs/btrfs/zlib.c writes it: a zlib-wrapped deflate stream (window 2^15, memLevel 8)
//! over the whole extent, the level set per call on a reused stream. The streams themselves
//! ([`DeflateStreams`]) serve zram's raw `deflate` too (`codec::deflate`), without the header.
//!
//! Differs from the kernel in checking the adler32 trailer on decompression (the kernel skips it)
//! and in using zlib-rs through flate2 rather than the kernel's zlib. A panic inside zlib-rs
//! fails the extent and replaces the streams rather than reaching the caller.

use std::panic::{catch_unwind, AssertUnwindSafe};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::{AllocError, Codec, CodecState};
use crate::error::Error;
use crate::spec::Algorithm;

/// deflate's window bits and memLevel, the kernel's MAX_WBITS and DEF_MEM_LEVEL.
pub(super) const WINDOW_BITS: u8 = 15;
const MEM_LEVEL: u32 = 8;
/// zlib's internal state structures, beyond the buffers the formula counts (zconf.h's "plus a
/// few kilobytes for small objects").
const DEFLATE_STATE: usize = 6 * 1024;
const INFLATE_STATE: usize = 7 * 1024;

/// zlib's sizing: one class, the same for every level (zlib_alloc_workspace).
pub(crate) struct ZlibCodec;

impl Codec for ZlibCodec {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Zlib
    }

    fn estimate_bytes(&self, _class: usize) -> usize {
        estimate_bytes()
    }

    fn alloc(&self, _class: usize, bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        Ok(Box::new(DeflateStreams::new(Framing::Zlib, bytes)?))
    }
}

/// zconf.h: deflate needs (1 << (windowBits+2)) + (1 << (memLevel+9)) bytes, inflate
/// (1 << windowBits), each plus a few KB of state — with or without zlib's header.
pub(super) fn estimate_bytes() -> usize {
    (1 << (WINDOW_BITS + 2))
        + (1 << (MEM_LEVEL + 9))
        + DEFLATE_STATE
        + (1 << WINDOW_BITS)
        + INFLATE_STATE
}

/// What wraps the deflate stream: zlib's header and Adler-32 (btrfs's zlib), or nothing
/// (zram's raw `deflate`, see `codec::deflate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// A zlib stream; bytes after its end are ignored, as the kernel ignores them.
    Zlib,
    /// Raw deflate; an object must be the stream and nothing more (zram stores exactly it).
    Raw,
}

impl Framing {
    fn algorithm(self) -> Algorithm {
        match self {
            Framing::Zlib => Algorithm::Zlib,
            Framing::Raw => Algorithm::Deflate,
        }
    }

    fn header(self) -> bool {
        self == Framing::Zlib
    }
}

/// A deflate and an inflate stream, or `None` when zlib-rs could not allocate them.
///
/// zlib-rs makes one allocation per stream (deflate's window, hash chains and pending buffer
/// together; inflate's state and window together) through Rust's global allocator, checks it
/// and returns Z_MEM_ERROR; but its stable `Deflate::new`/`Inflate::new`, which flate2 calls,
/// then `assert_eq!` that the init succeeded. So the failure arrives here as a panic, caught and
/// turned into `None`: nothing is left allocated (zlib-rs frees on a failed init) and no lock
/// is held. The panic hook still prints the assertion; that is the one trace this leaves.
/// Built with `panic = "abort"` (cargo-fuzz does) the failure still aborts: the only build in
/// which these two allocations stay fatal.
fn new_streams(framing: Framing, level: i32) -> Option<(Compress, Decompress)> {
    catch_unwind(|| {
        (
            Compress::new_with_window_bits(
                Compression::new(level as u32),
                framing.header(),
                WINDOW_BITS,
            ),
            Decompress::new_with_window_bits(framing.header(), WINDOW_BITS),
        )
    })
    .ok()
}

/// The working half of a zlib or raw deflate workspace: one deflate and one inflate stream,
/// reset for every extent, the level set per call.
pub(super) struct DeflateStreams {
    framing: Framing,
    deflate: Compress,
    inflate: Decompress,
    level: i32,
    /// Where an abandoned stream is drained (see [`DeflateStreams::drain`]).
    scratch: Box<[u8]>,
}

/// Size of the drain buffer; draining loops, so any size works.
const SCRATCH: usize = 4096;

impl DeflateStreams {
    /// Streams for `framing`, warmed up so that every lazily allocated buffer exists.
    pub(super) fn new(framing: Framing, bytes: usize) -> Result<DeflateStreams, AllocError> {
        let fail = AllocError { bytes };
        let level = framing.algorithm().default_level();
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(SCRATCH).map_err(|_| fail)?;
        scratch.resize(SCRATCH, 0);
        let (deflate, inflate) = new_streams(framing, level).ok_or(fail)?;
        let mut state = DeflateStreams {
            framing,
            deflate,
            inflate,
            level,
            scratch: scratch.into_boxed_slice(),
        };
        state.warm_up().map_err(|_| fail)?;
        Ok(state)
    }

    /// Run one tiny round trip so that every lazily allocated buffer exists before the
    /// workspace is handed out; an error means one could not be allocated.
    fn warm_up(&mut self) -> Result<(), Error> {
        let src = [0u8; 64];
        let mut packed = [0u8; 128];
        let mut out = [0u8; 64];
        let n = self
            .compress(self.level, &src, &mut packed)?
            .ok_or_else(|| self.library("64 zero bytes did not fit in 128"))?;
        let packed = packed
            .get(..n)
            .ok_or_else(|| self.library("the warm-up claimed more than its buffer"))?;
        self.decompress(packed, &mut out)?;
        Ok(())
    }

    fn library(&self, e: impl std::fmt::Display) -> Error {
        Error::Library {
            algorithm: self.framing.algorithm(),
            reason: e.to_string(),
        }
    }

    /// Finish a stream abandoned because its output did not fit, discarding the rest.
    /// zlib-rs's level-1 (deflate_quick) path keeps an open block across `reset()` when a
    /// stream was left unfinished, and the next stream then lacks its block header (or, at
    /// other levels, panicked in 0.6.8's block flush: "buf.len() must fit in remaining()");
    /// a stream run to its end resets cleanly.
    fn drain(&mut self, src: &[u8]) -> Result<(), Error> {
        loop {
            let rest = src
                .get(self.deflate.total_in() as usize..)
                .unwrap_or_default();
            let status = self
                .deflate
                .compress(rest, &mut self.scratch, FlushCompress::Finish)
                .map_err(|e| self.library(e))?;
            if status == Status::StreamEnd {
                return Ok(());
            }
        }
    }

    fn try_compress(
        &mut self,
        level: i32,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        self.deflate.reset();
        if level != self.level {
            self.deflate
                .set_level(Compression::new(level as u32))
                .map_err(|e| self.library(e))?;
            self.level = level;
        }
        match self
            .deflate
            .compress(src, dst, FlushCompress::Finish)
            .map_err(|e| self.library(e))?
        {
            Status::StreamEnd => Ok(Some(self.deflate.total_out() as usize)),
            Status::Ok | Status::BufError => {
                self.drain(src)?;
                Ok(None)
            }
        }
    }

    fn try_decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        let algorithm = self.framing.algorithm();
        self.inflate.reset(self.framing.header());
        let status = self
            .inflate
            .decompress(src, dst, FlushDecompress::Finish)
            .map_err(|e| Error::corrupt(algorithm, e.to_string()))?;
        let (consumed, produced) = (
            self.inflate.total_in() as usize,
            self.inflate.total_out() as usize,
        );
        match status {
            Status::StreamEnd if self.framing == Framing::Raw && consumed < src.len() => {
                Err(Error::corrupt(
                    algorithm,
                    format!("{} bytes after the end of the stream", src.len() - consumed),
                ))
            }
            Status::StreamEnd => Ok(produced),
            _ if produced == dst.len() && consumed < src.len() => Err(Error::Oversized {
                algorithm,
                limit: dst.len(),
            }),
            _ => Err(Error::corrupt(
                algorithm,
                "stream ends before its end marker",
            )),
        }
    }

    /// After a panic inside zlib-rs: the streams may be in any state, so they are replaced
    /// (never reused, as a context that panicked was never given back before the engine had
    /// raw deflate), and the extent fails.
    fn recover(&mut self, what: &str) -> Error {
        match new_streams(self.framing, self.level) {
            Some((deflate, inflate)) => {
                self.deflate = deflate;
                self.inflate = inflate;
            }
            None => log::error!(
                "{}: could not replace streams after a panic; keeping the old ones",
                self.framing.algorithm()
            ),
        }
        self.library(format!(
            "the deflate library panicked while {what} this extent"
        ))
    }
}

impl CodecState for DeflateStreams {
    fn compress(&mut self, level: i32, src: &[u8], dst: &mut [u8]) -> Result<Option<usize>, Error> {
        match catch_unwind(AssertUnwindSafe(|| self.try_compress(level, src, dst))) {
            Ok(r) => r,
            Err(_) => Err(self.recover("compressing")),
        }
    }

    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        match catch_unwind(AssertUnwindSafe(|| self.try_decompress(src, dst))) {
            Ok(r) => r,
            Err(_) => Err(self.recover("decompressing")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Regression: an incompressible extent followed by a compressible one on the same
    /// workspace must still give a valid stream at every level (zlib-rs level 1 did not).
    #[test]
    fn incompressible_extent_does_not_poison_the_next_stream() {
        let text: Vec<u8> = b"btrfs zlib extent "
            .iter()
            .cycle()
            .take(64 * 1024)
            .copied()
            .collect();
        let random = noise(128 * 1024);
        for level in 1..=9 {
            let mut st = ZlibCodec.alloc(0, 0).unwrap();
            let mut small = vec![0u8; 100_000];
            assert_eq!(st.compress(level, &random, &mut small).unwrap(), None);
            let mut packed = vec![0u8; text.len()];
            let n = st
                .compress(level, &text, &mut packed)
                .unwrap()
                .expect("text compresses");
            let mut back = vec![0u8; text.len()];
            let mut fresh = Decompress::new(true);
            let r = fresh.decompress(&packed[..n], &mut back, FlushDecompress::Finish);
            assert!(
                matches!(r, Ok(Status::StreamEnd)),
                "level {level}: fresh inflate: {r:?}"
            );
            assert_eq!(
                st.decompress(&packed[..n], &mut back),
                Ok(text.len()),
                "level {level}"
            );
            assert_eq!(back, text);
        }
    }
}
