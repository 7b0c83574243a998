//! A damaged extent: flip one byte of an extent's stored bytes in the store while unmounted;
//! reading that range is EIO with a log line naming the file and offset, the rest of the file
//! still reads back, and fsck reports the extent.
mod common;
use common::*;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use redb::ReadableTable;
use wring_fs::store::records::EXTENT_HEADER_LEN;
use wring_fs::store::{Store, DIRENTS, EXTENTS, ROOT};

const EXTENT: u64 = 128 * 1024;
const EXTENTS_IN_FILE: u64 = 16;
const BAD: u64 = 8;

#[test]
fn corrupt_extent_is_eio_and_logged() {
    if !require_root("corrupt_extent_is_eio_and_logged") {
        return;
    }
    let mut m = Mount::new("corrupt");
    let opts = "compress-force=zstd:3,max_extent=128K";
    m.start(opts);
    let data = text(&mut Rng(7), (EXTENT * EXTENTS_IN_FILE) as usize);
    std::fs::write(m.p("victim"), &data).unwrap();
    m.stop();

    // Flip a byte in the middle of extent BAD's stored bytes, through the store's own API.
    {
        let store = Store::open(&m.store).unwrap();
        let txn = store.write().unwrap();
        let ino = {
            let dirents = txn.open_table(DIRENTS).unwrap();
            let v = dirents.get((ROOT, b"victim".as_slice())).unwrap().unwrap();
            v.value().0
        };
        {
            let mut extents = txn.open_table(EXTENTS).unwrap();
            let mut value = extents.get((ino, BAD)).unwrap().unwrap().value().to_vec();
            let stored = value.len() - EXTENT_HEADER_LEN;
            assert!(stored > 16, "extent {BAD} holds {stored} bytes");
            value[EXTENT_HEADER_LEN + stored / 2] ^= 0x5a;
            extents.insert((ino, BAD), value.as_slice()).unwrap();
        }
        store.commit(txn, true).unwrap();
    }

    m.start(opts);
    let f = File::open(m.p("victim")).unwrap();
    // No readahead, so a read of a good range does not pull the bad extent in with it.
    // SAFETY: an advice call on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let bad_off = BAD * EXTENT;
    let mut buf = vec![0u8; 4096];
    let err = f
        .read_exact_at(&mut buf, bad_off + 4096)
        .expect_err("reading the corrupt extent must fail");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    for idx in [0, BAD - 1, BAD + 1, EXTENTS_IN_FILE - 1] {
        let off = idx * EXTENT;
        let mut good = vec![0u8; EXTENT as usize];
        f.read_exact_at(&mut good, off)
            .unwrap_or_else(|e| panic!("extent {idx} should read: {e}"));
        assert!(
            good == data[off as usize..(off + EXTENT) as usize],
            "extent {idx} reads back wrong"
        );
    }
    drop(f);
    // A whole-file read fails too (cp, cat, …).
    let err = std::fs::read(m.p("victim")).expect_err("whole-file read must fail");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    m.stop();

    let log = std::fs::read_to_string(m.store.join(wring_fs::daemon::LOG_FILE)).unwrap();
    let want = "/victim (inode ";
    assert!(
        log.lines().any(|l| l.contains("corrupt extent")
            && l.contains(want)
            && l.contains(&format!("offset {bad_off}"))),
        "no log line naming /victim at offset {bad_off}:\n{log}"
    );

    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    let p = &r.problems[0];
    assert!(
        p.contains("/victim") && p.contains(&format!("offset {bad_off}")) && p.contains("checksum"),
        "{p}"
    );
}
