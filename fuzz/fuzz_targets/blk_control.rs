//! wring blk's parsers and its lzo-rle compressor on arbitrary bytes. The first byte picks:
//!
//! * even: the rest as a control request line (`wring_blk::control::Request::parse`, which
//!   covers recompress, train_dict, policy, idle, writeback and the sizes) — never panics,
//!   and an accepted line prints back to a line that parses to the same request; the same
//!   text as `-o` device options (`wring_blk::Options::parse`), whose accepted options print
//!   back to themselves;
//! * odd: the rest compressed with `wring_lzo::compress_rle` (the kernel's lzo-rle) into a
//!   worst-case buffer and into one byte short of its result, then decoded: the round trip
//!   gives the input, the short buffer fails cleanly.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_blk::control::Request;
use wring_blk::Options;
use wring_lzo::{compress_rle, decompress, worst_compress, CompressState};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        control(rest);
    } else {
        lzo_rle(rest);
    }
});

fn control(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(r) = Request::parse(text) {
        assert_eq!(Request::parse(&r.line()).ok(), Some(r));
    }
    if let Ok(o) = Options::parse(text) {
        assert_eq!(Options::parse(&o.text()).ok(), Some(o));
    }
}

fn lzo_rle(src: &[u8]) {
    let src = &src[..src.len().min(1 << 17)];
    let mut packed = vec![0u8; worst_compress(src.len()) + 2];
    let n = match compress_rle(src, &mut packed, &mut CompressState::new()) {
        Ok(n) => n,
        Err(e) => panic!("{} bytes did not fit the worst case: {e}", src.len()),
    };
    let mut back = vec![0u8; src.len()];
    assert_eq!(decompress(&packed[..n], &mut back), Ok(src.len()));
    assert!(back == src, "the round trip changed the data");
    let mut short = vec![0u8; n - 1];
    assert!(compress_rle(src, &mut short, &mut CompressState::new()).is_err());
}
