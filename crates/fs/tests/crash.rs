//! kill -9 of the daemon at random moments under a writer doing fsync'ed writes: after every
//! cycle the store mounts again, every acknowledged block reads back, nothing reads back
//! wrong, and fsck finds nothing.
mod common;
use common::ledger::Ledger;
use common::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn kill_9_cycles() {
    if !require_root("kill_9_cycles") {
        return;
    }
    let mut m = Mount::new("crash");
    let ledger = Ledger::new(256);
    let mut rng = Rng(42);
    let mut generation = 0u64;
    for cycle in 0..12 {
        m.start("compress-force=zstd:1,max_extent=64K");
        // What survived the previous kill.
        ledger.check(&m.p("data"), &format!("cycle {cycle}"));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = ledger.writer(m.p("data"), generation, rng.next(), stop.clone(), None);
        std::thread::sleep(Duration::from_millis(100 + rng.below(600)));
        m.kill();
        stop.store(true, Ordering::Relaxed);
        generation = writer.join().unwrap() + 1;
        let r = wring_fs::fsck::fsck(&m.store).unwrap();
        assert!(r.problems.is_empty(), "cycle {cycle}: {:?}", r.problems);
    }
}

/// Data written and closed but never fsync'ed is durable once btrfs's commit interval has
/// passed (the committer thread): a kill -9 after that loses none of it.
#[test]
fn closed_writes_survive_a_kill_after_the_commit_interval() {
    if !require_root("closed_writes_survive_a_kill_after_the_commit_interval") {
        return;
    }
    let mut m = Mount::new("commit-interval");
    m.start("compress-force=zstd:1");
    let data = text(&mut Rng(7), 300_000);
    std::fs::create_dir(m.p("d")).unwrap();
    // close(2) writes the file's pages back to the daemon (FUSE flush).
    std::fs::write(m.p("d/f"), &data).unwrap();
    std::thread::sleep(wring_fs::store::COMMIT_INTERVAL + Duration::from_secs(3));
    m.kill();
    m.start("compress-force=zstd:1");
    let back = std::fs::read(m.p("d/f")).expect("the file survives");
    assert!(back == data, "the file reads back different");
    m.stop();
}

/// What a metadata object (a file or a directory) is given at its generation `g`: a mode,
/// an owner and group, an mtime, and the name `o{i}.g{g}`.
fn meta_mode(g: u64) -> u32 {
    0o700 | ((g * 7) % 0o100) as u32
}
fn meta_owner(g: u64) -> (u32, u32) {
    (1000 + (g % 500) as u32, 2000 + (g % 300) as u32)
}
fn meta_mtime(g: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_secs(1_000_000 + g * 11)
}

/// One generation of object `i` in `dir`: created (generation 1: mkdir or an empty file) or
/// renamed from its last name, then chmod, chown and utimens to the generation's values,
/// then made durable — by fsync of the object, fsync of the directory, or `wring sync`.
/// Returns whether every step succeeded (false once the daemon is gone).
fn meta_generation(mnt: &std::path::Path, i: usize, g: u64) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let dir = mnt.join("t");
    let path = dir.join(format!("o{i}.g{g}"));
    let made = if g == 1 {
        match i % 2 {
            0 => std::fs::create_dir(&path).is_ok(),
            _ => std::fs::File::create(&path).is_ok(),
        }
    } else {
        std::fs::rename(dir.join(format!("o{i}.g{}", g - 1)), &path).is_ok()
    };
    let (uid, gid) = meta_owner(g);
    let changed = made
        && std::fs::set_permissions(&path, std::fs::Permissions::from_mode(meta_mode(g))).is_ok()
        && std::os::unix::fs::chown(&path, Some(uid), Some(gid)).is_ok()
        && std::fs::File::open(&path)
            .and_then(|f| f.set_times(std::fs::FileTimes::new().set_modified(meta_mtime(g))))
            .is_ok();
    changed
        && match g % 3 {
            0 => std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .is_ok(),
            1 => std::fs::File::open(&dir).and_then(|f| f.sync_all()).is_ok(),
            _ => wring_fs::daemon::get_xattr(mnt, wring_fs::SYNC_XATTR).is_ok(),
        }
}

