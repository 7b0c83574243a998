//! LZ4 block format, as zram's lz4 and lz4hc backends (crypto/lz4.c, lz4hc.c) store a page:
//! the raw block, no frame, with the compressor's state kept in the workspace.
//!
//! Differs from zram in working on extents of up to 128 KiB instead of single pages.
//!
//! The state is initialised once, when the workspace is made. lz4hc then resets it the cheap
//! way on every extent (`LZ4_compress_HC_extStateHC_fastReset`): `LZ4_compress_HC_extStateHC`
//! clears its whole 256 KiB state first, and on 4 KiB pages the fast reset made lz4hc:9 15%
//! faster (65 → 75 MB/s, one thread, `wring bench blk`'s page table). lz4 keeps
//! `LZ4_compress_fast_extState`, which clears the 16 KiB table on every call, as the kernel's
//! lz4 backend (crypto/lz4.c, LZ4_compress_fast with a wrkmem) does: its `_fastReset` twin,
//! tried for issue 31, compressed 4 KiB pages 8–9% slower (387–391 → 354–355 MB/s): with a
//! table not cleared, every match candidate goes through the checks for stale entries, which
//! costs more than the memset it saves. Decoding needs no state:
//! [`Codec::decompress_stateless`].

use std::os::raw::{c_char, c_int, c_void};

use super::{aligned_buffer, AllocError, Codec, CodecState};
use crate::error::Error;
use crate::spec::Algorithm;

// The "extState" entry points exist in the liblz4 that lz4-sys builds and links, but lz4-sys
// does not declare them; they let the state live in memory we own instead of on the stack or heap.
extern "C" {
    fn LZ4_sizeofState() -> c_int;
    fn LZ4_initStream(buffer: *mut c_void, size: usize) -> *mut c_void;
    fn LZ4_compress_fast_extState(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        dst_capacity: c_int,
        acceleration: c_int,
    ) -> c_int;
    fn LZ4_decompress_safe_partial(
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        target_output_size: c_int,
        dst_capacity: c_int,
    ) -> c_int;
    fn LZ4_sizeofStateHC() -> c_int;
    fn LZ4_initStreamHC(buffer: *mut c_void, size: usize) -> *mut c_void;
    fn LZ4_compress_HC_extStateHC_fastReset(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        dst_capacity: c_int,
        level: c_int,
    ) -> c_int;
}

/// lz4 or lz4hc: one size class, the compressor's state.
pub(crate) struct Lz4Codec {
    pub(crate) hc: bool,
}

impl Codec for Lz4Codec {
    fn algorithm(&self) -> Algorithm {
        if self.hc {
            Algorithm::Lz4hc
        } else {
            Algorithm::Lz4
        }
    }

    fn estimate_bytes(&self, _class: usize) -> usize {
        // SAFETY: pure size queries.
        unsafe {
            (if self.hc {
                LZ4_sizeofStateHC()
            } else {
                LZ4_sizeofState()
            }) as usize
        }
    }

    fn alloc(&self, class: usize, _bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        let bytes = self.estimate_bytes(class);
        let mut state = aligned_buffer(bytes)?;
        let buf = state.as_mut_ptr().cast();
        // SAFETY: `buf` is 8-byte aligned (what LZ4_stream_t and LZ4_streamHC_t need) and
        // `bytes` long, the size the library asked for; both return NULL only for a buffer
        // that is misaligned or too small.
        let init = unsafe {
            if self.hc {
                LZ4_initStreamHC(buf, bytes)
            } else {
                LZ4_initStream(buf, bytes)
            }
        };
        if init.is_null() {
            return Err(AllocError { bytes });
        }
        Ok(Box::new(Lz4State { state, hc: self.hc }))
    }

    fn decompress_stateless(&self, src: &[u8], dst: &mut [u8]) -> Option<Result<usize, Error>> {
        Some(decompress(self.algorithm(), src, dst))
    }
}

struct Lz4State {
    state: Box<[u64]>,
    hc: bool,
}

impl CodecState for Lz4State {
    fn compress(&mut self, level: i32, src: &[u8], dst: &mut [u8]) -> Result<Option<usize>, Error> {
        let (Ok(src_len), Ok(cap)) = (c_int::try_from(src.len()), c_int::try_from(dst.len()))
        else {
            return Ok(None);
        };
        let state = self.state.as_mut_ptr().cast();
        let (s, d) = (src.as_ptr().cast(), dst.as_mut_ptr().cast());
        // SAFETY: the state buffer is 8-byte aligned, LZ4_sizeofState(HC) bytes long and was
        // initialised by LZ4_initStream(HC) when the workspace was made; every compression
        // leaves it initialised, which is all the HC fastReset variant asks (the plain lz4
        // call clears it itself). The pointers and lengths come from live slices.
        let n = unsafe {
            if self.hc {
                LZ4_compress_HC_extStateHC_fastReset(state, s, d, src_len, cap, level)
            } else {
                LZ4_compress_fast_extState(state, s, d, src_len, cap, 1)
            }
        };
        Ok((n > 0).then_some(n as usize))
    }

    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        let algorithm = if self.hc {
            Algorithm::Lz4hc
        } else {
            Algorithm::Lz4
        };
        decompress(algorithm, src, dst)
    }
}

