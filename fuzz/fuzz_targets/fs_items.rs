//! wring-fs's parsers of what it reads back from its store and of what users type: inode items,
//! extent items (inline or pointing into the data file), POSIX ACL attributes, mount options,
//! compression specs and the defragment ioctl's argument (refused only with the kernel's
//! EINVAL or EOPNOTSUPP). On arbitrary bytes none panics, and what parses encodes back to
//! what parses the same. An extent item whose header decodes has its stored bytes where the header
//! says: inline, exactly the bytes after the header; external, the (offset, length) written at
//! bytes 20..32 of a 32-byte item. Re-encoding the header gives back every byte the decoder
//! reads (a raw extent's level byte is not read). An inode or extent item
//! that does not decode gives a typed error naming its record and a field, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_fs::acl::Acl;
use wring_fs::options::Options;
use wring_fs::store::records::{
    self, external_item, Encoding, ExtentHeader, Inode, Stored, EXTENT_HEADER_LEN,
    EXTERNAL_ITEM_LEN,
};
use wring_fs::DefragArgs;

fuzz_target!(|data: &[u8]| {
    match Inode::decode(data) {
        Ok(i) => assert_eq!(Inode::decode(&i.to_bytes()), Ok(i)),
        Err(e) => assert!(e.record == "inode" && !e.field.is_empty(), "{e}"),
    }
    match ExtentHeader::decode(data) {
        Ok(h) => check_extent_item(data, &h),
        Err(e) => assert!(e.record == "extent item" && !e.field.is_empty(), "{e}"),
    }
    if let Ok(a) = DefragArgs::from_bytes(data) {
        assert_eq!(a.to_bytes()[..32], data[..32]);
        if let Err(e) = a.check_flags().and_then(|()| a.rewrite()) {
            assert!([libc::EINVAL, libc::EOPNOTSUPP].contains(&e.errno()));
        }
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

/// The properties of an extent item `data` whose header decoded to `h`.
fn check_extent_item(data: &[u8], h: &ExtentHeader) {
    let stored = records::stored(data).expect("a header that decodes has stored bytes");
    assert_eq!(records::stored_len(data), stored.len());
    // The bytes the decoder reads: version, algorithm, level (compressed only), then the
    // dictionary, ram_len, crc and seq.
    let read = |b: &[u8]| -> Vec<u8> {
        let level = if matches!(h.encoding, Encoding::Compressed(..)) {
            b[2]
        } else {
            0
        };
        [&b[..2], &[level], &b[3..EXTENT_HEADER_LEN]].concat()
    };
    match stored {
        Stored::Inline(bytes) => {
            assert_eq!(
                bytes,
                &data[EXTENT_HEADER_LEN..],
                "inline bytes are the item's tail"
            );
            let again = h.encode(bytes);
            assert_eq!(again.len(), data.len());
            assert_eq!(read(&again), read(data), "re-encoded header differs");
            assert_eq!(&again[EXTENT_HEADER_LEN..], bytes);
            assert_eq!(ExtentHeader::decode(&again).as_ref(), Ok(h));
        }
        Stored::External(offset, len) => {
            assert_eq!(data.len(), EXTERNAL_ITEM_LEN);
            assert_eq!(data[20..28], offset.to_le_bytes());
            assert_eq!(
                u64::from(u32::from_le_bytes([data[28], data[29], data[30], data[31]])),
                len
            );
            // Moving an inline item of that length out to `offset` gives the same item.
            if len <= 1 << 16 {
                let inline = h.encode(&vec![0; len as usize]);
                let item = external_item(&inline, offset).expect("an inline item moves out");
                assert_eq!(read(&item), read(data), "external item header differs");
                assert_eq!(item[EXTENT_HEADER_LEN..], data[EXTENT_HEADER_LEN..]);
                assert_eq!(ExtentHeader::decode(&item).as_ref(), Ok(h));
            }
        }
    }
}