/// After a kill: object `i` is found under one name, of a generation between the last one
/// made durable (`acked`) and the last one begun (`tried`), with that generation's
/// attributes (see below).
fn check_meta_object(dir: &std::path::Path, i: usize, acked: u64, tried: u64, cycle: usize) {
    use std::os::unix::fs::MetadataExt;
    let prefix = format!("o{i}.g");
    let names: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix(&prefix).map(|g| g.parse().unwrap())
        })
        .collect();
    let g = match names[..] {
        [] => {
            assert_eq!(
                acked, 0,
                "cycle {cycle}: object {i} (durable at {acked}) is gone"
            );
            return;
        }
        [g] => g,
        _ => panic!("cycle {cycle}: object {i} has several names: {names:?}"),
    };
    assert!(
        (acked..=tried).contains(&g),
        "cycle {cycle}: object {i} is at generation {g}, made durable at {acked}, begun {tried}"
    );
    // A generation renames first: under the name of generation g the attributes are g's,
    // or (g not made durable) each may still be g - 1's; a new object's are its defaults.
    if g > acked && g == 1 {
        return;
    }
    let md = std::fs::symlink_metadata(dir.join(format!("{prefix}{g}"))).unwrap();
    let gens: Vec<u64> = [g, g - 1]
        .into_iter()
        .filter(|&x| x == g || g > acked)
        .collect();
    let what =
        format!("cycle {cycle}: object {i} at generation {g} (durable {acked}, begun {tried})");
    assert!(
        gens.iter().any(|&x| md.mode() & 0o7777 == meta_mode(x)),
        "{what}: mode {:o}",
        md.mode() & 0o7777
    );
    assert!(
        gens.iter().any(|&x| (md.uid(), md.gid()) == meta_owner(x)),
        "{what}: owner {}:{}",
        md.uid(),
        md.gid()
    );
    assert!(
        gens.iter()
            .any(|&x| md.modified().unwrap() == meta_mtime(x)),
        "{what}: mtime {:?}",
        md.modified()
    );
}

/// kill -9 of the daemon at random moments under a worker doing metadata changes (mkdir,
/// create, rename, chmod, chown, utimens — the delayed inode items among them), each
/// generation made durable by fsync, fsync of the directory or `wring sync`: after every
/// cycle the store mounts again, every change made durable is there, no change shows that
/// was not made, and fsck finds nothing.
#[test]
fn metadata_kill_9_cycles() {
    if !require_root("metadata_kill_9_cycles") {
        return;
    }
    const OBJECTS: usize = 24;
    let mut m = Mount::new("crash-meta");
    // acked[i] = last generation of object i made durable; tried[i] = last one begun.
    let acked = Arc::new(Mutex::new(vec![0u64; OBJECTS]));
    let tried = Arc::new(Mutex::new(vec![0u64; OBJECTS]));
    let mut rng = Rng(4242);
    for cycle in 0..10 {
        m.start("compress=zstd:1");
        let dir = m.p("t");
        if cycle == 0 {
            std::fs::create_dir(&dir).unwrap();
            wring_fs::daemon::get_xattr(&m.mnt, wring_fs::SYNC_XATTR).unwrap();
        }
        {
            let (acked, tried) = (acked.lock().unwrap(), tried.lock().unwrap());
            for i in 0..OBJECTS {
                check_meta_object(&dir, i, acked[i], tried[i], cycle);
            }
        }
        // A generation begun and not made durable may or may not have happened: the next
        // one starts from the name the object has now.
        {
            let mut tried = tried.lock().unwrap();
            for (i, t) in tried.iter_mut().enumerate() {
                let prefix = format!("o{i}.g");
                *t = std::fs::read_dir(&dir)
                    .unwrap()
                    .filter_map(|e| {
                        let name = e.unwrap().file_name().into_string().unwrap();
                        name.strip_prefix(&prefix).map(|g| g.parse().unwrap())
                    })
                    .next()
                    .unwrap_or(0);
            }
            acked.lock().unwrap().clone_from(&tried);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (acked, tried, stop) = (acked.clone(), tried.clone(), stop.clone());
            let mnt = m.mnt.clone();
            let seed = rng.next();
            std::thread::spawn(move || {
                let mut rng = Rng(seed | 1);
                while !stop.load(Ordering::Relaxed) {
                    let i = rng.below(OBJECTS as u64) as usize;
                    let g = {
                        let mut t = tried.lock().unwrap();
                        t[i] += 1;
                        t[i]
                    };
                    if !meta_generation(&mnt, i, g) {
                        break;
                    }
                    acked.lock().unwrap()[i] = g;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(200 + rng.below(700)));
        m.kill();
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        let r = wring_fs::fsck::fsck(&m.store).unwrap();
        assert!(r.problems.is_empty(), "cycle {cycle}: {:?}", r.problems);
    }
    let total: u64 = acked.lock().unwrap().iter().sum();
    assert!(total > 100, "only {total} generations made durable in all");
}

/// A small header file, different for every (cycle, i), sharing a preamble with the others:
/// what dictionaries are trained on.
fn small_header(cycle: u64, i: u64) -> Vec<u8> {
    let mut rng = Rng(cycle.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i ^ 0x5a5a);
    let mut s = String::from(
        "/* SPDX-License-Identifier: GPL-2.0 */\n/* A header of the kill -9 test: the same \
         preamble in every file, then definitions of its own. */\n#pragma once\n\n",
    );
    for n in 0..20 + rng.below(100) {
        s += &format!(
            "#define KILL9_{cycle}_{i}_{n}\t(1U << {})\t/* {} */\n",
            rng.below(32),
            ["flag", "mask", "shift"][rng.below(3) as usize]
        );
    }
    s.into_bytes()
}

/// kill -9 at random moments while small files are written and fsync'ed, and dictionaries
/// are trained (every 64 KiB) and extents rewritten with them in the background: every
/// fsync'ed file reads back, fsck finds nothing, and the store ends with dictionaries.
#[test]
fn kill_9_cycles_with_dictionaries() {
    if !require_root("kill_9_cycles_with_dictionaries") {
        return;
    }
    let mut m = Mount::new("crash-dicts");
    let acked: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let mut rng = Rng(0xd1c7);
    for cycle in 0..10u64 {
        m.start("compress-force=zstd:3,dict_train=64K");
        for &(c, i) in lock(&acked).iter() {
            let back = std::fs::read(m.p(&format!("s/{c}-{i}.h")))
                .unwrap_or_else(|e| panic!("cycle {cycle}: {c}-{i}.h was fsync'ed: {e}"));
            assert!(
                back == small_header(c, i),
                "cycle {cycle}: {c}-{i}.h differs"
            );
        }
        let _ = std::fs::create_dir(m.p("s"));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (dir, stop, acked) = (m.p("s"), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let path = dir.join(format!("{cycle}-{i}.h"));
                    let ok = std::fs::File::create(&path)
                        .and_then(|mut f| {
                            std::io::Write::write_all(&mut f, &small_header(cycle, i))?;
                            f.sync_all()
                        })
                        .is_ok();
                    if !ok {
                        return;
                    }
                    lock(&acked).push((cycle, i));
                }
            })
        };
        std::thread::sleep(Duration::from_millis(400 + rng.below(1600)));
        m.kill();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let r = wring_fs::fsck::fsck(&m.store).unwrap();
        assert!(r.problems.is_empty(), "cycle {cycle}: {:?}", r.problems);
    }
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    eprintln!(
        "{} files fsync'ed, {} dictionaries",
        lock(&acked).len(),
        r.dicts
    );
    assert!(r.dicts >= 1, "no dictionary was trained in ten cycles");
}

