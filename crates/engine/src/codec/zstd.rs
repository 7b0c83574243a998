//! zstd, written the way fs/btrfs/zstd.c writes it: parameters from `zstd_get_params(level, len)`
//! with the window capped at 2^17, content size in the header, no checksum.
//!
//! Differs from the kernel in keeping a compression and a decompression context side by side
//! (the kernel re-initialises one arena for either), so a workspace costs their sum, not their
//! maximum, and in offering levels 16..=22 for userspace use.
//!
//! btrfs caps the window at 2^17; for extents > 128 KiB, which only wring-fs writes, wring uses
//! the extent's size as the window ([`extent_cparams`]); smaller frames are the kernel's, bytewise
//! (checked against the kernel in crates/btrfs/tests/zstd_identity.rs), which takes turning off
//! the row-based match finder the kernel's SIMD-less build never uses on such windows: levels 5
//! to 11 then compress about as fast as the kernel's, slower than userspace zstd would.

use std::ffi::CStr;
use std::ptr::NonNull;

use zstd_sys as z;

use super::{aligned_buffer, AllocError, Codec, CodecState};
use crate::dict::Dictionary;
use crate::error::Error;
use crate::spec::Algorithm;
use crate::MAX_EXTENT;

/// ZSTD_BTRFS_MAX_WINDOWLOG: btrfs never lets a frame's window exceed one extent.
pub const MAX_WINDOW_LOG: u32 = 17;

/// The largest window wring uses for extents beyond 128 KiB: 4 MiB, wring-fs's largest extent.
pub const LARGE_MAX_WINDOW_LOG: u32 = 22;

/// The compression parameters btrfs would use for `level` on a `src_len`-byte extent
/// (zstd_get_btrfs_parameters in fs/btrfs/zstd.c): ZSTD_getCParams(level, src_len, 0) with the
/// window capped at 2^[`MAX_WINDOW_LOG`]. wring compresses with these up to 128 KiB; beyond that
/// see [`extent_cparams`].
pub fn btrfs_cparams(level: i32, src_len: usize) -> z::ZSTD_compressionParameters {
    // SAFETY: a pure function of its arguments; no pointers involved.
    let mut p = unsafe { z::ZSTD_getCParams(level, src_len as u64, 0) };
    p.windowLog = p.windowLog.min(MAX_WINDOW_LOG);
    p
}

/// The parameters wring compresses a `src_len`-byte extent with at `level`.
///
/// Up to 128 KiB ([`MAX_EXTENT`], all btrfs ever writes): exactly [`btrfs_cparams`], so the
/// frames are byte-identical to the kernel's. Larger (wring-fs's extents of up to 4 MiB): the
/// window covers the extent — ceil(log2(`src_len`)), but never more than ZSTD_getCParams picks
/// for that size nor more than 2^[`LARGE_MAX_WINDOW_LOG`] — while every other parameter (chain,
/// hash and search logs, min match, target length, strategy) stays btrfs's for 128 KiB. The
/// tables are what a static context's memory depends on; the window is not, because
/// ZSTD_compress2 reads the source and writes the frame in place (stable buffers), so the
/// workspace stays the size [`ZstdParams`] gives for 128 KiB.
pub fn extent_cparams(level: i32, src_len: usize) -> z::ZSTD_compressionParameters {
    let mut p = btrfs_cparams(level, src_len.min(MAX_EXTENT));
    if src_len > MAX_EXTENT {
        // SAFETY: a pure function of its arguments; no pointers involved.
        let natural = unsafe { z::ZSTD_getCParams(level, src_len as u64, 0) }.windowLog;
        let cover = usize::BITS - (src_len - 1).leading_zeros(); // ceil(log2(src_len))
        p.windowLog = cover.min(natural).min(LARGE_MAX_WINDOW_LOG);
    }
    p
}

/// Memory figures for one zstd level, computed from the library's own estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZstdParams {
    /// ZSTD_estimateCStreamSize_usingCParams for the btrfs parameters at 128 KiB (or at
    /// `max_extent` if smaller). Extents beyond 128 KiB use the same tables with a larger
    /// window ([`extent_cparams`]), which ZSTD_compress2's stable buffers need no memory for.
    pub cstream_bytes: usize,
    /// ZSTD_estimateDStreamSize(`max_extent`): what the kernel's streaming decompression needs.
    pub dstream_bytes: usize,
    /// ZSTD_estimateDCtxSize: what wring's one-shot decompression needs.
    pub dctx_bytes: usize,
}

