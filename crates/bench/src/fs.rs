//! `wring bench fs`: seed 001's experiment through a real mount. For each method: mkfs, mount
//! wring with `compress-force=METHOD,max_extent=…` (a background daemon, as `wring mount`
//! starts it), copy the corpus in and sync (timed together), take the ratio from the
//! filesystem's own stat, unmount, drop caches, mount, read everything back with tar (timed).
//! The same on a kernel btrfs mounted with `compress-force=METHOD`. Then, for one method, the
//! large-extent run against the default: ratio gain and cold random 4 KiB read latency.
//!
//! The kernel's side is [`KernelFs`], every benchmark's one kernel run; the corpus directory is
//! copied as it is (`cp -r`) and listed with [`corpus::list`].
//!
//! With `--data`, each method also runs on a wring store whose extents are in an S3 bucket
//! (see [`objects`]), beside the local store and the kernel's btrfs: write and read MB/s, the
//! input against the bytes in the bucket, and requests per MiB.
//!
//! MB here are 10^6 bytes.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wring_btrfs::scratch::DEFAULT_IMAGE_SIZE;
use wring_engine::CompressSpec;

use crate::metrics::median;
use wring_fs::daemon;
use wring_fs::store::Store;
use wring_fs::{STAT_XATTR, SYNC_XATTR};

use crate::corpus;
use crate::kernel::{require_root, KernelFs};
use crate::BenchError;

mod objects;
pub use objects::{Objects, ObjectsRun};

/// How to start a background mount daemon.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// The wring CLI: `EXE mount -f -o OPTIONS DIR MOUNTPOINT`.
    Cli(PathBuf),
    /// The bare daemon: `EXE DIR MOUNTPOINT OPTIONS`.
    Fsd(PathBuf),
}

impl Launcher {
    /// The program and arguments that mount `dir` on `mnt` with `opts` in the foreground.
    pub(crate) fn args(&self, dir: &Path, mnt: &Path, opts: &str) -> (PathBuf, Vec<OsString>) {
        self.args_with(dir, mnt, opts, None)
    }

    /// [`Launcher::args`] with the bucket's credentials file for a store in a bucket.
    pub(crate) fn args_with(
        &self,
        dir: &Path,
        mnt: &Path,
        opts: &str,
        credentials: Option<&Path>,
    ) -> (PathBuf, Vec<OsString>) {
        let creds: Vec<OsString> = match credentials {
            Some(c) => vec!["--credentials".into(), c.into()],
            None => Vec::new(),
        };
        match self {
            Launcher::Cli(exe) => {
                let mut args: Vec<OsString> = vec!["mount".into(), "-f".into()];
                args.extend(creds);
                args.extend(["-o".into(), opts.into(), dir.into(), mnt.into()]);
                (exe.clone(), args)
            }
            Launcher::Fsd(exe) => {
                let mut args = creds;
                args.extend([dir.into(), mnt.into(), opts.into()]);
                (exe.clone(), args)
            }
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory whose files are copied in.
    pub corpus: PathBuf,
    /// Copies of it.
    pub copies: usize,
    /// Methods in btrfs's spelling (`lzo`, `zstd:3`, …).
    pub methods: Vec<String>,
    /// wring's max_extent for the main table.
    pub max_extent: usize,
    /// Method of the extent-size comparison (also gets random reads in the main table).
    pub extent_method: String,
    /// The larger max_extent to compare against `max_extent`; `None` skips the comparison.
    pub big_extent: Option<usize>,
    /// Random 4 KiB reads per latency measurement.
    pub random_reads: usize,
    /// Also run kernel btrfs.
    pub kernel: bool,
    /// How to start the daemon.
    pub launcher: Launcher,
    /// More mount options for wring (`uring=0`); empty for none.
    pub wring_options: String,
    /// Scratch directory for stores and mount points.
    pub work: PathBuf,
    /// Runs per method and filesystem, alternating; the fastest write and read of each are kept.
    pub repeat: usize,
    /// Also run each method on a store whose extents are in a bucket.
    pub objects: Option<Objects>,
}

/// Latency of cold random 4 KiB reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Latency {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Reads measured.
    pub reads: usize,
}

/// One filesystem's run of one method.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Bytes copied in.
    pub bytes: u64,
    /// Uncompressed bytes of the extents (the fs's own stat).
    pub uncompressed: u64,
    /// Stored bytes of the extents (the fs's own stat).
    pub stored: u64,
    /// Copy + sync.
    pub write: Duration,
    /// tar read-back after remount with cold caches.
    pub read: Duration,
    /// Cold random reads, when measured.
    pub latency: Option<Latency>,
    /// CPU seconds the mount daemon used over copy + sync (wring's runs only).
    pub write_cpu: f64,
}

