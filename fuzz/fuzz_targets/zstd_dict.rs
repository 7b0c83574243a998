//! zstd with a dictionary (wring blk's `algorithm_params dict=`, an engine `Dictionary`) on
//! arbitrary bytes: decoding with it never panics nor reports more than the destination holds,
//! and the input compressed with it decodes back (see `wring_fuzz::fuzz_dict`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wring_fuzz::fuzz_dict(data));
