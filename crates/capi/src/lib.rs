//! wring's engine behind a C ABI: `libwring.so`, `libwring.a` and `wring.h`, the header
//! cbindgen generates from this crate (`scripts/capi.sh`; never written by hand).
//!
//! * one-shot calls on buffers of any size ([`oneshot`]): `wring_compress`,
//!   `wring_decompress`, with zstd dictionaries (`wring_dict_*`);
//! * one btrfs extent in the kernel's formats ([`btrfs`]): `wring_btrfs_encode_extent`,
//!   `wring_btrfs_decode_extent`;
//! * an engine with its own streams ([`engine`]): `wring_engine_new`,
//!   `wring_engine_compress_many`, `wring_engine_decompress_many`.
//!
//! Every call returns a [`wring_status`]; on failure `wring_last_error()` gives the message
//! (the CLI's words) for the calling thread. Specs are btrfs's text (`zstd:3`, `lzo`) and
//! zram's names (`lz4`). No call unwinds into C: a panic is caught and reported as
//! `WRING_INTERNAL`. The Rust work is the engine's `frame` module and the bridge's `codec`,
//! which the Python package calls too.

#![allow(non_camel_case_types)]

pub mod btrfs;
mod call;
pub mod engine;
pub mod oneshot;

pub use call::{wring_last_error, wring_status, wring_version};

/// The README, whose examples run as doc tests (`cargo test -p wring-capi --doc`).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
