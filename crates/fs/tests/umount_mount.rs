//! `umount MNT` (umount(8), the kernel's umount(2) returning while the daemon still writes its
//! final commit) then a mount at once works, as on btrfs: the new daemon waits for the old one
//! to let go of the store, saying so, up to 30 s, and then fails naming the process that
//! holds it. A mount that fails leaves the mount point as it was. On the suite's transport
//! (`scripts/test.sh` runs it with `uring=0` and `uring=1`).

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{is_mounted, require_root, Mount};

/// The names in `dir` (the mount point itself, when nothing is mounted on it).
fn names_in(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn daemon_pid(m: &Mount) -> u32 {
    m.child.as_ref().expect("a daemon").id()
}

#[test]
fn fifty_plain_umounts_each_followed_at_once_by_a_mount() {
    if !require_root("fifty_plain_umounts_each_followed_at_once_by_a_mount") {
        return;
    }
    let mut m = Mount::new("cycles");
    m.start("compress=zstd:1");
    let start = Instant::now();
    for n in 0..50 {
        let body = format!("cycle {n}\n").repeat(2000 + n);
        fs::write(m.p(&format!("f{n}")), &body).unwrap();
        assert_eq!(fs::read_to_string(m.p(&format!("f{n}"))).unwrap(), body);
        if n > 0 {
            // What the previous daemon had when umount(8) returned is all there.
            let prev = format!("cycle {}\n", n - 1).repeat(2000 + n - 1);
            assert_eq!(
                fs::read_to_string(m.p(&format!("f{}", n - 1))).unwrap(),
                prev
            );
        }
        m.umount_plain();
        assert!(!is_mounted(&m.mnt));
        assert!(
            names_in(&m.mnt).is_empty(),
            "cycle {n}: the mount point holds files"
        );
        m.try_start("compress=zstd:1")
            .unwrap_or_else(|e| panic!("cycle {n}: the mount right after umount failed: {e}"));
        assert!(is_mounted(&m.mnt));
    }
    eprintln!(
        "50 cycles in {:?}; {} mounts said they waited for the previous daemon: {:?}",
        start.elapsed(),
        m.waits.len(),
        m.waits.first()
    );
    assert_eq!(names_in(&m.mnt).len(), 50);
    m.stop();
    assert!(names_in(&m.mnt).is_empty());
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
}

/// A daemon whose mount was detached lazily (`umount -l`) serves on while a file stays open:
/// a new mount waits for it, naming it, and goes through once the file is closed.
#[test]
fn a_mount_waits_for_the_daemon_still_holding_the_store_and_says_so() {
    if !require_root("a_mount_waits_for_the_daemon_still_holding_the_store_and_says_so") {
        return;
    }
    let mut m = Mount::new("waits");
    m.start("");
    fs::write(m.p("held"), b"held open\n").unwrap();
    let old = daemon_pid(&m);
    let file = fs::File::open(m.p("held")).unwrap();
    let out = std::process::Command::new("umount")
        .arg("-l")
        .arg(&m.mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    m.closing.extend(m.child.take());
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        drop(file);
    });
    let start = Instant::now();
    m.start("");
    let waited = start.elapsed();
    closer.join().unwrap();
    assert!(waited >= Duration::from_secs(1), "did not wait: {waited:?}");
    assert_eq!(m.waits.len(), 1, "{:?}", m.waits);
    assert!(
        m.waits[0].contains(&format!("in use by process {old} (")),
        "{:?}",
        m.waits
    );
    assert_eq!(fs::read(m.p("held")).unwrap(), b"held open\n");
    m.stop();
}

/// A store held past the 30 s bound: the mount fails naming the holder, nothing is mounted,
/// and the mount point is left empty.
#[test]
fn a_store_held_too_long_fails_the_mount_naming_the_holder() {
    if !require_root("a_store_held_too_long_fails_the_mount_naming_the_holder") {
        return;
    }
    let mut m = Mount::new("held");
    m.start("");
    fs::write(m.p("held"), b"held open\n").unwrap();
    let old = daemon_pid(&m);
    let file = fs::File::open(m.p("held")).unwrap();
    let out = std::process::Command::new("umount")
        .arg("-l")
        .arg(&m.mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    m.closing.extend(m.child.take());
    let start = Instant::now();
    let e = m
        .try_start("")
        .expect_err("mounted a store another daemon holds");
    let took = start.elapsed();
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(45)).contains(&took),
        "{took:?}"
    );
    assert!(e.contains(&format!("in use by process {old} (")), "{e}");
    assert!(e.contains("after waiting 30 s"), "{e}");
    assert!(!is_mounted(&m.mnt));
    assert!(names_in(&m.mnt).is_empty());
    drop(file);
    m.start("");
    assert_eq!(fs::read(m.p("held")).unwrap(), b"held open\n");
    m.stop();
}
