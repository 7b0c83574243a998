//! What the CLI tests share: a command's checked output, a free loopback port, a Prometheus
//! exposition parsed by prometheus-parse (and scraped with curl), and a scratch directory
//! with a mount point that is unmounted and removed whatever happens.
#![allow(dead_code)] // each test binary uses a part

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Its stdout, once `o` is known to have succeeded (else a failure naming `what`).
pub fn ok(o: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{what}: {}\n{err}", o.status);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Every sample of an exposition, by `name{label=value,…}` (labels sorted), parsed by
/// prometheus-parse; a histogram by its +Inf bucket (every request counted), as
/// `NAME_le_inf`.
pub fn parse_exposition(text: &str) -> HashMap<String, f64> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
    let mut out = HashMap::new();
    for s in scrape.samples {
        let (metric, v) = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => (s.metric, v),
            prometheus_parse::Value::Histogram(h) => {
                let inf = h.iter().find(|b| b.less_than.is_infinite());
                let inf = inf.unwrap_or_else(|| panic!("{}: no +Inf bucket", s.metric));
                (format!("{}_le_inf", s.metric), inf.count)
            }
            other => panic!("{}: unexpected {other:?}", s.metric),
        };
        let mut labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        out.insert(format!("{metric}{{{}}}", labels.join(",")), v);
    }
    out
}

/// `curl -sSf ARGS…` (a URL, or `--unix-socket PATH URL`), its exposition parsed.
pub fn curl_metrics(args: &[&str]) -> HashMap<String, f64> {
    let o = Command::new("curl")
        .args(["-sSf", "--max-time", "10"])
        .args(args)
        .output()
        .expect("running curl");
    parse_exposition(&ok(&o, "curl /metrics"))
}

/// A scratch directory with a mount point, unmounted (lazily) and removed whatever happens.
pub struct Scratch {
    pub base: PathBuf,
    pub mnt: PathBuf,
}

impl Scratch {
    /// A fresh directory under /tmp with an empty mount point `mnt` in it.
    pub fn new(name: &str) -> Scratch {
        let (base, mnt) = scratch_dirs(name);
        Scratch { base, mnt }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        clean_up(&self.base, &self.mnt);
    }
}

/// A fresh `/tmp/wring-cli-NAME-PID` with an empty mount point `mnt` in it: (base, mnt).
pub fn scratch_dirs(name: &str) -> (PathBuf, PathBuf) {
    let base = PathBuf::from(format!("/tmp/wring-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mnt")).unwrap();
    let mnt = base.join("mnt");
    (base, mnt)
}

/// Whether `p` is a mount point now (/proc/mounts).
pub fn is_mounted(p: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let p = p.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

/// Unmount `mnt` lazily if it is mounted, then remove `base` (a test's cleanup).
pub fn clean_up(base: &Path, mnt: &Path) {
    if is_mounted(mnt) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(mnt)
            .status();
    }
    let _ = std::fs::remove_dir_all(base);
}
