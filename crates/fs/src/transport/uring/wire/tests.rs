use super::*;
use proptest::prelude::*;

/// A request as the kernel lays it out on a ring entry.
fn request(opcode: u32, nodeid: u64, op: &[u8], payload: &[u8]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut in_out = vec![0u8; IN_OUT];
    in_out[0..4].copy_from_slice(&((IN_HEADER + op.len() + payload.len()) as u32).to_le_bytes());
    in_out[4..8].copy_from_slice(&opcode.to_le_bytes());
    in_out[8..16].copy_from_slice(&77u64.to_le_bytes());
    in_out[16..24].copy_from_slice(&nodeid.to_le_bytes());
    in_out[24..28].copy_from_slice(&1000u32.to_le_bytes());
    in_out[28..32].copy_from_slice(&100u32.to_le_bytes());
    in_out[32..36].copy_from_slice(&4242u32.to_le_bytes());
    // op_in is not cleared between requests: what the header does not cover is stale.
    let mut op_in = vec![0xa5u8; IN_OUT];
    op_in[..op.len()].copy_from_slice(op);
    (in_out, op_in, payload.to_vec())
}

fn le(fields: &[u64], widths: &[usize]) -> Vec<u8> {
    let mut v = Vec::new();
    for (&f, &w) in fields.iter().zip(widths) {
        v.extend_from_slice(&f.to_le_bytes()[..w]);
    }
    v
}

#[test]
fn header_fields() {
    let (i, o, p) = request(1, 9, &[], b"name\0");
    let (h, r) = parse(&i, &o, &p).unwrap();
    assert_eq!(
        h,
        Header {
            unique: 77,
            opcode: 1,
            nodeid: 9,
            uid: 1000,
            gid: 100,
            pid: 4242
        }
    );
    assert_eq!(r, Request::Lookup { name: b"name" });
}

