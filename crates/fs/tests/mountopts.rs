//! The mount options a btrfs fstab line uses (issue 28), each beside a scratch btrfs: `ro` at
//! mount and `remount,ro`/`remount,rw`; `suid`, `dev`, `exec` and their `no` forms (and
//! `suid`/`dev` refused for a store another user owns); `relatime` (the default),
//! `strictatime` and `noatime`; `nodiratime` and `diratime` (fstests generic/003); the source
//! spelled as findmnt shows it; a second mount of a mounted store saying where it is.
mod common;
use common::*;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use wring_btrfs::scratch::ScratchFs;
use wring_fs::daemon;

fn ok(cmd: &str) {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The exit status and output of `cmd`.
fn out(cmd: &str) -> (bool, String) {
    let o = sh(cmd);
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text.trim().to_string())
}

/// What writing, creating and reading do on `root`: the errno of each (0: done).
fn rw_outcome(root: &Path) -> [i32; 3] {
    let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error()).unwrap_or(0);
    [
        errno(std::fs::write(root.join("f"), b"changed")),
        errno(std::fs::write(root.join("new"), b"new")),
        errno(std::fs::read(root.join("f")).map(drop)),
    ]
}

#[test]
fn ro_at_mount_and_by_remount() {
    if !require_root("ro_at_mount_and_by_remount") {
        return;
    }
    let mut m = Mount::new("ro");
    m.start("compress=zstd:1");
    let mut btrfs = ScratchFs::new("").unwrap();
    for root in [&m.mnt, &btrfs.path().to_path_buf()] {
        std::fs::write(root.join("f"), b"before").unwrap();
    }
    m.sync();
    // remount,ro: writes EROFS, reads work, as on btrfs; and back.
    daemon::remount(&m.mnt, "ro").unwrap();
    ok(&format!("mount -o remount,ro {}", btrfs.path().display()));
    let ours = rw_outcome(&m.mnt);
    assert_eq!(ours, rw_outcome(btrfs.path()));
    assert_eq!(ours, [libc::EROFS, libc::EROFS, 0]);
    let status = daemon::status(&m.mnt).unwrap();
    assert!(status.lines().next().unwrap().ends_with(",ro"), "{status}");
    // Nothing is committed while read-only: reads do not even update access times.
    let before = std::fs::metadata(m.store.join("wring.redb"))
        .unwrap()
        .mtime_nsec();
    let _ = std::fs::read(m.p("f"));
    std::thread::sleep(Duration::from_millis(1500));
    let after = std::fs::metadata(m.store.join("wring.redb"))
        .unwrap()
        .mtime_nsec();
    assert_eq!(before, after, "the database was written while read-only");
    daemon::remount(&m.mnt, "rw").unwrap();
    ok(&format!("mount -o remount,rw {}", btrfs.path().display()));
    assert_eq!(rw_outcome(&m.mnt), [0, 0, 0]);
    assert_eq!(rw_outcome(btrfs.path()), [0, 0, 0]);
    // EBUSY while a file is open for writing, as on btrfs.
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(m.p("f"))
        .unwrap();
    let e = daemon::remount(&m.mnt, "ro").unwrap_err();
    assert_eq!(e.errno(), libc::EBUSY, "{e}");
    drop(f);
    m.stop();
    // ro at mount: nothing reaches the store's files, not even on a store that is read-only
    // itself (as on read-only media).
    ok(&format!(
        "chmod 500 {0} && chmod 400 {0}/*",
        m.store.display()
    ));
    m.start("ro");
    assert_eq!(rw_outcome(&m.mnt), [libc::EROFS, libc::EROFS, 0]);
    assert_eq!(std::fs::read(m.p("f")).unwrap(), b"changed");
    let e = daemon::remount(&m.mnt, "rw").unwrap_err().to_string();
    assert!(e.contains("mounted read-only"), "{e}");
    m.stop();
    ok(&format!(
        "chmod 700 {0} && chmod 600 {0}/wring.*",
        m.store.display()
    ));
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    btrfs.remount().unwrap();
}

