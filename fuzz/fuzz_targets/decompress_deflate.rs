//! The engine's raw deflate decoder (zram's `deflate`, which wring blk stores) on arbitrary
//! bytes: never panics, never reports more than the destination holds, and decompress_pages
//! agrees with it (see `wring_fuzz::fuzz_decoder`). Its compressor, reused across inputs
//! under tight limits, is the round-trip target's.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_engine::Algorithm;

fuzz_target!(|data: &[u8]| wring_fuzz::fuzz_decoder(Algorithm::Deflate, data));
