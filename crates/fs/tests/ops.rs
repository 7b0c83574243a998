//! Seeded random operations against the mount and a plain reference directory in lockstep
//! (several files and threads), comparing after every step and after a remount; then the
//! options, properties, remount and status checks.
mod common;
use common::lockstep;
use common::*;

use std::fs;

#[test]
fn random_ops_lockstep() {
    if !require_root("random_ops_lockstep") {
        return;
    }
    let mut m = Mount::new("ops");
    m.start("compress-force=zstd:1,max_extent=64K");
    let reference = m.base.join("ref");
    lockstep::run(&m.mnt, &reference, 3, 120, 0x9e37_79b9);
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    m.start("compress=lzo");
    for t in 0..3 {
        lockstep::compare(&m.mnt, &reference, t, "remount");
    }
}

/// A mount point must be a directory, and not one the store is under (the mount would hide
/// it); both are refused before the store is touched, and nothing is left mounted. `wring
/// umount` refuses a mount that is not wring's, and clears one whose daemon died.
#[test]
fn a_mount_point_must_be_a_directory_that_does_not_hold_the_store() {
    if !require_root("a_mount_point_must_be_a_directory_that_does_not_hold_the_store") {
        return;
    }
    let mut m = Mount::new("mountpoint");
    let file = m.base.join("file");
    fs::write(&file, b"x").unwrap();
    let real = std::mem::replace(&mut m.mnt, file.clone());
    let e = m.try_start("compress=zstd:3").unwrap_err();
    assert!(e.contains("Not a directory"), "{e}");
    assert!(!is_mounted(&file));
    m.mnt = m.base.clone();
    let e = m.try_start("compress=zstd:3").unwrap_err();
    assert!(e.contains("the store") && e.contains("is under it"), "{e}");
    assert!(!is_mounted(&m.base));
    m.mnt = real;
    m.start("compress=zstd:3");
    m.stop();
    // `wring umount` unmounts wring mounts only, a dead one too.
    let e = wring_fs::daemon::umount(std::path::Path::new("/proc")).unwrap_err();
    assert!(e.to_string().contains("not wring's"), "{e}");
    m.start("compress=zstd:3");
    let mut daemon = m.child.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    wring_fs::daemon::umount(&m.mnt).expect("unmounting a dead mount");
    assert!(!is_mounted(&m.mnt));
}

#[test]
fn options_properties_remount_status() {
    if !require_root("options_properties_remount_status") {
        return;
    }
    let mut m = Mount::new("opts");
    for (bad, name, accepted) in [
        ("compress=zstdd", "compress", "accepted are"),
        ("max_extent=5M", "max_extent", "4K to 4M"),
        ("streams=zero", "streams", "1 to 1024"),
        ("bogus=1", "bogus", "accepted are"),
    ] {
        let e = m.try_start(bad).unwrap_err();
        assert!(e.contains(name) && e.contains(accepted), "{bad}: {e}");
        assert!(!is_mounted(&m.mnt), "{bad} left a mount behind");
    }
    m.start("compress=zstd:3");
    let status = wring_fs::daemon::status(&m.mnt).unwrap();
    assert!(
        status.contains("options: compress=zstd:3,max_extent=128K"),
        "{status}"
    );
    let e = wring_fs::daemon::remount(&m.mnt, "compress=zlib:x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("compress") && e.contains("accepted"), "{e}");
    let now = wring_fs::daemon::remount(&m.mnt, "compress-force=zlib:9,streams=1").unwrap();
    assert!(
        now.starts_with("compress-force=zlib:9,max_extent=128K,streams=1"),
        "{now}"
    );
    // More streams start more compression workers, the mount's only compression threads
    // (writeback runs on their completions); fewer stop them.
    // The mount above started one per stream of the machine's default, so ask for more than
    // any machine has.
    let before = wring_fs::daemon::status(&m.mnt).unwrap();
    wring_fs::daemon::remount(&m.mnt, "streams=64").unwrap();
    let after = wring_fs::daemon::status(&m.mnt).unwrap();
    assert!(
        after.contains("offload cpu: workers=64 "),
        "{before}\n{after}"
    );
    // The daemon's compression threads are the offload's workers alone: no writeback threads.
    // A thread names itself once it runs, so poll (boundedly) until the new ones have.
    let pid = m.child.as_ref().expect("the daemon runs").id();
    let names = || -> Vec<String> {
        fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|n| n.trim().to_string())
            .collect()
    };
    let counts = |names: &[String]| {
        let count = |name: &str| names.iter().filter(|n| *n == name).count();
        (count("wring-cpu"), count("wring-wb"))
    };
    let settled = (0..400).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        counts(&names()) == (64, 0)
    });
    let last = names();
    assert!(settled, "{:?} in {last:?}", counts(&last));
    wring_fs::daemon::remount(&m.mnt, "streams=1").unwrap();
    // Surplus threads exit as they wake: poll (boundedly) until both are back to one.
    let back = (0..400).find_map(|_| {
        let s = wring_fs::daemon::status(&m.mnt).unwrap();
        let done = s.contains("offload cpu: workers=1 ");
        std::thread::sleep(std::time::Duration::from_millis(25));
        done.then_some(s)
    });
    assert!(back.is_some(), "threads never went back to one stream");
    // Property on a directory, inherited by new files; the level is honoured.
    let dir = m.p("z9");
    fs::create_dir(&dir).unwrap();
    let o = sh(&format!(
        "setfattr -n btrfs.compression -v zstd:9 {}",
        dir.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = sh(&format!(
        "setfattr -n btrfs.compression -v zstd:nine {}",
        dir.display()
    ));
    assert!(!o.status.success());
    let mut rng = Rng(5);
    fs::write(dir.join("a"), text(&mut rng, 400_000)).unwrap();
    let o = sh(&format!(
        "getfattr --only-values -n btrfs.compression {}",
        dir.join("a").display()
    ));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "zstd:9");
    let f = fs::File::open(dir.join("a")).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let stat =
        String::from_utf8_lossy(&wring_fs::daemon::get_xattr(&dir, wring_fs::STAT_XATTR).unwrap())
            .into_owned();
    assert!(stat.contains("zstd:9"), "{stat}");
    // A file outside follows the mount option; `none` stores raw.
    fs::write(m.p("b"), text(&mut rng, 300_000)).unwrap();
    let stat = String::from_utf8_lossy(
        &wring_fs::daemon::get_xattr(&m.mnt, wring_fs::STAT_XATTR).unwrap(),
    )
    .into_owned();
    assert!(stat.contains("zlib:9"), "{stat}");
    wring_fs::daemon::set_xattr(&m.p("b"), wring_fs::PROP_XATTR, b"none").unwrap();
    fs::write(m.p("b"), text(&mut rng, 300_000)).unwrap();
    let stat = String::from_utf8_lossy(
        &wring_fs::daemon::get_xattr(&m.p("b"), wring_fs::STAT_XATTR).unwrap(),
    )
    .into_owned();
    assert!(stat.contains("none       100%"), "{stat}");
    m.stop();
}
