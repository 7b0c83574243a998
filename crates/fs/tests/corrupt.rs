//! A damaged extent: flip one byte of an extent's stored bytes in the store while unmounted
//! (in the data file), point another extent's item past the end of the data file, and give a
//! third a header (which has no checksum of its own) claiming more than an extent; reading
//! those ranges is EIO with a log line naming the file and offset, never a panic, the rest of
//! the file still reads back, and fsck reports all three extents. A damaged inode item (a
//! time past what a SystemTime holds) is EIO on stat with a log line naming the inode, never a
//! panic; writes near the largest file offset fail as they do on tmpfs.
mod common;
use common::*;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use redb::ReadableTable;
use wring_fs::store::layout::{put_i64, put_u32};
use wring_fs::store::records::{extent, external_item_of, inode, stored, ExtentHeader, Stored};
use wring_fs::store::{Store, DATA_FILE, DIRENTS, EXTENTS, INODES, ROOT};

const EXTENT: u64 = 128 * 1024;
const EXTENTS_IN_FILE: u64 = 16;
const BAD: u64 = 8;
/// The extent whose item points past the end of the data file.
const LOST: u64 = 12;
/// The extent whose header claims one block more than an extent.
const HEADER: u64 = 4;

#[test]
fn corrupt_extent_is_eio_and_logged() {
    if !require_root("corrupt_extent_is_eio_and_logged") {
        return;
    }
    let mut m = Mount::new("corrupt");
    let opts = "compress-force=zstd:3,max_extent=128K";
    m.start(opts);
    // Text with a random byte in every 8: compressible, but too big for inline items.
    let mut rng = Rng(7);
    let mut data = text(&mut rng, (EXTENT * EXTENTS_IN_FILE) as usize);
    for b in data.iter_mut().step_by(8) {
        *b = rng.next() as u8;
    }
    std::fs::write(m.p("victim"), &data).unwrap();
    m.stop();

    // Flip a byte in the middle of extent BAD's stored bytes, found through the store's own
    // API; move LOST's bytes, as its item says, far past the end of the data file.
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
            let value = extents.get((ino, BAD)).unwrap().unwrap().value().to_vec();
            let Ok(Stored::External(at, len)) = stored(&value) else {
                panic!("extent {BAD} should be in the data file");
            };
            let data = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(m.store.join(DATA_FILE))
                .unwrap();
            let mut byte = [0u8];
            data.read_exact_at(&mut byte, at + len / 2).unwrap();
            data.write_all_at(&[byte[0] ^ 0x5a], at + len / 2).unwrap();
            data.sync_all().unwrap();
            let lost = extents.get((ino, LOST)).unwrap().unwrap().value().to_vec();
            let n = stored(&lost).unwrap().len() as usize;
            let h = ExtentHeader::decode(&lost).unwrap();
            let moved = external_item_of(&h, n, 1 << 40);
            extents.insert((ino, LOST), moved.as_slice()).unwrap();
            let mut long = extents
                .get((ino, HEADER))
                .unwrap()
                .unwrap()
                .value()
                .to_vec();
            put_u32(&mut long, &extent::RAM_LEN, EXTENT as u32 + 4096);
            extents.insert((ino, HEADER), long.as_slice()).unwrap();
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
    let lost_off = LOST * EXTENT;
    let err = f
        .read_exact_at(&mut buf, lost_off)
        .expect_err("reading the lost extent must fail");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    let header_off = HEADER * EXTENT;
    // Alone, and spanning it and the next extent (where a length past the extent would cut
    // the reply wrongly).
    for (off, len) in [(header_off, 4096), (header_off + EXTENT - 4096, 8192)] {
        let mut buf = vec![0u8; len];
        let err = f
            .read_exact_at(&mut buf, off)
            .expect_err("reading the extent with a damaged header must fail");
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    }
    for idx in [
        0,
        HEADER - 1,
        HEADER + 1,
        BAD - 1,
        BAD + 1,
        LOST - 1,
        LOST + 1,
        EXTENTS_IN_FILE - 1,
    ] {
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
    let bad = [
        (bad_off, "checksum"),
        (lost_off, "data file"),
        (header_off, "extent header gives"),
    ];
    for (off, why) in bad {
        assert!(
            log.lines().any(|l| l.contains("corrupt extent")
                && l.contains(want)
                && l.contains(&format!("offset {off}"))
                && l.contains(why)),
            "no log line naming /victim at offset {off} ({why}):\n{log}"
        );
    }

    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert_eq!(r.problems.len(), 3, "{:?}", r.problems);
    for (off, why) in bad {
        assert!(
            r.problems.iter().any(|p| p.contains("/victim")
                && p.contains(&format!("offset {off}"))
                && p.contains(why)),
            "fsck does not report offset {off} ({why}): {:?}",
            r.problems
        );
    }
}

#[test]
fn corrupt_inode_is_eio_and_logged() {
    if !require_root("corrupt_inode_is_eio_and_logged") {
        return;
    }
    let mut m = Mount::new("corrupt-inode");
    let opts = "compress-force=zstd:3,max_extent=128K";
    m.start(opts);
    std::fs::write(m.p("stamped"), b"a time no clock can show").unwrap();
    std::fs::write(m.p("other"), b"fine").unwrap();
    m.stop();

    // An atime of i64::MAX seconds and 2e9 nanoseconds: no SystemTime holds it.
    let ino = {
        let store = Store::open(&m.store).unwrap();
        let txn = store.write().unwrap();
        let ino = {
            let dirents = txn.open_table(DIRENTS).unwrap();
            let v = dirents.get((ROOT, b"stamped".as_slice())).unwrap().unwrap();
            v.value().0
        };
        {
            let mut inodes = txn.open_table(INODES).unwrap();
            let mut item = inodes.get(ino).unwrap().unwrap().value().to_vec();
            put_i64(&mut item, &inode::ATIME.secs, i64::MAX);
            put_u32(&mut item, &inode::ATIME.nsecs, 2_000_000_000);
            inodes.insert(ino, item.as_slice()).unwrap();
        }
        store.commit(txn, true).unwrap();
        ino
    };

    m.start(opts);
    for _ in 0..2 {
        let err = std::fs::metadata(m.p("stamped")).expect_err("stat of a damaged inode");
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    }
    // The daemon is still there and the rest of the filesystem works.
    assert_eq!(std::fs::read(m.p("other")).unwrap(), b"fine");
    let names: Vec<_> = std::fs::read_dir(m.p(""))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.iter().any(|n| n == "other"), "{names:?}");

    // Near the largest offset, as tmpfs: the kernel cuts a write that crosses
    // MAX_LFS_FILESIZE short and refuses one that starts there.
    let near = |path: &std::path::Path| -> Vec<String> {
        let _gone = RemoveOnDrop(path.to_path_buf());
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let max = i64::MAX as u64;
        let mut seen = Vec::new();
        for (off, len) in [(max - 10, 100usize), (max, 1), (max - 4096, 4096)] {
            seen.push(format!(
                "{:?}",
                f.write_at(&vec![7u8; len], off)
                    .map_err(|e| e.raw_os_error())
            ));
        }
        seen.push(format!(
            "{:?}",
            f.metadata()
                .map(|md| md.len())
                .map_err(|e| e.raw_os_error())
        ));
        let mut back = [0u8; 4];
        seen.push(format!(
            "{:?}",
            f.read_at(&mut back, max - 4).map_err(|e| e.raw_os_error())
        ));
        seen.push(format!("{back:?}"));
        seen
    };
    let tmpfs = std::path::PathBuf::from(format!("/dev/shm/wring-far-{}", std::process::id()));
    assert_eq!(near(&m.p("far")), near(&tmpfs), "wring vs tmpfs");
    m.stop();

    let log = std::fs::read_to_string(m.store.join(wring_fs::daemon::LOG_FILE)).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("inode {ino}")) && l.contains("damaged")),
        "no log line naming inode {ino} as damaged:\n{log}"
    );
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains(&format!("inode {ino}"))),
        "fsck does not report inode {ino}: {:?}",
        r.problems
    );
}

/// Removes a file when dropped, so a failed assertion leaves nothing behind.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
