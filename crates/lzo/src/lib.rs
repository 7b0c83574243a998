//! LZO1X-1 in safe Rust: the raw algorithm behind btrfs's `lzo` extents, plus
//! btrfs's own framing of those extents (see [`btrfs`]).
//!
//! The raw codec mirrors the kernel's lib/lzo: [`compress`] emits a standard
//! LZO1X stream (the same format `lzo1x_1_compress` writes, never the
//! `lzo-rle` variant) ending with the end-of-stream marker `0x11 0x00 0x00`,
//! [`compress_rle`] writes the `lzo-rle` variant zram uses (the kernel's
//! `lzorle1x_1_compress`: zero runs as instructions of their own),
//! and [`decompress`] accepts exactly what `lzo1x_decompress_safe` accepts.
//! Neither function allocates, panics on any input, or touches memory outside
//! the slices it is given. The crate contains no `unsafe` code.

#![forbid(unsafe_code)]

pub mod btrfs;
mod compress;
mod decompress;
mod rle;

pub use compress::{compress, CompressState};
pub use decompress::decompress;
pub use rle::{compress_rle, RLE_VERSION};

/// Worst-case compressed size of `n` input bytes: `n + n/16 + 64 + 3`, the
/// kernel's `lzo1x_worst_compress`. A `dst` this large never overruns.
pub const fn worst_compress(n: usize) -> usize {
    n + n / 16 + 64 + 3
}

/// Why compression or decompression failed.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The output buffer is too small for the result.
    #[error("the output buffer is too small")]
    OutputOverrun,
    /// The compressed data ends in the middle of an instruction or before the end marker.
    #[error("the compressed data ends too early")]
    InputOverrun,
    /// A match refers to bytes before the start of the output.
    #[error("the compressed data refers back to before the start of the output")]
    LookbehindOverrun,
    /// The end marker came before the end of the compressed data.
    #[error("the compressed data goes on past its end marker")]
    InputNotConsumed,
    /// The data breaks a rule of the format; the text says which.
    #[error("the compressed data is corrupt: {0}")]
    Corrupt(&'static str),
    /// A caller-supplied parameter is out of range; the text says which.
    #[error("bad parameter: {0}")]
    BadParameter(&'static str),
}

/// The README, whose examples run as doc tests (`cargo test -p wring-lzo --doc`).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
