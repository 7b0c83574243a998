//! `metrics=ADDR` and `wring metrics`: a mount serves its figures as Prometheus metrics on
//! loopback, refuses another address unless written `public:`, and the scrapes taken during a
//! copy (with curl, parsed by a Prometheus text parser) hold the `wring_` series for bytes in,
//! bytes stored and FUSE requests, with counters that only grow and stored bytes equal to
//! `wring stat`'s; `wring metrics --textfile` writes the same for node_exporter.

mod common;
use common::{curl_metrics, free_port, ok, parse_exposition as parse, Scratch};

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const WRING: &str = env!("CARGO_BIN_EXE_wring");

fn wring(args: &[&str]) -> Output {
    Command::new(WRING)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running wring")
}

/// A scrape with curl, parsed.
fn scrape(port: u16) -> HashMap<String, f64> {
    curl_metrics(&[&format!("http://127.0.0.1:{port}/metrics")])
}

/// The one sample named `name` with `label` among its labels.
fn sample(m: &HashMap<String, f64>, name: &str, label: &str) -> f64 {
    let hit = m
        .iter()
        .find(|(k, _)| k.starts_with(&format!("{name}{{")) && k.contains(label));
    *hit.unwrap_or_else(|| panic!("no {name} {label} in {m:#?}"))
        .1
}

/// The raw: line's `disk=` of `wring stat PATH`.
fn stat_disk(p: &Path) -> f64 {
    let t = ok(&wring(&["stat", p.to_str().unwrap()]), "wring stat");
    let raw = t
        .lines()
        .find(|l| l.starts_with("raw:"))
        .expect("a raw: line");
    let disk = raw.split(' ').find_map(|w| w.strip_prefix("disk="));
    disk.expect("disk=").parse().unwrap()
}

#[test]
fn a_scrape_during_a_copy_has_the_wring_series() {
    if !wring_testing::require_root("a_scrape_during_a_copy_has_the_wring_series") {
        return;
    }
    let s = Scratch::new("metrics");
    let store = s.base.join("store");
    let (st, mnt) = (store.to_str().unwrap(), s.mnt.to_str().unwrap());
    ok(&wring(&["mkfs", st]), "wring mkfs");
    let o = wring(&["mount", "-o", "metrics=192.0.2.1:9101", st, mnt]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("metrics=public:192.0.2.1:9101"),
        "{e}"
    );
    let port = free_port();
    let opts = format!("compress=zstd:3,metrics=127.0.0.1:{port}");
    ok(&wring(&["mount", "-o", &opts, st, mnt]), "wring mount");

    // A copy of 24 MiB of text, scraped between its chunks.
    let chunk: Vec<u8> = (0..1u32 << 20)
        .flat_map(|i| format!("{} ", i % 7919).into_bytes())
        .take(1 << 20)
        .collect();
    let mut f = std::fs::File::create(s.mnt.join("copy")).unwrap();
    let mut scrapes = vec![scrape(port)];
    for i in 0..24 {
        f.write_all(&chunk).unwrap();
        if i % 8 == 7 {
            scrapes.push(scrape(port));
        }
    }
    f.sync_all().unwrap();
    drop(f);
    let disk = stat_disk(&s.mnt);
    scrapes.push(scrape(port));

    // Counters only grow from one scrape to the next.
    for pair in scrapes.windows(2) {
        let counters = pair[0]
            .iter()
            .filter(|(k, _)| k.contains("_total{") || k.contains("_le_inf{"));
        for (k, v) in counters {
            let later = pair[1]
                .get(k)
                .copied()
                .unwrap_or_else(|| panic!("{k} went away"));
            assert!(later >= *v, "{k} fell from {v} to {later}");
        }
    }
    let last = scrapes.last().unwrap();
    let at = format!("mountpoint={}", s.mnt.canonicalize().unwrap().display());
    assert_eq!(
        sample(last, "wring_written_bytes_total", &at),
        24.0 * (1 << 20) as f64
    );
    assert!(sample(last, "wring_fuse_requests_total", "op=write") >= 24.0);
    let writes = sample(
        last,
        "wring_fuse_request_duration_seconds_le_inf",
        "op=write",
    );
    assert!(writes >= 24.0, "{writes}");
    assert_eq!(sample(last, "wring_stored_bytes", &at), disk);
    assert!(disk > 0.0 && disk < (24 << 20) as f64, "{disk}");

    // The textfile collector's file: the same series, written whole.
    let dir = s.base.join("textfile");
    std::fs::create_dir(&dir).unwrap();
    ok(
        &wring(&["metrics", "--textfile", dir.to_str().unwrap(), mnt]),
        "wring metrics --textfile",
    );
    let text = std::fs::read_to_string(dir.join("wring.prom")).unwrap();
    let m = parse(&text);
    assert_eq!(sample(&m, "wring_stored_bytes", &at), disk);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["wring.prom"], "a temporary file was left");
    let printed = ok(&wring(&["metrics", mnt]), "wring metrics");
    assert!(
        printed.contains("# TYPE wring_written_bytes counter"),
        "{printed}"
    );

    ok(&wring(&["umount", mnt]), "wring umount");
    let o = Command::new("curl")
        .args(["-sSf", "--max-time", "5"])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "still served after umount");

    // A Unix socket: served there, refused to a remount, its file gone after umount.
    let sock = s.base.join("metrics.sock");
    let opts = format!("metrics={}", sock.display());
    ok(
        &wring(&["mount", "-o", &opts, st, mnt]),
        "wring mount (socket)",
    );
    let o = Command::new("curl")
        .args(["-sSf", "--max-time", "10", "--unix-socket"])
        .arg(&sock)
        .arg("http://localhost/metrics")
        .output()
        .unwrap();
    let m = parse(&ok(&o, "curl --unix-socket"));
    assert_eq!(sample(&m, "wring_stored_bytes", &at), disk);
    let o = wring(&["remount", "-o", "metrics=127.0.0.1:9", mnt]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("metrics can only be set when mounting"),
        "{e}"
    );
    ok(&wring(&["umount", mnt]), "wring umount (socket)");
    assert!(!sock.exists(), "the socket file was left");
}
