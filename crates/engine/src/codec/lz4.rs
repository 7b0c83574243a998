//! LZ4 block format, as zram's lz4 and lz4hc backends (crypto/lz4.c, lz4hc.c) store a page:
//! the raw block, no frame, with the compressor's state kept in the workspace.
//!
//! Differs from zram in working on extents of up to 128 KiB instead of single pages.

use std::os::raw::{c_char, c_int, c_void};

use super::{aligned_buffer, AllocError, Codec, CodecState};
use crate::error::Error;
use crate::spec::Algorithm;

// The "extState" entry points exist in the liblz4 that lz4-sys builds and links, but lz4-sys
// does not declare them; they let the state live in memory we own instead of on the stack or heap.
extern "C" {
    fn LZ4_sizeofState() -> c_int;
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
    fn LZ4_compress_HC_extStateHC(
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
        let state = aligned_buffer(self.estimate_bytes(class))?;
        Ok(Box::new(Lz4State { state, hc: self.hc }))
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
        // SAFETY: the state buffer is 8-byte aligned and LZ4_sizeofState(HC) bytes long; the
        // pointers and lengths come from live slices.
        let n = unsafe {
            if self.hc {
                LZ4_compress_HC_extStateHC(state, s, d, src_len, cap, level)
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
        let (Ok(src_len), Ok(cap)) = (c_int::try_from(src.len()), c_int::try_from(dst.len()))
        else {
            return Err(Error::corrupt(algorithm, "extent too large for lz4"));
        };
        // SAFETY: LZ4_decompress_safe never reads past src_len nor writes past cap.
        let n = unsafe {
            lz4_sys::LZ4_decompress_safe(src.as_ptr().cast(), dst.as_mut_ptr().cast(), src_len, cap)
        };
        if n >= 0 {
            return Ok(n as usize);
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
}
