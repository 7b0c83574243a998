//! wring-fs's decoder of FUSE requests, as the kernel lays them on an io_uring entry (`uring=1`:
//! a `fuse_in_header`, the operation's header and its payload in buffers of their own) and as
//! `/dev/fuse` gives them (the same three one after the other, cut apart by `wire::split`). On
//! arbitrary bytes it never panics; what decodes names only bytes of the payload, a WRITE's
//! data is exactly the size its header gives, and the serving loop's peek at a READ's size
//! agrees with the decoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_fs::wire::{self, Request, IN_OUT};

fuzz_target!(|data: &[u8]| {
    // The whole input as a request read from /dev/fuse.
    if let Ok((in_header, op_in, payload)) = wire::split(data) {
        check(in_header, op_in, payload);
    }
    // The first 128 bytes are in_out, the next 128 op_in (both as long as there is input),
    // the rest the payload.
    let (in_out, rest) = data.split_at(data.len().min(IN_OUT));
    let (op_in, payload) = rest.split_at(rest.len().min(IN_OUT));
    check(in_out, op_in, payload);
});

fn check(in_out: &[u8], op_in: &[u8], payload: &[u8]) {
    // The serving loop's peek at a READ's size never panics either.
    let peeked = wire::read_size(in_out, op_in);
    let Ok((h, r)) = wire::parse(in_out, op_in, payload) else {
        return;
    };
    assert_eq!(wire::header(in_out).ok(), Some(h));
    // It agrees with the decoder: a READ's size, nothing for any other request.
    match &r {
        Request::Read { size, .. } => assert_eq!(peeked, Some(*size)),
        _ => assert_eq!(peeked, None),
    }
    let inside = |s: &[u8]| {
        let (a, b) = (payload.as_ptr() as usize, s.as_ptr() as usize);
        s.is_empty() || (b >= a && b + s.len() <= a + payload.len())
    };
    match r {
        Request::Write { data, .. } => {
            assert!(inside(data));
            let size = u32::from_le_bytes(op_in[16..20].try_into().unwrap()) as usize;
            assert_eq!(data.len(), size);
        }
        Request::Lookup { name } | Request::Unlink { name } | Request::Rmdir { name } => {
            assert!(inside(name) && !name.contains(&0))
        }
        Request::Rename { name, newname, .. } => {
            assert!(inside(name) && inside(newname));
        }
        _ => {}
    }
}
