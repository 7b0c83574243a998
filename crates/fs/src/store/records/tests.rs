//! The records' codecs: round trips, damaged fields named, and (property tests) any bytes
//! decode to a record or a typed error, never a panic, and every truncation of a good record
//! is an error naming it.

use proptest::prelude::*;
use wring_engine::Algorithm;

use super::*;

#[test]
fn inode_round_trip() {
    let mut i = Inode::new(Kind::File, 0o644, 1, 2);
    i.size = 12345;
    i.disk = 999;
    i.bytes = 8192;
    i.extent_size = 131072;
    i.flags = FLAG_NOCOMPRESS;
    i.mtime = Time { secs: -5, nsecs: 7 };
    assert_eq!(Inode::decode(&i.to_bytes()), Ok(i));
}

/// The layout is the one stores were written with (format versions 1 to 4): the old
/// appending encoder's bytes, spelled out.
#[test]
fn inode_bytes_are_the_format_s() {
    let i = Inode {
        kind: Kind::Dir,
        flags: 0x81,
        perm: 0o755,
        uid: 1000,
        gid: 1001,
        nlink: 3,
        rdev: 0x0102_0304,
        size: 0x1122_3344_5566,
        disk: 77,
        bytes: 8192,
        extent_size: 131072,
        atime: Time { secs: -2, nsecs: 9 },
        mtime: Time { secs: 5, nsecs: 0 },
        ctime: Time { secs: 6, nsecs: 1 },
    };
    let mut want = vec![2u8, 0x81];
    for v in [0o755u32, 1000, 1001, 3, 0x0102_0304, 0] {
        want.extend_from_slice(&v.to_le_bytes());
    }
    want.extend_from_slice(&0x1122_3344_5566u64.to_le_bytes());
    want.extend_from_slice(&77u64.to_le_bytes());
    want.extend_from_slice(&131072u32.to_le_bytes());
    for (s, n) in [(-2i64, 9u32), (5, 0), (6, 1)] {
        want.extend_from_slice(&s.to_le_bytes());
        want.extend_from_slice(&n.to_le_bytes());
    }
    assert_eq!(want.len(), INODE_LEN_V3);
    want.extend_from_slice(&8192u64.to_le_bytes());
    assert_eq!(i.to_bytes(), want);
    assert_eq!((INODE_LEN, INODE_LEN_V3), (90, 82));
}

/// A record from before format version 4 has no `bytes`: it decodes with its stored bytes in
/// their place (what `st_blocks` showed then), and re-encodes at today's length.
#[test]
fn an_inode_item_from_before_bytes_decodes() {
    let mut i = Inode::new(Kind::File, 0o644, 1, 2);
    i.size = 1 << 20;
    i.disk = 5000;
    i.bytes = 1 << 20;
    let old = &i.to_bytes()[..INODE_LEN_V3];
    let back = Inode::decode(old).unwrap();
    assert_eq!(back.bytes, 5000);
    assert_eq!(
        Inode {
            bytes: i.bytes,
            ..back.clone()
        },
        i
    );
    assert_eq!(back.to_bytes().len(), INODE_LEN);
    let e = Inode::decode(&i.to_bytes()[..INODE_LEN_V3 + 4]).unwrap_err();
    assert_eq!((e.record, e.field), ("inode", "bytes"));
    assert_eq!(
        (covered(0), covered(1), covered(4096), covered(4097)),
        (0, 4096, 4096, 8192)
    );
}