/// One lz4 block into `dst` (lz4 and lz4hc share the format); no state.
fn decompress(algorithm: Algorithm, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let (Ok(src_len), Ok(cap)) = (c_int::try_from(src.len()), c_int::try_from(dst.len())) else {
        return Err(Error::corrupt(algorithm, "extent too large for lz4"));
    };
    // SAFETY: LZ4_decompress_safe never reads past src_len nor writes past cap.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(src.as_ptr().cast(), dst.as_mut_ptr().cast(), src_len, cap)
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    if cap == 0 {
        // Into no room, lz4 refuses every block but the one empty block ([0]), so "filled
        // the whole buffer" below would call any garbage oversized: ask a 1-byte buffer
        // instead (found by the frame_decompress fuzz target: [0x05] decoded to nothing in
        // 64 KiB, and was "oversized" for 0 bytes).
        return match decompress(algorithm, src, &mut [0u8; 1]) {
            Ok(0) => Ok(0),
            Ok(_) | Err(Error::Oversized { .. }) => Err(Error::Oversized {
                algorithm,
                limit: 0,
            }),
            Err(e) => Err(e),
        };
    }
    // LZ4_decompress_safe gives one error for both; a block that fills the whole buffer
    // when decoding stops there is one that decodes to more than the extent holds.
    // SAFETY: as above; the partial decoder writes at most cap bytes.
    let filled = unsafe {
        LZ4_decompress_safe_partial(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            src_len,
            cap,
            cap,
        )
    };
    Err(match filled == cap {
        true => Error::Oversized {
            algorithm,
            limit: dst.len(),
        },
        false => Error::corrupt(algorithm, "malformed block"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_destination_agrees_with_a_large_one() {
        for src in [&[0x05u8][..], &[0x00], &[0xff, 0x00], &[0x10, b'a']] {
            let big = decompress(Algorithm::Lz4, src, &mut [0u8; 65536]);
            let empty = decompress(Algorithm::Lz4, src, &mut []);
            match big {
                Ok(0) => assert_eq!(empty, Ok(0), "{src:?}"),
                Ok(_) => {
                    let want = Error::Oversized {
                        algorithm: Algorithm::Lz4,
                        limit: 0,
                    };
                    assert_eq!(empty, Err(want), "{src:?}")
                }
                Err(_) => assert!(empty.is_err(), "{src:?}"),
            }
        }
    }

    /// Text-like bytes that differ with `seed`.
    fn input(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let words: [&[u8]; 6] = [b"page ", b"extent ", b"zram ", b"btrfs ", b"lz4 ", b"\n"];
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(words[(x % 6) as usize]);
            if x.is_multiple_of(5) {
                out.push(x as u8);
            }
        }
        out.truncate(len);
        out
    }

    /// One state, reused without a full reset between calls (lz4hc), compresses inputs of every
    /// size class lz4 treats apart (under 64 KiB: 16-bit table; above: 32-bit), in any order, also right
    /// after a compression that did not fit: each decodes to its input, at the size a fresh
    /// state gives.
    #[test]
    fn one_state_reset_fast_serves_every_size_in_any_order() {
        for hc in [false, true] {
            let codec = Lz4Codec { hc };
            let mut state = codec.alloc(0, codec.estimate_bytes(0)).unwrap();
            let sizes = [
                4096, 100, 131_072, 4096, 70_000, 1, 65_535, 65_536, 4096, 12_000,
            ];
            let level = if hc { 9 } else { 1 };
            for (i, &len) in sizes.iter().enumerate() {
                let src = input(i as u64, len);
                if i % 3 == 1 {
                    // Too small to fit: Ok(None), and the state stays usable.
                    let mut tiny = [0u8; 1];
                    assert_eq!(state.compress(level, &src, &mut tiny).unwrap(), None);
                }
                let mut dst = vec![0u8; len + len / 255 + 16];
                let n = state.compress(level, &src, &mut dst).unwrap().unwrap();
                let mut fresh = codec.alloc(0, codec.estimate_bytes(0)).unwrap();
                let mut again = vec![0u8; dst.len()];
                let m = fresh.compress(level, &src, &mut again).unwrap().unwrap();
                assert_eq!(n, m, "hc={hc} {len} bytes: reused state {n}, fresh {m}");
                let mut back = vec![0u8; len];
                let stateless = codec.decompress_stateless(&dst[..n], &mut back).unwrap();
                assert_eq!(stateless.unwrap(), len);
                assert!(back == src, "hc={hc}: {len} bytes decoded wrong");
            }
        }
    }
}
