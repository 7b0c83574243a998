//! The engine's lzo decoder (btrfs's segment framing) on arbitrary bytes: never panics, never
//! reports more than the destination holds, and decompress_pages agrees with it (see
//! `wring_fuzz::fuzz_decoder`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_engine::Algorithm;

fuzz_target!(|data: &[u8]| wring_fuzz::fuzz_decoder(Algorithm::Lzo, data));
