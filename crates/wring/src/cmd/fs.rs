//! `wring mkfs|mount|umount|remount|status|property|stat|fsck`: the wring filesystem's
//! commands. Thin: parse, call wring-fs, print.
//!
//! A store keeps its extents in its directory or in an S3 bucket (`mkfs --data
//! s3://BUCKET/PREFIX`). Credentials for the bucket come from a file named with
//! `--credentials FILE` (owner-only, AWS's shared-credentials form) or the `AWS_*`
//! environment variables: never from the command line, and never logged.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use wring_engine::size::parse_size;
use wring_fs::store::{Access, DataSpec, ObjectsSpec, Store};
use wring_fs::{
    daemon, fsck, Options, METRICS_XATTR, PROP_XATTR, STATUS_JSON_XATTR, STAT_JSON_XATTR,
    STAT_XATTR,
};

/// How to reach a bucket: where the credentials come from, and whether to break its lease.
#[derive(clap::Args, Clone, Default)]
pub struct AccessArgs {
    /// File with the bucket's key pair (aws_access_key_id = …, aws_secret_access_key = …),
    /// readable by its owner only (chmod 600). mkfs and mount --from record its path (never
    /// its contents) in DIR for later mounts and fsck; without one given or recorded,
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from the
    /// environment. Keys are never accepted on the command line
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
}

impl AccessArgs {
    fn access(&self, break_lease: bool) -> Access {
        Access {
            credentials: self.credentials.clone(),
            break_lease,
        }
    }
}

/// Where `wring mount --from` fetches a store from.
#[derive(clap::Args, Clone, Default)]
pub struct FromArgs {
    /// Take over a filesystem kept in a bucket: take its lease and fetch its newest metadata
    /// snapshot (written by the last clean unmount) into DIR, then mount it. URL is
    /// s3://BUCKET/PREFIX, as given to mkfs --data
    #[arg(long, value_name = "URL")]
    pub from: Option<String>,
    /// The S3 endpoint for --from (https://HOST[:PORT], or http:// on this machine only);
    /// without it, AWS
    #[arg(long, value_name = "URL", requires = "from")]
    pub endpoint: Option<String>,
    /// Take the bucket's lease even when someone else holds it: a mount daemon that died
    /// holding it (kill -9, a crash, this directory's own included) or a lost machine. Only
    /// for a holder that is gone for good: two writers at once corrupt the filesystem
    #[arg(long)]
    pub break_lease: bool,
}

/// `s3://BUCKET/PREFIX` checked enough for an error that names `option`; the object store
/// checks the bucket name itself.
fn check_url(option: &str, url: &str) -> Result<()> {
    let rest = url.strip_prefix("s3://").unwrap_or_default();
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() || prefix.trim_matches('/').is_empty() {
        bail!(
            "{option} must be s3://BUCKET/PREFIX (a bucket and a key prefix for this \
             filesystem's objects), not '{url}'"
        );
    }
    Ok(())
}

/// `--endpoint`: https://, or http:// (loopback only, checked by the object store).
fn check_endpoint(url: &str) -> Result<()> {
    if !url.starts_with("https://") && !url.starts_with("http://") {
        bail!("--endpoint must be https://HOST[:PORT] (or http:// on this machine), not '{url}'");
    }
    Ok(())
}

/// What `mkfs` makes: a local store, or one whose extents go to a bucket.
fn data_spec(
    data: Option<String>,
    endpoint: Option<String>,
    segment_size: Option<String>,
) -> Result<DataSpec> {
    let Some(url) = data else {
        if endpoint.is_some() || segment_size.is_some() {
            bail!("--endpoint and --segment-size need --data s3://BUCKET/PREFIX");
        }
        return Ok(DataSpec::Local);
    };
    check_url("--data", &url)?;
    if let Some(e) = &endpoint {
        check_endpoint(e)?;
    }
    let segment_bytes = match segment_size {
        None => None,
        Some(t) => Some(
            parse_size(&t)
                .ok()
                .filter(|n| (64 << 10..=1 << 30).contains(n))
                .with_context(|| {
                    format!("--segment-size must be a size from 64K to 1G (4M: 4 MiB), not '{t}'")
                })?,
        ),
    };
    Ok(DataSpec::Objects(ObjectsSpec {
        url,
        endpoint,
        segment_bytes,
        credentials: None,
    }))
}

