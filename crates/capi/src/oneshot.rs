//! One-shot calls on buffers of any size, through one process-wide engine (its workspaces are
//! reused from call to call, so a 4 KiB call allocates nothing but its result), and zstd
//! dictionaries.

use std::ffi::c_char;
use std::sync::OnceLock;

use wring_engine::dict::Dictionary;
use wring_engine::{frame, Engine, EngineConfig};

use crate::call::{guard, input, output, put, wring_status, Failure};

/// The engine behind the one-shot calls.
pub(crate) fn oneshot_engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(EngineConfig::default()))
}

/// A zstd dictionary, digested once and shared by every call that names it.
pub struct wring_dict {
    pub(crate) dict: Dictionary,
}

/// The dictionary behind a handle, or none for NULL.
///
/// # Safety
/// `d` is NULL or a live handle from `wring_dict_new`/`wring_train_dict`.
pub(crate) unsafe fn dict<'a>(d: *const wring_dict) -> Option<&'a Dictionary> {
    // SAFETY: NULL or live, per the contract.
    unsafe { d.as_ref() }.map(|d| &d.dict)
}

/// Most bytes `wring_compress` can write for `src_len` input bytes under `spec`.
///
/// # Safety
/// `spec` is a NUL-terminated string; `bound` points to a writable size_t.
#[no_mangle]
pub unsafe extern "C" fn wring_compress_bound(
    spec: *const c_char,
    src_len: usize,
    bound: *mut usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let spec = unsafe { crate::call::spec(spec) }?;
        // SAFETY: the caller's contract.
        unsafe { put(bound, frame::compress_bound(spec, src_len), "bound") }?;
        Ok(wring_status::WRING_OK)
    })
}

/// Compress `src` under `spec` (`zstd:3`, `zlib:9`, `lzo`, `lz4`, ...) into `dst`, in the
/// codec's own format (a zstd frame with its content size, a zlib stream, btrfs's LZO
/// framing, a raw lz4 block); `*dst_len` is set to the bytes written. `dict` is NULL or a
/// zstd dictionary.
///
/// # Safety
/// `spec` is a NUL-terminated string; `src` holds `src_len` bytes (or is NULL with 0); `dst`
/// has `dst_cap` writable bytes not overlapping `src`; `dst_len` is writable; `dict` is NULL
/// or live.
#[no_mangle]
pub unsafe extern "C" fn wring_compress(
    spec: *const c_char,
    dict: *const wring_dict,
    src: *const u8,
    src_len: usize,
    dst: *mut u8,
    dst_cap: usize,
    dst_len: *mut usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract, for each argument.
        let (spec, dict, src, dst) = unsafe {
            (
                crate::call::spec(spec)?,
                self::dict(dict),
                input(src, src_len, "src")?,
                output(dst, dst_cap)?,
            )
        };
        let n = frame::compress_into(oneshot_engine(), spec, dict, src, dst)?;
        // SAFETY: the caller's contract.
        unsafe { put(dst_len, n, "dst_len") }?;
        Ok(wring_status::WRING_OK)
    })
}

/// Decompress `src` of `algorithm` (`zstd`, or a spec whose level is ignored) into `dst`;
/// `*dst_len` is set to the bytes produced. Data that decodes to more than `dst_cap` is
/// `WRING_SHORT_BUFFER`.
///
/// # Safety
/// As `wring_compress`.
#[no_mangle]
pub unsafe extern "C" fn wring_decompress(
    algorithm: *const c_char,
    dict: *const wring_dict,
    src: *const u8,
    src_len: usize,
    dst: *mut u8,
    dst_cap: usize,
    dst_len: *mut usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract, for each argument.
        let (algorithm, dict, src, dst) = unsafe {
            (
                crate::call::algorithm(algorithm)?,
                self::dict(dict),
                input(src, src_len, "src")?,
                output(dst, dst_cap)?,
            )
        };
        let n = match algorithm {
            None => {
                let out = dst
                    .get_mut(..src.len())
                    .ok_or_else(|| short(dst_cap, src.len()))?;
                out.copy_from_slice(src);
                src.len()
            }
            Some(a) => match frame::decompress_into(oneshot_engine(), a, dict, src, dst) {
                Err(frame::FrameError::Codec(wring_engine::Error::Oversized { .. })) => {
                    return Err(Failure(
                        wring_status::WRING_SHORT_BUFFER,
                        format!("the data decodes to more than dst_cap ({dst_cap} bytes)"),
                    ))
                }
                r => r?,
            },
        };
        // SAFETY: the caller's contract.
        unsafe { put(dst_len, n, "dst_len") }?;
        Ok(wring_status::WRING_OK)
    })
}