impl Run {
    /// Keep the faster write and read of this run and `other` (the same data either way).
    pub fn keep_fastest(&mut self, other: &Run) {
        if other.write < self.write {
            (self.write, self.write_cpu) = (other.write, other.write_cpu);
        }
        self.read = self.read.min(other.read);
    }

    /// Write MB/s.
    pub fn write_mbs(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.write.as_secs_f64().max(1e-9)
    }
    /// Read MB/s.
    pub fn read_mbs(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.read.as_secs_f64().max(1e-9)
    }
    /// uncompressed / stored.
    pub fn ratio(&self) -> f64 {
        if self.stored == 0 {
            0.0
        } else {
            self.uncompressed as f64 / self.stored as f64
        }
    }
}

/// One method: wring and (optionally) kernel btrfs.
#[derive(Debug, Clone)]
pub struct Row {
    /// The method.
    pub method: String,
    /// wring.
    pub wring: Run,
    /// Kernel btrfs.
    pub kernel: Option<Run>,
    /// wring / kernel of each round's write and read MB/s, the two runs of a round back to
    /// back, so a slow spell of the machine hits both sides of a ratio alike.
    pub rounds: Vec<(f64, f64)>,
    /// wring with its extents in a bucket, when asked for.
    pub objects: Option<ObjectsRun>,
}

/// wring / kernel write and read MB/s of one round.
fn round_ratio(wring: &Run, kernel: &Run) -> (f64, f64) {
    (
        wring.write_mbs() / kernel.write_mbs(),
        wring.read_mbs() / kernel.read_mbs(),
    )
}

/// The extent-size comparison.
#[derive(Debug, Clone)]
pub struct ExtentCompare {
    /// The method.
    pub method: String,
    /// (max_extent, run) at the default size.
    pub small: (usize, Run),
    /// (max_extent, run) at the large size.
    pub big: (usize, Run),
    /// Kernel btrfs with the same method, when run.
    pub kernel: Option<Run>,
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Bytes of one copy of the corpus and its file count.
    pub corpus: (u64, usize),
    /// One row per method.
    pub rows: Vec<Row>,
    /// The extent-size comparison.
    pub extent: Option<ExtentCompare>,
    /// Runs per method and filesystem (the fastest kept).
    pub repeat: usize,
}

/// A size as the options spell it (`128K`).
fn fmt_size(n: usize) -> String {
    wring_engine::size::format_size(n as u64)
}

fn progress(msg: &str) {
    eprintln!("bench fs: {msg}");
}

pub(crate) fn sh(cmd: &str) -> Result<(), BenchError> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| BenchError::io("running sh", e))?;
    if !o.status.success() {
        return Err(BenchError::Command {
            command: cmd.to_string(),
            status: o.status.to_string(),
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        });
    }
    Ok(())
}

pub(crate) fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Write back everything and empty the page, dentry and inode caches.
pub(crate) fn drop_caches() -> Result<(), BenchError> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| BenchError::io("dropping caches (needs root)", e))
}

fn copy_in(corpus: &Path, dest: &Path, copies: usize) -> Result<(), BenchError> {
    for k in 0..copies {
        sh(&format!(
            "cp -r {} {}",
            quote(corpus),
            quote(&dest.join(format!("c{k}")))
        ))?;
    }
    Ok(())
}

