//! Every record wring-fs reads back from its store and interprets, on arbitrary bytes: inode
//! items, extent items (inline or in the data file), directory entries' kind byte, POSIX ACL
//! xattrs, times, and the dictionary table's records (a 4-byte key, then zstd's dictionary
//! format). The first byte picks the record, the rest is the record.
//!
//! Decoding never panics: it either gives a record, valid, which re-encodes to bytes that
//! decode the same, or a typed error ([`RecordError`]) naming the record it was decoding and
//! one of its fields (the dictionary table: the key or the bytes). What the filesystem then
//! builds from a record that decodes — the FUSE attributes, the byte range of the file's
//! last extent, the data-file range of stored bytes — is computed without overflow and
//! converts back exactly.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wring_fs::acl::Acl;
use wring_fs::options::MAX_MAX_EXTENT;
use wring_fs::store::records::{
    external_item, stored, ExtentHeader, Inode, Kind, RecordError, Stored, Time, MAX_FILE_SIZE,
};

/// A decoder's error names `record` and a field of it, and says so in its text.
fn named(e: &RecordError, record: &str) {
    assert_eq!(e.record, record, "{e}");
    assert!(!e.field.is_empty(), "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{record} record: field {}: ", e.field)),
        "{text}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, record)) = data.split_first() else {
        return;
    };
    match which % 6 {
        0 => inode(record),
        1 => extent_item(record),
        2 => dirent(record),
        3 => acl(record),
        4 => time(record),
        _ => dictionary(record),
    }
});

/// A record of the dictionary table: an id an extent can name, and a dictionary zstd
/// digests, whose bytes are the record's.
fn dictionary(b: &[u8]) {
    let Some((key, bytes)) = b.split_first_chunk::<4>() else {
        return;
    };
    let key = u32::from_le_bytes(*key);
    match wring_fs::store::dicts::record(key, bytes) {
        Ok((id, dict)) => {
            assert_eq!(u32::from(id), key);
            assert!(id != 0);
            assert_eq!(dict.bytes(), bytes);
        }
        Err(e) => {
            named(&e, "dictionary");
            assert!(["id", "bytes"].contains(&e.field), "{e}");
        }
    }
}

fn inode(b: &[u8]) {
    let i = match Inode::decode(b) {
        Ok(i) => i,
        Err(e) => return named(&e, "inode"),
    };
    assert_eq!(
        Inode::decode(&i.to_bytes()).as_ref(),
        Ok(&i),
        "re-encoded inode"
    );
    let attr = wring_fs::wire::attr(7, &i, 131072);
    assert_eq!(attr.size, i.size);
    assert_eq!(Time::from_system(attr.atime), i.atime);
    assert_eq!(Time::from_system(attr.mtime), i.mtime);
    assert_eq!(Time::from_system(attr.ctime), i.ctime);
    assert!(i.size <= MAX_FILE_SIZE);
    // The extent holding the last byte, as the read and write paths compute it.
    if i.extent_size != 0 {
        let e = u64::from(i.extent_size);
        let cstart = (i.size / e) * e;
        assert!(cstart.checked_add(e).is_some(), "last extent of {i:?}");
    }
}

fn extent_item(b: &[u8]) {
    let where_ = stored(b);
    match &where_ {
        Ok(Stored::External(offset, len)) => {
            assert!(offset
                .checked_add(*len)
                .is_some_and(|end| end <= MAX_FILE_SIZE));
        }
        Ok(Stored::Inline(_)) => {}
        Err(e) => named(e, "extent item"),
    }
    let h = match ExtentHeader::decode(b) {
        Ok(h) => h,
        Err(e) => return named(&e, "extent item"),
    };
    assert!(h.ram_len as usize <= MAX_MAX_EXTENT, "{h:?}");
    match where_.expect("a header that decodes has stored bytes") {
        Stored::Inline(bytes) => {
            assert_eq!(ExtentHeader::decode(&h.encode(bytes)).as_ref(), Ok(&h));
        }
        Stored::External(offset, len) => {
            if len <= 1 << 16 {
                let item = external_item(&h.encode(&vec![0; len as usize]), offset)
                    .expect("an inline item that decodes moves out");
                assert_eq!(ExtentHeader::decode(&item).as_ref(), Ok(&h));
                assert_eq!(stored(&item), Ok(Stored::External(offset, len)));
            }
        }
    }
}

/// A directory entry's value is (inode, kind byte); only the kind byte is interpreted.
fn dirent(b: &[u8]) {
    if let Some(&k) = b.first() {
        match Kind::of_entry(k) {
            Ok(kind) => assert_eq!(kind as u8, k),
            Err(e) => named(&e, "directory entry"),
        }
    }
}

fn acl(b: &[u8]) {
    if let Ok(a) = Acl::parse(b) {
        assert_eq!(a.to_bytes(), b);
    }
}

/// Twelve bytes as an inode item stores a time: seconds, then nanoseconds.
fn time(b: &[u8]) {
    let Some(b) = b.get(..12) else {
        return;
    };
    let mut secs = [0; 8];
    secs.copy_from_slice(&b[..8]);
    let t = Time {
        secs: i64::from_le_bytes(secs),
        nsecs: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
    };
    let back = Time::from_system(t.to_system());
    if t.is_valid() {
        assert_eq!(back, t);
    }
}
