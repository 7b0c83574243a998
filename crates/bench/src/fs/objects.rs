//! `wring bench fs --data`: the runs on a store whose extents are in an S3 bucket (`mkfs
//! --data s3://…`, issue 18), beside the local store and the kernel's btrfs. The bucket is one
//! the user names, or a SeaweedFS started for the run (`weed server -s3`, through
//! [`wring_seaweed`], the harness the tests use too).
//! Requests come from the mount's own `wring status` (`objects:` lines).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wring_fs::daemon;
use wring_fs::store::{Access, DataSpec, ObjectsSpec, Store};
use wring_seaweed::{Seaweed, BUCKET};

use super::{progress, Config, Row, Run};
use crate::machine::cpu_seconds;
use crate::BenchError;

/// Where the runs on a store in a bucket keep their extents.
#[derive(Debug, Clone)]
pub enum Objects {
    /// A SeaweedFS started for the benchmark on this machine (`weed server -s3`).
    Seaweed,
    /// A bucket: `s3://BUCKET/PREFIX` (each run under a prefix of its own below it), the
    /// endpoint (None: AWS) and the credentials file (None: the `AWS_*` environment).
    Bucket {
        /// s3://BUCKET/PREFIX.
        url: String,
        /// The S3 endpoint.
        endpoint: Option<String>,
        /// A 0600 credentials file.
        credentials: Option<PathBuf>,
    },
}

/// A bucket ready for the runs: where, and how to reach it.
pub(super) struct BucketTarget {
    url: String,
    endpoint: Option<String>,
    pub(super) credentials: Option<PathBuf>,
    /// Retry mkfs while a fresh SeaweedFS settles.
    fresh: bool,
    /// The server's processes when it runs here (their CPU time is measured).
    server: Vec<u32>,
}

/// One run on a store whose extents are in a bucket.
#[derive(Debug, Clone, Default)]
pub struct ObjectsRun {
    /// Throughput and the fs's own ratio.
    pub run: Run,
    /// Bytes of segment objects in the bucket after the write.
    pub bucket_bytes: u64,
    /// PUT requests during the write (copy + sync).
    pub puts: u64,
    /// GET requests during the read back (cold cache).
    pub gets: u64,
    /// CPU seconds of the object server during the write, when it runs on this machine.
    pub server_cpu: f64,
}

impl ObjectsRun {
    /// Keep the faster write (with its server CPU) and read of this run and `other`.
    pub fn keep_fastest(&mut self, other: &ObjectsRun) {
        if other.run.write < self.run.write {
            self.server_cpu = other.server_cpu;
        }
        self.run.keep_fastest(&other.run);
    }

    /// Input bytes / bytes in the bucket.
    pub fn bucket_ratio(&self) -> f64 {
        self.run.bytes as f64 / self.bucket_bytes.max(1) as f64
    }
    /// PUTs per MiB of input written.
    pub fn puts_per_mib(&self) -> f64 {
        self.puts as f64 / (self.run.bytes as f64 / (1 << 20) as f64).max(1e-9)
    }
    /// GETs per MiB of input read.
    pub fn gets_per_mib(&self) -> f64 {
        self.gets as f64 / (self.run.bytes as f64 / (1 << 20) as f64).max(1e-9)
    }
}

/// A mount's request counters (zero for a local store) and CPU seconds used so far.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counters {
    pub(super) bucket_bytes: u64,
    pub(super) gets: u64,
    pub(super) puts: u64,
    /// The mount daemon's.
    pub(super) daemon_cpu: f64,
    /// The object server's, when it runs here.
    pub(super) server_cpu: f64,
}

/// The daemon's CPU seconds so far (its pid from the mount's `wring.pid`).
pub(super) fn daemon_cpu(mnt: &Path) -> f64 {
    daemon::get_xattr(mnt, wring_fs::PID_XATTR)
        .ok()
        .and_then(|p| String::from_utf8_lossy(&p).parse().ok())
        .map_or(0.0, cpu_seconds)
}

/// The counters of `wring status`'s object-store lines (`objects:` and `objects raw:`), the
/// daemon's and `t`'s server's CPU seconds.
pub(super) fn counters(mnt: &Path, t: &BucketTarget) -> Result<Counters, BenchError> {
    let text = daemon::status(mnt).map_err(|source| BenchError::Fs {
        what: format!("wring status of {}", mnt.display()),
        source,
    })?;
    let found: HashMap<&str, u64> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("objects:")
                .or(l.strip_prefix("objects raw:"))
        })
        .flat_map(str::split_whitespace)
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k, v.parse().ok()?))
        })
        .collect();
    let get = |field: &str| {
        found
            .get(field)
            .copied()
            .ok_or_else(|| BenchError::StatReport {
                path: mnt.to_path_buf(),
                field: format!("{field}= (wring status)"),
                report: text.clone(),
            })
    };
    Ok(Counters {
        bucket_bytes: get("bucket_bytes")?,
        gets: get("gets")?,
        puts: get("puts")?,
        daemon_cpu: daemon_cpu(mnt),
        server_cpu: t.server.iter().map(|&p| cpu_seconds(p)).sum(),
    })
}