/// Read the corpus once so every copy starts from the page cache, whatever ran before.
fn warm(corpus: &Path, files: &[(PathBuf, u64)]) -> Result<(), BenchError> {
    for (rel, _) in files {
        let path = corpus.join(rel);
        let what = || format!("reading {}", path.display());
        let mut f = File::open(&path).map_err(|e| BenchError::io(what(), e))?;
        std::io::copy(&mut f, &mut std::io::sink()).map_err(|e| BenchError::io(what(), e))?;
    }
    Ok(())
}

/// Read every file back. GNU tar does not read file data when the archive is /dev/null (it
/// notices and only stats), so the archive goes to a pipe and `cat` discards it.
fn tar_read(dir: &Path) -> Result<Duration, BenchError> {
    let t = Instant::now();
    sh(&format!("tar cf - -C {} . | cat > /dev/null", quote(dir)))?;
    Ok(t.elapsed())
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// `n` preads of 4 KiB at random 4 KiB-aligned offsets (seeded) over the files of `root`,
/// uniform over their pages, each timed. Readahead is switched off per file so each read asks
/// the filesystem for just that page.
pub fn random_reads(
    root: &Path,
    files: &[(PathBuf, u64)],
    n: usize,
) -> Result<Latency, BenchError> {
    let mut open = Vec::new();
    let mut ends = Vec::new();
    let mut pages = 0u64;
    for (rel, len) in files {
        if *len == 0 {
            continue;
        }
        let f = File::open(root.join(rel))
            .map_err(|e| BenchError::io(format!("opening {}", root.join(rel).display()), e))?;
        // SAFETY: an advice call on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        pages += len.div_ceil(4096);
        open.push(f);
        ends.push(pages);
    }
    if pages == 0 || n == 0 {
        return Ok(Latency::default());
    }
    let mut rng = Rng(0x5eed_0001);
    let mut buf = vec![0u8; 4096];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let page = rng.below(pages);
        let i = ends.partition_point(|&e| e <= page);
        let first = if i == 0 { 0 } else { ends[i - 1] };
        let off = (page - first) * 4096;
        let t = Instant::now();
        open[i]
            .read_at(&mut buf, off)
            .map_err(|e| BenchError::io(format!("pread at {off}"), e))?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(Latency {
        p50: times[times.len() / 2],
        p99: times[(times.len() * 99 / 100).min(times.len() - 1)],
        reads: times.len(),
    })
}

/// A background wring mount, unmounted on drop.
pub(crate) struct WringMount {
    mnt: PathBuf,
    live: bool,
}

impl WringMount {
    pub(crate) fn mount(
        l: &Launcher,
        dir: &Path,
        mnt: &Path,
        opts: &str,
    ) -> Result<WringMount, BenchError> {
        Self::mount_with(l, dir, mnt, opts, None)
    }

    /// [`WringMount::mount`] of a store in a bucket, with its credentials file.
    pub(crate) fn mount_with(
        l: &Launcher,
        dir: &Path,
        mnt: &Path,
        opts: &str,
        credentials: Option<&Path>,
    ) -> Result<WringMount, BenchError> {
        let (exe, args) = l.args_with(dir, mnt, opts, credentials);
        daemon::mount_background(&exe, &args).map_err(|source| BenchError::WringMount {
            what: format!("mounting {} with -o {opts}", dir.display()),
            source,
        })?;
        Ok(WringMount {
            mnt: mnt.to_path_buf(),
            live: true,
        })
    }

    pub(crate) fn umount(mut self) -> Result<(), BenchError> {
        self.live = false;
        daemon::umount(&self.mnt).map_err(|source| BenchError::Fs {
            what: format!("unmounting {}", self.mnt.display()),
            source,
        })
    }
}

impl Drop for WringMount {
    fn drop(&mut self) {
        if self.live {
            let _ = daemon::umount(&self.mnt);
        }
    }
}

/// syncfs (writes back the kernel's dirty pages through FUSE), then a durable commit.
/// The text of `wring status` of the mount at `mnt`.
pub(crate) fn status_text(mnt: &Path) -> Result<String, BenchError> {
    let text = daemon::get_xattr(mnt, wring_fs::STATUS_XATTR).map_err(|source| BenchError::Fs {
        what: format!("reading the status of {}", mnt.display()),
        source,
    })?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// A new store in `base/store` and a mount point `base/mnt`: (store, mount point).
pub(crate) fn fresh_store(base: &Path) -> Result<(PathBuf, PathBuf), BenchError> {
    let (store, mnt) = (base.join("store"), base.join("mnt"));
    std::fs::create_dir_all(&mnt)
        .map_err(|e| BenchError::io(format!("creating {}", mnt.display()), e))?;
    Store::mkfs(&store).map_err(|source| BenchError::Fs {
        what: format!("making a store in {}", store.display()),
        source,
    })?;
    Ok((store, mnt))
}

pub(crate) fn wring_sync(mnt: &Path) -> Result<(), BenchError> {
    let f = File::open(mnt).map_err(|e| BenchError::io(format!("opening {}", mnt.display()), e))?;
    // SAFETY: syncfs on an open descriptor.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(BenchError::io(
            format!("syncfs {}", mnt.display()),
            std::io::Error::last_os_error(),
        ));
    }
    daemon::get_xattr(mnt, SYNC_XATTR).map_err(|source| BenchError::Fs {
        what: format!("committing {}", mnt.display()),
        source,
    })?;
    Ok(())
}

