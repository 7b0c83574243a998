//! Codecs: one module per algorithm behind a small trait, as fs/btrfs has one file per
//! `btrfs_compress_op` and zram's zcomp one `backend_*.c` per entry of `backends[]`. Each
//! algorithm decides how its workspaces are sized ([`Codec`]) and does the work inside one
//! ([`CodecState`]); the generic manager in `workspace` reuses them. [`codec_for`] is the
//! table: every [`Algorithm`] has its entry, so each gets the workspace manager, the offload
//! API, the fuzz targets and `wring levels`.

// Codecs decode what disk and callers hand them, possibly corrupt: no path may panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod deflate;
mod lz4;
mod lzo;
mod lzo_rle;
mod zlib;
pub(crate) mod zstd;

use crate::dict::Dictionary;
use crate::error::Error;
use crate::spec::Algorithm;

pub use self::zstd::{
    btrfs_cparams, extent_cparams, ZstdParams, LARGE_MAX_WINDOW_LOG, MAX_WINDOW_LOG,
};

/// Allocation of a workspace failed (the manager treats it as memory pressure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("could not allocate a {bytes}-byte workspace")]
pub struct AllocError {
    /// Bytes that were asked for.
    pub bytes: usize,
}

/// What an algorithm tells the workspace manager (the sizing half of `btrfs_compress_op`).
pub trait Codec: Send + Sync + 'static {
    /// Which algorithm this is.
    fn algorithm(&self) -> Algorithm;

    /// Number of workspace size classes: 1 unless memory depends on the level (zstd).
    fn classes(&self) -> usize {
        1
    }

    /// The size class that serves `level`; level 0 ("any workspace") maps to class 0.
    fn class_of(&self, level: i32) -> usize {
        let _ = level;
        0
    }

    /// The highest level a workspace of `class` can compress at.
    fn class_level(&self, class: usize) -> i32 {
        let _ = class;
        self.algorithm().max_level()
    }

    /// The library's own estimate of the memory a workspace of `class` needs.
    fn estimate_bytes(&self, class: usize) -> usize;

    /// Create the codec half of a workspace of `class`, given the (monotonic) bytes the manager
    /// accounts for it. Must not keep allocating afterwards: compress/decompress reuse it.
    /// Every buffer it holds is allocated fallibly (a failure is an [`AllocError`], which the
    /// manager treats as memory pressure); only the box around the state's handful of handles
    /// (well under 1 KiB; `Box::try_new` is unstable) is allocated infallibly.
    fn alloc(&self, class: usize, bytes: usize) -> Result<Box<dyn CodecState>, AllocError>;

    /// Decompress without a workspace, for decoders that keep no state (lz4, lzo): `None`
    /// when the algorithm needs one. The engine then decodes on the caller's thread without
    /// leasing a workspace, so a read never waits behind the `streams` compressions holding
    /// them, and pays no manager lock per page. (zram takes a per-CPU stream for both
    /// directions; its lzo and lz4 decoders use none of it.)
    fn decompress_stateless(&self, src: &[u8], dst: &mut [u8]) -> Option<Result<usize, Error>> {
        let _ = (src, dst);
        None
    }
}

/// The working half of a workspace: compression contexts, dictionaries, hash tables.
pub trait CodecState: Send {
    /// Compress `src` into `dst` at `level` (already clamped). `Ok(None)` when it does not fit
    /// in `dst` — the caller then stores the extent raw.
    fn compress(&mut self, level: i32, src: &[u8], dst: &mut [u8]) -> Result<Option<usize>, Error>;

    /// Decompress one extent into `dst`, returning the bytes produced. Never writes past `dst`;
    /// output that would not fit is [`Error::Oversized`].
    fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error>;

    /// As [`CodecState::compress`] with `dict`; `None` when the algorithm takes no dictionary
    /// (the default: only zstd does, see [`Algorithm::takes_dictionary`]).
    fn compress_dict(
        &mut self,
        level: i32,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<Option<usize>, Error>> {
        let _ = (level, dict, src, dst);
        None
    }

    /// As [`CodecState::decompress`] with `dict`; `None` when the algorithm takes none.
    fn decompress_dict(
        &mut self,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<usize, Error>> {
        let _ = (dict, src, dst);
        None
    }
}

/// The codec for an algorithm, sized for extents of at most `max_extent` bytes.
pub fn codec_for(algorithm: Algorithm, max_extent: usize) -> Box<dyn Codec> {
    match algorithm {
        Algorithm::Zlib => Box::new(zlib::ZlibCodec),
        Algorithm::Lzo => Box::new(lzo::LzoCodec(Algorithm::Lzo)),
        Algorithm::Zstd => Box::new(zstd::ZstdCodec::new(max_extent)),
        Algorithm::Lz4 => Box::new(lz4::Lz4Codec { hc: false }),
        Algorithm::Lz4hc => Box::new(lz4::Lz4Codec { hc: true }),
        Algorithm::LzoRle => Box::new(lzo::LzoCodec(Algorithm::LzoRle)),
        Algorithm::Deflate => Box::new(deflate::DeflateCodec),
    }
}

/// A codec state for `level` outside any manager: what a caller using the library directly
/// would hold (benchmarks compare the managed path against it).
pub fn standalone(
    algorithm: Algorithm,
    level: i32,
    max_extent: usize,
) -> Result<Box<dyn CodecState>, AllocError> {
    let codec = codec_for(algorithm, max_extent);
    let class = codec.class_of(level);
    let bytes = (0..=class)
        .map(|c| codec.estimate_bytes(c))
        .max()
        .unwrap_or(0);
    codec.alloc(class, bytes)
}

/// A heap buffer of `bytes` bytes aligned to 8, allocated fallibly (for FFI contexts).
pub(crate) fn aligned_buffer(bytes: usize) -> Result<Box<[u64]>, AllocError> {
    let words = bytes.div_ceil(8);
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words)
        .map_err(|_| AllocError { bytes })?;
    v.resize(words, 0);
    Ok(v.into_boxed_slice())
}
