//! `wring top`: run on a mount and on a blk device while data is written, with stdout a pipe
//! (plain lines, no screen clearing), it prints `--count` refreshes with their headings, and a
//! later refresh shows the write throughput. Needs root and FUSE (the mount) and nbdkit and
//! nbdcopy (the device); fails without them.

mod common;
use common::{clean_up, ok, scratch_dirs};

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const WRING: &str = env!("CARGO_BIN_EXE_wring");

/// Unmounts (lazily), stops devices and removes the scratch directory whatever happens.
struct Scratch {
    base: PathBuf,
    mnt: PathBuf,
    devices: Vec<String>,
    top: Option<Child>,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let (base, mnt) = scratch_dirs(name);
        Scratch {
            mnt,
            base,
            devices: Vec::new(),
            top: None,
        }
    }

    fn wring(&self) -> Command {
        let mut c = Command::new(WRING);
        c.env("WRING_BLK_DIR", self.base.join("blk"))
            .env("WRING_BLK_PLUGIN", plugin())
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let o = self.wring().args(args).output().expect("running wring");
        ok(&o, &format!("wring {}", args.join(" ")))
    }

    /// `wring top --count 3 --interval 0.5 TARGET`, its stdout a pipe.
    fn spawn_top(&mut self, target: &str) {
        let args = ["top", "--count", "3", "--interval", "0.5", target];
        let child = self.wring().args(args).stdout(Stdio::piped()).spawn();
        self.top = Some(child.expect("starting wring top"));
    }

    fn top_output(&mut self) -> String {
        let child = self.top.take().expect("wring top was started");
        ok(&child.wait_with_output().unwrap(), "wring top")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(mut c) = self.top.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for d in std::mem::take(&mut self.devices) {
            let _ = self.wring().args(["blk", "stop", &d]).output();
        }
        clean_up(&self.base, &self.mnt);
    }
}

/// The plugin cargo built as this test's dev-dependency, beside the test binary in deps/.
fn plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.with_file_name("libwring_blk_nbdkit.so")
}

/// Each refresh's `throughput: in X MB/s` figure, checking every refresh has its headings.
fn throughputs(out: &str, headings: &[&str]) -> Vec<f64> {
    let refreshes: Vec<&str> = out.split("--- wring top: ").skip(1).collect();
    assert_eq!(refreshes.len(), 3, "three refreshes in:\n{out}");
    assert!(!out.contains('\x1b'), "a pipe got terminal escapes:\n{out}");
    refreshes
        .iter()
        .map(|r| {
            for h in headings {
                assert!(r.contains(h), "no {h} in:\n{r}");
            }
            let t = r
                .split("throughput: in ")
                .nth(1)
                .expect("a throughput line");
            t.split(' ').next().unwrap().parse().expect("a number")
        })
        .collect()
}

/// 1 MiB of compressible text.
fn chunk() -> Vec<u8> {
    (0..1u32 << 20)
        .flat_map(|i| format!("{} ", i % 7919).into_bytes())
        .take(1 << 20)
        .collect()
}

#[test]
fn top_on_a_mount_shows_the_writes() {
    if !wring_testing::require_root("top_on_a_mount_shows_the_writes") {
        return;
    }
    let mut s = Scratch::new("top");
    let store = s.base.join("store");
    let mnt_path = s.mnt.clone();
    let (st, mnt) = (store.to_str().unwrap(), mnt_path.to_str().unwrap());
    s.run(&["mkfs", st]);
    s.run(&["mount", "-o", "compress=zstd:3", st, mnt]);
    s.spawn_top(mnt);
    // Writes through the whole run: 1 MiB every 50 ms for about 1.6 s.
    let mut f = std::fs::File::create(s.mnt.join("file")).unwrap();
    let c = chunk();
    for _ in 0..32 {
        f.write_all(&c).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    f.sync_all().unwrap();
    drop(f);
    let out = s.top_output();
    let headings = [
        "throughput:",
        "requests/s:",
        "commits:",
        "time (% of one thread):",
        "compression (offload):",
    ];
    let t = throughputs(&out, &headings);
    assert!(
        t[1..].iter().any(|&x| x > 0.0),
        "no write throughput:\n{out}"
    );
    assert!(out.contains(" write "), "no write requests:\n{out}");
    assert!(
        out.contains("codec zstd: compress "),
        "no compression line:\n{out}"
    );
    s.run(&["umount", mnt]);
    let o = s
        .wring()
        .args(["top", "--count", "1", mnt])
        .output()
        .unwrap();
    assert!(!o.status.success(), "top on an unmounted directory");
}

#[test]
fn top_on_a_blk_device_shows_the_writes() {
    let mut s = Scratch::new("top-blk");
    let uri = s.run(&[
        "blk",
        "start",
        "-o",
        "comp_algorithm=zstd:1",
        "--size",
        "64M",
        "b0",
    ]);
    s.devices.push("b0".into());
    let src = s.base.join("src");
    let data: Vec<u8> = (0..16).flat_map(|_| chunk()).collect();
    std::fs::write(&src, data).unwrap();
    s.spawn_top("b0");
    // Copies through the whole run.
    for _ in 0..6 {
        let o = Command::new("nbdcopy")
            .arg(&src)
            .arg(uri.trim())
            .output()
            .expect("nbdcopy is installed (Debian package libnbd-bin)");
        ok(&o, "nbdcopy");
        std::thread::sleep(Duration::from_millis(150));
    }
    let out = s.top_output();
    let t = throughputs(&out, &["throughput:", "data:", "requests/s:", "streams 0"]);
    assert!(
        t[1..].iter().any(|&x| x > 0.0),
        "no write throughput:\n{out}"
    );
    let err = s.wring().args(["top", "nosuch"]).output().unwrap();
    let e = String::from_utf8_lossy(&err.stderr);
    assert!(
        !err.status.success() && e.contains("neither a directory"),
        "{e}"
    );
}