/// (uncompressed, stored) from the `raw:` line of the fs's stat report of `path`.
pub(crate) fn wring_usage(path: &Path) -> Result<(u64, u64), BenchError> {
    let text = daemon::get_xattr(path, STAT_XATTR).map_err(|source| BenchError::Fs {
        what: format!("reading the stat report of {}", path.display()),
        source,
    })?;
    let text = String::from_utf8_lossy(&text);
    let missing = |field: &str, report: &str| BenchError::StatReport {
        path: path.to_path_buf(),
        field: field.to_string(),
        report: report.to_string(),
    };
    let raw = text
        .lines()
        .find(|l| l.starts_with("raw:"))
        .ok_or_else(|| missing("raw: line", &text))?;
    let field = |name: &str| -> Result<u64, BenchError> {
        raw.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            .ok_or_else(|| missing(&format!("{name}="), raw))
    };
    Ok((field("uncompressed")?, field("disk")?))
}

fn total_bytes(files: &[(PathBuf, u64)]) -> u64 {
    files.iter().map(|f| f.1).sum()
}

/// Where a wring run keeps its extents: in the store directory, or in the bucket (the run's
/// number under it, for a prefix of its own).
#[derive(Clone, Copy)]
enum Backing<'a> {
    Local,
    Bucket(&'a objects::BucketTarget, usize),
}

/// One wring run of `method` at `max_extent`; random reads when `random`.
pub fn wring_run(
    cfg: &Config,
    files: &[(PathBuf, u64)],
    method: &str,
    max_extent: usize,
    random: bool,
) -> Result<Run, BenchError> {
    Ok(wring_run_on(cfg, files, method, max_extent, random, Backing::Local)?.run)
}

/// One wring run of `method` on a store whose extents are in the bucket `t` (run `n`).
fn objects_run(
    cfg: &Config,
    files: &[(PathBuf, u64)],
    method: &str,
    t: &objects::BucketTarget,
    n: usize,
) -> Result<ObjectsRun, BenchError> {
    let b = Backing::Bucket(t, n);
    wring_run_on(cfg, files, method, cfg.max_extent, false, b)
}