#[test]
fn extent_round_trip() {
    let h = ExtentHeader {
        encoding: Encoding::Compressed(Algorithm::Zstd, -3),
        ram_len: 4096,
        crc: 7,
        seq: 9,
        dict: 3,
    };
    let b = h.encode(b"abc");
    assert_eq!(ExtentHeader::decode(&b), Ok(h.clone()));
    assert_eq!(&b[EXTENT_HEADER_LEN..], b"abc");
    assert_eq!(b[..4], [1, 3, (-3i8) as u8, 3]);
    assert_eq!(b[4..8], 4096u32.to_le_bytes());
    assert_eq!(stored(&b), Ok(Stored::Inline(b"abc")));
    let ext = external_item(&b, 1 << 40).unwrap();
    assert_eq!(ext[0], 2);
    assert_eq!(ext[1..EXTENT_HEADER_LEN], b[1..EXTENT_HEADER_LEN]);
    assert_eq!(ext[20..28], (1u64 << 40).to_le_bytes());
    assert_eq!(ext[28..32], 3u32.to_le_bytes());
    assert_eq!(ExtentHeader::decode(&ext), Ok(h));
    assert_eq!(stored(&ext), Ok(Stored::External(1 << 40, 3)));
    assert_eq!(stored(&ext[..31]).unwrap_err().field, "len");
    assert_eq!(stored(&[9u8; 40]).unwrap_err().field, "version");
    let mut moved = ext;
    set_external_offset(&mut moved, 5).unwrap();
    assert_eq!(stored(&moved), Ok(Stored::External(5, 3)));
    let mut inline = b.clone();
    assert!(set_external_offset(&mut inline, 5).is_err());
    assert_eq!(inline, b);
    ExtentHeader::set_seq(&mut moved, 77).unwrap();
    assert_eq!(ExtentHeader::decode(&moved).unwrap().seq, 77);
    assert!(ExtentHeader::set_seq(&mut [1u8; 12], 1).is_err());
}

/// Regression: a damaged item with a time past what SystemTime holds made getattr panic.
#[test]
fn a_time_no_system_time_holds_is_refused_and_never_panics() {
    let mut i = Inode::new(Kind::File, 0o644, 1, 2);
    i.atime = Time {
        secs: i64::MAX,
        nsecs: 2_000_000_000,
    };
    let b = i.to_bytes();
    let why = Inode::decode(&b).unwrap_err();
    assert_eq!(why.field, "atime.nsecs", "{why}");
    // Converting it anyway saturates instead of panicking.
    let _ = i.atime.to_system();
    for secs in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX] {
        for nsecs in [0, 999_999_999] {
            let t = Time { secs, nsecs };
            assert_eq!(Time::from_system(t.to_system()), t, "{t:?}");
        }
    }
}

#[test]
fn damaged_inode_fields_are_refused_by_name() {
    let good = Inode::new(Kind::File, 0o644, 1, 2);
    type Damage = fn(&mut Inode);
    let cases: [(&str, Damage); 6] = [
        ("perm", |i| i.perm = 0o10000),
        ("size", |i| i.size = MAX_FILE_SIZE + 1),
        ("disk", |i| i.disk = u64::MAX),
        ("bytes", |i| i.bytes = MAX_FILE_SIZE + 1),
        ("extent_size", |i| i.extent_size = 4097),
        ("ctime.nsecs", |i| i.ctime.nsecs = 1_000_000_000),
    ];
    for (field, damage) in cases {
        let mut i = good.clone();
        damage(&mut i);
        let why = Inode::decode(&i.to_bytes()).unwrap_err();
        assert_eq!((why.record, why.field), ("inode", field), "{why}");
    }
    let mut b = good.to_bytes();
    b[0] = 9;
    assert_eq!(
        Inode::decode(&b).unwrap_err().to_string(),
        "inode record: field kind: invalid value 9: not a kind of inode"
    );
    assert!(Inode::decode(&b[1..]).is_err());
    let long = [good.to_bytes(), vec![0]].concat();
    assert!(matches!(
        Inode::decode(&long).unwrap_err().problem,
        Problem::Long { want: 90, have: 91 }
    ));
    assert_eq!(
        Kind::of_entry(0).unwrap_err().to_string(),
        "directory entry record: field kind: invalid value 0: not a kind of inode"
    );
}

