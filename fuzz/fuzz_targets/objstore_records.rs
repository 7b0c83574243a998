//! Every record wring-objstore reads back from the bucket or the disk, on arbitrary bytes: a
//! segment object (trailer, index, extents' checksums), the lease record, a credentials file
//! and a segment object's name. The first byte picks the record, the rest is the record.
//!
//! Parsing never panics; what parses is consistent — a segment's entries lie inside its data
//! and verify, a packed segment rebuilds to the same bytes, a lease re-encodes to itself, a
//! credentials file's Debug output never shows its secret, a segment name maps back to its key.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_objstore::addr::{parse_segment_name, segment_key};
use wring_objstore::creds;
use wring_objstore::lease::Lease;
use wring_objstore::segment::{verify_object, Builder, Trailer, TRAILER_LEN};

fuzz_target!(|data: &[u8]| {
    let Some((&which, record)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => segment(record),
        1 => lease(record),
        2 => credentials(record),
        _ => name(record),
    }
});

fn segment(bytes: &[u8]) {
    if bytes.len() >= TRAILER_LEN {
        // The trailer alone, against any object length.
        let tail = &bytes[bytes.len() - TRAILER_LEN..];
        let _ = Trailer::parse(tail, bytes.len() as u64);
        let _ = Trailer::parse(tail, u64::MAX);
    }
    let Ok((trailer, entries)) = verify_object(bytes) else {
        return;
    };
    assert_eq!(trailer.object_len(), bytes.len() as u64);
    let mut packed = true;
    let mut at = 0u64;
    for e in &entries {
        let end = e.offset as u64 + e.len as u64;
        assert!(end <= trailer.data_len as u64);
        packed &= e.offset as u64 == at;
        at = end;
    }
    // A segment whose extents fill its data back to back is what the writer makes: rebuilding
    // it gives the same object.
    if packed && at == trailer.data_len as u64 {
        let mut b = Builder::default();
        for e in &entries {
            b.push(&bytes[e.offset as usize..(e.offset + e.len) as usize]);
        }
        let (again, again_entries) = b.finish(trailer.segment);
        assert_eq!(again, bytes);
        assert_eq!(again_entries, entries);
    }
}

fn lease(bytes: &[u8]) {
    if let Ok(l) = Lease::parse(bytes) {
        assert_eq!(Lease::parse(&l.encode()), Ok(l));
    }
}

fn credentials(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(c) = creds::parse(text) {
        assert!(!c.secret_access_key.expose().is_empty());
        // Debug output does not depend on the secret or the token at all.
        let mut other = c.clone();
        other.secret_access_key = creds::Secret::new("another secret");
        other.session_token = c.session_token.as_ref().map(|_| creds::Secret::new("t"));
        assert_eq!(format!("{c:?}"), format!("{other:?}"));
    }
}

fn name(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Some(n) = parse_segment_name(text) {
        assert_eq!(
            segment_key("", n),
            format!("seg/{}", text.to_ascii_lowercase())
        );
    }
}
