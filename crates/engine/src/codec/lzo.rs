//! lzo, as fs/btrfs/lzo.c stores it: LZO1X-1 per 4 KiB sector in btrfs's segment framing.
//!
//! The algorithm and the framing live in the `wring-lzo` crate (safe Rust); this adapter gives
//! them a workspace: the compressor's dictionary, reused for every extent.

use wring_lzo::btrfs::{compress_extent, decompress_extent};
use wring_lzo::CompressState;

use super::{AllocError, Codec, CodecState};
use crate::error::Error;
use crate::spec::Algorithm;
use crate::BLOCK_SIZE;

/// lzo's sizing: one class, the dictionary (LZO1X_1_MEM_COMPRESS).
pub(crate) struct LzoCodec;

impl Codec for LzoCodec {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Lzo
    }

    fn estimate_bytes(&self, _class: usize) -> usize {
        CompressState::BYTES
    }

    fn alloc(&self, _class: usize, _bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        let dict = CompressState::try_new().ok_or(AllocError {
            bytes: CompressState::BYTES,
        })?;
        Ok(Box::new(LzoState { dict }))
    }
}

struct LzoState {
    dict: CompressState,
}

impl CodecState for LzoState {
    fn compress(
        &mut self,
        _level: i32,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        compress_extent(src, dst, BLOCK_SIZE, &mut self.dict).map_err(|e| Error::Library {
            algorithm: Algorithm::Lzo,
            reason: e.to_string(),
        })
    }

    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        decompress_extent(src, dst, BLOCK_SIZE).map_err(|e| match e {
            wring_lzo::Error::OutputOverrun => Error::Oversized {
                algorithm: Algorithm::Lzo,
                limit: dst.len(),
            },
            other => Error::corrupt(Algorithm::Lzo, other.to_string()),
        })
    }
}
