//! One btrfs extent in the kernel's on-disk formats (the bridge's `codec`): what
//! BTRFS_IOC_ENCODED_WRITE takes and ENCODED_READ gives.

use std::ffi::c_char;

use wring_btrfs::codec::{decode_extent, encode_extent};
use wring_btrfs::Compression;

use crate::call::{guard, input, output, put, wring_status, Failure};
use crate::oneshot::oneshot_engine;

/// Compress at most 128 KiB of `src` as btrfs stores it under `spec` (zlib, lzo or zstd, any
/// level): `*dst_len` bytes in `dst` and `*compression` the kernel's encoding value
/// (`BTRFS_ENCODED_IO_COMPRESSION_*`: 1 zlib, 2 zstd, 3 lzo on 4 KiB sectors).
/// `WRING_INCOMPRESSIBLE` when it would not save a sector, so the kernel would store the
/// range raw. A `dst` of `src_len` bytes is always enough.
///
/// # Safety
/// `spec` is a NUL-terminated string; `src` holds `src_len` bytes; `dst` has `dst_cap`
/// writable bytes not overlapping `src`; `dst_len` and `compression` are writable.
#[no_mangle]
pub unsafe extern "C" fn wring_btrfs_encode_extent(
    spec: *const c_char,
    src: *const u8,
    src_len: usize,
    dst: *mut u8,
    dst_cap: usize,
    dst_len: *mut usize,
    compression: *mut u32,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract, for each argument.
        let (spec, src, dst) = unsafe {
            (
                crate::call::spec(spec)?,
                input(src, src_len, "src")?,
                output(dst, dst_cap)?,
            )
        };
        let Some((encoding, bytes)) = encode_extent(oneshot_engine(), spec, src)? else {
            return Ok(wring_status::WRING_INCOMPRESSIBLE);
        };
        let out = dst.get_mut(..bytes.len()).ok_or_else(|| {
            Failure::from(wring_engine::Error::ShortBuffer {
                got: dst_cap,
                need: bytes.len(),
            })
        })?;
        out.copy_from_slice(&bytes);
        let raw = encoding.to_raw().unwrap_or_default();
        // SAFETY: the caller's contract.
        unsafe {
            put(dst_len, bytes.len(), "dst_len")?;
            put(compression, raw, "compression")?;
        }
        Ok(wring_status::WRING_OK)
    })
}

/// Decode one extent of the kernel's encoding `compression` that declares `ram_bytes`
/// decoded bytes into `dst` (`ram_bytes` of them; a stream that ends early leaves zeros, as
/// the kernel's read path does).
///
/// # Safety
/// `src` holds `src_len` bytes; `dst` has `ram_bytes` writable bytes not overlapping `src`.
#[no_mangle]
pub unsafe extern "C" fn wring_btrfs_decode_extent(
    compression: u32,
    src: *const u8,
    src_len: usize,
    dst: *mut u8,
    ram_bytes: usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract, for each argument.
        let (src, dst) = unsafe { (input(src, src_len, "src")?, output(dst, ram_bytes)?) };
        let decoded = decode_extent(
            oneshot_engine(),
            Compression::from_raw(compression),
            src,
            ram_bytes,
        )?;
        dst.copy_from_slice(&decoded);
        Ok(wring_status::WRING_OK)
    })
}