#[test]
fn names_come_from_the_payload_and_headers_from_op_in() {
    let op = le(&[0o100644, 0, 0o022, 0], &[4, 4, 4, 4]);
    let (i, o, p) = request(8, 1, &op, b"f\0");
    let want = Request::Mknod {
        name: b"f",
        mode: 0o100644,
        rdev: 0,
        umask: 0o022,
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
    let (i, o, p) = request(6, 1, &[], b"link\0/target\0");
    let want = Request::Symlink {
        name: b"link",
        target: b"/target",
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
}

#[test]
fn rename_reads_flags_only_from_rename2() {
    // RENAME's 8-byte header: the stale bytes after it are not flags.
    let (i, o, p) = request(12, 1, &5u64.to_le_bytes(), b"a\0b\0");
    let want = Request::Rename {
        newdir: 5,
        name: b"a",
        newname: b"b",
        flags: 0,
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
    let op = le(&[5, 1, 0], &[8, 4, 4]);
    let (i, o, p) = request(45, 1, &op, b"a\0b\0");
    match parse(&i, &o, &p).unwrap().1 {
        Request::Rename { flags, .. } => assert_eq!(flags, 1),
        r => panic!("{r:?}"),
    }
}

#[test]
fn write_takes_its_size_of_the_payload() {
    let op = le(&[0, 4096, 3, 4, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
    let (i, o, p) = request(WRITE, 3, &op, b"abcdef");
    let want = Request::Write {
        offset: 4096,
        kill_suidgid: true,
        data: b"abc",
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
    let op = le(&[0, 0, 10, 0, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
    let (i, o, p) = request(WRITE, 3, &op, b"short");
    assert!(matches!(parse(&i, &o, &p), Err(WireError::Short { .. })));
}

#[test]
fn setattr_fields_and_times() {
    let mut op = vec![0u8; 88];
    let valid = FATTR_MODE | FATTR_SIZE | FATTR_ATIME | FATTR_ATIME_NOW | FATTR_MTIME;
    op[0..4].copy_from_slice(&valid.to_le_bytes());
    op[16..24].copy_from_slice(&123u64.to_le_bytes());
    op[40..48].copy_from_slice(&(-2i64 as u64).to_le_bytes());
    op[60..64].copy_from_slice(&500_000_000u32.to_le_bytes());
    op[68..72].copy_from_slice(&0o100600u32.to_le_bytes());
    let (i, o, p) = request(4, 3, &op, &[]);
    let want = SetAttr {
        mode: Some(0o100600),
        size: Some(123),
        atime: Some(None),
        mtime: Some(Some(SystemTime::UNIX_EPOCH - Duration::from_millis(1500))),
        ..SetAttr::default()
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, Request::Setattr(want));
}

#[test]
fn unterminated_and_short_are_errors() {
    let (i, o, p) = request(1, 1, &[], b"no-nul");
    assert_eq!(
        parse(&i, &o, &p),
        Err(WireError::Unterminated { opcode: 1 })
    );
    assert!(matches!(
        parse(&i[..20], &o, &p),
        Err(WireError::Short { need: 40, .. })
    ));
    let (i, o, p) = request(43, 1, &[], &[]);
    assert!(parse(&i, &o[..8], &p).is_err());
}

#[test]
fn unknown_opcodes_are_unsupported() {
    for op in [2, 26, 31, 36, 40, 42, 46, 47, 52, 9999] {
        let (i, o, p) = request(op, 1, &[], &[]);
        assert_eq!(parse(&i, &o, &p).unwrap().1, Request::Unsupported, "{op}");
    }
}

#[test]
fn ioctl_and_tmpfile_take_their_fields_from_op_in() {
    // fuse_ioctl_in: fh, flags, cmd, arg, in_size, out_size; the input is the payload.
    let op = le(&[5, 0, 0x8008_6601, 0, 4, 4], &[8, 4, 4, 8, 4, 4]);
    let (i, o, p) = request(39, 3, &op, &[1, 2, 3, 4]);
    let want = Request::Ioctl {
        cmd: 0x8008_6601,
        input: &[1, 2, 3, 4],
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
    // An in_size beyond the payload is refused, not read past.
    let op = le(&[5, 0, 0x8008_6601, 0, 64, 4], &[8, 4, 4, 8, 4, 4]);
    let (i, o, p) = request(39, 3, &op, &[1, 2, 3, 4]);
    assert!(parse(&i, &o, &p).is_err());
    // fuse_create_in: flags, mode, umask, open_flags.
    let op = le(&[0o2, 0o100600, 0o022, 0], &[4, 4, 4, 4]);
    let (i, o, p) = request(51, 1, &op, &[]);
    let want = Request::Tmpfile {
        mode: 0o100600,
        umask: 0o022,
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
}

fn file_attr(t: SystemTime) -> FileAttr {
    FileAttr {
        ino: fuser::INodeNo(42),
        size: 5,
        blocks: 1,
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        kind: FileType::Symlink,
        perm: 0o777,
        nlink: 1,
        uid: 7,
        gid: 8,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

#[test]
fn entry_out_layout() {
    let mut b = vec![0xffu8; ENTRY_OUT];
    let t = SystemTime::UNIX_EPOCH - Duration::from_millis(1500);
    put_entry_out(&mut b, &Duration::from_millis(2500), &file_attr(t));
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(
        (u64_at(0), u64_at(8), u64_at(16), u64_at(24)),
        (42, 0, 2, 2)
    );
    assert_eq!((u32_at(32), u32_at(36)), (500_000_000, 500_000_000));
    // fuse_attr at 40: atime -1.5 s is -2 s + 0.5 s.
    assert_eq!(u64_at(40 + 24) as i64, -2);
    assert_eq!(u32_at(40 + 48), 500_000_000);
    assert_eq!(u32_at(40 + 60), libc::S_IFLNK | 0o777);
    assert_eq!((u32_at(40 + 68), u32_at(40 + 72)), (7, 8));
}

#[test]
fn dirents_are_padded_to_8_and_stop_when_full() {
    let mut b = vec![0xffu8; 64];
    let n = put_dirent(&mut b, 5, 1, FileType::Directory, b"abc", None).unwrap();
    assert_eq!(n, 32);
    assert_eq!(&b[24..32], b"abc\0\0\0\0\0");
    assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 4);
    assert_eq!(
        put_dirent(&mut b[..31], 5, 1, FileType::Directory, b"abc", None),
        None
    );
    let a = file_attr(SystemTime::UNIX_EPOCH);
    let mut b = vec![0u8; 256];
    let plus = Some((&Duration::from_secs(1), &a));
    assert_eq!(put_dirent(&mut b, 42, 2, a.kind, b"x", plus), Some(160));
}

proptest! {
    #[test]
    fn parse_never_panics(
        opcode in prop_oneof![0u32..60, any::<u32>()],
        op_in in proptest::collection::vec(any::<u8>(), 0..130),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        short in 0usize..48,
    ) {
        let (i, _, _) = request(opcode, 1, &[], &[]);
        let _ = parse(&i, &op_in, &payload);
        let _ = parse(&i[..short.min(i.len())], &op_in, &payload);
    }

    #[test]
    fn times_go_through_the_wire_unchanged(secs in -(1i64 << 40)..(1i64 << 40), ns in 0u32..1_000_000_000) {
        let t = if secs >= 0 {
            SystemTime::UNIX_EPOCH + Duration::new(secs as u64, ns)
        } else {
            SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(ns.into())
        };
        let (s, n) = secs_nsecs(t);
        prop_assert_eq!(time(4, s, n), Ok(t));
    }
}

/// The serving loop peeks at a READ's size before decoding (to choose the thread's CPUs):
/// it agrees with the decoder, and says nothing for any other request or a short buffer.
#[test]
fn read_size_peeks_what_parse_decodes() {
    let op = le(&[3, 1 << 20, 128 << 10, 0], &[8, 8, 4, 4]);
    let (i, o, p) = request(READ, 9, &op, &[]);
    assert_eq!(read_size(&i, &o), Some(128 << 10));
    match parse(&i, &o, &p).unwrap().1 {
        Request::Read { size, .. } => assert_eq!(size, 128 << 10),
        other => panic!("{other:?}"),
    }
    let (i, o, _) = request(WRITE, 9, &op, &[]);
    assert_eq!(read_size(&i, &o), None);
    assert_eq!(read_size(&i[..3], &o), None);
    let (i, _, _) = request(READ, 9, &op, &[]);
    assert_eq!(read_size(&i, &[0u8; 8]), None);
}
