//! The engine's lzo-rle decoder (zram's default; the same decoder reads plain LZO1X) on
//! arbitrary bytes: never panics, never reports more than the destination holds, and
//! decompress_pages agrees with it (see `wring_fuzz::fuzz_decoder`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_engine::Algorithm;

fuzz_target!(|data: &[u8]| wring_fuzz::fuzz_decoder(Algorithm::LzoRle, data));