/// `dev` and `suid` on a root-owned store mounted by root behave as on btrfs; `nodev`,
/// `nosuid` (the default) and `noexec` too; `suid` on a store another user owns is refused.
#[test]
fn dev_suid_exec_as_mount8_means_them() {
    if !require_root("dev_suid_exec_as_mount8_means_them") {
        return;
    }
    let mut m = Mount::new("devsuid");
    let btrfs = ScratchFs::new("").unwrap();
    let nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    // What a set-user-ID root copy of id(1) says as nobody, and whether a device node opens.
    let probe = |root: &Path| -> (String, bool, bool) {
        let id = root.join("id");
        let _ = std::fs::remove_file(&id);
        ok(&format!(
            "cp /usr/bin/id {0} && chmod 4755 {0}",
            id.display()
        ));
        let euid = out(&format!("{nobody} {} -u", id.display())).1;
        let null = root.join("null");
        let _ = std::fs::remove_file(&null);
        ok(&format!("mknod {} c 1 3", null.display()));
        let dev = std::fs::OpenOptions::new().write(true).open(&null).is_ok();
        let exec = out(&format!("{} -u", id.display())).0;
        (euid, dev, exec)
    };
    run_dir(&m.base);
    let kernel = probe(btrfs.path());
    assert_eq!(kernel, ("0".into(), true, true), "btrfs's defaults");
    m.start("suid,dev,allow_other");
    assert_eq!(probe(&m.mnt), kernel, "suid,dev");
    m.stop();
    m.start("allow_other");
    assert_eq!(probe(&m.mnt), ("65534".into(), false, true), "the default");
    m.stop();
    m.start("noexec,allow_other");
    assert!(!probe(&m.mnt).2, "noexec runs nothing");
    m.stop();
    // A store another user owns: suid and dev are refused, saying why.
    ok(&format!("chown -R 65534 {}", m.store.display()));
    let e = m.try_start("suid").unwrap_err();
    assert!(e.contains("suid refused") && e.contains("uid 65534"), "{e}");
    ok(&format!("chown -R 0 {}", m.store.display()));
}

/// The test's base directory must let nobody through to the mount.
fn run_dir(base: &Path) {
    ok(&format!("chmod 755 {}", base.display()));
}

/// Access times under each atime option, beside btrfs with the same, as kept across
/// remounts: a read after a change updates them (relatime, strictatime), a later read only
/// under strictatime, noatime never. Each read comes after a remount, so it reaches the
/// daemon: FUSE sends the server no access time, so a read the kernel serves from its page
/// cache updates it in the kernel's memory only (see crates/fs/src/vfs.rs).
#[test]
fn access_times_as_btrfs_keeps_them() {
    if !require_root("access_times_as_btrfs_keeps_them") {
        return;
    }
    let mut m = Mount::new("atime");
    let atime = |f: &Path| {
        let md = std::fs::metadata(f).unwrap();
        md.atime() as i128 * 1_000_000_000 + md.atime_nsec() as i128
    };
    for opt in ["relatime", "strictatime", "noatime"] {
        let mut btrfs = ScratchFs::new(opt).unwrap();
        m.start(opt);
        let (ours, theirs) = (m.p("f"), btrfs.path().join("f"));
        for f in [&ours, &theirs] {
            std::fs::write(f, b"data").unwrap();
        }
        let mut times = vec![(atime(&ours), atime(&theirs))];
        for _ in 0..2 {
            m.stop();
            m.start(opt);
            btrfs.remount().unwrap();
            std::thread::sleep(Duration::from_millis(1100));
            std::fs::read(&ours).unwrap();
            std::fs::read(&theirs).unwrap();
            m.stop();
            m.start(opt);
            btrfs.remount().unwrap();
            times.push((atime(&ours), atime(&theirs)));
        }
        let moved = |pick: fn(&(i128, i128)) -> i128| {
            (
                pick(&times[1]) > pick(&times[0]),
                pick(&times[2]) > pick(&times[1]),
            )
        };
        let (wring, kernel) = (moved(|t| t.0), moved(|t| t.1));
        assert_eq!(wring, kernel, "{opt}: wring against btrfs");
        let want = match opt {
            "strictatime" => (true, true),
            "relatime" => (true, false),
            _ => (false, false),
        };
        assert_eq!(wring, want, "{opt}");
        m.stop();
        let _ = std::fs::remove_file(&theirs);
    }
    // And the kernel shows the option.
    m.start("strictatime");
    let (_, shown) = out(&format!("findmnt -n -o OPTIONS {}", m.mnt.display()));
    assert!(
        shown.contains("strictatime") || !shown.contains("relatime"),
        "{shown}"
    );
    m.stop();
}

