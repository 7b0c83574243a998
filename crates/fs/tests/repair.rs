//! `fsck --repair` on stores the delayed-namespace bug of issue 40 damaged, made by the release
//! of ea38f87 (`tests/fixtures/README.md`): repaired, then clean, then mounted and used, the
//! names that were stuck included; and a mounted store refused by the repair and by fsck,
//! naming its mount.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{require_root, Mount};
use wring_fs::store::Access;

/// A mount point beside the store of `fixture`, unpacked (owner-only, as mkfs makes a store).
fn unpacked(name: &str, fixture: &str) -> Mount {
    let m = Mount::unmade(name);
    fs::create_dir_all(&m.store).unwrap();
    fs::set_permissions(&m.store, fs::Permissions::from_mode(0o700)).unwrap();
    let tarball = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    let out = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&m.store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    m
}

/// fsck's problems, the repair's changes; the store is clean after it.
fn repair(m: &Mount) -> (Vec<String>, Vec<String>) {
    let before = wring_fs::fsck::fsck(&m.store).unwrap().problems;
    let r = wring_fs::fsck::repair(&m.store, &Access::default(), &mut |w| panic!("waited: {w}"))
        .unwrap();
    assert!(r.after.problems.is_empty(), "{r:?}");
    let after = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(after.problems.is_empty(), "{after:?}");
    (before, r.changes)
}

fn has(lines: &[String], words: &[&str]) -> bool {
    lines.iter().any(|l| words.iter().all(|w| l.contains(w)))
}

#[test]
fn the_dangling_name_of_issue_40_is_repaired_and_the_name_usable_again() {
    if !require_root("the_dangling_name_of_issue_40_is_repaired_and_the_name_usable_again") {
        return;
    }
    let mut m = unpacked("repair-dangling", "store-dangling.tar.gz");
    let (before, changes) = repair(&m);
    assert_eq!(before, ["entry 'n0' in 2 points at missing inode 3"]);
    assert!(has(
        &changes,
        &["removed entry 'n0' in /d (directory 2): inode 3 does not exist"]
    ));
    m.start("compress=zstd:3");
    let d = m.p("d");
    // The issue's sequence goes through now: the name is free.
    std::os::unix::fs::symlink("t", d.join("n0")).expect("ln -s t n0 after the repair");
    fs::remove_file(d.join("n0")).unwrap();
    fs::write(d.join("n0"), b"new\n").unwrap();
    assert_eq!(fs::read(d.join("n0")).unwrap(), b"new\n");
    let names: Vec<_> = fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["n0"]);
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
}

#[test]
fn three_kinds_of_damage_are_repaired_and_the_store_used() {
    if !require_root("three_kinds_of_damage_are_repaired_and_the_store_used") {
        return;
    }
    let mut m = unpacked("repair-tangled", "store-tangled.tar.gz");
    let (before, changes) = repair(&m);
    for p in [
        "entry 'c' in 2 points at missing inode 6",
        "entry 'f' in missing directory 3",
        "inode 5: link count 1 but 2 expected",
    ] {
        assert!(before.iter().any(|b| b == p), "{p}: {before:?}");
    }
    for c in [
        "removed entry 'c' in /d (directory 2): inode 6 does not exist",
        "removed entry 'f' in directory 3: directory 3 does not exist",
        "set the link count of /d/g (inode 5) from 1 to 2",
    ] {
        assert!(has(&changes, &[c]), "{c}: {changes:?}");
    }
    m.start("compress=zstd:3");
    let d = m.p("d");
    assert_eq!(fs::read(d.join("h")).unwrap(), b"1\n");
    // Removing one name of the file leaves the other (with a link count of 1 it went).
    fs::remove_file(d.join("g")).unwrap();
    assert_eq!(fs::read(d.join("h")).unwrap(), b"1\n");
    fs::create_dir(d.join("c")).expect("mkdir c after the repair");
    fs::create_dir(d.join("a")).unwrap();
    fs::write(d.join("a/f"), b"again\n").unwrap();
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
}

#[test]
fn a_mounted_store_is_refused_naming_its_mount() {
    if !require_root("a_mounted_store_is_refused_naming_its_mount") {
        return;
    }
    let mut m = Mount::new("repair-mounted");
    m.start("");
    fs::write(m.p("kept"), b"kept\n").unwrap();
    let e = wring_fs::fsck::repair(&m.store, &Access::default(), &mut |w| panic!("waited: {w}"))
        .unwrap_err();
    let msg = e.to_string();
    let mnt = m.mnt.display().to_string();
    assert!(msg.contains(&format!("is mounted on {mnt}")), "{msg}");
    assert_eq!(e.errno(), libc::EBUSY);
    // fsck too, at once (not after waiting for the daemon that serves the mount).
    let start = std::time::Instant::now();
    let e = wring_fs::fsck::fsck(&m.store).unwrap_err().to_string();
    assert!(e.contains(&format!("is mounted on {mnt}")), "{e}");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(fs::read(m.p("kept")).unwrap(), b"kept\n");
    m.stop();
}