impl ZstdParams {
    /// The estimates for `level` on extents of at most `max_extent` bytes.
    pub fn for_level(level: i32, max_extent: usize) -> ZstdParams {
        let cp = btrfs_cparams(level, max_extent.min(MAX_EXTENT));
        // SAFETY: the estimate functions only read the parameter struct passed by value.
        unsafe {
            ZstdParams {
                cstream_bytes: z::ZSTD_estimateCStreamSize_usingCParams(cp),
                dstream_bytes: z::ZSTD_estimateDStreamSize(max_extent),
                dctx_bytes: z::ZSTD_estimateDCtxSize(),
            }
        }
    }

    /// The kernel's per-level figure: max(cstream, dstream), as zstd_calc_ws_mem_sizes.
    pub fn kernel_bytes(&self) -> usize {
        self.cstream_bytes.max(self.dstream_bytes)
    }

    /// What a wring workspace holds: a compression and a decompression context.
    pub fn wring_bytes(&self) -> usize {
        self.cstream_bytes + self.dctx_bytes
    }
}

/// zstd's sizing: one size class per positive level; negative levels share level 1's class.
pub(crate) struct ZstdCodec {
    max_extent: usize,
}

impl ZstdCodec {
    pub(crate) fn new(max_extent: usize) -> ZstdCodec {
        ZstdCodec { max_extent }
    }
}

impl Codec for ZstdCodec {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Zstd
    }

    fn classes(&self) -> usize {
        Algorithm::Zstd.max_level() as usize
    }

    /// clip_level(): levels <= 1 (and 0, "any") use the first class.
    fn class_of(&self, level: i32) -> usize {
        (level.max(1) - 1) as usize
    }

    fn class_level(&self, class: usize) -> i32 {
        class as i32 + 1
    }

    fn estimate_bytes(&self, class: usize) -> usize {
        let level = self.class_level(class);
        let lowest = if class == 0 {
            Algorithm::Zstd.min_level()
        } else {
            level
        };
        (lowest..=level)
            .filter(|&l| l != 0)
            .map(|l| ZstdParams::for_level(l, self.max_extent).wring_bytes())
            .max()
            .unwrap_or(0)
    }

    fn alloc(&self, _class: usize, bytes: usize) -> Result<Box<dyn CodecState>, AllocError> {
        Ok(Box::new(ZstdState::new(bytes)?))
    }
}

/// A static compression context and a static decompression context in memory we own:
/// zstd can never allocate behind our back (ZSTD_initStaticCCtx/DCtx).
///
/// Compression with a [`Dictionary`] runs in a third context, on the heap and made at the
/// first such extent (zram's zstd backend with `ZSTD_compress_usingCDict`): a dictionary's
/// parameters come from its digested form, whose tables a static context sized for btrfs's
/// parameters need not hold. zstd sizes it once and reuses it; it is not in the workspace's
/// accounted bytes. Decompression with a dictionary uses the static context (the digested
/// dictionary is only referenced).
struct ZstdState {
    /// (level, source length) the context's parameters were last set for.
    configured: Option<(i32, usize)>,
    cctx: NonNull<z::ZSTD_CCtx>,
    dctx: NonNull<z::ZSTD_DCtx>,
    /// The heap context for compression with a dictionary, once one was asked for.
    dict_cctx: Option<HeapCCtx>,
    _cmem: Box<[u64]>,
    _dmem: Box<[u64]>,
}

/// A zstd compression context on zstd's heap, freed on drop.
struct HeapCCtx(NonNull<z::ZSTD_CCtx>);

