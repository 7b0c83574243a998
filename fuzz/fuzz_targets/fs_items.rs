//! wring-fs's parsers of what it reads back from its store and of what users type: inode items,
//! extent items (inline or pointing into the data file), POSIX ACL attributes, mount options
//! and compression specs. On arbitrary bytes none panics, and what parses encodes back to what
//! parses the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_fs::acl::Acl;
use wring_fs::options::Options;
use wring_fs::store::records::{self, ExtentHeader, Inode};

fuzz_target!(|data: &[u8]| {
    if let Some(i) = Inode::from_bytes(data) {
        assert_eq!(Inode::from_bytes(&i.to_bytes()), Some(i));
    }
    if let (Some(h), Some(s)) = (ExtentHeader::decode(data), records::stored(data)) {
        assert!(s.len() <= data.len() as u64 || matches!(s, records::Stored::External(..)));
        let _ = h;
    }
    if let Ok(a) = Acl::parse(data) {
        assert_eq!(a.to_bytes(), data);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(o) = Options::parse(text) {
            let again = Options::parse(&o.to_string()).expect("options print as they parse");
            assert_eq!(again.to_string(), o.to_string());
        }
        let _ = wring_engine::CompressSpec::parse(text);
    }
});
