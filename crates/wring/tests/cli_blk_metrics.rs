//! `wring blk start -o metrics=ADDR`: a device serves its zram figures as Prometheus metrics
//! on loopback (another address refused unless written `public:`), the scrape (curl, parsed by
//! a Prometheus text parser) after a copy holds every `wring_blk_` series with the `device`
//! label and an orig_data_size equal to `wring blk stat --json`'s, and `wring metrics DEVICE`
//! prints and `--textfile` writes the same. On a Unix socket too, its file gone after stop.
//! Needs nbdkit, nbdcopy and curl; fails without them.

mod common;
use common::{curl_metrics as curl, free_port, ok, parse_exposition as parse};

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const WRING: &str = env!("CARGO_BIN_EXE_wring");

/// A private WRING_BLK_DIR whose devices are stopped on drop, also when the test fails.
struct Devices {
    base: PathBuf,
    names: Vec<String>,
}

impl Devices {
    fn new(tag: &str) -> Devices {
        let base = std::env::temp_dir().join(format!("wring-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        Devices {
            base,
            names: Vec::new(),
        }
    }

    fn wring(&self, args: &[&str]) -> Output {
        let plugin = std::env::current_exe()
            .expect("the test's own path")
            .with_file_name("libwring_blk_nbdkit.so");
        Command::new(WRING)
            .args(args)
            .env("WRING_BLK_DIR", self.base.join("blk"))
            .env("WRING_BLK_PLUGIN", plugin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("running wring")
    }

    fn ok(&self, args: &[&str]) -> String {
        ok(&self.wring(args), &format!("wring {}", args.join(" ")))
    }

    fn start(&mut self, options: &str, name: &str) -> String {
        self.names.push(name.into());
        let uri = self.ok(&["blk", "start", "-o", options, "--size", "64M", name]);
        uri.trim().to_string()
    }
}

impl Drop for Devices {
    fn drop(&mut self) {
        for n in std::mem::take(&mut self.names) {
            let _ = self.wring(&["blk", "stop", &n]);
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Every series the exposition must hold, by full name.
const SERIES: [&str; 19] = [
    "wring_blk_orig_data_size_bytes",
    "wring_blk_compr_data_size_bytes",
    "wring_blk_mem_used_total_bytes",
    "wring_blk_mem_limit_bytes",
    "wring_blk_mem_used_max_bytes",
    "wring_blk_same_pages",
    "wring_blk_pages_compacted_total",
    "wring_blk_huge_pages",
    "wring_blk_huge_pages_since_total",
    "wring_blk_failed_reads_total",
    "wring_blk_failed_writes_total",
    "wring_blk_invalid_io_total",
    "wring_blk_notify_free_total",
    "wring_blk_reads_total",
    "wring_blk_writes_total",
    "wring_blk_compressed_in_bytes_total",
    "wring_blk_compressed_out_bytes_total",
    "wring_blk_bd_writes_total",
    "wring_blk_disksize_bytes",
];

fn get(m: &HashMap<String, f64>, name: &str, label: &str) -> f64 {
    let hit = m
        .iter()
        .find(|(k, _)| k.starts_with(&format!("{name}{{")) && k.contains(label));
    *hit.unwrap_or_else(|| panic!("no {name} with {label} in {m:#?}"))
        .1
}

fn stat_orig(d: &Devices, name: &str) -> f64 {
    let j: serde_json::Value =
        serde_json::from_str(&d.ok(&["blk", "stat", "--json", name])).unwrap();
    j["mm_stat"]["orig_data_size"].as_f64().unwrap()
}

#[test]
fn a_device_serves_its_zram_figures() {
    let mut d = Devices::new("blk-metrics");
    let o = d.wring(&[
        "blk",
        "start",
        "-o",
        "metrics=192.0.2.1:9101",
        "--size",
        "4M",
        "x",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("metrics=public:192.0.2.1:9101"),
        "{e}"
    );

    let port = free_port();
    let uri = d.start(
        &format!("comp_algorithm=zstd:1,metrics=127.0.0.1:{port}"),
        "m0",
    );
    let src = d.base.join("src");
    let text: Vec<u8> = (0..(8 << 20))
        .map(|i: usize| b"zram in userspace, served over NBD. "[i % 36])
        .collect();
    std::fs::write(&src, text).unwrap();
    let o = Command::new("nbdcopy").arg(&src).arg(&uri).output();
    ok(&o.expect("nbdcopy is installed (libnbd-bin)"), "nbdcopy");

    let m = curl(&[&format!("http://127.0.0.1:{port}/metrics")]);
    for s in SERIES {
        get(&m, s, "device=m0");
    }
    let orig = get(&m, "wring_blk_orig_data_size_bytes", "device=m0");
    assert_eq!(orig, stat_orig(&d, "m0"));
    assert_eq!(orig, (8 << 20) as f64);
    assert!(get(&m, "wring_blk_writes_total", "device=m0") > 0.0);
    let compr = get(&m, "wring_blk_compr_data_size_bytes", "device=m0");
    assert!(compr > 0.0 && compr < orig, "{compr}");
    get(&m, "wring_blk_compressed_in_bytes_total", "algorithm=zstd");

    // wring metrics DEVICE: printed, and written for the textfile collector.
    let printed = parse(&d.ok(&["metrics", "m0"]));
    assert_eq!(
        get(&printed, "wring_blk_orig_data_size_bytes", "device=m0"),
        orig
    );
    let dir = d.base.join("textfile");
    std::fs::create_dir(&dir).unwrap();
    d.ok(&["metrics", "--textfile", dir.to_str().unwrap(), "m0"]);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["wring-blk-m0.prom"]);
    let filed = parse(&std::fs::read_to_string(dir.join("wring-blk-m0.prom")).unwrap());
    assert_eq!(
        get(&filed, "wring_blk_orig_data_size_bytes", "device=m0"),
        orig
    );

    d.ok(&["blk", "stop", "m0"]);
    d.names.clear();
    let o = Command::new("curl")
        .args(["-sSf", "--max-time", "5"])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "still served after stop");

    // A Unix socket: served there, its file gone after stop.
    let sock = d.base.join("m1.sock");
    d.start(&format!("metrics={}", sock.display()), "m1");
    let s = sock.to_str().unwrap();
    let m = curl(&["--unix-socket", s, "http://localhost/metrics"]);
    assert_eq!(get(&m, "wring_blk_orig_data_size_bytes", "device=m1"), 0.0);
    d.ok(&["blk", "stop", "m1"]);
    d.names.clear();
    assert!(!sock.exists(), "the socket file was left");
}