impl Drop for HeapCCtx {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCCtx and freed once, here.
        unsafe { z::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

// SAFETY: the contexts live in the two boxes owned by this struct (and the heap context is
// owned by it too) and are only touched through `&mut self`, so moving the struct to another
// thread moves sole access with it.
unsafe impl Send for ZstdState {}

impl ZstdState {
    fn new(bytes: usize) -> Result<ZstdState, AllocError> {
        // SAFETY: pure size computation.
        let dbytes = unsafe { z::ZSTD_estimateDCtxSize() };
        let cbytes = bytes.saturating_sub(dbytes);
        let mut cmem = aligned_buffer(cbytes)?;
        let mut dmem = aligned_buffer(dbytes)?;
        // SAFETY: each buffer is 8-byte aligned, at least as large as stated, and outlives the
        // context placed in it (both are owned by the returned struct and dropped together).
        let (cctx, dctx) = unsafe {
            (
                z::ZSTD_initStaticCCtx(cmem.as_mut_ptr().cast(), cmem.len() * 8),
                z::ZSTD_initStaticDCtx(dmem.as_mut_ptr().cast(), dmem.len() * 8),
            )
        };
        let fail = AllocError { bytes };
        Ok(ZstdState {
            configured: None,
            cctx: NonNull::new(cctx).ok_or(fail)?,
            dctx: NonNull::new(dctx).ok_or(fail)?,
            dict_cctx: None,
            _cmem: cmem,
            _dmem: dmem,
        })
    }

    fn set(&mut self, param: z::ZSTD_cParameter, value: i32) -> Result<(), Error> {
        // SAFETY: cctx is a live context owned by self.
        check(unsafe { z::ZSTD_CCtx_setParameter(self.cctx.as_ptr(), param, value) }).map(|_| ())
    }

    fn reset(&mut self, directive: z::ZSTD_ResetDirective) -> Result<(), Error> {
        // SAFETY: cctx is a live context owned by self.
        check(unsafe { z::ZSTD_CCtx_reset(self.cctx.as_ptr(), directive) }).map(|_| ())
    }

    /// Set the parameters for (`level`, `src_len`) ([`extent_cparams`]: btrfs's up to 128 KiB) —
    /// only when they differ from the last extent's, so a stream of same-sized extents at one
    /// level keeps its context warm.
    fn configure(&mut self, level: i32, src_len: usize) -> Result<(), Error> {
        use z::ZSTD_ResetDirective::*;
        if self.configured == Some((level, src_len)) {
            return self.reset(ZSTD_reset_session_only);
        }
        self.configured = None;
        self.reset(ZSTD_reset_session_and_parameters)?;
        self.apply(extent_cparams(level, src_len))?;
        self.configured = Some((level, src_len));
        Ok(())
    }

    fn apply(&mut self, p: z::ZSTD_compressionParameters) -> Result<(), Error> {
        use z::ZSTD_cParameter::*;
        self.set(ZSTD_c_windowLog, p.windowLog as i32)?;
        self.set(ZSTD_c_chainLog, p.chainLog as i32)?;
        self.set(ZSTD_c_hashLog, p.hashLog as i32)?;
        self.set(ZSTD_c_searchLog, p.searchLog as i32)?;
        self.set(ZSTD_c_minMatch, p.minMatch as i32)?;
        self.set(ZSTD_c_targetLength, p.targetLength as i32)?;
        self.set(ZSTD_c_strategy, p.strategy as i32)?;
        self.set(ZSTD_c_contentSizeFlag, 1)?;
        self.set(ZSTD_c_checksumFlag, 0)?;
        // The kernel's zstd is built without SIMD, so it uses the row-based match finder
        // (greedy, lazy and lazy2: levels 5 to 11) only for windows beyond 2^17, never for a
        // btrfs frame; userspace would use it from 2^15 on and make different (valid) frames.
        let row = match p.windowLog <= MAX_WINDOW_LOG {
            true => z::ZSTD_ParamSwitch_e::ZSTD_ps_disable,
            false => z::ZSTD_ParamSwitch_e::ZSTD_ps_auto,
        };
        self.set(ZSTD_c_experimentalParam14, row as i32)
    }
}

impl CodecState for ZstdState {
    fn compress(&mut self, level: i32, src: &[u8], dst: &mut [u8]) -> Result<Option<usize>, Error> {
        self.configure(level, src.len())?;
        // SAFETY: pointers and lengths come from live slices; cctx is owned by self.
        let r = unsafe {
            z::ZSTD_compress2(
                self.cctx.as_ptr(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        match check(r) {
            Ok(n) => Ok(Some(n)),
            Err(_) if error_code(r) == z::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        let frame = frame_len(src)?;
        // SAFETY: pointers and lengths come from live slices; dctx is owned by self.
        let r = unsafe {
            z::ZSTD_decompressDCtx(
                self.dctx.as_ptr(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                frame,
            )
        };
        decoded(r, dst.len())
    }

    fn compress_dict(
        &mut self,
        level: i32,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<Option<usize>, Error>> {
        Some(self.compress_with(level, dict, src, dst))
    }

    fn decompress_dict(
        &mut self,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<usize, Error>> {
        let frame = match frame_len(src) {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: pointers and lengths come from live slices; dctx is owned by self; the
        // digested dictionary lives as long as `dict`, past the call.
        let r = unsafe {
            z::ZSTD_decompress_usingDDict(
                self.dctx.as_ptr(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                frame,
                dict.ddict(),
            )
        };
        Some(decoded(r, dst.len()))
    }
}

impl ZstdState {
    /// Compress with `dict`'s digested form for `level` in the heap context.
    fn compress_with(
        &mut self,
        level: i32,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        let cdict = dict.cdict(level)?;
        let cctx = match &self.dict_cctx {
            Some(c) => c.0,
            None => {
                // SAFETY: no preconditions; NULL on allocation failure, checked.
                let made = NonNull::new(unsafe { z::ZSTD_createCCtx() }).ok_or_else(|| {
                    Error::Library {
                        algorithm: Algorithm::Zstd,
                        reason: "could not allocate a context for a dictionary".into(),
                    }
                })?;
                self.dict_cctx.insert(HeapCCtx(made)).0
            }
        };
        // SAFETY: the context is ours alone (`&mut self`); `dst` is writable and `src`
        // readable for their lengths; the digested dictionary outlives the call.
        let r = unsafe {
            z::ZSTD_compress_usingCDict(
                cctx.as_ptr(),
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
                cdict,
            )
        };
        match check(r) {
            Ok(n) => Ok(Some(n)),
            Err(_) if error_code(r) == z::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The decoded size a zstd frame declares in its header, when it declares one.
pub(crate) fn content_size(src: &[u8]) -> Option<usize> {
    // SAFETY: reads only within `src`.
    let n = unsafe { z::ZSTD_getFrameContentSize(src.as_ptr().cast(), src.len()) };
    // ZSTD_CONTENTSIZE_UNKNOWN and _ERROR are the two largest u64 values.
    match n >= u64::MAX - 1 {
        true => None,
        false => usize::try_from(n).ok(),
    }
}

/// The length of the one frame at the start of an extent, which may carry zero padding up to
/// the sector after it.
fn frame_len(src: &[u8]) -> Result<usize, Error> {
    // SAFETY: reads only within `src`.
    let frame = unsafe { z::ZSTD_findFrameCompressedSize(src.as_ptr().cast(), src.len()) };
    check(frame).map_err(|e| corrupt(&e))
}

/// A decompression's return value as the bytes produced or the extent's error: output beyond
/// `limit` is oversized, anything else zstd refuses is corrupt.
fn decoded(r: usize, limit: usize) -> Result<usize, Error> {
    match check(r) {
        Ok(n) => Ok(n),
        Err(_) if error_code(r) == z::ZSTD_ErrorCode::ZSTD_error_dstSize_tooSmall => {
            Err(Error::Oversized {
                algorithm: Algorithm::Zstd,
                limit,
            })
        }
        Err(e) => Err(corrupt(&e)),
    }
}

/// zstd's error code of a return value.
pub(crate) fn error_code(r: usize) -> z::ZSTD_ErrorCode {
    // SAFETY: pure function of the value.
    unsafe { z::ZSTD_getErrorCode(r) }
}

/// Turn a zstd return value into a size or an error carrying zstd's message (the one place
/// zstd's and its dictionary builder's errors are read: ZDICT's codes are zstd's).
pub(crate) fn check(r: usize) -> Result<usize, Error> {
    // SAFETY: ZSTD_isError and ZSTD_getErrorName are pure; the name is a static C string.
    unsafe {
        if z::ZSTD_isError(r) == 0 {
            return Ok(r);
        }
        let name = CStr::from_ptr(z::ZSTD_getErrorName(r))
            .to_string_lossy()
            .into_owned();
        Err(Error::Library {
            algorithm: Algorithm::Zstd,
            reason: name,
        })
    }
}

fn corrupt(e: &Error) -> Error {
    match e {
        Error::Library { reason, .. } => Error::corrupt(Algorithm::Zstd, reason.clone()),
        other => other.clone(),
    }
}