/// What the names worker has made durable: files whose create and contents an fsync
/// acknowledged, and files whose unlink an fsync of their directory acknowledged.
#[derive(Default)]
struct Names {
    acked: std::collections::BTreeSet<u64>,
    removed: std::collections::BTreeSet<u64>,
}

/// The contents of file `n{k}`.
fn name_body(k: u64) -> Vec<u8> {
    format!("file {k}\n")
        .repeat(1 + (k % 7) as usize)
        .into_bytes()
}

/// Where the contents of entry `n{k}` are: every fourth one is a directory holding them in
/// its file `x`, the others are files.
fn name_path(dir: &std::path::Path, k: u64) -> std::path::PathBuf {
    match k % 4 {
        0 => dir.join(format!("n{k}/x")),
        _ => dir.join(format!("n{k}")),
    }
}

/// One step of the names worker: entry `n{k}` made (a file, or a directory with a file),
/// written and fsync'ed; every third step the removal of an earlier one (unlink, or unlink
/// and rmdir), made durable by an fsync of the directory. False once the daemon is gone.
fn names_step(dir: &std::path::Path, k: u64, names: &Mutex<Names>, rng: &mut Rng) -> bool {
    use std::io::Write;
    let path = name_path(dir, k);
    let made = match k % 4 {
        0 => std::fs::create_dir(dir.join(format!("n{k}"))),
        _ => Ok(()),
    };
    let made = made
        .and_then(|()| std::fs::File::create(&path))
        .and_then(|mut f| {
            f.write_all(&name_body(k))?;
            f.sync_all()
        });
    if made.is_err() {
        return false;
    }
    lock(names).acked.insert(k);
    if !k.is_multiple_of(3) {
        return true;
    }
    let victim = {
        let mut n = lock(names);
        let pick = rng.below(n.acked.len() as u64) as usize;
        let j = n.acked.iter().nth(pick).copied();
        // Begun: may or may not have happened until the directory's fsync returns.
        j.inspect(|j| {
            n.acked.remove(j);
        })
    };
    let Some(j) = victim else {
        return true;
    };
    let gone = std::fs::remove_file(name_path(dir, j))
        .and_then(|()| match j % 4 {
            0 => std::fs::remove_dir(dir.join(format!("n{j}"))),
            _ => Ok(()),
        })
        .and_then(|()| std::fs::File::open(dir)?.sync_all());
    if gone.is_err() {
        return false;
    }
    lock(names).removed.insert(j);
    true
}

