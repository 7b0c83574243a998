//! wring blk's raw deflate (zram's `deflate`, `wring_blk::DeflateStreams`) on arbitrary bytes:
//! decoding them into a whole 4 KiB or 16 KiB slot never panics and succeeds only with a
//! whole slot; compressing them as a slot under a limit and decoding the result gives them
//! back, with the context reused across inputs (as the store's streams reuse it).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use wring_blk::{DeflateStreams, PageJob, Streams};

fn streams() -> &'static DeflateStreams {
    static S: OnceLock<DeflateStreams> = OnceLock::new();
    S.get_or_init(|| DeflateStreams::new(6, 1).expect("deflate:6"))
}

fuzz_target!(|data: &[u8]| {
    let s = streams();
    let slot = if data.first().is_some_and(|b| b & 1 == 1) {
        16 << 10
    } else {
        4096
    };
    let mut out = vec![0u8; slot];
    let mut jobs = [PageJob::new(data, &mut out)];
    s.decompress(&mut jobs);
    if let Some(Ok(n)) = &jobs[0].result {
        assert_eq!(*n, Some(slot));
    }
    // The input as a slot (zero-padded or cut), compressed under a limit, then decoded.
    let mut page = data.to_vec();
    page.resize(slot, 0);
    let limit = slot - slot / 5;
    let mut packed = vec![0u8; limit];
    let mut jobs = [PageJob::new(&page, &mut packed)];
    s.compress(&mut jobs);
    if let Some(Ok(Some(n))) = jobs[0].result {
        let mut back = vec![0u8; slot];
        let mut jobs = [PageJob::new(&packed[..n], &mut back)];
        s.decompress(&mut jobs);
        assert!(matches!(jobs[0].result, Some(Ok(Some(_)))));
        assert!(back == page, "the slot did not survive its round trip");
    }
});
