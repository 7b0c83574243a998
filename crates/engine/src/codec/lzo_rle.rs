//! `lzo-rle`, zram's default algorithm: lib/lzo/lzo1x_compress.c's `lzorle1x_1_compress` (the
//! kernel's LZO1X-1 with zero runs as instructions of their own, bitstream version 1) and
//! lib/lzo/lzo1x_decompress_safe.c, through zcomp's `backend_lzorle.c`: one raw stream per
//! page, no framing.
//!
//! The algorithm lives in `wring-lzo` (safe Rust, a port that writes the kernel's stream byte
//! for byte); this adapter gives it a workspace: the compressor's dictionary (16 KiB of 16-bit
//! offsets, LZO1X_1_MEM_COMPRESS), reused for every extent. One decoder reads both LZO1X and
//! the RLE variant (the stream's first bytes say which).
//!
//! Differs from zram in taking extents larger than a page (the stream has no limit of its own;
//! the kernel cuts blocks of 48 KiB inside it as here). btrfs's `lzo` is the framed LZO1X-1 of
//! `codec::lzo`; btrfs has no lzo-rle type: [`crate::CompressSpec::btrfs_option`] says so.

use wring_lzo::CompressState;

use super::lzo::decode_error;
use super::CodecState;
use crate::error::Error;
use crate::spec::Algorithm;

/// lzo-rle's state in a workspace; sized and made by [`LzoCodec`](super::lzo::LzoCodec).
pub(super) struct LzoRleState {
    dict: CompressState,
}

impl LzoRleState {
    /// A state compressing with `dict`.
    pub(super) fn new(dict: CompressState) -> LzoRleState {
        LzoRleState { dict }
    }
}

impl CodecState for LzoRleState {
    fn compress(
        &mut self,
        _level: i32,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        match wring_lzo::compress_rle(src, dst, &mut self.dict) {
            Ok(n) => Ok(Some(n)),
            Err(wring_lzo::Error::OutputOverrun) => Ok(None),
            Err(e) => Err(Error::Library {
                algorithm: Algorithm::LzoRle,
                reason: e.to_string(),
            }),
        }
    }

    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        decompress(src, dst)
    }
}

/// zram's lzo-rle stream: one page (or extent) into `dst`.
pub(super) fn decompress(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let limit = dst.len();
    wring_lzo::decompress(src, dst).map_err(|e| decode_error(Algorithm::LzoRle, e, limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::lzo::LzoCodec;
    use crate::codec::Codec;

    #[test]
    fn the_kernels_stream_and_one_decoder_for_both_variants() {
        let mut st = LzoCodec(Algorithm::LzoRle)
            .alloc(0, 0)
            .expect("a workspace");
        let mut page = vec![0u8; 4096];
        page[..200].copy_from_slice(&b"zram's lzo-rle ".repeat(14)[..200]);
        let mut out = vec![0u8; 4096];
        let n = st.compress(0, &page, &mut out).unwrap().expect("fits");
        assert_eq!(&out[..2], &[17, wring_lzo::RLE_VERSION], "the RLE header");
        let mut back = vec![0u8; 4096];
        assert_eq!(st.decompress(&out[..n], &mut back), Ok(4096));
        assert_eq!(back, page);
        // Plain LZO1X (zram's `lzo`) decodes with the same decoder.
        let mut plain = vec![0u8; wring_lzo::worst_compress(4096)];
        let m = wring_lzo::compress(&page, &mut plain, &mut CompressState::new()).unwrap();
        assert_eq!(st.decompress(&plain[..m], &mut back), Ok(4096));
        assert_eq!(
            st.decompress(&out[..n], &mut back[..100]),
            Err(Error::Oversized {
                algorithm: Algorithm::LzoRle,
                limit: 100
            })
        );
        let noise = wring_testing::random_bytes(3, 4096);
        assert_eq!(st.compress(0, &noise, &mut out[..4000]), Ok(None));
        assert!(matches!(
            st.decompress(&[0xff; 30], &mut back),
            Err(Error::Corrupt { .. })
        ));
    }
}
