//! `umount MNT` then a mount at once, through the real `wring` binary, as on btrfs: with
//! `wring mount`, and with mount(8)'s `mount -t fuse.wring` (its helper `mount.fuse.wring` is
//! this binary, put over the system's /usr/sbin in a private mount namespace, as the package
//! installs it). 50 cycles each, every one writing and reading back a file through the mount,
//! unmounting with plain umount(8) (which returns while the daemon still writes its final
//! commit) and finding the mount point empty. A mount that waits for the old daemon says so on
//! stderr. And `wring fsck --repair` on a store the bug of issue 40 damaged, then mounted and
//! used, and refused on a mounted store. Mounts take the suite's transport
//! (`WRING_TEST_MOUNT_OPTIONS`: scripts/test.sh runs this file with uring=0 and uring=1).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WRING: &str = env!("CARGO_BIN_EXE_wring");

fn is_mounted(p: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let p = p.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

/// Run `cmd` capturing its output, failing when it takes longer than `limit`.
fn run(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null());
    let what = format!("{cmd:?}");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.unwrap_or_else(|e| panic!("running {what}: {e}")),
        Err(_) => panic!("{what} did not return within {limit:?}"),
    }
}

fn wring(args: &[&str]) -> Output {
    let mut cmd = Command::new(WRING);
    cmd.args(args);
    run(cmd, Duration::from_secs(60))
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// umount(8), plain: no waiting for the daemon.
fn umount(mnt: &Path) {
    let mut cmd = Command::new("umount");
    cmd.arg(mnt);
    ok(&run(cmd, Duration::from_secs(30)), "umount");
}

/// The suite's mount options, then `opts`.
fn options(opts: &str) -> String {
    match std::env::var("WRING_TEST_MOUNT_OPTIONS") {
        Ok(extra) if !extra.is_empty() => format!("{extra},{opts}"),
        _ => opts.to_string(),
    }
}

fn empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

/// A store and a mount point under /tmp; unmounted (lazily) and removed whatever happens.
struct Scratch {
    base: PathBuf,
    store: PathBuf,
    mnt: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let base = PathBuf::from(format!("/tmp/wring-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let s = Scratch {
            store: base.join("store"),
            mnt: base.join("mnt"),
            base,
        };
        std::fs::create_dir_all(&s.mnt).unwrap();
        s
    }

    fn st(&self) -> &str {
        self.store.to_str().unwrap()
    }

    fn mt(&self) -> &str {
        self.mnt.to_str().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        // The last daemon finishes before its store goes.
        let _ = Command::new(WRING).args(["fsck", self.st()]).output();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// The body written in cycle `n`.
fn body(n: usize) -> String {
    format!("cycle {n}\n").repeat(1000 + n)
}

#[test]
fn fifty_umounts_each_followed_at_once_by_wring_mount() {
    if !wring_testing::require_root("fifty_umounts_each_followed_at_once_by_wring_mount") {
        return;
    }
    let s = Scratch::new("cycles");
    ok(&wring(&["mkfs", s.st()]), "wring mkfs");
    let opts = options("compress=zstd:1");
    let (start, mut said) = (Instant::now(), 0);
    for n in 0..50 {
        let o = wring(&["mount", "-o", &opts, s.st(), s.mt()]);
        ok(&o, &format!("cycle {n}: wring mount right after umount"));
        said += String::from_utf8_lossy(&o.stderr)
            .matches("is in use by")
            .count();
        assert!(
            is_mounted(&s.mnt),
            "cycle {n}: not mounted when wring mount returned"
        );
        let f = s.mnt.join(format!("f{n}"));
        std::fs::write(&f, body(n)).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), body(n));
        if n > 0 {
            let prev = s.mnt.join(format!("f{}", n - 1));
            assert_eq!(std::fs::read_to_string(prev).unwrap(), body(n - 1));
        }
        umount(&s.mnt);
        assert!(!is_mounted(&s.mnt));
        assert!(empty(&s.mnt), "cycle {n}: the mount point holds files");
    }
    eprintln!(
        "50 cycles in {:?}; {said} mounts said they waited",
        start.elapsed()
    );
    let out = ok(&wring(&["fsck", s.st()]), "wring fsck");
    assert!(out.contains("checked 51 inodes"), "{out}");
}

/// The same through mount(8): `mount -t fuse.wring` runs /sbin/mount.fuse.wring, which is this
/// binary in a private mount namespace (an overlay on /usr/sbin holding the link, so the
/// system's /usr/sbin is left alone). The cycles run in a shell inside it.
#[test]
fn fifty_umounts_each_followed_at_once_by_mount_t_fuse_wring() {
    if !wring_testing::require_root("fifty_umounts_each_followed_at_once_by_mount_t_fuse_wring") {
        return;
    }
    let s = Scratch::new("cycles-mount8");
    ok(&wring(&["mkfs", s.st()]), "wring mkfs");
    let (upper, work) = (s.base.join("upper"), s.base.join("work"));
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink(WRING, upper.join("mount.fuse.wring")).unwrap();
    let script = format!(
        r#"set -eu
mount -t overlay wring-test -o lowerdir=/usr/sbin,upperdir={upper},workdir={work} /usr/sbin
trap 'umount -l "$M" 2>/dev/null || true' EXIT
M={mnt}
for n in $(seq 0 49); do
  mount -t fuse.wring {store} "$M" -o {opts} || {{ echo "cycle $n: mount failed"; exit 1; }}
  findmnt -n -t fuse.wring "$M" >/dev/null || {{ echo "cycle $n: not mounted"; exit 1; }}
  yes "cycle $n" | head -n $((1000 + n)) > "$M/f$n"
  [ "$(head -n 1 "$M/f$n")" = "cycle $n" ] && [ "$(wc -l < "$M/f$n")" -eq $((1000 + n)) ] ||
    {{ echo "cycle $n: read back wrong"; exit 1; }}
  if [ "$n" -gt 0 ]; then
    p=$((n - 1))
    [ "$(wc -l < "$M/f$p")" -eq $((1000 + p)) ] || {{ echo "cycle $n: f$p lost"; exit 1; }}
  fi
  umount "$M"
  [ -z "$(ls -A "$M")" ] || {{ echo "cycle $n: the mount point holds $(ls -A "$M")"; exit 1; }}
  echo "cycle $n ok"
done
"#,
        upper = upper.display(),
        work = work.display(),
        mnt = s.mt(),
        store = s.st(),
        opts = options("compress=zstd:1"),
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
    let start = Instant::now();
    let o = run(cmd, Duration::from_secs(300));
    let out = ok(&o, "50 cycles of mount -t fuse.wring and umount");
    assert_eq!(out.matches(" ok\n").count(), 50, "{out}");
    let said = String::from_utf8_lossy(&o.stderr)
        .matches("is in use by")
        .count();
    eprintln!(
        "50 cycles in {:?}; {said} mounts said they waited",
        start.elapsed()
    );
    let out = ok(&wring(&["fsck", s.st()]), "wring fsck");
    assert!(out.contains("checked 51 inodes"), "{out}");
}

/// `wring mount` of a store a lazily detached mount's daemon still serves: it says on stderr
/// whom it waits for, and mounts once that daemon lets go.
#[test]
fn wring_mount_says_whom_it_waits_for() {
    if !wring_testing::require_root("wring_mount_says_whom_it_waits_for") {
        return;
    }
    let s = Scratch::new("says");
    ok(&wring(&["mkfs", s.st()]), "wring mkfs");
    let opts = options("compress=zstd:1");
    ok(
        &wring(&["mount", "-o", &opts, s.st(), s.mt()]),
        "wring mount",
    );
    std::fs::write(s.mnt.join("held"), b"held\n").unwrap();
    let pid = String::from_utf8(
        wring_fs::daemon::get_xattr(&s.mnt, wring_fs::PID_XATTR).expect("the daemon's pid"),
    )
    .unwrap();
    let file = std::fs::File::open(s.mnt.join("held")).unwrap();
    let mut cmd = Command::new("umount");
    cmd.args(["-l", s.mt()]);
    ok(&run(cmd, Duration::from_secs(30)), "umount -l");
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        drop(file);
    });
    let o = wring(&["mount", "-o", &opts, s.st(), s.mt()]);
    closer.join().unwrap();
    ok(&o, "wring mount of a store still held");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("wring: {} is in use by process {pid} (", s.st()))
            && err.contains("waiting up to 30 s"),
        "{err}"
    );
    assert_eq!(std::fs::read(s.mnt.join("held")).unwrap(), b"held\n");
    ok(&wring(&["umount", s.mt()]), "wring umount");
}

