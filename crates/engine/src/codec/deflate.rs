//! `deflate`, zram's raw deflate: drivers/block/zram/backend_deflate.c (and crypto/deflate.c
//! before it) compresses each page with `zlib_deflateInit2(level, Z_DEFLATED,
//! -DEFLATE_DEF_WINBITS, MAX_MEM_LEVEL, Z_DEFAULT_STRATEGY)` — no zlib header or checksum,
//! level `Z_DEFAULT_COMPRESSION` (6) unless `algorithm_params level=` says otherwise — and
//! inflates with `-DEFLATE_DEF_WINBITS`.
//!
//! The streams are zlib's ([`super::zlib::DeflateStreams`], flate2 on zlib-rs) without the
//! header: one deflate and one inflate stream per workspace, reset between extents, an
//! abandoned stream run to its end before reuse, a panic inside zlib-rs an error of the extent.
//!
//! Differs from the kernel: zlib-rs's output is not byte-identical to the kernel's zlib (a
//! valid raw deflate stream all the same), its memory level is 8, not 9, and the window is 15
//! bits (32 KiB), not 11, the window btrfs's zlib uses through the same library: a larger
//! window only finds more matches (a 4 KiB page never reaches past 4 KiB; larger extents use
//! all of it), and any inflater with a 32 KiB window reads the result. An extent must be one
//! stream and nothing after it (zram stores exactly the stream). btrfs has no raw deflate
//! type: [`crate::CompressSpec::btrfs_option`] says so.

use super::zlib::{estimate_bytes, DeflateStreams, Framing};
use super::{AllocError, Codec, CodecState};
use crate::spec::Algorithm;

/// Raw deflate's sizing: zlib's, one class for every level.
pub(crate) struct DeflateCodec;

impl Codec for DeflateCodec {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Deflate
    }

    fn estimate_bytes(&self, _class: usize) -> usize {
        estimate_bytes()
    }

    fn alloc(&self, _class: usize, bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        Ok(Box::new(DeflateStreams::new(Framing::Raw, bytes)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    const PAGE: usize = 4096;

    fn text(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                b"raw deflate, as zram's deflate backend writes it. "[i % 50] ^ (i / 997) as u8
            })
            .collect()
    }

    fn state() -> Box<dyn CodecState> {
        DeflateCodec.alloc(0, 0).expect("a workspace")
    }

    fn round_trip(st: &mut dyn CodecState, level: i32, page: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; page.len()];
        let n = st
            .compress(level, page, &mut out)
            .expect("compress")
            .expect("fits");
        out.truncate(n);
        let mut back = vec![0u8; page.len()];
        assert_eq!(st.decompress(&out, &mut back), Ok(page.len()));
        assert_eq!(back, page);
        out
    }

    #[test]
    fn raw_deflate_that_any_inflater_reads() {
        let mut st = state();
        for len in [PAGE, 16 << 10, 32 << 10] {
            let page = text(len);
            let out = round_trip(&mut *st, 6, &page);
            assert!(out.len() < len / 4, "{} of {len}", out.len());
            // No zlib header or checksum: a plain raw inflater reads it back.
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::DeflateDecoder::new(&out[..]), &mut back)
                .unwrap();
            assert_eq!(back, page);
        }
    }

    #[test]
    fn higher_levels_do_not_grow_text() {
        let page = text(PAGE);
        let mut st = state();
        let one = round_trip(&mut *st, 1, &page).len();
        let nine = round_trip(&mut *st, 9, &page).len();
        assert!(nine <= one, "level 9 {nine} > level 1 {one}");
    }

    #[test]
    fn noise_does_not_fit_and_garbage_is_corrupt_not_a_panic() {
        let mut st = state();
        let noise = wring_testing::random_bytes(7, PAGE);
        let mut out = vec![0u8; PAGE - 1];
        assert_eq!(st.compress(6, &noise, &mut out), Ok(None));
        // The workspace that gave up on the noise compresses the next pages right (zlib-rs
        // keeps an unfinished stream's state across reset(); without running it to its end
        // this panicked or wrote a broken stream).
        for _ in 0..3 {
            assert_eq!(st.compress(6, &noise, &mut out), Ok(None));
            round_trip(&mut *st, 6, &text(PAGE));
        }
        let good = round_trip(&mut *st, 6, &text(PAGE));
        let mut back = vec![0u8; PAGE];
        for bad in [&[0xffu8; 40][..], &good[..good.len() / 2], &[][..]] {
            let r = st.decompress(bad, &mut back);
            assert!(matches!(r, Err(Error::Corrupt { .. })), "{r:?}");
        }
        // Bytes after the stream are not part of an object.
        let mut long = good.clone();
        long.push(0);
        let r = st.decompress(&long, &mut back);
        assert!(matches!(r, Err(Error::Corrupt { .. })), "{r:?}");
        // A stream that decodes to more than the destination is oversized.
        let r = st.decompress(&good, &mut back[..PAGE / 2]);
        assert!(matches!(r, Err(Error::Oversized { .. })), "{r:?}");
    }
}