fn short(got: usize, need: usize) -> Failure {
    wring_engine::Error::ShortBuffer { got, need }.into()
}

/// A dictionary from its bytes (a zstd dictionary, or raw content); `*out` is set to a handle
/// to free with `wring_dict_free`.
///
/// # Safety
/// `bytes` holds `len` bytes; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn wring_dict_new(
    bytes: *const u8,
    len: usize,
    out: *mut *mut wring_dict,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let bytes = unsafe { input(bytes, len, "bytes") }?;
        let dict = Dictionary::new(bytes.to_vec())?;
        let handle = Box::into_raw(Box::new(wring_dict { dict }));
        // SAFETY: the caller's contract.
        unsafe { put(out, handle, "out") }?;
        Ok(wring_status::WRING_OK)
    })
}

/// Train a zstd dictionary of at most `capacity` bytes on `n` samples (`samples[i]` holding
/// `lens[i]` bytes); `*out` is set to a handle to free with `wring_dict_free`.
///
/// # Safety
/// `samples` and `lens` hold `n` entries each, every sample its length in bytes; `out` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn wring_train_dict(
    samples: *const *const u8,
    lens: *const usize,
    n: usize,
    capacity: usize,
    out: *mut *mut wring_dict,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract: n pointers and n lengths.
        let (ptrs, lens) = unsafe {
            (
                std::slice::from_raw_parts(samples, if samples.is_null() { 0 } else { n }),
                std::slice::from_raw_parts(lens, if lens.is_null() { 0 } else { n }),
            )
        };
        if ptrs.len() != n || lens.len() != n {
            return Err(Failure::invalid("samples or lens is NULL"));
        }
        let samples = ptrs
            .iter()
            .zip(lens)
            // SAFETY: each sample holds its length, per the contract.
            .map(|(&p, &len)| unsafe { input(p, len, "a sample") })
            .collect::<Result<Vec<&[u8]>, Failure>>()?;
        let dict = Dictionary::train(&samples, capacity)?;
        let handle = Box::into_raw(Box::new(wring_dict { dict }));
        // SAFETY: the caller's contract.
        unsafe { put(out, handle, "out") }?;
        Ok(wring_status::WRING_OK)
    })
}

/// The dictionary's bytes (to store beside the data): `*bytes` points into the handle, valid
/// until it is freed.
///
/// # Safety
/// `dict` is live; `bytes` and `len` are writable.
#[no_mangle]
pub unsafe extern "C" fn wring_dict_bytes(
    dict: *const wring_dict,
    bytes: *mut *const u8,
    len: *mut usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let d = unsafe { self::dict(dict) }.ok_or_else(|| Failure::invalid("dict is NULL"))?;
        // SAFETY: the caller's contract.
        unsafe {
            put(bytes, d.bytes().as_ptr(), "bytes")?;
            put(len, d.bytes().len(), "len")?;
        }
        Ok(wring_status::WRING_OK)
    })
}

/// Free a dictionary (NULL is ignored).
///
/// # Safety
/// `dict` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn wring_dict_free(dict: *mut wring_dict) {
    if !dict.is_null() {
        // SAFETY: made by Box::into_raw in this crate and freed once, per the contract.
        drop(unsafe { Box::from_raw(dict) });
    }
}