/// kill -9 at random moments under a worker that creates small files and directories with a
/// file (fsync'ed) and removes some (each removal made durable by an fsync of the directory)
/// — delayed creates, mkdirs, unlinks and rmdirs, written by the fsyncs: after every cycle
/// the store mounts again, everything acknowledged is there with its contents, nothing whose
/// removal was acknowledged is, anything else holds its contents or nothing, and fsck finds
/// nothing.
#[test]
fn names_kill_9_cycles() {
    if !require_root("names_kill_9_cycles") {
        return;
    }
    let mut m = Mount::new("crash-names");
    let names = Arc::new(Mutex::new(Names::default()));
    let mut rng = Rng(777);
    let mut next = 1u64;
    for cycle in 0..8 {
        m.start("compress=zstd:1");
        let dir = m.p("n");
        if cycle == 0 {
            std::fs::create_dir(&dir).unwrap();
            wring_fs::daemon::get_xattr(&m.mnt, wring_fs::SYNC_XATTR).unwrap();
        }
        {
            let n = lock(&names);
            for k in &n.acked {
                let back = std::fs::read(name_path(&dir, *k));
                let back = back.unwrap_or_else(|e| panic!("cycle {cycle}: n{k}: {e}"));
                assert!(
                    back == name_body(*k),
                    "cycle {cycle}: n{k} reads back wrong"
                );
            }
            for j in &n.removed {
                let p = dir.join(format!("n{j}"));
                assert!(!p.exists(), "cycle {cycle}: n{j} is back after its unlink");
            }
            for e in std::fs::read_dir(&dir).unwrap() {
                let name = e.unwrap().file_name().into_string().unwrap();
                let k: u64 = name[1..].parse().unwrap();
                // A directory made whose file was not yet: empty.
                let back = std::fs::read(name_path(&dir, k)).unwrap_or_default();
                assert!(
                    back.is_empty() || back == name_body(k),
                    "cycle {cycle}: {name} holds what was never written to it"
                );
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (names, stop, dir) = (names.clone(), stop.clone(), dir.clone());
            let mut wrng = Rng(rng.next() | 1);
            std::thread::spawn(move || {
                let mut k = next;
                while !stop.load(Ordering::Relaxed) && names_step(&dir, k, &names, &mut wrng) {
                    k += 1;
                }
                k + 1
            })
        };
        std::thread::sleep(Duration::from_millis(200 + rng.below(800)));
        m.kill();
        stop.store(true, Ordering::Relaxed);
        next = worker.join().unwrap();
        let r = wring_fs::fsck::fsck(&m.store).unwrap();
        assert!(r.problems.is_empty(), "cycle {cycle}: {:?}", r.problems);
    }
    let n = lock(&names);
    eprintln!(
        "{} files acknowledged, {} unlinks",
        n.acked.len(),
        n.removed.len()
    );
    assert!(
        n.removed.len() > 50,
        "only {} unlinks acknowledged",
        n.removed.len()
    );
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes through a descriptor still open are in the durable commit `wring.sync` makes
/// (`wring_fs::daemon::sync`: syncfs, then the daemon's commit): syncfs does not wait for a
/// FUSE server, so the daemon makes the kernel write back the dirty pages of every file
/// open for writing first. A kill -9 right after loses none of it (it lost them about one
/// time in two before; found by wring difftest's crash pass).
#[test]
fn writes_through_an_open_descriptor_are_in_the_sync_before_a_kill() {
    use std::os::unix::fs::FileExt;
    if !require_root("writes_through_an_open_descriptor_are_in_the_sync_before_a_kill") {
        return;
    }
    let mut m = Mount::new("crash-open-fd");
    for round in 0..10u8 {
        m.start("");
        let p = m.p(&format!("f{round}"));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        let body: Vec<u8> = (0..185_519u32).map(|i| (i % 251) as u8 ^ round).collect();
        f.write_all_at(&body, 0).unwrap();
        f.write_all_at(&[round; 356], 4416).unwrap();
        m.sync();
        m.kill();
        drop(f);
        let r = wring_fs::fsck::fsck(&m.store).unwrap();
        assert!(r.problems.is_empty(), "round {round}: {:?}", r.problems);
        m.start("");
        let got = std::fs::read(&p).unwrap();
        let mut want = body;
        want[4416..4416 + 356].fill(round);
        assert!(
            got == want,
            "round {round}: the synced writes read back wrong"
        );
        m.stop();
    }
}