/// Filesystem commands (flattened into wring's top level).
#[derive(clap::Subcommand)]
pub enum Command {
    /// Create a wring filesystem store in DIR (its extents in DIR, or in a bucket with --data)
    Mkfs {
        /// Keep the compressed extents in an S3 bucket under s3://BUCKET/PREFIX (packed into
        /// segment objects) instead of in DIR; the metadata stays in DIR. The bucket must
        /// exist, the prefix must hold no other filesystem (refused, naming what is there),
        /// and the credentials must be allowed to write and delete there
        #[arg(long, value_name = "URL")]
        data: Option<String>,
        /// The S3 endpoint for --data (https://HOST[:PORT], or http:// on this machine only);
        /// without it, AWS. Recorded in DIR for later mounts
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// Size of the segment objects for --data (64K to 1G, default 4M): larger ones mean
        /// fewer requests, smaller ones less to rewrite when compacting
        #[arg(long, value_name = "SIZE")]
        segment_size: Option<String>,
        #[command(flatten)]
        access: AccessArgs,
        /// Store directory (created if missing)
        dir: PathBuf,
    },
    /// Mount the store DIR on MOUNTPOINT (in the background unless -f)
    Mount {
        /// Options, comma-separated, -o may repeat (later ones win). btrfs's spelling:
        /// compress=ALG[:LEVEL] (zstd:-15..22, default 3; zlib:1..9, default 3; lzo; lz4;
        /// lz4hc:1..12), compress-force=ALG[:LEVEL], compress=no; and wring's:
        /// max_extent=SIZE (4K..4M, default 128K), streams=N (1..1024), reclaim=SECONDS,
        /// workspace_mem=BYTES|unlimited, page_pool=PAGES (0..1048576), threads=N (1..64),
        /// uring=auto|0|1 (FUSE over io_uring; auto: when the kernel offers it), dict=auto|off
        /// (trained dictionaries for small zstd extents), dict_train=SIZE (64K..1G, default
        /// 4M), compact=0|1 and compact_threshold=PERCENT (1..95, default 50; a store in a
        /// bucket), metrics=ADDR (at mount: Prometheus metrics on GET /metrics at
        /// 127.0.0.1:PORT, [::1]:PORT or an absolute Unix socket path; another IP only as
        /// public:IP:PORT), allow_other; and mount(8)'s ro, rw, suid, dev, noexec (nosuid, nodev, exec),
        /// relatime (default), strictatime, noatime, nodiratime, lazytime (man 5 wring-mount-options)
        #[arg(short = 'o')]
        options: Vec<String>,
        /// Stay in the foreground
        #[arg(short = 'f')]
        foreground: bool,
        #[command(flatten)]
        objects: MountObjects,
        /// Store directory
        dir: PathBuf,
        /// Where to mount it
        mountpoint: PathBuf,
    },
    /// Flush everything and unmount
    Umount {
        /// The mount point
        mountpoint: PathBuf,
    },
    /// Change options on a live mount
    Remount {
        /// Options to change (as for mount, except allow_other), -o may repeat
        #[arg(short = 'o', required = true)]
        options: Vec<String>,
        /// The mount point
        mountpoint: PathBuf,
    },
    /// Live options (as /proc/mounts shows btrfs's) and engine statistics of a mount
    Status {
        /// Print the same figures as one JSON object instead: names are stable and carry
        /// their unit (_bytes: bytes, _seconds: seconds, _pages: 4 KiB pages; no suffix: a
        /// count); parts a store lacks (objects, compaction) are null
        #[arg(long)]
        json: bool,
        /// The mount point
        mountpoint: PathBuf,
    },
    /// A mount's or a blk device's figures as Prometheus metrics (OpenMetrics text), printed,
    /// or written for node_exporter's textfile collector with --textfile
    Metrics {
        /// Write them to DIR/wring.prom (a blk device's: DIR/wring-blk-NAME.prom) instead (a
        /// temporary file renamed over it, so the collector never reads half a file); run it
        /// from a timer
        #[arg(long, value_name = "DIR")]
        textfile: Option<PathBuf>,
        /// The mount point, or the name of a `wring blk` device
        mountpoint: PathBuf,
    },
    /// Get or set the per-file/per-directory compression property
    #[command(subcommand)]
    Property(PropertyCommand),
    /// compsize's report for files under a mount, with the per-level breakdown
    Stat {
        /// Print the same figures as JSON instead: an array with one object per PATH (its
        /// "path", "files", "inline_extents", "total", "by_type", "by_level", "by_dict",
        /// "bucket"); each row has disk_bytes, uncompressed_bytes, referenced_bytes, extents
        /// and refs
        #[arg(long)]
        json: bool,
        /// Files or directories on a wring mount
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Check a store that is not mounted (for a store in a bucket: every segment object an
    /// extent names exists and its checksums hold); with --repair, fix what it finds
    Fsck {
        /// Fix what needs no guess at data, as e2fsck does, printing each change: remove
        /// entries whose inode or directory is missing, move inodes no name reaches into
        /// /lost+found as #INODE, set link counts, `..` records, the orphan table and the
        /// store's counters. One transaction: an interruption leaves the store as it was.
        /// Refused while the store is mounted; a mount started meanwhile waits for it
        #[arg(long)]
        repair: bool,
        #[command(flatten)]
        access: AccessArgs,
        /// Store directory
        dir: PathBuf,
    },
}

/// `wring mount`'s options for a store whose extents are in a bucket.
#[derive(clap::Args, Clone, Default)]
pub struct MountObjects {
    /// --from, --endpoint, --break-lease.
    #[command(flatten)]
    pub from: FromArgs,
    /// --credentials.
    #[command(flatten)]
    pub access: AccessArgs,
}

/// `wring property`.
#[derive(clap::Subcommand)]
pub enum PropertyCommand {
    /// Show a property
    Get {
        /// File or directory
        path: PathBuf,
        /// Property name (only `compression`)
        #[arg(default_value = "compression")]
        name: String,
    },
    /// Set a property (`none` stores data uncompressed; an empty value removes it)
    Set {
        /// File or directory
        path: PathBuf,
        /// Property name (only `compression`)
        name: String,
        /// Value: zstd:9, zlib, lzo, none, …
        value: String,
    },
}

fn check_prop(name: &str) -> Result<()> {
    if name != "compression" {
        bail!("unknown property '{name}': accepted is compression");
    }
    Ok(())
}

/// `wring mount`: with --from, fetch the store from its bucket first (here, in the parent, so
/// an error reaches the terminal), then mount as usual; the daemon is this program again with
/// `-f`, and gets --credentials and --break-lease (never the keys themselves).
fn mount(
    options: &str,
    foreground: bool,
    objects: &MountObjects,
    dir: PathBuf,
    mountpoint: PathBuf,
) -> Result<()> {
    Options::parse(options)?;
    let access = objects.access.access(objects.from.break_lease);
    if let Some(url) = &objects.from.from {
        check_url("--from", url)?;
        if let Some(e) = &objects.from.endpoint {
            check_endpoint(e)?;
        }
        Store::fetch(url, objects.from.endpoint.as_deref(), &access, &dir)
            .with_context(|| format!("fetching {url} into {}", dir.display()))?;
    }
    if foreground {
        return Ok(daemon::mount_foreground(
            &dir,
            &mountpoint,
            options,
            &access,
        )?);
    }
    let exe = std::env::current_exe().context("finding the wring executable")?;
    let mut args: Vec<OsString> = vec!["mount".into(), "-f".into()];
    if let Some(c) = &objects.access.credentials {
        // Absolute: the daemon's working directory may differ.
        let c = std::path::absolute(c).unwrap_or_else(|_| c.clone());
        args.extend(["--credentials".into(), c.into_os_string()]);
    }
    // After --from the fetch holds the lease (broken already if asked) and the daemon takes
    // it over; --break-lease goes on only to a plain mount (a crashed daemon's lease).
    if objects.from.break_lease && objects.from.from.is_none() {
        args.push("--break-lease".into());
    }
    args.extend([
        "-o".into(),
        options.into(),
        dir.into_os_string(),
        mountpoint.into_os_string(),
    ]);
    daemon::mount_background(&exe, &args).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Run a filesystem command.
pub fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Mkfs {
            data,
            endpoint,
            segment_size,
            access,
            dir,
        } => {
            let spec = data_spec(data, endpoint, segment_size)?;
            Store::mkfs_with(&dir, &spec, &access.access(false))
                .with_context(|| format!("mkfs {}", dir.display()))?;
            match &spec {
                DataSpec::Local => println!("created a wring store in {}", dir.display()),
                DataSpec::Objects(o) => println!(
                    "created a wring store in {} with its extents in {}",
                    dir.display(),
                    o.url
                ),
            }
        }
        Command::Mount {
            options,
            foreground,
            objects,
            dir,
            mountpoint,
        } => {
            let dir = daemon::store_dir(&dir);
            mount(&options.join(","), foreground, &objects, dir, mountpoint)?
        }
        Command::Umount { mountpoint } => daemon::umount(&mountpoint)?,
        Command::Remount {
            options,
            mountpoint,
        } => {
            println!("{}", daemon::remount(&mountpoint, &options.join(","))?);
        }
        Command::Status { json, mountpoint } => status(json, &mountpoint)?,
        Command::Metrics {
            textfile,
            mountpoint,
        } => metrics(textfile.as_deref(), &mountpoint)?,
        Command::Property(PropertyCommand::Get { path, name }) => {
            check_prop(&name)?;
            match daemon::get_xattr(&path, PROP_XATTR) {
                Ok(v) => println!("compression={}", String::from_utf8_lossy(&v)),
                Err(wring_fs::FsError::Io { source, .. })
                    if source.raw_os_error() == Some(libc::ENODATA) =>
                {
                    println!("compression=")
                }
                Err(e) => return Err(e.into()),
            }
        }
        Command::Property(PropertyCommand::Set { path, name, value }) => {
            check_prop(&name)?;
            if !value.is_empty() {
                wring_fs::options::parse_spec("compression", &value)?;
            }
            daemon::set_xattr(&path, PROP_XATTR, value.as_bytes())?;
        }
        Command::Stat { json, paths } => stat(json, &paths)?,
        Command::Fsck {
            repair,
            access,
            dir,
        } => fsck_command(repair, &access, &dir)?,
    }
    Ok(())
}

/// `wring status [--json] MNT`: the daemon's text, or its JSON as it sent it.
fn status(json: bool, mountpoint: &Path) -> Result<()> {
    if !json {
        print!("{}", daemon::status(mountpoint)?);
        return Ok(());
    }
    let v = daemon::get_xattr(mountpoint, STATUS_JSON_XATTR)
        .with_context(|| format!("wring status --json {}", mountpoint.display()))?;
    println!("{}", String::from_utf8_lossy(&v));
    Ok(())
}

/// `wring metrics [--textfile DIR] MNT|DEVICE`: the mount's exposition (or a blk device's,
/// for a name that is no directory) on stdout, or in DIR/wring.prom (DIR/wring-blk-NAME.prom),
/// replaced whole by a rename.
fn metrics(textfile: Option<&Path>, target: &Path) -> Result<()> {
    let (v, file) = if target.is_dir() {
        let v = daemon::get_xattr(target, METRICS_XATTR)
            .with_context(|| format!("wring metrics {}", target.display()))?;
        (v, "wring.prom".to_string())
    } else {
        let name = target.to_string_lossy();
        let dir = super::blk::device(&name).with_context(|| {
            format!("'{name}' is neither a directory (a wring mount) nor a blk device")
        })?;
        let v = super::blk_metrics::text(&name, &dir)?.into_bytes();
        (v, format!("wring-blk-{name}.prom"))
    };
    let Some(dir) = textfile else {
        print!("{}", String::from_utf8_lossy(&v));
        return Ok(());
    };
    let tmp = dir.join(format!(".{file}.{}", std::process::id()));
    let dest = dir.join(file);
    std::fs::write(&tmp, &v).with_context(|| format!("writing {}", tmp.display()))?;
    if let Err(e) = std::fs::rename(&tmp, &dest) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("renaming it to {}", dest.display()));
    }
    Ok(())
}

