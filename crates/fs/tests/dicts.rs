//! Trained dictionaries for small files (`dict=auto`), on the volume directly (no root): small
//! files get a dictionary trained on their own kind and read back everywhere — on the live
//! volume, after a reopen, through fsck; files written before it are rewritten with it; a
//! missing dictionary is EIO with a log line and fsck names it; a store of a newer format is
//! refused in plain words; `dict=off` trains nothing; and a store made before dictionaries
//! (the fixture in tests/fixtures) mounts, reads and takes new data.
mod common;
use common::Rng;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wring_fs::store::dicts::DICTS;
use wring_fs::store::{Store, META, ROOT};
use wring_fs::{NewInode, Options, Volume};

/// A header file of the kind dictionaries are for: a preamble every file shares, then
/// definitions of its own.
fn header(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut s = String::from(
        "/* SPDX-License-Identifier: GPL-2.0 */\n/*\n * Copyright (C) the wring authors.\n * \
         This file is part of a test tree: every file starts with the same preamble, as the \
         headers of one project do,\n * and goes on with definitions of its own.\n */\n\
         #ifndef _WRING_TEST_H\n#define _WRING_TEST_H\n\n#include <linux/types.h>\n\
         #include <linux/compiler.h>\n\n",
    );
    for i in 0..40 + rng.below(80) {
        let name: String = (0..8)
            .map(|_| (b'A' + rng.below(26) as u8) as char)
            .collect();
        s += &format!(
            "#define WRING_{name}_{n}_{i}\t(1U << {})\t/* {} */\n",
            rng.below(32),
            ["flag", "mask", "shift", "bit"][rng.below(4) as usize]
        );
    }
    s += "\n#endif /* _WRING_TEST_H */\n";
    s.into_bytes()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wring-dicts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Options with a training after `train` bytes of samples.
fn opts(text: &str, train: usize) -> Options {
    let mut o = Options::parse(text).unwrap();
    o.dict_train_bytes = train;
    o
}

fn open(dir: &Path, o: Options) -> Arc<Volume> {
    let vol = Arc::new(Volume::open(dir, o).unwrap());
    vol.start_writeback();
    vol.start_committer().unwrap();
    vol
}

/// Write `n` header files named `h{i}.h`; their contents.
fn write_headers(vol: &Volume, rng: &mut Rng, from: usize, n: usize) -> Vec<(String, Vec<u8>)> {
    write_headers_in(vol, ROOT, rng, from, n)
}

/// [`write_headers`] in directory `dir`.
fn write_headers_in(
    vol: &Volume,
    dir: u64,
    rng: &mut Rng,
    from: usize,
    n: usize,
) -> Vec<(String, Vec<u8>)> {
    (from..from + n)
        .map(|i| {
            let name = format!("h{i}.h");
            let data = header(rng, i);
            let ino = vol
                .create(dir, name.as_bytes(), NewInode::file(0o644))
                .unwrap()
                .0;
            vol.write(ino, 0, &data, None).unwrap();
            (name, data)
        })
        .collect()
}

/// Wait until no training or rewrite pass runs or is due; the dictionaries' count.
fn settle(vol: &Volume) -> usize {
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        vol.sync().unwrap();
        let st = vol.dict_status().unwrap();
        if !st.busy {
            return st.dicts.len();
        }
        assert!(Instant::now() < until, "dictionaries still busy: {st:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A setattr of the size alone.
fn size(len: u64) -> wring_fs::SetAttr {
    wring_fs::SetAttr {
        size: Some(len),
        ..Default::default()
    }
}

/// Close the volume, open it again and read every file of `sets` back, then close it and
/// check the store with fsck.
fn reopen_and_check(vol: Arc<Volume>, dir: &Path, o: Options, sets: &[&[(String, Vec<u8>)]]) {
    drop(vol);
    let vol = open(dir, o);
    for files in sets {
        read_back(&vol, files);
    }
    drop(vol);
    let fsck = wring_fs::fsck::fsck(dir).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);
}

fn read_back(vol: &Volume, files: &[(String, Vec<u8>)]) {
    for (name, data) in files {
        let (ino, _) = vol.lookup(ROOT, name.as_bytes()).unwrap();
        let got = vol.read(ino, 0, data.len() as u32 + 10).unwrap();
        assert!(got == *data, "{name} differs");
    }
}

#[test]
fn small_files_get_a_dictionary_and_read_back_everywhere() {
    let dir = scratch("trained");
    Store::mkfs(&dir).unwrap();
    let vol = open(&dir, opts("compress-force=zstd:3", 256 << 10));
    let mut rng = Rng(0x6469_6374);
    let files = write_headers(&vol, &mut rng, 0, 400);
    let dicts = settle(&vol);
    assert!(dicts >= 1, "no dictionary was trained");
    let st = vol.dict_status().unwrap();
    let t = st.last.expect("a training this mount");
    assert!(t.with < t.alone, "the dictionary saves nothing: {t:?}");
    // Files written before the dictionary were rewritten with it: nearly every small extent
    // names one.
    let report = vol.stat_report(ROOT).unwrap();
    let with: u64 = report.by_dict.values().map(|u| u.extents).sum();
    assert!(
        with * 10 >= files.len() as u64 * 9,
        "{with} of {} extents use a dictionary",
        files.len()
    );
    read_back(&vol, &files);
    let o = opts("compress-force=zstd:3", 256 << 10);
    reopen_and_check(vol, &dir, o, &[&files]);
    assert_eq!(wring_fs::fsck::fsck(&dir).unwrap().dicts as usize, dicts);

    // Without the dictionary its extents are EIO, and fsck names it.
    {
        let store = Store::open(&dir).unwrap();
        let txn = store.write().unwrap();
        txn.open_table(DICTS).unwrap().retain(|_, _| false).unwrap();
        store.commit(txn, true).unwrap();
    }
    let vol = Volume::open(&dir, Options::default()).unwrap();
    let (ino, _) = vol.lookup(ROOT, files[200].0.as_bytes()).unwrap();
    let err = vol.read(ino, 0, 4096).unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(err.to_string().contains("dictionary"), "{err}");
    drop(vol);
    let fsck = wring_fs::fsck::fsck(&dir).unwrap();
    assert!(
        fsck.problems.iter().any(|p| p.contains("dictionary")),
        "{:?}",
        fsck.problems
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_says_off_and_its_files_never_get_one() {
    let dir = scratch("switch");
    Store::mkfs(&dir).unwrap();
    let vol = open(&dir, opts("compress-force=zstd:3", 128 << 10));
    let new_dir = NewInode {
        kind: wring_fs::store::records::Kind::Dir,
        ..NewInode::file(0o755)
    };
    let (plain, _) = vol.create(ROOT, b"plain", new_dir).unwrap();
    let err = vol
        .setxattr(plain, b"wring.dict", b"sometimes", 0)
        .unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    vol.setxattr(plain, b"wring.dict", b"off", 0).unwrap();
    let mut rng = Rng(3);
    let inside = write_headers_in(&vol, plain, &mut rng, 0, 150);
    let outside = write_headers(&vol, &mut rng, 1000, 150);
    assert!(settle(&vol) >= 1, "no dictionary was trained");
    let (ino, _) = vol.lookup(plain, inside[0].0.as_bytes()).unwrap();
    assert_eq!(
        vol.getxattr(ino, b"wring.dict").unwrap(),
        b"off",
        "inherited"
    );
    assert!(vol.stat_report(plain).unwrap().by_dict.is_empty());
    assert!(!vol.stat_report(ROOT).unwrap().by_dict.is_empty());
    read_back(&vol, &outside);
    for (name, data) in &inside {
        let (ino, _) = vol.lookup(plain, name.as_bytes()).unwrap();
        assert!(vol.read(ino, 0, data.len() as u32).unwrap() == *data);
    }
    drop(vol);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_store_of_a_newer_format_is_refused_in_plain_words() {
    let dir = scratch("newer");
    Store::mkfs(&dir).unwrap();
    {
        let store = Store::open(&dir).unwrap();
        let txn = store.write().unwrap();
        // One past the newest this binary knows (3: shared extents).
        let newer = wring_fs::store::format::VERSION + 1;
        txn.open_table(META)
            .unwrap()
            .insert("version", newer)
            .unwrap();
        store.commit(txn, true).unwrap();
    }
    let err = Volume::open(&dir, Options::default())
        .err()
        .expect("refused");
    let newer = wring_fs::store::format::VERSION + 1;
    assert!(
        err.to_string().contains(&format!("format version {newer}")),
        "{err}"
    );
    let err = wring_fs::fsck::fsck(&dir).expect_err("refused");
    assert!(err.to_string().contains("newer wring"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dict_off_trains_nothing() {
    let dir = scratch("off");
    Store::mkfs(&dir).unwrap();
    let vol = open(&dir, opts("compress-force=zstd:3,dict=off", 64 << 10));
    let mut rng = Rng(7);
    let files = write_headers(&vol, &mut rng, 0, 100);
    assert_eq!(settle(&vol), 0);
    assert!(vol.stat_report(ROOT).unwrap().by_dict.is_empty());
    read_back(&vol, &files);
    drop(vol);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_store_made_before_dictionaries_mounts_reads_and_takes_new_data() {
    let dir = scratch("fixture");
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.tar.gz");
    let out = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&fixture)
        .arg("-C")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let fsck = wring_fs::fsck::fsck(&dir).unwrap();
    assert!(fsck.problems.is_empty(), "{:?}", fsck.problems);

    let vol = open(&dir, opts("compress-force=zstd:3", 128 << 10));
    let small: String = (1..=60)
        .map(|i| {
            format!(
                "#define WRING_FIXTURE_{i} (1 << {}) /* bit {i} */\n",
                i % 31
            )
        })
        .collect();
    let big: String = (1..=50_000).map(|i| format!("{i}\n")).collect();
    let old = vec![
        (
            "hello.txt".to_string(),
            b"hello from a store made before dictionaries\n".to_vec(),
        ),
        ("small.h".to_string(), small.into_bytes()),
        ("big.txt".to_string(), big.into_bytes()),
    ];
    read_back(&vol, &old);
    // The open upgraded the store to format version 4: each file's inode has the bytes its
    // extents cover (what st_blocks shows, as btrfs's does), counted from its extents.
    for (name, data) in &old {
        let (ino, _) = vol.lookup(ROOT, name.as_bytes()).unwrap();
        let want = data.len().div_ceil(4096) as u64 * 4096;
        assert_eq!(vol.inode(ino).unwrap().bytes, want, "{name}");
    }
    let (sub, _) = vol.lookup(ROOT, b"sub").unwrap();
    let (link, _) = vol.lookup(sub, b"link").unwrap();
    assert_eq!(vol.readlink(link).unwrap(), b"../hello.txt");
    assert_eq!(vol.getxattr(sub, b"user.note").unwrap(), b"kept");

    // New data, with a dictionary trained on it, beside the old.
    let mut rng = Rng(11);
    let new = write_headers(&vol, &mut rng, 0, 200);
    assert!(settle(&vol) >= 1, "no dictionary was trained");
    read_back(&vol, &old);
    read_back(&vol, &new);
    let o = opts("compress-force=zstd:3", 128 << 10);
    reopen_and_check(vol, &dir, o, &[&old, &new]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writers overwrite small files (whole, in part, or cut short) while dictionaries are
/// trained and rewrite passes run under them: every read sees the last write, and so does
/// the store after a reopen and fsck. The pass replaces an extent only if it is still the one
/// it read; a write in between must win. (A pass starts once writing pauses, so the writers
/// pause once, and 2,000 other files give the pass batches to go on with after they resume.)
#[test]
fn writes_racing_the_rewrite_pass_win() {
    let dir = scratch("race");
    Store::mkfs(&dir).unwrap();
    let vol = open(&dir, opts("compress-force=zstd:3", 64 << 10));
    let filler = write_headers(&vol, &mut Rng(99), 100_000, 2000);
    let threads = 4;
    let per = 40;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pause = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (vol, stop, pause) = (vol.clone(), stop.clone(), pause.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x7261_6365 + t as u64);
                let mut files = write_headers(&vol, &mut rng, t * 1000, per);
                let mut rounds = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 200 {
                    rounds += 1;
                    while pause.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let i = rng.below(per as u64) as usize;
                    let (ino, _) = vol.lookup(ROOT, files[i].0.as_bytes()).unwrap();
                    let new = header(&mut rng, t * 1000 + i);
                    match rng.below(3) {
                        // A whole new content.
                        0 => {
                            vol.setattr(ino, &size(0)).unwrap();
                            vol.write(ino, 0, &new, None).unwrap();
                            files[i].1 = new;
                        }
                        // Part of it overwritten.
                        1 => {
                            let at = rng.below(files[i].1.len() as u64) as usize;
                            let part = &new[..new.len().min(200)];
                            vol.write(ino, at as u64, part, None).unwrap();
                            let d = &mut files[i].1;
                            if d.len() < at + part.len() {
                                d.resize(at + part.len(), 0);
                            }
                            d[at..at + part.len()].copy_from_slice(part);
                        }
                        // Cut short.
                        _ => {
                            let len = rng.below(files[i].1.len() as u64);
                            vol.setattr(ino, &size(len)).unwrap();
                            files[i].1.truncate(len as usize);
                        }
                    }
                    let back = vol.read(ino, 0, files[i].1.len() as u32 + 10).unwrap();
                    assert!(back == files[i].1, "{} differs after a write", files[i].0);
                }
                files
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    pause.store(true, std::sync::atomic::Ordering::Relaxed);
    // Until a pass starts (or two and a half seconds).
    let until = Instant::now() + Duration::from_millis(2500);
    while vol.dict_status().unwrap().rewritten == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    pause.store(false, std::sync::atomic::Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let files: Vec<_> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(settle(&vol) >= 1, "no dictionary was trained");
    let rewritten = vol.dict_status().unwrap().rewritten;
    assert!(
        rewritten > 0,
        "no rewrite pass rewrote anything under the writers"
    );
    read_back(&vol, &files);
    read_back(&vol, &filler);
    let o = opts("compress-force=zstd:3", 64 << 10);
    reopen_and_check(vol, &dir, o, &[&files, &filler]);
    let _ = std::fs::remove_dir_all(&dir);
}
