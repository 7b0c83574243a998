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

/// The sizing both LZO1X variants share: one class, the dictionary (LZO1X_1_MEM_COMPRESS).
/// `LzoCodec(Algorithm::Lzo)` is btrfs's framed lzo (this module's state),
/// `LzoCodec(Algorithm::LzoRle)` zram's lzo-rle stream (`codec::lzo_rle`'s).
pub(crate) struct LzoCodec(pub(crate) Algorithm);

impl Codec for LzoCodec {
    fn algorithm(&self) -> Algorithm {
        self.0
    }

    fn estimate_bytes(&self, _class: usize) -> usize {
        CompressState::BYTES
    }

    fn alloc(&self, _class: usize, _bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        let dict = CompressState::try_new().ok_or(AllocError {
            bytes: CompressState::BYTES,
        })?;
        Ok(match self.0 {
            Algorithm::LzoRle => Box::new(super::lzo_rle::LzoRleState::new(dict)),
            _ => Box::new(LzoState { dict }),
        })
    }

    fn decompress_stateless(&self, src: &[u8], dst: &mut [u8]) -> Option<Result<usize, Error>> {
        Some(match self.0 {
            Algorithm::LzoRle => super::lzo_rle::decompress(src, dst),
            _ => decompress(src, dst),
        })
    }
}

/// btrfs's framed lzo: one extent into `dst`.
fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let limit = dst.len();
    decompress_extent(src, dst, BLOCK_SIZE).map_err(|e| decode_error(Algorithm::Lzo, e, limit))
}

/// A decoder's error as the engine's: an overrun is output past `limit`, anything else corrupt
/// input (both variants decode with wring-lzo's one LZO1X decoder).
pub(super) fn decode_error(algorithm: Algorithm, e: wring_lzo::Error, limit: usize) -> Error {
    match e {
        wring_lzo::Error::OutputOverrun => Error::Oversized { algorithm, limit },
        other => Error::corrupt(algorithm, other.to_string()),
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
        decompress(src, dst)
    }
}