#[test]
fn damaged_extent_headers_are_refused_by_name() {
    let h = ExtentHeader {
        encoding: Encoding::Compressed(Algorithm::Zlib, 9),
        ram_len: 4096,
        crc: 0,
        seq: 1,
        dict: 0,
    };
    let field = |b: &[u8]| ExtentHeader::decode(b).unwrap_err().field;
    let mut b = h.encode(b"x");
    b[2] = 10; // zlib has no level 10
    assert_eq!(field(&b), "level");
    let mut b = h.encode(b"x");
    b[3] = 1; // a dictionary with zlib
    assert_eq!(field(&b), "dict");
    let mut b = h.encode(b"x");
    b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(field(&b), "ram_len");
    let mut b = h.encode(b"x");
    b[1] = 8;
    assert_eq!(field(&b), "compression");
    let far = external_item(&h.encode(b"xyz"), u64::MAX - 1).unwrap();
    assert_eq!(stored(&far).unwrap_err().field, "offset");
    assert_eq!(field(&[]), "version");
}

/// Any header an encoder may be handed: every encoding with a level its algorithm takes.
fn any_header() -> impl Strategy<Value = ExtentHeader> {
    let algs = prop::sample::select(vec![
        Algorithm::Zlib,
        Algorithm::Lzo,
        Algorithm::Zstd,
        Algorithm::Lz4,
        Algorithm::Lz4hc,
        Algorithm::LzoRle,
        Algorithm::Deflate,
    ]);
    let encoding = prop_oneof![
        Just(Encoding::Raw),
        (algs, any::<i8>()).prop_map(|(a, l)| {
            let l = i32::from(l);
            let ok = l == 0 || (a.min_level()..=a.max_level()).contains(&l);
            Encoding::Compressed(a, if ok { l } else { 0 })
        }),
    ];
    (
        encoding,
        0..=crate::options::MAX_MAX_EXTENT as u32,
        any::<u32>(),
        any::<u64>(),
        any::<u8>(),
    )
        .prop_map(|(encoding, ram_len, crc, seq, dict)| ExtentHeader {
            dict: match encoding {
                Encoding::Compressed(Algorithm::Zstd, _) => dict,
                _ => 0,
            },
            encoding,
            ram_len,
            crc,
            seq,
        })
}

/// Any inode this filesystem could write.
fn any_inode() -> impl Strategy<Value = Inode> {
    let time = (any::<i64>(), 0..1_000_000_000u32).prop_map(|(secs, nsecs)| Time { secs, nsecs });
    let kind = prop::sample::select(vec![
        Kind::File,
        Kind::Dir,
        Kind::Symlink,
        Kind::Fifo,
        Kind::Socket,
        Kind::Char,
        Kind::Block,
    ]);
    (
        (kind, any::<u8>(), 0..=0o7777u32, any::<[u32; 3]>()),
        (
            any::<u32>(),
            [0..=MAX_FILE_SIZE, 0..=MAX_FILE_SIZE, 0..=MAX_FILE_SIZE],
        ),
        0..=(crate::options::MAX_MAX_EXTENT as u32 / 4096),
        [time.clone(), time.clone(), time],
    )
        .prop_map(
            |((kind, flags, perm, [uid, gid, nlink]), (rdev, [size, disk, bytes]), e, t)| Inode {
                kind,
                flags,
                perm,
                uid,
                gid,
                nlink,
                rdev,
                size,
                disk,
                bytes,
                extent_size: e * 4096,
                atime: t[0],
                mtime: t[1],
                ctime: t[2],
            },
        )
}

