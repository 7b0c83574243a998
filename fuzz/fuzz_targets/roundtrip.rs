//! Compress then decompress arbitrary data with an algorithm, level and policy chosen by the
//! first two bytes: what compresses saves a block and comes back unchanged.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wring_fuzz::fuzz_round_trip(data));
