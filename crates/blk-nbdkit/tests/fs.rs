//! A real filesystem on wring's block device, the way `wring blk start --help` tells users to
//! get a block device where the kernel has no nbd driver: nbdkit serves the plugin, nbdfuse
//! exposes the export as a file, `losetup` makes that a block device, then mkfs.ext4, mount,
//! `cp -a` of a corpus slice, `diff -r`, umount, `e2fsck -fn`.
//!
//! Needs root (loop devices, mount; fails without it unless `WRING_SKIP_ROOT=1`) and the
//! Debian packages nbdkit, libnbd-bin (nbdfuse), fuse3 and e2fsprogs (fails naming the
//! package). Every step is undone by a Drop guard — unmount, detach the loop device, unmount
//! nbdfuse, kill nbdkit, remove the temporary directory — also when an assertion fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

// The bench's nbdkit harness, compiled in (a dev-dependency on wring-bench would be a cycle).
#[allow(dead_code)]
#[path = "../../bench/src/serve.rs"]
mod serve;
use serve::Nbdkit;
use wring_testing::blk_plugin as plugin_path;

/// Run a program to completion; its output, or a panic naming the package when it is missing.
fn run(program: &str, args: &[&str], package: &str) -> Output {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{program} could not run ({e}): install the Debian package {package}")
        })
}

/// [`run`], failing the test with the program's stderr unless it succeeds.
fn ok(program: &str, args: &[&str], package: &str) -> String {
    let out = run(program, args, package);
    assert!(
        out.status.success(),
        "{program} {} failed ({}): {}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Wait until `path` is a non-empty file (a pid file written once serving), or the child died.
fn wait_for(child: &mut Child, path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited ({status}) before it was ready");
        }
        assert!(
            Instant::now() < deadline,
            "{what} was not ready within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The temporary directory; removed last.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// nbdfuse serving the export as `DIR/nbd`; unmounted (which ends it) on drop, killed if it
/// does not end.
struct Fuse {
    child: Child,
    dir: PathBuf,
}

impl Drop for Fuse {
    fn drop(&mut self) {
        let dir = self.dir.display().to_string();
        let _ = run("fusermount3", &["-u", &dir], "fuse3");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = run("umount", &["-l", &dir], "mount");
    }
}

/// A loop device; detached on drop.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = run("losetup", &["-d", &self.0], "mount");
    }
}

/// A mounted filesystem; unmounted on drop (lazily if it is still busy).
struct Mounted(Option<String>);

impl Mounted {
    fn umount(&mut self) {
        if let Some(dir) = self.0.take() {
            ok("umount", &[&dir], "mount");
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            if !run("umount", &[&dir], "mount").status.success() {
                let _ = run("umount", &["-l", &dir], "mount");
            }
        }
    }
}

/// The corpus slice copied in: wring-testing's samples (the shared corpus when
/// `WRING_CORPUS` names it, else system files; a zero and a random file), in two directories
/// with a symbolic link and a file mode that `cp -a` must keep.
fn make_source(dir: &Path) {
    let nested = dir.join("a/b");
    std::fs::create_dir_all(&nested).expect("making the source tree");
    for (i, s) in wring_testing::samples(6 << 20).iter().enumerate() {
        let at = if i % 2 == 0 { dir } else { nested.as_path() };
        std::fs::write(at.join(&s.name), &s.data).expect("writing a sample");
    }
    std::os::unix::fs::symlink("a/b", dir.join("link")).expect("a symbolic link");
    std::fs::write(dir.join("script.sh"), b"#!/bin/sh\necho hi\n").expect("a script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dir.join("script.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .expect("chmod");
}

#[test]
fn ext4_through_nbdfuse_and_a_loop_device() {
    ext4_on_the_device(
        "ext4_through_nbdfuse_and_a_loop_device",
        &["comp_algorithm=lz4"],
    );
}

/// The same on 16 KiB slots (beyond zram): ext4's 4 KiB blocks are partial slots, each
/// write a read-modify-write of its slot.
#[test]
fn ext4_through_nbdfuse_and_a_loop_device_with_16k_slots() {
    ext4_on_the_device(
        "ext4_through_nbdfuse_and_a_loop_device_with_16k_slots",
        &["comp_algorithm=zstd:1", "slot_size=16K"],
    );
}

/// mkfs.ext4, mount, cp -a, diff -r, umount, e2fsck -fn on a 64 MiB device with `options`.
fn ext4_on_the_device(test: &str, options: &[&str]) {
    if !wring_testing::require_root(test) {
        return;
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("wring-{test}-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tmp.0);
    for d in ["fuse", "mnt", "src"] {
        std::fs::create_dir_all(tmp.0.join(d)).expect("a temporary directory");
    }
    let mut args = vec![
        plugin_path().display().to_string(),
        "size=64M".to_string(),
        "streams=2".to_string(),
    ];
    args.extend(options.iter().map(|o| o.to_string()));
    let server = Nbdkit::start(&tmp.0, &args, false, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}"));
    let sock = server.socket();

    let fuse_dir = tmp.0.join("fuse");
    let child = Command::new("nbdfuse")
        .arg("-P")
        .arg(tmp.0.join("nbdfuse.pid"))
        .arg(&fuse_dir)
        .arg("--unix")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nbdfuse runs (install the Debian package libnbd-bin)");
    let mut fuse = Fuse {
        child,
        dir: fuse_dir.clone(),
    };
    wait_for(&mut fuse.child, &tmp.0.join("nbdfuse.pid"), "nbdfuse");
    let image = fuse_dir.join("nbd");
    assert_eq!(
        std::fs::metadata(&image).expect("nbdfuse's file").len(),
        64 << 20,
        "nbdfuse's file is not the device's size"
    );

    let image_arg = image.display().to_string();
    let dev = Loop(ok("losetup", &["-f", "--show", &image_arg], "mount"));
    assert!(dev.0.starts_with("/dev/loop"), "losetup printed {}", dev.0);
    ok("mkfs.ext4", &["-q", "-F", &dev.0], "e2fsprogs");
    let mnt = tmp.0.join("mnt").display().to_string();
    ok("mount", &[&dev.0, &mnt], "mount");
    let mut mounted = Mounted(Some(mnt.clone()));

    let src = tmp.0.join("src");
    make_source(&src);
    let copy = format!("{mnt}/copy");
    ok(
        "cp",
        &["-a", &src.display().to_string(), &copy],
        "coreutils",
    );
    // What was written is read back from the device, not the page cache.
    ok("sync", &[], "coreutils");
    ok("sh", &["-c", "echo 3 > /proc/sys/vm/drop_caches"], "dash");
    ok(
        "diff",
        &["-r", "--no-dereference", &src.display().to_string(), &copy],
        "diffutils",
    );
    let mode = std::fs::metadata(format!("{copy}/script.sh"))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
        .expect("the copied script");
    assert_eq!(mode, 0o750, "cp -a did not keep the mode");
    mounted.umount();

    ok("e2fsck", &["-fn", &dev.0], "e2fsprogs");
    // Guards drop in reverse: the loop device, nbdfuse, nbdkit, the directory.
    drop(dev);
    drop(fuse);
    drop(server);
    drop(tmp);
}