/// `nodiratime` and `diratime` are taken as btrfs takes them from mount(8) (fstests
/// generic/003 remounts with `nodiratime`): listing a directory updates its access time only
/// with `diratime` (the default), while a file's still follows the atime option; the kernel
/// shows the flag, and `wring status` the option. Each access reaches the daemon (a remount
/// before it), as in [`access_times_as_btrfs_keeps_them`].
#[test]
fn nodiratime_and_diratime_as_btrfs() {
    if !require_root("nodiratime_and_diratime_as_btrfs") {
        return;
    }
    let mut m = Mount::new("diratime");
    let atime = |f: &Path| {
        let md = std::fs::metadata(f).unwrap();
        md.atime() as i128 * 1_000_000_000 + md.atime_nsec() as i128
    };
    for opt in ["nodiratime", "diratime", "strictatime,nodiratime"] {
        let mut btrfs = ScratchFs::new(opt).unwrap();
        m.start(opt);
        let roots = [m.mnt.clone(), btrfs.path().to_path_buf()];
        for r in &roots {
            std::fs::create_dir(r.join("d")).unwrap();
            std::fs::write(r.join("d/f"), b"data").unwrap();
        }
        m.stop();
        m.start(opt);
        btrfs.remount().unwrap();
        let before = roots
            .clone()
            .map(|r| (atime(&r.join("d")), atime(&r.join("d/f"))));
        std::thread::sleep(Duration::from_millis(1100));
        for r in &roots {
            assert_eq!(std::fs::read_dir(r.join("d")).unwrap().count(), 1);
            std::fs::read(r.join("d/f")).unwrap();
        }
        m.stop();
        m.start(opt);
        btrfs.remount().unwrap();
        let after = roots
            .clone()
            .map(|r| (atime(&r.join("d")), atime(&r.join("d/f"))));
        let moved = |k: usize| (after[k].0 > before[k].0, after[k].1 > before[k].1);
        assert_eq!(moved(0), moved(1), "{opt}: wring against btrfs");
        let dir = !opt.contains("nodiratime");
        assert_eq!(moved(0), (dir, true), "{opt}: (directory, file)");
        let (_, shown) = out(&format!("findmnt -n -o OPTIONS {}", m.mnt.display()));
        assert_eq!(shown.contains("nodiratime"), !dir, "{opt}: {shown}");
        let status = daemon::status(&m.mnt).unwrap();
        assert_eq!(status.contains("nodiratime"), !dir, "{opt}: {status}");
        std::fs::remove_dir_all(m.p("d")).unwrap();
        m.stop();
    }
}

/// The source as findmnt shows it mounts the store; a second mount of a mounted store says
/// where it is mounted.
#[test]
fn the_source_as_findmnt_shows_it_and_a_second_mount() {
    if !require_root("the_source_as_findmnt_shows_it_and_a_second_mount") {
        return;
    }
    let mut m = Mount::new("source");
    let source = format!("wring:{}", m.store.display());
    let store = m.store.clone();
    m.store = source.clone().into();
    m.start("");
    let (_, shown) = out(&format!("findmnt -n -o SOURCE {}", m.mnt.display()));
    assert_eq!(shown, source);
    let mut second = Mount::unmade("source-2");
    second.store = store.clone();
    let e = second.try_start("").unwrap_err();
    assert!(
        e.contains(&format!("already mounted on {}", m.mnt.display())),
        "{e}"
    );
    m.stop();
    m.store = store;
}
