use super::out::secs_nsecs;
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
    for op in [31, 40, 46, 9999] {
        let (i, o, p) = request(op, 1, &[], &[]);
        assert_eq!(parse(&i, &o, &p).unwrap().1, Request::Unsupported, "{op}");
    }
}

#[test]
fn copy_file_range_takes_its_fields_from_op_in() {
    // fuse_copy_file_range_in: fh_in, off_in, nodeid_out, fh_out, off_out, len, flags.
    let op = le(&[7, 4096, 42, 8, 1 << 20, 3 << 30, 0], &[8; 7]);
    let (i, o, p) = request(47, 5, &op, &[]);
    let (h, r) = parse(&i, &o, &p).unwrap();
    assert_eq!(h.nodeid, 5);
    assert_eq!(
        r,
        Request::CopyFileRange {
            off_in: 4096,
            nodeid_out: 42,
            off_out: 1 << 20,
            len: 3 << 30,
            flags: 0,
        }
    );
    assert!(parse(&i, &o[..48], &p).is_err());
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
    let (i, o, p) = request(51, 1, &op, b"/\0");
    let want = Request::Tmpfile {
        mode: 0o100600,
        umask: 0o022,
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
    let (i, o, p) = request(35, 1, &op, b"new\0");
    let want = Request::Create {
        name: b"new",
        mode: 0o100600,
        umask: 0o022,
        flags: 0o2,
    };
    assert_eq!(parse(&i, &o, &p).unwrap().1, want);
}

/// A request as `/dev/fuse` gives it: the three parts one after the other.
fn dev_request(opcode: u32, op: &[u8], payload: &[u8]) -> Vec<u8> {
    let (i, _, p) = request(opcode, 9, op, payload);
    let mut v = i[..IN_HEADER].to_vec();
    v.extend_from_slice(op);
    v.extend_from_slice(&p);
    v
}

#[test]
fn split_cuts_dev_fuse_requests_as_the_ring_lays_them_out() {
    let op = le(&[0o100644, 0, 0o022, 0], &[4, 4, 4, 4]);
    let r = dev_request(8, &op, b"f\0");
    let (i, o, p) = split(&r).unwrap();
    assert_eq!((i.len(), o, p), (IN_HEADER, &op[..], &b"f\0"[..]));
    assert!(matches!(
        parse(i, o, p).unwrap().1,
        Request::Mknod { name: b"f", .. }
    ));
    // Names only: no operation header.
    let r = dev_request(1, &[], b"name\0");
    assert_eq!(parse_dev(&r).unwrap().1, Request::Lookup { name: b"name" });
    // A WRITE's data follows its 40-byte header.
    let op = le(&[0, 8, 3, 0, 0, 0, 0], &[8, 8, 4, 4, 8, 4, 4]);
    let r = dev_request(WRITE, &op, b"xyz");
    match parse_dev(&r).unwrap().1 {
        Request::Write { offset, data, .. } => assert_eq!((offset, data), (8, &b"xyz"[..])),
        other => panic!("{other:?}"),
    }
    // The header's length must be what was read; an operation header must be whole.
    let mut r = dev_request(1, &[], b"name\0");
    r.push(0);
    assert!(matches!(split(&r), Err(WireError::Length { .. })));
    let r = dev_request(WRITE, &op[..20], &[]);
    assert!(matches!(split(&r), Err(WireError::Short { .. })));
    assert!(split(&r[..30]).is_err());
}

fn parse_dev(r: &[u8]) -> Result<(Header, Request<'_>), WireError> {
    let (i, o, p) = split(r)?;
    parse(i, o, p)
}

#[test]
fn init_forget_and_statx_decode() {
    // fuse_init_in: major, minor, max_readahead, flags (with INIT_EXT), flags2.
    let op = le(&[7, 44, 128 << 10, (1 << 30) | 1, 1 << 9], &[4, 4, 4, 4, 4]);
    let mut op64 = op.clone();
    op64.resize(64, 0);
    let want = InitIn {
        major: 7,
        minor: 44,
        max_readahead: 128 << 10,
        flags: (1 << 30) | 1 | (1 << 41),
    };
    assert_eq!(
        parse_dev(&dev_request(INIT, &op64, &[])).unwrap().1,
        Request::Init(want)
    );
    // An old kernel's 16-byte fuse_init_in without INIT_EXT.
    let old = le(&[7, 31, 4096, 1], &[4, 4, 4, 4]);
    match parse_dev(&dev_request(INIT, &old, &[])).unwrap().1 {
        Request::Init(i) => assert_eq!((i.minor, i.flags), (31, 1)),
        other => panic!("{other:?}"),
    }
    let r = dev_request(FORGET, &3u64.to_le_bytes(), &[]);
    assert_eq!(parse_dev(&r).unwrap().1, Request::Forget { nlookup: 3 });
    let items = le(&[5, 1, 6, 2], &[8, 8, 8, 8]);
    let r = dev_request(BATCH_FORGET, &le(&[2, 0], &[4, 4]), &items);
    match parse_dev(&r).unwrap().1 {
        Request::BatchForget { items } => {
            assert_eq!(forgets(items).collect::<Vec<_>>(), [(5, 1), (6, 2)])
        }
        other => panic!("{other:?}"),
    }
    let r = dev_request(BATCH_FORGET, &le(&[3, 0], &[4, 4]), &items);
    assert!(parse_dev(&r).is_err(), "a count beyond the items");
    let r = dev_request(52, &[0u8; 24], &[]);
    assert_eq!(parse_dev(&r).unwrap().1, Request::Statx);
    let r = dev_request(14, &le(&[0o101, 0], &[4, 4]), &[]);
    assert_eq!(parse_dev(&r).unwrap().1, Request::Open { flags: 0o101 });
}

#[test]
fn statx_init_and_notify_layouts() {
    let t = SystemTime::UNIX_EPOCH + Duration::new(1000, 5);
    let mut a = file_attr(t);
    a.kind = FileType::RegularFile;
    a.perm = 0o640;
    a.rdev = (8 << 8) | 1 | (0x12 << 20);
    let x = StatxExtra {
        attributes: 0x30,
        attributes_mask: 0x74,
    };
    let mut b = vec![0xffu8; STATX_OUT];
    assert_eq!(
        put_statx_out(&mut b, &Duration::from_secs(60), &a, &x),
        Some(288)
    );
    let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let s = 32;
    assert_eq!((u64_at(0), u32_at(8)), (60, 0));
    assert_eq!(u32_at(s), STATX_BASIC_STATS);
    assert_eq!((u64_at(s + 8), u64_at(s + 56)), (0x30, 0x74));
    assert_eq!(
        u16::from_le_bytes([b[s + 28], b[s + 29]]) as u32,
        libc::S_IFREG | 0o640
    );
    assert_eq!((u64_at(s + 32), u64_at(s + 40)), (42, 5));
    assert_eq!((u64_at(s + 64), u32_at(s + 72)), (1000, 5));
    assert_eq!(u64_at(s + 80), 0, "no birth time");
    assert_eq!((u32_at(s + 128), u32_at(s + 132)), (8, 1 | (0x12 << 8)));
    let out = InitOut {
        minor: 40,
        max_readahead: 4 << 20,
        flags: 1 | (1 << 41),
        max_background: 64,
        congestion_threshold: 48,
        max_write: 1 << 20,
        time_gran: 1,
        max_pages: 256,
    };
    let b = init_out(&out);
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(
        (u32_at(0), u32_at(4), u32_at(8), u32_at(12)),
        (7, 40, 4 << 20, 1)
    );
    assert_eq!((u32_at(20), u32_at(24), u32_at(32)), (1 << 20, 1, 1 << 9));
    assert_eq!(u16::from_le_bytes([b[28], b[29]]), 256);
    let n = inval_inode(7, -1, 0);
    assert_eq!(&n[..16], &out_header(0, NOTIFY_INVAL_INODE, 24));
    assert_eq!(i64::from_le_bytes(n[24..32].try_into().unwrap()), -1);
}

fn file_attr(t: SystemTime) -> FileAttr {
    FileAttr {
        ino: 42,
        size: 5,
        blocks: 1,
        atime: t,
        mtime: t,
        ctime: t,
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
    let n = put_entry_out(&mut b, &Duration::from_millis(2500), &file_attr(t));
    assert_eq!(n, Some(ENTRY_OUT));
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

#[test]
fn writers_refuse_a_short_buffer() {
    let a = file_attr(SystemTime::UNIX_EPOCH);
    let ttl = Duration::from_secs(1);
    let mut b = vec![0u8; STATX_OUT];
    assert_eq!(put_entry_out(&mut b[..ENTRY_OUT - 1], &ttl, &a), None);
    assert_eq!(put_attr_out(&mut b[..ATTR_OUT - 1], &ttl, &a), None);
    let x = StatxExtra::default();
    assert_eq!(put_statx_out(&mut b[..STATX_OUT - 1], &ttl, &a, &x), None);
    assert_eq!(put_ioctl_out(&mut b[..23], 0, &[1; 8]), None);
    assert_eq!(put_ioctl_out(&mut b[..24], 0, &[1; 8]), Some(24));
    assert_eq!(put_u32_out(&mut b[..7], 1), None);
    let fs = Statfs {
        blocks: 1,
        bfree: 1,
        bavail: 1,
        files: 1,
        ffree: 1,
        bsize: 4096,
        namelen: 255,
        frsize: 4096,
    };
    assert_eq!(put_statfs_out(&mut b[..79], &fs), None);
    assert!(ring_headers(&mut [0u8; REQ_HEADER - 1]).is_err());
    let mut h = [0u8; REQ_HEADER];
    let (in_out, op_in, ent) = ring_headers(&mut h).unwrap();
    assert_eq!(
        (in_out.len(), op_in.len(), ent.len()),
        (IN_OUT, IN_OUT, ENT_IN_OUT)
    );
}

#[test]
fn forgets_leave_a_partial_item() {
    let items = [le(&[5, 1], &[8, 8]), vec![9; 15]].concat();
    assert_eq!(forgets(&items).collect::<Vec<_>>(), [(5, 1)]);
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
        // The same bytes as /dev/fuse gives them.
        let mut dev = i[..IN_HEADER].to_vec();
        dev.extend_from_slice(&op_in);
        dev.extend_from_slice(&payload);
        let len = dev.len() as u32;
        dev[..4].copy_from_slice(&len.to_le_bytes());
        if let Ok((i, o, p)) = split(&dev) {
            let _ = parse(i, o, p);
        }
        let _ = split(&payload);
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
