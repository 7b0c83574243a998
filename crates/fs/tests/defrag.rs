//! `BTRFS_IOC_DEFRAG_RANGE` through the volume: extents compressed again in place with the
//! requested algorithm and level, the bytes unchanged, fsck clean, and btrfs's rules on who
//! may, on ranges, on nodatacow files and on a write that races the rewrite.

mod common;
use common::{text, Rng};

use std::sync::Arc;

use wring_engine::{Algorithm, CompressSpec};
use wring_fs::store::{Store, ROOT};
use wring_fs::{fsck, Caller, DefragArgs, NewInode, Options, Volume};

const ROOT_CALLER: Caller = Caller {
    uid: 0,
    gid: 0,
    pid: 0,
};

fn volume(name: &str, options: &str) -> (std::path::PathBuf, Arc<Volume>) {
    let dir = std::env::temp_dir().join(format!("wring-defrag-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Store::mkfs(&dir).unwrap();
    let vol = Arc::new(Volume::open(&dir, Options::parse(options).unwrap()).unwrap());
    (dir, vol)
}

fn file(vol: &Volume, name: &str, mode: u32) -> u64 {
    let mut new = NewInode::file(mode);
    new.uid = 1000;
    new.gid = 1000;
    vol.create(ROOT, name.as_bytes(), new).unwrap().0
}

/// The stored encodings of `ino` with their extent counts, as `wring stat` shows them.
fn levels(vol: &Volume, ino: u64) -> Vec<(String, u64)> {
    vol.stat_report(ino)
        .unwrap()
        .by_level
        .into_iter()
        .map(|(k, u)| (k, u.extents))
        .collect()
}

fn zstd(level: i32) -> DefragArgs {
    DefragArgs::compressing(CompressSpec::new(Algorithm::Zstd, level), 0, u64::MAX)
}

fn defrag(vol: &Volume, ino: u64, who: Caller, args: &DefragArgs) -> Result<u64, i32> {
    vol.defrag(ino, who, args).map_err(|e| e.errno())
}

fn read_all(vol: &Volume, ino: u64) -> Vec<u8> {
    let size = vol.inode(ino).unwrap().size;
    vol.read(ino, 0, size as u32).unwrap()
}

fn closed(dir: &std::path::Path, vol: Arc<Volume>) {
    vol.sync().unwrap();
    drop(vol);
    let report = fsck::fsck(dir).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_file_written_with_lzo_is_stored_as_zstd_after_defrag_and_reads_the_same() {
    let (dir, vol) = volume("lzo", "compress=lzo");
    let ino = file(&vol, "f", 0o644);
    let data = text(&mut Rng(7), 8 * 128 * 1024);
    vol.write(ino, 0, &data, None).unwrap();
    vol.fsync(ino).unwrap();
    let before = levels(&vol, ino);
    assert_eq!(before.iter().map(|l| l.1).sum::<u64>(), 8);
    assert!(
        before.iter().all(|(k, _)| !k.starts_with("zstd")),
        "{before:?}"
    );
    let lzo_disk = vol.inode(ino).unwrap().disk;

    let n = defrag(&vol, ino, ROOT_CALLER, &zstd(9)).unwrap();
    assert_eq!(n, 8);
    assert_eq!(levels(&vol, ino), [("zstd:9".to_string(), 8)]);
    assert!(vol.inode(ino).unwrap().disk < lzo_disk);
    assert_eq!(read_all(&vol, ino), data);
    closed(&dir, vol);
    let vol = Volume::open(&dir, Options::default()).unwrap();
    assert_eq!(read_all(&vol, ino), data);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_range_rewrites_only_the_extents_it_touches_and_dirty_data_goes_first() {
    let (dir, vol) = volume("range", "compress=lzo");
    let ino = file(&vol, "f", 0o644);
    let data = text(&mut Rng(8), 4 * 128 * 1024);
    vol.write(ino, 0, &data, None).unwrap();
    // Not written back yet: START_IO (implied by compression) writes it back first.
    let args = DefragArgs {
        start: 128 * 1024 + 10,
        len: 128 * 1024,
        ..zstd(3)
    };
    assert_eq!(defrag(&vol, ino, ROOT_CALLER, &args).unwrap(), 2);
    assert_eq!(
        levels(&vol, ino),
        [("lzo".to_string(), 2), ("zstd:3".to_string(), 2)]
    );
    assert_eq!(read_all(&vol, ino), data);
    // Past the end: EINVAL, as btrfs answers.
    let past = DefragArgs {
        start: data.len() as u64,
        ..zstd(3)
    };
    assert_eq!(
        defrag(&vol, ino, ROOT_CALLER, &past).unwrap_err(),
        libc::EINVAL
    );
    closed(&dir, vol);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn who_may_defrag_is_who_may_write_and_only_root_on_a_directory() {
    let (dir, vol) = volume("perm", "compress=lzo");
    let ino = file(&vol, "f", 0o644);
    vol.write(ino, 0, &text(&mut Rng(9), 2 * 128 * 1024), None)
        .unwrap();
    let owner = Caller {
        uid: 1000,
        gid: 1000,
        pid: 0,
    };
    let other = Caller {
        uid: 2000,
        gid: 2000,
        pid: 0,
    };
    assert_eq!(defrag(&vol, ino, other, &zstd(3)).unwrap_err(), libc::EPERM);
    assert_eq!(levels(&vol, ino), [("lzo".to_string(), 2)]);
    assert_eq!(defrag(&vol, ino, owner, &zstd(3)).unwrap(), 2);
    assert_eq!(
        defrag(&vol, ROOT, owner, &zstd(3)).unwrap_err(),
        libc::EPERM
    );
    assert_eq!(defrag(&vol, ROOT, ROOT_CALLER, &zstd(3)).unwrap(), 0);
    // Without compression there is nothing to merge: the extents stay as they are.
    assert_eq!(defrag(&vol, ino, owner, &DefragArgs::whole()).unwrap(), 0);
    assert_eq!(levels(&vol, ino), [("zstd:3".to_string(), 2)]);
    closed(&dir, vol);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A NOCOMPRESS file is compressed (the defrag's compression comes before the flag in
/// btrfs's inode_need_compress); a nodatacow one is left alone; incompressible data stays raw.
#[test]
fn nocompress_files_are_compressed_and_nodatacow_ones_are_not() {
    let (dir, vol) = volume("flags", "compress=lzo");
    let nocomp = file(&vol, "nocomp", 0o644);
    vol.set_fs_flags(nocomp, 0x0000_0400).unwrap(); // FS_NOCOMP_FL
    let data = text(&mut Rng(10), 300_000);
    vol.write(nocomp, 0, &data, None).unwrap();
    vol.fsync(nocomp).unwrap();
    assert_eq!(levels(&vol, nocomp), [("none".to_string(), 3)]);
    assert_eq!(defrag(&vol, nocomp, ROOT_CALLER, &zstd(1)).unwrap(), 3);
    assert_eq!(levels(&vol, nocomp), [("zstd:1".to_string(), 3)]);
    // BTRFS_DEFRAG_RANGE_NOCOMPRESS stores them uncompressed again.
    let raw = DefragArgs {
        flags: 8,
        ..DefragArgs::whole()
    };
    assert_eq!(defrag(&vol, nocomp, ROOT_CALLER, &raw).unwrap(), 3);
    assert_eq!(levels(&vol, nocomp), [("none".to_string(), 3)]);
    assert_eq!(defrag(&vol, nocomp, ROOT_CALLER, &zstd(1)).unwrap(), 3);

    let nocow = file(&vol, "nocow", 0o644);
    vol.set_fs_flags(nocow, 0x0080_0000).unwrap(); // FS_NOCOW_FL, on an empty file
    vol.write(nocow, 0, &data, None).unwrap();
    vol.fsync(nocow).unwrap();
    let before = levels(&vol, nocow);
    assert_eq!(defrag(&vol, nocow, ROOT_CALLER, &zstd(1)).unwrap(), 0);
    assert_eq!(levels(&vol, nocow), before);

    let noise = file(&vol, "noise", 0o644);
    let mut rng = Rng(11);
    let random: Vec<u8> = (0..200_000).map(|_| rng.next() as u8).collect();
    vol.write(noise, 0, &random, None).unwrap();
    defrag(&vol, noise, ROOT_CALLER, &zstd(19)).unwrap();
    assert_eq!(levels(&vol, noise), [("none".to_string(), 2)]);
    assert_eq!(read_all(&vol, noise), random);
    assert_eq!(read_all(&vol, nocomp), data);
    closed(&dir, vol);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes racing defrags of the same file: every read sees the writes, never an older
/// extent put back by the rewrite.
#[test]
fn writes_racing_defrag_win() {
    let (dir, vol) = volume("race", "compress=lzo");
    vol.start_writeback();
    let ino = file(&vol, "f", 0o644);
    let mut model = text(&mut Rng(12), 8 * 128 * 1024);
    vol.write(ino, 0, &model, None).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let defragger = {
        let (vol, stop) = (Arc::clone(&vol), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut level = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                defrag(&vol, ino, ROOT_CALLER, &zstd(level)).unwrap();
                level = level % 9 + 1;
            }
        })
    };
    let mut rng = Rng(13);
    for round in 0..300 {
        let off = rng.below(model.len() as u64 - 5000) as usize;
        let len = 1 + rng.below(4999) as usize;
        let new = text(&mut rng, len);
        vol.write(ino, off as u64, &new, None).unwrap();
        model[off..off + len].copy_from_slice(&new);
        if round % 30 == 0 {
            vol.fsync(ino).unwrap();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    defragger.join().unwrap();
    vol.fsync(ino).unwrap();
    assert!(
        read_all(&vol, ino) == model,
        "a write was lost to a rewrite"
    );
    closed(&dir, vol);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report `wring stat` prints for `path` on a mount (compsize's view).
fn stat_of(path: &std::path::Path) -> String {
    String::from_utf8_lossy(&wring_fs::daemon::get_xattr(path, wring_fs::STAT_XATTR).unwrap())
        .into_owned()
}

/// btrfs-progs' own `btrfs filesystem defragment -c`, unchanged, on a mount: one file, then a
/// tree with `-r`; the bytes stay, `wring stat` shows the new algorithm, fsck is clean.
#[test]
fn btrfs_filesystem_defragment_recompresses_on_the_mount() {
    if !common::require_root("btrfs_filesystem_defragment_recompresses_on_the_mount") {
        return;
    }
    let mut m = common::Mount::new("defrag");
    m.start("compress=lzo");
    let mut rng = Rng(14);
    let one = text(&mut rng, 4 * 128 * 1024);
    std::fs::write(m.p("one"), &one).unwrap();
    std::fs::create_dir_all(m.p("tree/sub")).unwrap();
    let mut files = Vec::new();
    for (i, name) in ["tree/a", "tree/sub/b", "tree/sub/c"].iter().enumerate() {
        let data = text(&mut rng, (i + 1) * 128 * 1024);
        std::fs::write(m.p(name), &data).unwrap();
        files.push((name.to_string(), data));
    }
    m.sync();
    assert!(!stat_of(&m.mnt).contains("zstd"), "{}", stat_of(&m.mnt));

    let o = common::sh(&format!(
        "btrfs filesystem defragment -czstd {}",
        m.p("one").display()
    ));
    assert!(o.status.success(), "{o:?}");
    let stat = stat_of(&m.p("one"));
    assert!(stat.contains("zstd:3") && !stat.contains("lzo"), "{stat}");
    assert_eq!(std::fs::read(m.p("one")).unwrap(), one);

    let o = common::sh(&format!(
        "btrfs filesystem defragment -r -czlib {}",
        m.p("tree").display()
    ));
    assert!(o.status.success(), "{o:?}");
    let stat = stat_of(&m.p("tree"));
    assert!(stat.contains("zlib:3") && !stat.contains("lzo"), "{stat}");
    // A file just written, its pages still in the kernel's writeback cache: the defrag
    // sees them, as btrfs does (they are written back first), and compresses them too.
    // The writer keeps the file open (a close would flush it).
    let fresh = text(&mut rng, 3000);
    let mut writer = std::fs::File::create(m.p("fresh")).unwrap();
    std::io::Write::write_all(&mut writer, &fresh).unwrap();
    let o = common::sh(&format!(
        "btrfs filesystem defragment -czstd {}",
        m.p("fresh").display()
    ));
    assert!(o.status.success(), "{o:?}");
    drop(writer);
    let stat = stat_of(&m.p("fresh"));
    assert!(stat.contains("zstd:3") && !stat.contains("lzo"), "{stat}");
    assert_eq!(std::fs::read(m.p("fresh")).unwrap(), fresh);
    // An algorithm btrfs does not know is refused by btrfs-progs, and the kernel's EINVAL for
    // a type past zstd is ours too (`wring defrag` has the levels btrfs's ABI lacks).
    let o = common::sh(&format!(
        "btrfs filesystem defragment -cfoo {}",
        m.p("one").display()
    ));
    assert!(!o.status.success(), "{o:?}");
    for (name, data) in &files {
        assert_eq!(&std::fs::read(m.p(name)).unwrap(), data, "{name}");
    }
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

/// On a store that is full, a defrag that would take more room (to raw) answers ENOSPC and
/// leaves the file as it was; the promised room of written data is never taken; deleting
/// still works, and fsck is clean.
#[test]
fn a_full_store_refuses_a_growing_defrag_and_changes_nothing() {
    if !common::require_root("a_full_store_refuses_a_growing_defrag_and_changes_nothing") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("wring-defrag-full-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let o = common::sh(&format!(
        "mount -t tmpfs -o size=48M tmpfs {}",
        dir.display()
    ));
    assert!(o.status.success(), "{o:?}");
    let store = dir.join("store");
    Store::mkfs(&store).unwrap();
    let vol = Volume::open(&store, Options::parse("compress=zstd:3").unwrap()).unwrap();
    let small = file(&vol, "text", 0o644);
    let data = text(&mut Rng(15), 16 * 128 * 1024);
    vol.write(small, 0, &data, None).unwrap();
    vol.fsync(small).unwrap();
    // Fill the rest with data that does not compress, until the store says ENOSPC. The
    // accepted writes stay dirty: their room is promised, not yet written.
    let filler = file(&vol, "filler", 0o644);
    let mut rng = Rng(16);
    let mut written = Vec::new();
    loop {
        let chunk: Vec<u8> = (0..1 << 20).map(|_| rng.next() as u8).collect();
        match vol.write(filler, written.len() as u64, &chunk, None) {
            Ok(()) => written.extend_from_slice(&chunk),
            Err(e) => {
                assert_eq!(e.errno(), libc::ENOSPC, "{e}");
                break;
            }
        }
        assert!(written.len() < 64 << 20, "the store never filled");
    }
    let before = levels(&vol, small);
    let raw = DefragArgs {
        flags: 8,
        ..DefragArgs::whole()
    };
    assert_eq!(defrag(&vol, small, ROOT_CALLER, &raw), Err(libc::ENOSPC));
    assert_eq!(levels(&vol, small), before);
    assert_eq!(read_all(&vol, small), data);
    // What was promised is kept.
    vol.fsync(filler).unwrap();
    assert!(
        read_all(&vol, filler) == written,
        "a promised write was lost"
    );
    vol.remove(ROOT, b"filler", false).unwrap();
    vol.sync().unwrap();
    assert_eq!(defrag(&vol, small, ROOT_CALLER, &raw), Ok(16));
    assert_eq!(read_all(&vol, small), data);
    vol.sync().unwrap();
    drop(vol);
    let report = fsck::fsck(&store).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let _ = common::sh(&format!("umount {}", dir.display()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A damaged extent does not stop a defragment: the batch is decoded together on the
/// offload's workers, and when one of them fails its checksum the others are decoded one by
/// one and rewritten; the damaged one is left as it was, for fsck and the reader to report.
#[test]
fn a_damaged_extent_is_left_and_the_others_are_rewritten() {
    use std::os::unix::fs::FileExt;
    let (dir, vol) = volume("damaged", "compress=lzo");
    let ino = file(&vol, "f", 0o644);
    let data = text(&mut Rng(17), 6 * 128 * 1024);
    vol.write(ino, 0, &data, None).unwrap();
    closed(&dir, vol);
    // Extent 2's stored bytes, found through the store's own API, damaged in the data file.
    {
        let store = Store::open(&dir).unwrap();
        let txn = store.read().unwrap();
        let t = txn.open_table(wring_fs::store::EXTENTS).unwrap();
        let item = t.get((ino, 2)).unwrap().unwrap().value().to_vec();
        let Ok(wring_fs::store::records::Stored::External(at, _)) =
            wring_fs::store::records::stored(&item)
        else {
            panic!("extent 2 should be in the data file");
        };
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(wring_fs::store::DATA_FILE))
            .unwrap();
        f.write_all_at(b"damage", at + 10).unwrap();
        f.sync_all().unwrap();
    }
    let vol = Arc::new(Volume::open(&dir, Options::parse("compress=lzo").unwrap()).unwrap());
    assert_eq!(defrag(&vol, ino, ROOT_CALLER, &zstd(3)), Ok(5));
    let by = levels(&vol, ino);
    assert_eq!(by, [("lzo".into(), 1), ("zstd:3".into(), 5)], "{by:?}");
    assert_eq!(
        vol.read(ino, 0, 2 * 128 * 1024).unwrap(),
        data[..2 * 128 * 1024]
    );
    assert!(vol.read(ino, 2 * 128 * 1024, 4096).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