/// `wring stat [--json] PATH...`: each path's report; with --json one array holding each
/// report with its `path`.
fn stat(json: bool, paths: &[PathBuf]) -> Result<()> {
    let name = if json { STAT_JSON_XATTR } else { STAT_XATTR };
    let mut reports = Vec::new();
    for p in paths {
        let v = match daemon::get_xattr(p, name) {
            // Only a wring mount answers its control attribute.
            Err(wring_fs::FsError::Io { source, .. })
                if source.raw_os_error() == Some(libc::ENODATA)
                    || source.raw_os_error() == Some(libc::EOPNOTSUPP) =>
            {
                bail!("{} is not on a wring mount", p.display())
            }
            r => r.with_context(|| format!("wring stat {}", p.display()))?,
        };
        if !json {
            print!("{}", String::from_utf8_lossy(&v));
            continue;
        }
        let mut report: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&v)
            .with_context(|| format!("the mount's JSON report on {}", p.display()))?;
        let path = serde_json::Value::String(p.display().to_string());
        report.insert("path".into(), path);
        reports.push(serde_json::Value::Object(report));
    }
    if json {
        println!("{}", serde_json::Value::Array(reports));
    }
    Ok(())
}

/// `wring fsck [--repair] DIR`: the check's (or the repair's) report; an error when problems
/// are left.
fn fsck_command(repair: bool, access: &AccessArgs, dir: &std::path::Path) -> Result<()> {
    if let Some(why) = wring_fs::store::exposure(dir) {
        let what = if repair {
            "a repair"
        } else {
            "fsck only reads it"
        };
        eprintln!(
            "warning: the store {}: {why} (a mount refuses it; {what})",
            dir.display()
        );
    }
    let waiting = &mut |m: &str| eprintln!("wring: {m}");
    let access = access.access(false);
    let r = match repair {
        false => fsck::fsck_waiting(dir, &access, waiting)?,
        true => {
            let done = fsck::repair(dir, &access, waiting)
                .with_context(|| format!("repairing {}", dir.display()))?;
            for c in &done.changes {
                println!("repaired: {c}");
            }
            println!("{} change(s) made", done.changes.len());
            done.after
        }
    };
    println!(
        "checked {} inodes, {} extents ({} shared), {} dictionaries",
        r.inodes, r.extents, r.shared, r.dicts
    );
    for n in &r.notes {
        println!("note: {n}");
    }
    for p in &r.problems {
        println!("problem: {p}");
    }
    match (r.problems.len(), repair) {
        (0, _) => println!("no problems found"),
        (n, false) => bail!(
            "{n} problem(s) found in {} (wring fsck --repair fixes what can be fixed)",
            dir.display()
        ),
        (n, true) => bail!(
            "{n} problem(s) left in {} that a repair cannot fix",
            dir.display()
        ),
    }
    Ok(())
}
