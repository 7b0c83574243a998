//! The real `wring blk` CLI: `start` returns once the device serves (without holding the
//! caller's pipes) and prints its URI; the runtime directory and sockets are private;
//! `list`, `stat` (zram's mm_stat/io_stat lines and `--json`), the live actions and `stop`
//! work; bad options and names are refused naming what is accepted. Needs nbdkit and nbdcopy
//! (Debian packages nbdkit, libnbd-bin; scripts/setup.sh installs them): the test fails without
//! them. The plugin is the one cargo builds as wring's dev-dependency.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const WRING: &str = env!("CARGO_BIN_EXE_wring");

/// A private WRING_BLK_DIR whose devices are stopped on drop, also when the test fails.
struct Devices {
    dir: PathBuf,
    names: Vec<String>,
}

impl Devices {
    fn new(tag: &str) -> Devices {
        let dir = std::env::temp_dir().join(format!("wring-cli-blk-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Devices {
            dir: dir.join("blk"),
            names: Vec::new(),
        }
    }

    fn wring(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(WRING);
        cmd.args(args)
            .env("WRING_BLK_DIR", &self.dir)
            .env("WRING_BLK_PLUGIN", plugin())
            .stdin(Stdio::null());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(cmd.output());
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(o) => o.expect("running wring"),
            Err(_) => panic!(
                "`wring {}` did not return (a daemon holding its pipes?)",
                args.join(" ")
            ),
        }
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.wring(args);
        assert!(
            o.status.success(),
            "wring {}: {}\n{}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn err(&self, args: &[&str]) -> String {
        let o = self.wring(args);
        assert!(!o.status.success(), "wring {} should fail", args.join(" "));
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    fn start(&mut self, args: &[&str], name: &str) -> String {
        let mut a = vec!["blk", "start"];
        a.extend(args);
        a.push(name);
        self.names.push(name.to_string());
        self.ok(&a).trim().to_string()
    }
}

impl Drop for Devices {
    fn drop(&mut self) {
        for n in std::mem::take(&mut self.names) {
            let _ = self.wring(&["blk", "stop", &n]);
        }
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}

/// The plugin cargo built as this test's dev-dependency, beside the test binary in deps/.
fn plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let p = exe.with_file_name("libwring_blk_nbdkit.so");
    assert!(
        p.exists(),
        "{} is missing: cargo builds it as wring's dev-dependency",
        p.display()
    );
    p
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn nbdcopy(from: &str, to: &str) {
    let o = Command::new("nbdcopy")
        .arg(from)
        .arg(to)
        .output()
        .expect("nbdcopy is installed (Debian package libnbd-bin)");
    assert!(
        o.status.success(),
        "nbdcopy {from} {to}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn start_stat_actions_and_stop() {
    let mut d = Devices::new("main");
    let uri = d.start(
        &["-o", "comp_algorithm=zstd:1,streams=2", "--size", "16M"],
        "t0",
    );
    let dev = d.dir.join("t0");
    assert_eq!(
        uri,
        format!("nbd+unix:///?socket={}", dev.join("nbd.sock").display())
    );
    assert_eq!(mode(&d.dir), 0o700);
    assert_eq!(mode(&dev), 0o700);
    assert_eq!(mode(&dev.join("nbd.sock")), 0o600);
    assert_eq!(mode(&dev.join("control.sock")), 0o600);

    // Data in and out.
    let text: Vec<u8> = (0..(4 << 20))
        .map(|i: usize| b"zram in userspace, served over NBD. "[i % 36])
        .collect();
    let src = d.dir.join("in.img");
    std::fs::write(&src, &text).expect("write the source");
    nbdcopy(src.to_str().expect("utf-8"), &uri);
    let out = d.dir.join("out.img");
    nbdcopy(&uri, out.to_str().expect("utf-8"));
    let back = std::fs::read(&out).expect("read back");
    assert!(
        back[..text.len()] == text[..],
        "the device returned other bytes"
    );

    let list = d.ok(&["blk", "list"]);
    assert!(
        list.contains("t0") && list.contains("zstd:1") && list.contains(&uri),
        "{list}"
    );
    let stat = d.ok(&["blk", "stat", "t0"]);
    let mm = stat
        .lines()
        .find_map(|l| l.strip_prefix("mm_stat:"))
        .unwrap_or_else(|| panic!("no mm_stat line:\n{stat}"));
    let fields: Vec<u64> = mm
        .split_whitespace()
        .map(|f| f.parse().expect("a number"))
        .collect();
    assert_eq!(fields.len(), 9, "{mm}");
    assert_eq!(fields[0], 4 << 20, "orig_data_size: {mm}");
    assert!(fields[1] < fields[0] / 10, "compr_data_size: {mm}");
    assert!(
        stat.lines()
            .any(|l| l.starts_with("io_stat:") && l.split_whitespace().count() == 5),
        "{stat}"
    );
    assert!(stat.contains("comp_algorithm    zstd:1"), "{stat}");
    let json = d.ok(&["blk", "stat", "t0", "--json"]);
    assert!(json.contains("\"orig_data_size\": 4194304"), "{json}");

    assert!(d.ok(&["blk", "streams", "t0", "1"]).contains("streams 1"));
    d.ok(&["blk", "compact", "t0"]);
    assert!(d
        .ok(&["blk", "mem-limit", "t0", "64M"])
        .contains("67108864"));
    d.ok(&["blk", "reset", "t0"]);
    let json = d.ok(&["blk", "stat", "t0", "--json"]);
    assert!(json.contains("\"orig_data_size\": 0"), "{json}");

    // A second start of the same name is refused; stop removes the directory.
    let e = d.err(&["blk", "start", "--size", "1M", "t0"]);
    assert!(e.contains("already running"), "{e}");
    d.ok(&["blk", "stop", "t0"]);
    d.names.clear();
    assert!(!dev.exists());
    let e = d.err(&["blk", "stat", "t0"]);
    assert!(e.contains("no device 't0'"), "{e}");
}

#[test]
fn bad_options_and_names_are_refused_naming_what_is_accepted() {
    let d = Devices::new("bad");
    let e = d.err(&["blk", "start", "-o", "compression=lz4", "--size", "1M", "x"]);
    assert!(
        e.contains("compression") && e.contains("comp_algorithm, streams, mem_limit"),
        "{e}"
    );
    let e = d.err(&[
        "blk",
        "start",
        "-o",
        "comp_algorithm=brotli",
        "--size",
        "1M",
        "x",
    ]);
    assert!(e.contains("brotli") && e.contains("lz4"), "{e}");
    let e = d.err(&["blk", "start", "--size", "lots", "x"]);
    assert!(e.contains("lots"), "{e}");
    let e = d.err(&["blk", "start", "--size", "1M", "../x"]);
    assert!(e.contains("not a device name"), "{e}");
    let e = d.err(&["blk", "start", "--size", "1M", "--listen", "0", "x"]);
    assert!(e.contains("--listen"), "{e}");
    assert!(!d.dir.join("x").exists());
}

#[test]
fn tcp_only_with_listen_on_loopback_by_default() {
    let mut d = Devices::new("tcp");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let uri = d.start(&["--size", "1M", "--listen", &port.to_string()], "tcp0");
    assert_eq!(uri, format!("nbd://127.0.0.1:{port}/"));
    assert!(!d.dir.join("tcp0").join("nbd.sock").exists());
    let o = Command::new("nbdinfo")
        .arg("--size")
        .arg(&uri)
        .output()
        .expect("nbdinfo is installed (Debian package libnbd-bin)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1048576");
    let list = d.ok(&["blk", "list"]);
    assert!(list.contains(&uri), "{list}");
}

/// Under a systemd unit (stderr is the journal: `JOURNAL_STREAM` names it), nbdkit logs
/// through syslog(3), which journald keeps with each message's priority, instead of into
/// nbdkit.log; elsewhere it logs to nbdkit.log.
#[test]
fn under_a_systemd_unit_nbdkit_logs_to_the_journal() {
    use std::os::unix::fs::MetadataExt;
    let mut d = Devices::new("journal");
    let parent = d.dir.parent().expect("a parent").to_path_buf();
    std::fs::create_dir_all(&parent).expect("the test's directory");
    let dir = d.dir.clone();
    let nbdkit_args = |name: &str| -> Vec<String> {
        let pid = std::fs::read_to_string(dir.join(name).join("nbdkit.pid")).expect("pid");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).expect("cmdline");
        cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    };
    let stderr = std::fs::File::create(parent.join("stderr")).expect("a stderr file");
    let meta = stderr.metadata().expect("its metadata");
    d.names.push("j0".into());
    let status = Command::new(WRING)
        .args(["blk", "start", "--size", "1M", "j0"])
        .env("WRING_BLK_DIR", &d.dir)
        .env("WRING_BLK_PLUGIN", plugin())
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .status()
        .expect("running wring");
    assert!(status.success(), "wring blk start under a journal stderr");
    let args = nbdkit_args("j0");
    assert!(args.iter().any(|a| a == "--log=syslog"), "{args:?}");
    d.start(&["--size", "1M"], "j1");
    let args = nbdkit_args("j1");
    assert!(args.iter().any(|a| a == "--log=stderr"), "{args:?}");
}

fn nbdinfo(uri: &str) -> String {
    let o = Command::new("nbdinfo")
        .arg(uri)
        .output()
        .expect("nbdinfo is installed (Debian package libnbd-bin)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `-o slot_size=16K` (beyond zram): the device stores 16 KiB slots (`stat` and `--json`
/// show it, the size rounds up to whole slots), the export advertises the slot as its
/// preferred block size while still taking any request, and data written with a partial
/// slot at each end reads back. A 4K device advertises 4096. Bad sizes and slot_size with
/// backing_dev are refused before a daemon starts.
#[test]
fn slot_size_is_shown_and_advertised_as_the_preferred_block_size() {
    let mut d = Devices::new("slot");
    let uri = d.start(
        &["-o", "comp_algorithm=zstd:3,slot_size=16K", "--size", "10M"],
        "s16",
    );
    let info = nbdinfo(&uri);
    for want in ["block_size_minimum: 1", "block_size_preferred: 16384"] {
        assert!(info.contains(want), "nbdinfo lacks '{want}':\n{info}");
    }
    let stat = d.ok(&["blk", "stat", "s16"]);
    assert!(stat.contains("slot_size         16384"), "{stat}");
    let json = d.ok(&["blk", "stat", "s16", "--json"]);
    assert!(json.contains("\"slot_size\": 16384"), "{json}");
    // 10M is a whole number of 16 KiB slots (100K below rounds up to whole 32 KiB slots).
    assert!(json.contains("\"disksize\": 10485760"), "{json}");

    // 1 MiB + 6 KiB at 10 KiB: a partial slot at each end, whole slots between.
    let text: Vec<u8> = (0..(1 << 20) + 6144)
        .map(|i: usize| b"sixteen KiB slots compress as one object. "[i % 42])
        .collect();
    let src = d.dir.join("in.img");
    std::fs::write(&src, &text).expect("write the source");
    let o = Command::new("qemu-io")
        .args(["-f", "raw", "-c"])
        .arg(format!("write -s {} 10240 {}", src.display(), text.len()))
        .arg(&uri)
        .output()
        .expect("qemu-io is installed (Debian package qemu-utils)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.dir.join("out.img");
    nbdcopy(&uri, out.to_str().expect("utf-8"));
    let back = std::fs::read(&out).expect("read back");
    assert!(back[..10240].iter().all(|&b| b == 0), "before the write");
    assert!(
        back[10240..10240 + text.len()] == text[..],
        "the device returned other bytes"
    );
    assert!(back[10240 + text.len()..].iter().all(|&b| b == 0));

    let uri4 = d.start(&["--size", "1M"], "s4");
    let info = nbdinfo(&uri4);
    assert!(info.contains("block_size_preferred: 4096"), "{info}");
    let uri_odd = d.start(&["-o", "slot_size=32K", "--size", "100K"], "s32");
    let o = Command::new("nbdinfo")
        .arg("--size")
        .arg(&uri_odd)
        .output()
        .expect("nbdinfo");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "131072");

    let e = d.err(&["blk", "start", "-o", "slot_size=12K", "--size", "1M", "x"]);
    assert!(e.contains("slot_size") && e.contains("32K"), "{e}");
    let e = d.err(&[
        "blk",
        "start",
        "-o",
        "slot_size=16K,backing_dev=/tmp/wring-never",
        "--size",
        "1M",
        "x",
    ]);
    assert!(e.contains("slot_size") && e.contains("backing_dev"), "{e}");
    assert!(!d.dir.join("x").exists());
}

/// `--tls-psk FILE`: nbdkit requires TLS with the pre-shared keys; the printed URI (nbds+unix,
/// naming the file and the username, never the key) reads and writes the device, and a client
/// without TLS is refused. The same over TCP with --listen. A PSK file others can read is
/// refused before a daemon starts, naming the fix.
#[test]
fn tls_psk_requires_tls_and_the_key() {
    let mut d = Devices::new("tls");
    let parent = d.dir.parent().expect("a parent").to_path_buf();
    std::fs::create_dir_all(&parent).expect("the test's directory");
    let psk = parent.join("keys.psk");
    // A fixed test key: this device lives for the test only.
    std::fs::write(
        &psk,
        "alice:5f3a0c1d9e8b7a6f5e4d3c2b1a09f8e7d6c5b4a3928170615f4e3d2c1b0a9988\n",
    )
    .expect("the PSK file");
    std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o644)).unwrap();
    let p = psk.display().to_string();
    let e = d.err(&["blk", "start", "--size", "1M", "--tls-psk", &p, "t0"]);
    assert!(e.contains("chmod 600"), "{e}");
    assert!(!d.dir.join("t0").exists(), "a refused start left a device");
    std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
    let uri = d.start(&["--size", "1M", "--tls-psk", &p], "t0");
    assert!(uri.starts_with("nbds+unix://alice@/?socket="), "{uri}");
    assert!(uri.contains("tls-psk-file="), "{uri}");
    assert!(!uri.contains("5f3a0c1d"), "the key is printed: {uri}");
    assert!(nbdinfo(&uri).contains("with TLS"), "{uri}");
    // Without TLS: refused.
    let plain = format!(
        "nbd+unix:///?socket={}",
        d.dir.join("t0").join("nbd.sock").display()
    );
    let o = Command::new("nbdinfo")
        .arg("--size")
        .arg(&plain)
        .output()
        .unwrap();
    assert!(!o.status.success(), "a client without TLS was served");
    // Data goes through TLS both ways.
    let src = parent.join("src");
    let data: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i % 251) as u8 ^ (i >> 12) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    nbdcopy(&src.display().to_string(), &uri);
    let back = parent.join("back");
    nbdcopy(&uri, &back.display().to_string());
    assert!(
        std::fs::read(&back).unwrap() == data,
        "data differs through TLS"
    );
    // TCP with TLS needs no listen_insecure: the key is the authentication.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let uri = d.start(
        &[
            "--size",
            "1M",
            "--listen",
            &port.to_string(),
            "--tls-psk",
            &p,
        ],
        "t1",
    );
    assert!(
        uri.starts_with(&format!("nbds://alice@127.0.0.1:{port}/?tls-psk-file=")),
        "{uri}"
    );
    assert!(nbdinfo(&uri).contains("with TLS"), "{uri}");
    let o = Command::new("nbdinfo")
        .arg("--size")
        .arg(format!("nbd://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "a TCP client without TLS was served");
}
