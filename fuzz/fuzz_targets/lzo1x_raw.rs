//! The raw LZO1X decoder (`wring_lzo::decompress`) on arbitrary bytes: never panics, never
//! reports more than the destination holds, and does not depend on the destination's size.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wring_fuzz::fuzz_lzo1x(data));
