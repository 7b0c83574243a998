//! zlib, as fs/btrfs/zlib.c writes it: a zlib-wrapped deflate stream (window 2^15, memLevel 8)
//! over the whole extent, the level set per call on a reused stream.
//!
//! Differs from the kernel in checking the adler32 trailer on decompression (the kernel skips it)
//! and in using zlib-rs through flate2 rather than the kernel's zlib.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::{AllocError, Codec, CodecState};
use crate::error::Error;
use crate::spec::Algorithm;

/// deflate's window bits and memLevel, the kernel's MAX_WBITS and DEF_MEM_LEVEL.
const WINDOW_BITS: u32 = 15;
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

    /// zconf.h: deflate needs (1 << (windowBits+2)) + (1 << (memLevel+9)) bytes, inflate
    /// (1 << windowBits), each plus a few KB of state.
    fn estimate_bytes(&self, _class: usize) -> usize {
        (1 << (WINDOW_BITS + 2))
            + (1 << (MEM_LEVEL + 9))
            + DEFLATE_STATE
            + (1 << WINDOW_BITS)
            + INFLATE_STATE
    }

    fn alloc(&self, _class: usize, _bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        let level = Algorithm::Zlib.default_level();
        let mut state = ZlibState {
            deflate: Compress::new(Compression::new(level as u32), true),
            inflate: Decompress::new(true),
            level,
        };
        state.warm_up();
        Ok(Box::new(state))
    }
}

struct ZlibState {
    deflate: Compress,
    inflate: Decompress,
    level: i32,
}

impl ZlibState {
    /// Run one tiny round trip so that every lazily allocated buffer (inflate's window) exists
    /// before the workspace is handed out.
    fn warm_up(&mut self) {
        let src = [0u8; 64];
        let mut packed = [0u8; 128];
        let mut out = [0u8; 64];
        if let Ok(Some(n)) = self.compress(self.level, &src, &mut packed) {
            let _ = self.decompress(&packed[..n], &mut out);
        }
    }
}

impl CodecState for ZlibState {
    fn compress(&mut self, level: i32, src: &[u8], dst: &mut [u8]) -> Result<Option<usize>, Error> {
        self.deflate.reset();
        if level != self.level {
            self.deflate
                .set_level(Compression::new(level as u32))
                .map_err(library)?;
            self.level = level;
        }
        match self
            .deflate
            .compress(src, dst, FlushCompress::Finish)
            .map_err(library)?
        {
            Status::StreamEnd => Ok(Some(self.deflate.total_out() as usize)),
            Status::Ok | Status::BufError => Ok(None),
        }
    }

    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        self.inflate.reset(true);
        let status = self
            .inflate
            .decompress(src, dst, FlushDecompress::Finish)
            .map_err(|e| Error::corrupt(Algorithm::Zlib, e.to_string()))?;
        let (consumed, produced) = (
            self.inflate.total_in() as usize,
            self.inflate.total_out() as usize,
        );
        match status {
            Status::StreamEnd => Ok(produced),
            _ if produced == dst.len() && consumed < src.len() => Err(Error::Oversized {
                algorithm: Algorithm::Zlib,
                limit: dst.len(),
            }),
            _ => Err(Error::corrupt(
                Algorithm::Zlib,
                "stream ends before its end marker",
            )),
        }
    }
}

fn library(e: impl std::fmt::Display) -> Error {
    Error::Library {
        algorithm: Algorithm::Zlib,
        reason: e.to_string(),
    }
}