proptest! {
    /// Every inode encodes to 90 bytes that decode to it; its first 82 are the item of an
    /// older store, which decodes to it with `disk` as its `bytes`; every other truncation is
    /// an error naming the inode record and a field.
    #[test]
    fn every_inode_round_trips_and_every_truncation_is_named(i in any_inode()) {
        let b = i.to_bytes();
        prop_assert_eq!(b.len(), INODE_LEN);
        prop_assert_eq!(Inode::decode(&b), Ok(i.clone()));
        prop_assert_eq!(Inode::decode(&b[..INODE_LEN_V3]), Ok(Inode { bytes: i.disk, ..i }));
        for n in (0..INODE_LEN).filter(|&n| n != INODE_LEN_V3) {
            let e = Inode::decode(&b[..n]).unwrap_err();
            prop_assert_eq!(e.record, "inode");
            prop_assert!(matches!(e.problem, Problem::Short { have, .. } if have == n), "{}", e);
        }
    }

    /// Every header round-trips inline and external; every truncation of either item is an
    /// error naming the extent item and a field (an inline item's data may be cut anywhere).
    #[test]
    fn every_extent_item_round_trips_and_every_truncation_is_named(
        h in any_header(),
        data in prop::collection::vec(any::<u8>(), 0..64),
        offset in 0..MAX_FILE_SIZE / 2,
    ) {
        let inline = h.encode(&data);
        prop_assert_eq!(ExtentHeader::decode(&inline), Ok(h.clone()));
        prop_assert_eq!(stored(&inline), Ok(Stored::Inline(&data)));
        let ext = external_item_of(&h, data.len(), offset);
        prop_assert_eq!(ExtentHeader::decode(&ext), Ok(h.clone()));
        prop_assert_eq!(stored(&ext), Ok(Stored::External(offset, data.len() as u64)));
        prop_assert_eq!(external_item(&inline, offset), Ok(ext));
        for n in 0..EXTENT_HEADER_LEN {
            let e = ExtentHeader::decode(&inline[..n]).unwrap_err();
            prop_assert_eq!(e.record, "extent item");
            prop_assert!(!e.field.is_empty());
        }
        for n in 0..EXTERNAL_ITEM_LEN {
            let e = ExtentHeader::decode(&ext[..n]).unwrap_err();
            prop_assert_eq!(e.record, "extent item");
            prop_assert!(!e.field.is_empty());
        }
    }

    /// Whatever bytes an inode item holds, decoding never panics, what decodes re-encodes to
    /// an item that decodes the same, what does not names the inode record and a field, and
    /// its times convert.
    #[test]
    fn any_inode_item(b in prop::collection::vec(any::<u8>(), 0..=INODE_LEN + 2)) {
        match Inode::decode(&b) {
            Ok(i) => {
                prop_assert_eq!(Inode::decode(&i.to_bytes()), Ok(i.clone()));
                for t in [i.atime, i.mtime, i.ctime] {
                    prop_assert_eq!(Time::from_system(t.to_system()), t);
                }
            }
            Err(e) => prop_assert!(e.record == "inode" && !e.field.is_empty(), "{}", e),
        }
    }

    /// Any time converts without panicking; a valid one round-trips.
    #[test]
    fn any_time(secs in any::<i64>(), nsecs in any::<u32>()) {
        let t = Time { secs, nsecs };
        let back = Time::from_system(t.to_system());
        if t.is_valid() {
            prop_assert_eq!(back, t);
        }
    }

    /// Whatever bytes an extent item holds, decoding never panics, what decodes re-encodes
    /// the same, and what does not names the extent item and a field; an external item's
    /// range fits in a file.
    #[test]
    fn any_extent_item(b in prop::collection::vec(any::<u8>(), 0..64)) {
        match ExtentHeader::decode(&b) {
            Ok(h) => {
                if let Ok(Stored::Inline(data)) = stored(&b) {
                    prop_assert_eq!(ExtentHeader::decode(&h.encode(data)), Ok(h));
                }
            }
            Err(e) => prop_assert!(e.record == "extent item" && !e.field.is_empty(), "{}", e),
        }
        if let Ok(Stored::External(at, len)) = stored(&b) {
            prop_assert!(at.checked_add(len).is_some_and(|e| e <= MAX_FILE_SIZE));
        }
    }
}

#[test]
fn negative_times() {
    let t = Time {
        secs: -10,
        nsecs: 5,
    };
    assert_eq!(Time::from_system(t.to_system()), t);
}
