//! zstd with a dictionary: zram's `algorithm_params dict=FILE` (zcomp's zstd backend with
//! `ZSTD_createCDict_byReference`/`ZSTD_createDDict_byReference` in
//! drivers/block/zram/backend_zstd.c), and, beyond zram, [`train`] to build one from the
//! device's own pages (`ZDICT_trainFromBuffer`).
//!
//! A [`DictStreams`] holds one compression and one decompression dictionary, shared by every
//! stream (zstd's digested dictionaries are read-only and safe to share between threads), and
//! a pool of zstd contexts, one per stream in use (zram's per-CPU `zcomp_strm`): a page borrows
//! a context, compresses or decompresses with the dictionary, and gives it back.
//!
//! The only unsafe code of the crate: calls into libzstd through `zstd-sys`.

use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::Mutex;

use zstd_sys as z;

use crate::error::BlkError;
use crate::streams::{PageCodec, PerPage};

fn error_name(code: usize) -> String {
    // SAFETY: ZSTD_getErrorName takes any code and returns a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(z::ZSTD_getErrorName(code)) };
    name.to_string_lossy().into_owned()
}

fn is_error(code: usize) -> bool {
    // SAFETY: ZSTD_isError only inspects the number.
    unsafe { z::ZSTD_isError(code) != 0 }
}

/// Train a dictionary of at most `capacity` bytes from `samples` (pages).
pub fn train(samples: &[&[u8]], capacity: usize) -> Result<Vec<u8>, BlkError> {
    if samples.len() < 8 {
        return Err(BlkError::Option(format!(
            "train_dict: {} pages are too few samples; write more data first (at least 8 \
             pages that are neither empty nor one repeated word)",
            samples.len()
        )));
    }
    let sizes: Vec<usize> = samples.iter().map(|s| s.len()).collect();
    let flat: Vec<u8> = samples.concat();
    let mut dict = vec![0u8; capacity];
    // SAFETY: `dict` is writable for `capacity` bytes; `flat` holds exactly the sum of `sizes`
    // bytes, and `sizes` has `samples.len()` entries; libzstd reads and writes only those.
    let n = unsafe {
        z::ZDICT_trainFromBuffer(
            dict.as_mut_ptr().cast(),
            dict.len(),
            flat.as_ptr().cast(),
            sizes.as_ptr(),
            sizes.len() as u32,
        )
    };
    // SAFETY: ZDICT_isError only inspects the number.
    if unsafe { z::ZDICT_isError(n) } != 0 {
        // SAFETY: as ZSTD_getErrorName: a static string for any code.
        let why = unsafe { CStr::from_ptr(z::ZDICT_getErrorName(n)) };
        return Err(BlkError::Option(format!(
            "train_dict: zstd could not train a dictionary from {} pages: {}",
            samples.len(),
            why.to_string_lossy()
        )));
    }
    dict.truncate(n);
    Ok(dict)
}

/// A digested dictionary pair, freed on drop.
struct Digested {
    cdict: NonNull<z::ZSTD_CDict>,
    ddict: NonNull<z::ZSTD_DDict>,
}

// SAFETY: digested dictionaries are immutable after creation; zstd documents them as usable
// by many contexts on many threads at once.
unsafe impl Send for Digested {}
// SAFETY: as above; no method mutates them.
unsafe impl Sync for Digested {}

impl Drop for Digested {
    fn drop(&mut self) {
        // SAFETY: both were created by ZSTD_create{C,D}Dict and are freed once, here; no
        // context refers to them any longer (the contexts are dropped with the streams first).
        unsafe {
            z::ZSTD_freeCDict(self.cdict.as_ptr());
            z::ZSTD_freeDDict(self.ddict.as_ptr());
        }
    }
}

/// A zstd compression context, freed on drop.
struct CCtx(NonNull<z::ZSTD_CCtx>);
/// A zstd decompression context, freed on drop.
struct DCtx(NonNull<z::ZSTD_DCtx>);

// SAFETY: a context is used by one thread at a time (it is taken out of the pool's lock
// before use) and holds no thread-local state.
unsafe impl Send for CCtx {}
// SAFETY: as above.
unsafe impl Send for DCtx {}

impl Drop for CCtx {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCCtx, freed once.
        unsafe { z::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

impl Drop for DCtx {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createDCtx, freed once.
        unsafe { z::ZSTD_freeDCtx(self.0.as_ptr()) };
    }
}

/// zstd with a dictionary, as a set of streams.
pub struct DictStreams {
    // Field order: the contexts are dropped before the dictionaries they used.
    cctxs: Mutex<Vec<CCtx>>,
    dctxs: Mutex<Vec<DCtx>>,
    digested: Digested,
    bytes: Vec<u8>,
    level: i32,
    name: String,
    per_page: PerPage,
}

impl std::fmt::Debug for DictStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DictStreams")
            .field("name", &self.name)
            .field("dict_bytes", &self.bytes.len())
            .finish()
    }
}