/// [`wring_run`] on `backing`; for a bucket, with its requests counted and its bytes.
fn wring_run_on(
    cfg: &Config,
    files: &[(PathBuf, u64)],
    method: &str,
    max_extent: usize,
    random: bool,
    backing: Backing<'_>,
) -> Result<ObjectsRun, BenchError> {
    let method_ = method.replace(':', "_");
    let name = match backing {
        Backing::Local => format!("wring-{method_}-{}", fmt_size(max_extent)),
        Backing::Bucket(_, n) => format!("s3-{method_}-{n}"),
    };
    let base = cfg.work.join(&name);
    let _ = std::fs::remove_dir_all(&base);
    let (store, mnt) = (base.join("store"), base.join("mnt"));
    std::fs::create_dir_all(&mnt)
        .map_err(|e| BenchError::io(format!("creating {}", mnt.display()), e))?;
    let creds = match backing {
        Backing::Local => {
            Store::mkfs(&store).map_err(|source| BenchError::Fs {
                what: format!("making a store in {}", store.display()),
                source,
            })?;
            None
        }
        Backing::Bucket(t, _) => {
            objects::mkfs(&store, t, &name)?;
            t.credentials.as_deref()
        }
    };
    let count = |mnt: &Path| match backing {
        Backing::Local => Ok(objects::Counters {
            daemon_cpu: objects::daemon_cpu(mnt),
            ..Default::default()
        }),
        Backing::Bucket(t, _) => objects::counters(mnt, t),
    };
    let mut opts = format!(
        "compress-force={method},max_extent={}",
        fmt_size(max_extent)
    );
    if !cfg.wring_options.is_empty() {
        opts = format!("{opts},{}", cfg.wring_options);
    }
    let label = match backing {
        Backing::Local => format!("wring {opts}"),
        Backing::Bucket(..) => format!("wring in a bucket, {opts}"),
    };
    let mut out = ObjectsRun {
        run: Run {
            bytes: total_bytes(files) * cfg.copies as u64,
            ..Run::default()
        },
        ..ObjectsRun::default()
    };
    let run = &mut out.run;
    let m = WringMount::mount_with(&cfg.launcher, &store, &mnt, &opts, creds)?;
    warm(&cfg.corpus, files)?;
    progress(&format!("{label}: copying"));
    let before = count(&mnt)?;
    let t = Instant::now();
    copy_in(&cfg.corpus, &mnt, cfg.copies)?;
    wring_sync(&mnt)?;
    run.write = t.elapsed();
    let after = count(&mnt)?;
    (out.puts, out.bucket_bytes) = (after.puts.saturating_sub(before.puts), after.bucket_bytes);
    run.write_cpu = after.daemon_cpu - before.daemon_cpu;
    out.server_cpu = after.server_cpu - before.server_cpu;
    (run.uncompressed, run.stored) = wring_usage(&mnt)?;
    m.umount()?;
    drop_caches()?;
    let m = WringMount::mount_with(&cfg.launcher, &store, &mnt, &opts, creds)?;
    progress(&format!("{label}: reading back"));
    let before = count(&mnt)?;
    run.read = tar_read(&mnt)?;
    out.gets = count(&mnt)?.gets.saturating_sub(before.gets);
    m.umount()?;
    if random {
        // A fresh mount: the fs's decompressed-extent cache is empty too.
        drop_caches()?;
        let m = WringMount::mount_with(&cfg.launcher, &store, &mnt, &opts, creds)?;
        progress(&format!("{label}: random reads"));
        run.latency = Some(random_reads(&mnt.join("c0"), files, cfg.random_reads)?);
        m.umount()?;
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(out)
}

/// The same on a kernel btrfs mounted with `compress-force=METHOD` ([`KernelFs`]).
pub fn kernel_run(
    cfg: &Config,
    files: &[(PathBuf, u64)],
    method: &str,
    random: bool,
) -> Result<Run, BenchError> {
    let spec: CompressSpec = method
        .parse()
        .map_err(|e| BenchError::Spec(format!("{method}: {e}")))?;
    let mut fs = KernelFs::mount(spec, DEFAULT_IMAGE_SIZE)?;
    let label = format!("btrfs {}", fs.options());
    let mut run = Run {
        bytes: total_bytes(files) * cfg.copies as u64,
        ..Run::default()
    };
    warm(&cfg.corpus, files)?;
    progress(&format!("{label}: copying"));
    let t = Instant::now();
    copy_in(&cfg.corpus, fs.path(), cfg.copies)?;
    fs.sync()?;
    run.write = t.elapsed();
    let total = fs.usage()?;
    (run.uncompressed, run.stored) = (total.uncompressed, total.disk);
    fs.remount()?;
    drop_caches()?;
    progress(&format!("{label}: reading back"));
    run.read = tar_read(fs.path())?;
    if random {
        fs.remount()?;
        drop_caches()?;
        progress(&format!("{label}: random reads"));
        run.latency = Some(random_reads(
            &fs.path().join("c0"),
            files,
            cfg.random_reads,
        )?);
    }
    Ok(run)
}

/// Run the whole benchmark.
pub fn run(cfg: &Config) -> Result<Report, BenchError> {
    require_root("bench fs", "FUSE and loop mounts, dropping the page cache")?;
    let files = corpus::list(&cfg.corpus)?;
    if files.is_empty() {
        return Err(BenchError::EmptyCorpus(cfg.corpus.clone()));
    }
    std::fs::create_dir_all(&cfg.work)
        .map_err(|e| BenchError::io(format!("creating {}", cfg.work.display()), e))?;
    let compare = cfg.big_extent.is_some();
    let bucket = objects::target(cfg)?;
    let mut rows = Vec::new();
    for method in &cfg.methods {
        let random = compare && *method == cfg.extent_method;
        let mut wring = wring_run(cfg, &files, method, cfg.max_extent, random)?;
        let mut kernel = if cfg.kernel {
            Some(kernel_run(cfg, &files, method, random)?)
        } else {
            None
        };
        let mut objects = match &bucket {
            Some((t, _)) => Some(objects_run(cfg, &files, method, t, 0)?),
            None => None,
        };
        let mut rounds: Vec<_> = kernel.iter().map(|k| round_ratio(&wring, k)).collect();
        for round in 1..cfg.repeat {
            let w = wring_run(cfg, &files, method, cfg.max_extent, false)?;
            wring.keep_fastest(&w);
            if let Some(k) = kernel.as_mut() {
                let kr = kernel_run(cfg, &files, method, false)?;
                rounds.push(round_ratio(&w, &kr));
                k.keep_fastest(&kr);
            }
            if let (Some(o), Some((t, _))) = (objects.as_mut(), &bucket) {
                o.keep_fastest(&objects_run(cfg, &files, method, t, round)?);
            }
        }
        rows.push(Row {
            method: method.clone(),
            wring,
            kernel,
            rounds,
            objects,
        });
    }
    let extent = match cfg.big_extent {
        None => None,
        Some(big) => {
            let found = rows.iter().find(|r| r.method == cfg.extent_method);
            let (small, kernel) = match found {
                Some(r) => (r.wring.clone(), r.kernel.clone()),
                None => (
                    wring_run(cfg, &files, &cfg.extent_method, cfg.max_extent, true)?,
                    None,
                ),
            };
            let big_run = wring_run(cfg, &files, &cfg.extent_method, big, true)?;
            Some(ExtentCompare {
                method: cfg.extent_method.clone(),
                small: (cfg.max_extent, small),
                big: (big, big_run),
                kernel,
            })
        }
    };
    if let Some((_, Some(sw))) = bucket {
        sw.stop_and_check()
            .map_err(|e| BenchError::io("stopping SeaweedFS", std::io::Error::other(e)))?;
    }
    Ok(Report {
        corpus: (total_bytes(&files), files.len()),
        rows,
        extent,
        repeat: cfg.repeat,
    })
}

/// `0.97 1.02 …` of one column of the rounds.
fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

impl Report {
    /// The per-round ratios and their medians.
    fn render_rounds(&self) -> String {
        let mut s = String::from(
            "\nwring/kernel round by round (each round runs wring, then the kernel, back to back):\n\n\
             | method | write, each round | write median | read, each round | read median |\n\
             |---|---|---:|---|---:|\n",
        );
        for r in self.rows.iter().filter(|r| !r.rounds.is_empty()) {
            let (w, rd): (Vec<f64>, Vec<f64>) = r.rounds.iter().copied().unzip();
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {} | {:.2} |",
                r.method,
                list(&w),
                median(&w),
                list(&rd),
                median(&rd)
            );
        }
        s
    }

    /// The markdown tables.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let copies = self
            .rows
            .first()
            .map(|r| r.wring.bytes / self.corpus.0.max(1))
            .unwrap_or(1);
        let _ = writeln!(
            s,
            "corpus: {} files, {:.1} MB × {copies} (MB = 10^6 bytes; write = copy from the page cache + sync, read = tar of everything after remount with cold caches; fastest of {} alternating runs)\n",
            self.corpus.1,
            self.corpus.0 as f64 / 1e6,
            self.repeat
        );
        s += "| method | wring write MB/s | kernel write MB/s | write wring/kernel | wring ratio | kernel ratio | ratio wring/kernel | wring read MB/s | kernel read MB/s | read wring/kernel |\n";
        s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        let na = || "–".to_string();
        for r in &self.rows {
            let w = &r.wring;
            let k = r.kernel.as_ref();
            let f1 = |v: f64| format!("{v:.1}");
            let f2 = |v: f64| format!("{v:.2}");
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.method,
                f1(w.write_mbs()),
                k.map_or_else(na, |k| f1(k.write_mbs())),
                k.map_or_else(na, |k| f2(w.write_mbs() / k.write_mbs())),
                f2(w.ratio()),
                k.map_or_else(na, |k| f2(k.ratio())),
                k.map_or_else(na, |k| f2(w.ratio() / k.ratio())),
                f1(w.read_mbs()),
                k.map_or_else(na, |k| f1(k.read_mbs())),
                k.map_or_else(na, |k| f2(w.read_mbs() / k.read_mbs())),
            );
        }
        if self.repeat > 1 && self.rows.iter().any(|r| !r.rounds.is_empty()) {
            s += &self.render_rounds();
        }
        if self.rows.iter().any(|r| r.objects.is_some()) {
            s += &objects::render(&self.rows);
        }
        if let Some(e) = &self.extent {
            let _ = writeln!(
                s,
                "\n{}: max_extent {} vs {} (random reads: 4 KiB preads at seeded random aligned offsets, caches dropped and the fs freshly mounted)\n",
                e.method,
                fmt_size(e.big.0),
                fmt_size(e.small.0)
            );
            s += "| fs | max_extent | ratio | ratio gain | write MB/s | read MB/s | random 4K p50 | random 4K p99 |\n";
            s += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
            let base = e.small.1.ratio();
            let mut line = |fs: &str, ext: String, r: &Run, gain: String| {
                let (p50, p99) = r
                    .latency
                    .map_or_else(|| (na(), na()), |l| (us(l.p50), us(l.p99)));
                let _ = writeln!(
                    s,
                    "| {fs} | {ext} | {:.2} | {gain} | {:.1} | {:.1} | {p50} | {p99} |",
                    r.ratio(),
                    r.write_mbs(),
                    r.read_mbs()
                );
            };
            line("wring", fmt_size(e.small.0), &e.small.1, "—".into());
            let gain = (e.big.1.ratio() / base - 1.0) * 100.0;
            line("wring", fmt_size(e.big.0), &e.big.1, format!("{gain:+.1}%"));
            if let Some(k) = &e.kernel {
                line("kernel btrfs", "128K".into(), k, "—".into());
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_table_lists_each_round_and_the_median() {
        let run = |w: u64, r: u64| Run {
            bytes: 100_000_000,
            write: Duration::from_millis(w),
            read: Duration::from_millis(r),
            ..Run::default()
        };
        let (wring, kernel) = (run(1000, 200), run(900, 200));
        let report = Report {
            corpus: (100_000_000, 1),
            rows: vec![Row {
                method: "zstd:3".into(),
                rounds: vec![round_ratio(&wring, &kernel), (1.1, 0.8), (1.0, 1.2)],
                wring,
                kernel: Some(kernel),
                objects: None,
            }],
            extent: None,
            repeat: 3,
        };
        let text = report.render();
        assert!(
            text.contains("| zstd:3 | 0.90 1.10 1.00 | 1.00 | 1.00 0.80 1.20 | 1.00 |"),
            "{text}"
        );
    }
}
