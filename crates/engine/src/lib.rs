//! wring's engine: btrfs-compatible codecs, the level-aware workspace manager, compression
//! streams and the decompression page pool — everything below the front ends.
//!
//! The unit is an *extent*: at most [`MAX_EXTENT`] bytes of input compressed alone, in the
//! format btrfs stores on disk. The public face is small:
//!
//! * [`CompressSpec`] parses btrfs's option text (`zstd:3`, `zlib:9`, `lzo`, `no`) and zram's
//!   names for what btrfs lacks (`lz4`, `lzo-rle`, `deflate:6`); [`Algorithm`] is the one
//!   codec table every front end compresses through.
//! * [`dict::Dictionary`] is a zstd dictionary a request can carry.
//! * [`Engine::compress`] / [`Engine::decompress`] work on one extent through the workspace
//!   managers; [`stream::compress_batch`] compresses many on the engine's streams.
//! * [`offload::Offload`] is the one asynchronous way front ends compress: requests submitted
//!   to the CPU workers (one per stream) or a device, completed later (seed 004's acomp).
//! * [`frame`] compresses and decompresses buffers of any size in one call (the bindings').
//! * [`Engine::stats`] reads every manager's and the pool's counters.
//! * [`size`] parses and formats sizes (`128K`, `1M`) for every crate's options.
//!
//! Mirrors fs/btrfs/compression.c (with zlib.c, lzo.c, zstd.c), zram's zcomp streams and
//! EROFS's global page pool; it differs in adding zram's lz4, lz4hc, lzo-rle and raw deflate,
//! zstd with a dictionary, and zstd levels 16–22 for userspace.

// Modules are private behind the curated `pub use` below: a `pub` item no path can reach
// from outside says `pub(crate)`.
#![warn(unreachable_pub)]

pub mod clock;
pub mod codec;
pub mod dict;
mod engine;
mod error;
pub mod frame;
pub mod heuristic;
pub mod levels;
pub mod offload;
pub mod pool;
pub mod size;
mod spec;
pub mod stream;
mod sync;
pub mod workspace;

pub use engine::{compressed_limit, Engine, EngineConfig, EngineStats, Outcome, Policy, Saving};
pub use error::{Error, SpecError};
pub use spec::{Algorithm, CompressSpec, NotInBtrfs, SpecWarning};

/// Largest input btrfs compresses as one extent (BTRFS_MAX_UNCOMPRESSED).
pub const MAX_EXTENT: usize = 128 * 1024;
/// Block (sector) size: compression must save at least one of these.
pub const BLOCK_SIZE: usize = 4096;

/// The README, whose examples run as doc tests (`cargo test -p wring-engine --doc`).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