/// mkfs --data for run `name` under a prefix of its own, retrying while a fresh SeaweedFS
/// learns of its bucket.
pub(super) fn mkfs(store: &Path, t: &BucketTarget, name: &str) -> Result<(), BenchError> {
    let spec = DataSpec::Objects(ObjectsSpec {
        url: format!(
            "{}/{name}-{}",
            t.url.trim_end_matches('/'),
            std::process::id()
        ),
        endpoint: t.endpoint.clone(),
        segment_bytes: None,
        credentials: None,
    });
    let access = Access {
        credentials: t.credentials.clone(),
        break_lease: false,
    };
    let deadline = Instant::now() + Duration::from_secs(if t.fresh { 60 } else { 0 });
    loop {
        match Store::mkfs_with(store, &spec, &access) {
            Ok(()) => return Ok(()),
            Err(_) if Instant::now() < deadline => {
                let _ = std::fs::remove_dir_all(store);
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(source) => {
                return Err(BenchError::Fs {
                    what: format!("making a store in {} with --data", store.display()),
                    source,
                })
            }
        }
    }
}

/// A 0600 credentials file for a SeaweedFS started here.
fn write_credentials(path: &Path, sw: &Seaweed) -> Result<(), BenchError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let text = format!(
        "aws_access_key_id = {}\naws_secret_access_key = {}\n",
        sw.access_key, sw.secret_key
    );
    let what = || format!("writing {}", path.display());
    std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| BenchError::io(what(), e))
}

/// The bucket for the runs; a SeaweedFS started here is returned too (the caller stops it).
pub(super) fn target(cfg: &Config) -> Result<Option<(BucketTarget, Option<Seaweed>)>, BenchError> {
    match &cfg.objects {
        None => Ok(None),
        Some(Objects::Bucket {
            url,
            endpoint,
            credentials,
        }) => Ok(Some((
            BucketTarget {
                url: url.clone(),
                endpoint: endpoint.clone(),
                credentials: credentials.clone(),
                fresh: false,
                server: Vec::new(),
            },
            None,
        ))),
        Some(Objects::Seaweed) => {
            progress("starting SeaweedFS (weed server -s3)");
            let sw = Seaweed::server()
                .map_err(|e| BenchError::io("starting SeaweedFS for --data seaweed", e))?;
            let creds = cfg.work.join("seaweed-credentials");
            let _ = std::fs::remove_file(&creds);
            write_credentials(&creds, &sw)?;
            Ok(Some((
                BucketTarget {
                    url: format!("s3://{BUCKET}/bench"),
                    endpoint: Some(sw.endpoint.clone()),
                    credentials: Some(creds),
                    fresh: true,
                    server: sw.pids(),
                },
                Some(sw),
            )))
        }
    }
}

/// The store in a bucket against the local store (and the kernel's btrfs, in the main
/// table): throughput, input against the bytes in the bucket, requests per MiB.
pub(super) fn render(rows: &[Row]) -> String {
    let mut s = String::from(
        "\nwring with its extents in a bucket (mkfs --data) against the local store (same \
         method, max_extent and data; PUTs and CPU seconds counted over copy + sync, GETs over \
         the cold read back; the server's CPU when it runs on this machine):\n\n\
         | method | local write MB/s | bucket write MB/s | bucket/local write | local read MB/s \
         | bucket read MB/s | bucket/local read | input / bytes in bucket | local ratio \
         | PUTs per MiB written | GETs per MiB read | daemon CPU s, local | daemon CPU s, \
         bucket | server CPU s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let Some(o) = &r.objects else { continue };
        let _ = writeln!(
            s,
            "| {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} \
             | {:.2} | {:.2} | {:.2} |",
            r.method,
            r.wring.write_mbs(),
            o.run.write_mbs(),
            o.run.write_mbs() / r.wring.write_mbs(),
            r.wring.read_mbs(),
            o.run.read_mbs(),
            o.run.read_mbs() / r.wring.read_mbs(),
            o.bucket_ratio(),
            r.wring.ratio(),
            o.puts_per_mib(),
            o.gets_per_mib(),
            r.wring.write_cpu,
            o.run.write_cpu,
            o.server_cpu
        );
    }
    s
}