fn take<T>(pool: &Mutex<Vec<T>>) -> Option<T> {
    wring_sync::lock(&pool).pop()
}

fn give<T>(pool: &Mutex<Vec<T>>, t: T) {
    wring_sync::lock(&pool).push(t);
}

impl DictStreams {
    /// zstd at `level` with the dictionary `dict` (zstd's format, or raw content); `name` is
    /// what reports call it.
    pub fn new(dict: Vec<u8>, level: i32, name: &str) -> Result<DictStreams, BlkError> {
        if dict.is_empty() {
            return Err(BlkError::Option(format!("{name}: the dictionary is empty")));
        }
        // SAFETY: `dict` is readable for its length; zstd copies it into the digested form.
        let cdict = unsafe { z::ZSTD_createCDict(dict.as_ptr().cast(), dict.len(), level) };
        // SAFETY: as above.
        let ddict = unsafe { z::ZSTD_createDDict(dict.as_ptr().cast(), dict.len()) };
        let (Some(cdict), Some(ddict)) = (NonNull::new(cdict), NonNull::new(ddict)) else {
            // SAFETY: freeing NULL is a no-op; a non-NULL one was created above, freed once.
            unsafe {
                z::ZSTD_freeCDict(cdict);
                z::ZSTD_freeDDict(ddict);
            }
            return Err(BlkError::Option(format!(
                "{name}: zstd refused the dictionary ({} bytes)",
                dict.len()
            )));
        };
        Ok(DictStreams {
            cctxs: Mutex::new(Vec::new()),
            dctxs: Mutex::new(Vec::new()),
            digested: Digested { cdict, ddict },
            bytes: dict,
            level,
            name: name.to_string(),
            per_page: PerPage::new(1),
        })
    }

    /// The dictionary's bytes (to save it for `dict=FILE`).
    pub fn dict(&self) -> &[u8] {
        &self.bytes
    }

    /// The level.
    pub fn level(&self) -> i32 {
        self.level
    }

    fn cctx(&self) -> Result<CCtx, BlkError> {
        if let Some(c) = take(&self.cctxs) {
            return Ok(c);
        }
        // SAFETY: no preconditions; NULL on allocation failure, checked.
        NonNull::new(unsafe { z::ZSTD_createCCtx() })
            .map(CCtx)
            .ok_or_else(|| self.failed("could not allocate a zstd context"))
    }

    fn dctx(&self) -> Result<DCtx, BlkError> {
        if let Some(c) = take(&self.dctxs) {
            return Ok(c);
        }
        // SAFETY: no preconditions; NULL on allocation failure, checked.
        NonNull::new(unsafe { z::ZSTD_createDCtx() })
            .map(DCtx)
            .ok_or_else(|| self.failed("could not allocate a zstd context"))
    }

    fn failed(&self, message: &str) -> BlkError {
        BlkError::Compress {
            algorithm: self.name.clone(),
            message: message.to_string(),
        }
    }

    fn compress_page(&self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, BlkError> {
        let ctx = self.cctx()?;
        // SAFETY: the context is ours alone until given back; `output` is writable and
        // `input` readable for their lengths; the digested dictionary outlives the call.
        let n = unsafe {
            z::ZSTD_compress_usingCDict(
                ctx.0.as_ptr(),
                output.as_mut_ptr().cast(),
                output.len(),
                input.as_ptr().cast(),
                input.len(),
                self.digested.cdict.as_ptr(),
            )
        };
        give(&self.cctxs, ctx);
        if !is_error(n) {
            return Ok(Some(n));
        }
        // SAFETY: only inspects the number.
        let code = unsafe { z::ZSTD_getErrorCode(n) };
        if code == z::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall {
            return Ok(None);
        }
        Err(self.failed(&error_name(n)))
    }

    fn decompress_page(&self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, BlkError> {
        let ctx = self.dctx()?;
        // SAFETY: as compress_one.
        let n = unsafe {
            z::ZSTD_decompress_usingDDict(
                ctx.0.as_ptr(),
                output.as_mut_ptr().cast(),
                output.len(),
                input.as_ptr().cast(),
                input.len(),
                self.digested.ddict.as_ptr(),
            )
        };
        give(&self.dctxs, ctx);
        if is_error(n) || n != output.len() {
            let message = if is_error(n) {
                error_name(n)
            } else {
                format!("decompressed to {n} bytes, not a page")
            };
            return Err(BlkError::Corrupt { page: 0, message });
        }
        Ok(Some(n))
    }
}

impl PageCodec for DictStreams {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn per_page(&self) -> &PerPage {
        &self.per_page
    }

    fn compress_one(&self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, BlkError> {
        self.compress_page(input, output)
    }

    fn decompress_one(&self, input: &[u8], output: &mut [u8]) -> Result<Option<usize>, BlkError> {
        self.decompress_page(input, output)
    }

    fn workspaces(&self) -> usize {
        self.cctxs.lock().map_or(0, |v| v.len())
    }
}
