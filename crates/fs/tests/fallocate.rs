//! fallocate's punch hole and zero range on the volume directly (no root): whole extents
//! become holes in one transaction, so punching a terabyte of a sparse file takes as long as
//! the extents it holds, and the bytes around the range are kept.
mod common;
use common::{text, Rng};

use wring_fs::store::{Store, ROOT};
use wring_fs::{NewInode, Options, Volume};

const E: u64 = 128 * 1024;
const FAR: u64 = 1 << 40;

#[test]
fn punching_a_terabyte_keeps_the_edges() {
    let dir = std::env::temp_dir().join(format!("wring-fallocate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, Options::parse("compress-force=zstd:1").unwrap()).unwrap();
    let (ino, _) = vol.create(ROOT, b"f", NewInode::file(0o644)).unwrap();
    let mut rng = Rng(0xfa11);
    let head = text(&mut rng, 10 * E as usize);
    let tail = text(&mut rng, 3 * E as usize);
    vol.write(ino, 0, &head, None).unwrap();
    vol.write(ino, FAR, &tail, None).unwrap();
    vol.fsync(ino).unwrap();
    let stored = vol.inode(ino).unwrap().disk;

    // From the middle of extent 0 to the middle of the tail's first extent, size kept.
    let keep_punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    let (from, to) = (E / 2, FAR + E / 2);
    vol.fallocate(ino, (from, to - from, keep_punch), None)
        .unwrap();
    vol.fsync(ino).unwrap();
    let size = FAR + tail.len() as u64;
    assert_eq!(vol.inode(ino).unwrap().size, size);
    assert_eq!(
        vol.read(ino, 0, from as u32).unwrap(),
        head[..from as usize]
    );
    assert!(vol
        .read(ino, from, 4 * E as u32)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    assert!(vol
        .read(ino, to - E, E as u32)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    let rest = vol.read(ino, to, tail.len() as u32).unwrap();
    assert_eq!(rest, tail[(to - FAR) as usize..]);
    let now = vol.inode(ino).unwrap().disk;
    assert!(
        now < stored / 4,
        "stored {stored} before, {now} after the punch"
    );

    // Zero range past the end extends the file with zeros.
    vol.fallocate(ino, (size - 10, 3 * E, libc::FALLOC_FL_ZERO_RANGE), None)
        .unwrap();
    assert_eq!(vol.inode(ino).unwrap().size, size - 10 + 3 * E);
    let end = vol.read(ino, size - 10, 3 * E as u32).unwrap();
    assert_eq!(end.len(), 3 * E as usize);
    assert!(end.iter().all(|&b| b == 0));
    drop(vol);
    let r = wring_fs::fsck::fsck(&dir).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let _ = std::fs::remove_dir_all(&dir);
}