/// The store the issue's six commands damaged (tests/fixtures of wring-fs): fsck names the
/// problem and points at --repair, --repair fixes it and says how, the name works again on a
/// mount, and a repair of the mounted store is refused, naming the mount.
#[test]
fn fsck_repair_through_the_cli() {
    if !wring_testing::require_root("fsck_repair_through_the_cli") {
        return;
    }
    let s = Scratch::new("repair");
    std::fs::create_dir_all(&s.store).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&s.store, std::fs::Permissions::from_mode(0o700)).unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fs/tests/fixtures/store-dangling.tar.gz");
    let mut tar = Command::new("tar");
    tar.arg("-xzf").arg(&fixture).arg("-C").arg(&s.store);
    ok(&run(tar, Duration::from_secs(30)), "tar -x");

    let o = wring(&["fsck", s.st()]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("problem: entry 'n0' in 2 points at missing inode 3"),
        "{out}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("wring fsck --repair"));

    let out = ok(&wring(&["fsck", "--repair", s.st()]), "wring fsck --repair");
    assert!(
        out.contains("repaired: removed entry 'n0' in /d (directory 2): inode 3 does not exist")
            && out.contains("1 change(s) made")
            && out.ends_with("no problems found\n"),
        "{out}"
    );
    let out = ok(&wring(&["fsck", s.st()]), "wring fsck after the repair");
    assert!(out.contains("no problems found"), "{out}");

    let opts = options("compress=zstd:3");
    ok(
        &wring(&["mount", "-o", &opts, s.st(), s.mt()]),
        "wring mount",
    );
    let n0 = s.mnt.join("d/n0");
    std::os::unix::fs::symlink("t", &n0).expect("ln -s t n0 on the repaired store");
    assert_eq!(std::fs::read_link(&n0).unwrap(), Path::new("t"));
    let o = wring(&["fsck", "--repair", s.st()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains(&format!("is mounted on {}", s.mt())),
        "{err}"
    );
    ok(&wring(&["umount", s.mt()]), "wring umount");
    let out = ok(&wring(&["fsck", s.st()]), "wring fsck at the end");
    assert!(out.contains("no problems found"), "{out}");
}
