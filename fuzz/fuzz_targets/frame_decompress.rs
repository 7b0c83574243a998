//! The bindings' one-shot decompression (`engine::frame`) on arbitrary bytes, without a size:
//! the output grows until the data fits or `max_size` is reached. Never panics, never returns
//! more than `max_size`, and what decodes decodes the same when its size is given.
//! The first byte picks the algorithm; the rest is the data.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_engine::frame::{self, FrameError};
use wring_engine::Algorithm;

/// Small enough that a run spends its time decoding, not growing.
const MAX_SIZE: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let [pick, src @ ..] = data else { return };
    let algorithm = Algorithm::ALL[usize::from(*pick) % Algorithm::ALL.len()];
    let engine = wring_fuzz::engine();
    match frame::decompress(engine, algorithm, None, src, None, MAX_SIZE) {
        Ok(out) => {
            assert!(out.len() <= MAX_SIZE, "{algorithm}: {} bytes", out.len());
            let again = frame::decompress(engine, algorithm, None, src, Some(out.len()), MAX_SIZE);
            assert_eq!(
                again.as_deref(),
                Ok(&out[..]),
                "{algorithm}: the sized decode differs"
            );
        }
        Err(FrameError::TooLarge { max_size }) => assert_eq!(max_size, MAX_SIZE),
        Err(_) => {}
    }
});
