//! `wring bench pool`: seed 003's question — does EROFS's page pool for decompression
//! destinations pay in userspace? Random 4 KiB and 128 KiB reads over compressed files larger
//! than the memory the daemon may use, through a wring-fs mount, with the page pool off and on,
//! each without and with memory pressure: the daemon started inside a v1 memory cgroup
//! (/sys/fs/cgroup/memory/wring-bench-pool, so its page pool is charged there too) with a
//! tight limit and a memory hog (a forked child touching memory in a loop) in the same cgroup. Each case on a
//! fresh daemon with cold caches; every read's file range is dropped from the page cache after
//! it (untimed), so each one reaches the daemon. One run, printed with pool-on/pool-off ratios.
//!
//! What the pool serves: a 4 KiB read decodes its whole 128 KiB extent into the cache of
//! decoded extents, whose pages come from the pool; a 128 KiB read covers its extent whole and
//! decodes straight into the reply, so the pool does not enter it (a control).
//!
//! MB here are 10^6 bytes.

use std::fmt::Write as _;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wring_fs::daemon;
use wring_fs::store::Store;
use wring_fs::SYNC_XATTR;

use crate::fs::Launcher;
use crate::kernel::require_root;
use crate::BenchError;

/// Where the v1 memory controller keeps the benchmark's cgroup.
const CGROUP: &str = "/sys/fs/cgroup/memory/wring-bench-pool";
/// The extent size of the files (btrfs's).
const EXTENT: u64 = 128 * 1024;

/// What to run.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// How to start the daemon.
    pub launcher: Launcher,
    /// Scratch directory for the store and the mount point.
    pub work: PathBuf,
    /// Uncompressed bytes of the files, in all.
    pub bytes: u64,
    /// How many files.
    pub files: usize,
    /// Compression method (btrfs spelling).
    pub method: String,
    /// Pages of the pool when on.
    pub pool_pages: usize,
    /// The cgroup's memory limit under pressure.
    pub limit: u64,
    /// Bytes the hog touches over and over.
    pub hog: u64,
    /// Random reads per size and case.
    pub reads: usize,
}

/// Latency percentiles, throughput and the daemon's page faults of one read size in one case.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measure {
    /// Median read latency.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// Bytes read / time spent in reads, MB/s.
    pub mbs: f64,
    /// The daemon's minor faults during the reads.
    pub minflt: u64,
    /// The daemon's major faults during the reads.
    pub majflt: u64,
}

/// One case: pool off or on, pressure or not; its 4 KiB and 128 KiB measures and the pool's
/// status line at the end.
#[derive(Debug, Clone)]
pub struct Case {
    /// Pool pages (0 = off).
    pub pool: usize,
    /// Under the cgroup's limit with the hog.
    pub pressure: bool,
    /// (read size, measure).
    pub sizes: Vec<(usize, Measure)>,
    /// The mount's `page_pool:` status line after the reads.
    pub status: String,
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct PoolReport {
    /// The configuration.
    pub config: PoolConfig,
    /// Bytes the store's data file holds (compressed).
    pub stored: u64,
    /// The cases, in the order run.
    pub cases: Vec<Case>,
}

fn io(what: impl Into<String>, e: std::io::Error) -> BenchError {
    BenchError::io(what, e)
}

fn progress(msg: &str) {
    eprintln!("bench pool: {msg}");
}

/// A small deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Text that compresses about 3:1 with zstd:1 (words drawn at random, numbers among them).
fn text(rng: &mut Rng, len: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "extent ",
        "btrfs ",
        "page ",
        "pool ",
        "erofs ",
        "decompress ",
        "inode\n",
        "wring ",
        "cgroup ",
        "memory ",
        "reclaim ",
        "lz4 ",
        "zstd ",
        "the ",
        "of ",
        "and ",
    ];
    let mut v = Vec::with_capacity(len + 32);
    while v.len() < len {
        let r = rng.next();
        v.extend_from_slice(WORDS[(r % 16) as usize].as_bytes());
        if r.is_multiple_of(7) {
            let _ = write!(FmtVec(&mut v), "{} ", (r >> 40) % 100_000);
        }
    }
    v.truncate(len);
    v
}

/// `write!` into a byte vector.
struct FmtVec<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for FmtVec<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// A background mount, unmounted on drop.
struct Mount {
    mnt: PathBuf,
    pid: u32,
}

impl Mount {
    fn start(cfg: &PoolConfig, dir: &Path, mnt: &Path, opts: &str) -> Result<Mount, BenchError> {
        let (exe, args) = cfg.launcher.args(dir, mnt, opts);
        let pid =
            daemon::mount_background(&exe, &args).map_err(|source| BenchError::WringMount {
                what: format!("mounting {} with -o {opts}", dir.display()),
                source,
            })?;
        Ok(Mount {
            mnt: mnt.to_path_buf(),
            pid,
        })
    }

    fn status(&self) -> String {
        daemon::get_xattr(&self.mnt, wring_fs::STATUS_XATTR)
            .map(|t| String::from_utf8_lossy(&t).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = daemon::umount(&self.mnt) {
            progress(&format!("unmounting {}: {e}", self.mnt.display()));
        }
    }
}

/// The memory cgroup with its limit; the daemon is started from inside it (this process
/// steps in for the mount and out again), so everything the daemon allocates — the page pool
/// too — is charged to it. The hog joins it; killed on drop.
struct Pressure {
    hog: Option<libc::pid_t>,
}

fn cgroup_write(file: &Path, value: &str) -> Result<(), BenchError> {
    std::fs::write(file, value).map_err(|e| io(format!("writing {value} to {}", file.display()), e))
}

impl Pressure {
    /// Make the cgroup with `limit` and move this process into it.
    fn enter(limit: u64) -> Result<Pressure, BenchError> {
        let dir = Path::new(CGROUP);
        if !dir.exists() {
            std::fs::create_dir(dir).map_err(|e| {
                io(
                    format!("creating {CGROUP} (needs the v1 memory controller)"),
                    e,
                )
            })?;
        }
        cgroup_write(&dir.join("memory.limit_in_bytes"), &limit.to_string())?;
        cgroup_write(&dir.join("cgroup.procs"), &std::process::id().to_string())?;
        Ok(Pressure { hog: None })
    }

    /// Step this process back out (the daemon stays) and start the hog inside.
    fn leave_and_hog(&mut self, hog: u64) -> Result<(), BenchError> {
        let root = Path::new(CGROUP).with_file_name("cgroup.procs");
        cgroup_write(&root, &std::process::id().to_string())?;
        let pid = spawn_hog(hog)?;
        self.hog = Some(pid);
        cgroup_write(&Path::new(CGROUP).join("cgroup.procs"), &pid.to_string())
    }
}

impl Drop for Pressure {
    fn drop(&mut self) {
        let root = Path::new(CGROUP).with_file_name("cgroup.procs");
        let _ = std::fs::write(root, std::process::id().to_string());
        if let Some(hog) = self.hog {
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(hog, libc::SIGKILL);
                libc::waitpid(hog, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Remove the cgroup once its daemon has exited.
fn remove_cgroup() {
    for _ in 0..50 {
        match std::fs::remove_dir(CGROUP) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    progress(&format!("could not remove {CGROUP}; rmdir it by hand"));
}

/// Fork a child that maps `bytes`, touches every page, unmaps, and starts over, until killed
/// (or its parent dies).
fn spawn_hog(bytes: u64) -> Result<libc::pid_t, BenchError> {
    let len = usize::try_from(bytes).unwrap_or(usize::MAX);
    // SAFETY: the child only makes raw system calls (no allocation, no locks), as a child of
    // a multithreaded parent must.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io(
            "forking the memory hog",
            std::io::Error::last_os_error(),
        ));
    }
    if pid == 0 {
        // SAFETY: raw calls on memory this child maps itself; it never returns.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            loop {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p == libc::MAP_FAILED {
                    libc::usleep(1000);
                    continue;
                }
                let base = p.cast::<u8>();
                let mut at = 0;
                while at < len {
                    std::ptr::write_volatile(base.add(at), 1);
                    at += 4096;
                }
                libc::munmap(p, len);
            }
        }
    }
    Ok(pid)
}

/// (minor, major) faults of `pid` from /proc/PID/stat.
fn faults(pid: u32) -> (u64, u64) {
    let f = crate::machine::proc_stat(pid);
    (
        f.get(7).copied().unwrap_or(0),
        f.get(9).copied().unwrap_or(0),
    )
}

fn drop_caches() -> Result<(), BenchError> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| io("dropping caches", e))
}

/// Write the files through a fresh mount, then make them durable.
fn populate(cfg: &PoolConfig, dir: &Path, mnt: &Path) -> Result<u64, BenchError> {
    let m = Mount::start(cfg, dir, mnt, &format!("compress-force={}", cfg.method))?;
    let per = cfg.bytes / cfg.files.max(1) as u64 / EXTENT * EXTENT;
    let mut rng = Rng(0x9001);
    for i in 0..cfg.files {
        let path = mnt.join(format!("f{i}"));
        let f = File::create(&path).map_err(|e| io(format!("creating {}", path.display()), e))?;
        let mut at = 0;
        while at < per {
            let n = (per - at).min(8 << 20);
            let chunk = text(&mut rng, n as usize);
            f.write_all_at(&chunk, at)
                .map_err(|e| io(format!("writing {}", path.display()), e))?;
            at += n;
        }
    }
    let root = File::open(mnt).map_err(|e| io("opening the mount", e))?;
    // SAFETY: syncfs on an open descriptor.
    unsafe { libc::syncfs(root.as_raw_fd()) };
    daemon::get_xattr(mnt, SYNC_XATTR).map_err(|source| BenchError::Fs {
        what: "committing the files".into(),
        source,
    })?;
    drop(root);
    drop(m);
    let data = std::fs::read_dir(dir)
        .map_err(|e| io("listing the store", e))?
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0);
    Ok(data)
}

/// `n` random `size`-aligned reads of `size` bytes over the files, each timed; the range is
/// dropped from the page cache afterwards so the next read of it reaches the daemon.
fn reads(cfg: &PoolConfig, mnt: &Path, size: usize, pid: u32) -> Result<Measure, BenchError> {
    let per = cfg.bytes / cfg.files.max(1) as u64 / EXTENT * EXTENT;
    let mut files = Vec::new();
    for i in 0..cfg.files {
        let path = mnt.join(format!("f{i}"));
        let f = File::open(&path).map_err(|e| io(format!("opening {}", path.display()), e))?;
        // SAFETY: an advice call on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        files.push(f);
    }
    let slots = per / size as u64;
    let mut rng = Rng(0x5eed ^ size as u64);
    let mut buf = vec![0u8; size];
    let mut times = Vec::with_capacity(cfg.reads);
    let before = faults(pid);
    for _ in 0..cfg.reads {
        let r = rng.next();
        let f = &files[(r % files.len() as u64) as usize];
        let off = (r >> 16) % slots.max(1) * size as u64;
        let t = Instant::now();
        f.read_exact_at(&mut buf, off)
            .map_err(|e| io(format!("reading {size} bytes at {off}"), e))?;
        times.push(t.elapsed());
        // SAFETY: an advice call on an open descriptor.
        unsafe {
            libc::posix_fadvise(
                f.as_raw_fd(),
                off as i64,
                size as i64,
                libc::POSIX_FADV_DONTNEED,
            )
        };
    }
    let after = faults(pid);
    let total: Duration = times.iter().sum();
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    Ok(Measure {
        p50: pct(0.50),
        p99: pct(0.99),
        p999: pct(0.999),
        mbs: (cfg.reads * size) as f64 / 1e6 / total.as_secs_f64().max(1e-9),
        minflt: after.0.saturating_sub(before.0),
        majflt: after.1.saturating_sub(before.1),
    })
}

/// One case on a fresh daemon with cold caches.
fn case(
    cfg: &PoolConfig,
    dir: &Path,
    mnt: &Path,
    pool: usize,
    pressure: bool,
) -> Result<Case, BenchError> {
    progress(&format!(
        "page_pool={pool}, {}",
        if pressure {
            "under pressure"
        } else {
            "no pressure"
        }
    ));
    drop_caches()?;
    let opts = format!("compress-force={},page_pool={pool}", cfg.method);
    let mut p = match pressure {
        true => Some(Pressure::enter(cfg.limit)?),
        false => None,
    };
    let m = Mount::start(cfg, dir, mnt, &opts);
    if let Some(p) = &mut p {
        p.leave_and_hog(cfg.hog)?;
    }
    let m = m?;
    let mut sizes = Vec::new();
    for size in [4096, EXTENT as usize] {
        sizes.push((size, reads(cfg, mnt, size, m.pid)?));
    }
    let status = m
        .status()
        .lines()
        .find(|l| l.starts_with("page_pool:"))
        .unwrap_or("")
        .to_string();
    drop(p);
    drop(m);
    if pressure {
        remove_cgroup();
    }
    Ok(Case {
        pool,
        pressure,
        sizes,
        status,
    })
}

/// Run every case.
pub fn run(cfg: &PoolConfig) -> Result<PoolReport, BenchError> {
    require_root(
        "wring bench pool",
        "it mounts, drops caches and makes a memory cgroup",
    )?;
    let dir = cfg.work.join("store");
    let mnt = cfg.work.join("mnt");
    let _ = std::fs::remove_dir_all(&cfg.work);
    std::fs::create_dir_all(&mnt).map_err(|e| io("creating the work directory", e))?;
    Store::mkfs(&dir).map_err(|source| BenchError::Fs {
        what: "making the store".into(),
        source,
    })?;
    progress(&format!(
        "writing {} MB in {} files",
        cfg.bytes / 1_000_000,
        cfg.files
    ));
    let stored = populate(cfg, &dir, &mnt)?;
    let mut cases = Vec::new();
    for (pool, pressure) in [
        (0, false),
        (cfg.pool_pages, false),
        (0, true),
        (cfg.pool_pages, true),
    ] {
        cases.push(case(cfg, &dir, &mnt, pool, pressure)?);
    }
    Ok(PoolReport {
        config: cfg.clone(),
        stored,
        cases,
    })
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

impl PoolReport {
    /// The table, then pool-on / pool-off ratios per read size, without and with pressure.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut s = format!(
            "bench pool: {} MB in {} files ({} stored), {}, {} reads per size; pressure = \
             cgroup limit {} MB with a {} MB hog; pool on = {} pages\n\n",
            c.bytes / 1_000_000,
            c.files,
            self.stored / 1_000_000,
            c.method,
            c.reads,
            c.limit / 1_000_000,
            c.hog / 1_000_000,
            c.pool_pages
        );
        s += "| pool | pressure | read | p50 ms | p99 ms | p99.9 ms | MB/s | minflt | majflt |\n";
        s += "|---|---|---|---|---|---|---|---|---|\n";
        for case in &self.cases {
            for (size, m) in &case.sizes {
                let _ = writeln!(
                    s,
                    "| {} | {} | {}K | {} | {} | {} | {:.1} | {} | {} |",
                    case.pool,
                    if case.pressure { "yes" } else { "no" },
                    size / 1024,
                    ms(m.p50),
                    ms(m.p99),
                    ms(m.p999),
                    m.mbs,
                    m.minflt,
                    m.majflt
                );
            }
        }
        s += "\npool on / pool off (below 1 is better for latency, above 1 for MB/s):\n\n";
        s += "| pressure | read | p50 | p99 | p99.9 | MB/s | minflt |\n|---|---|---|---|---|---|---|\n";
        for pressure in [false, true] {
            let find = |on: bool| {
                self.cases
                    .iter()
                    .find(|k| k.pressure == pressure && (k.pool > 0) == on)
            };
            let (Some(off), Some(on)) = (find(false), find(true)) else {
                continue;
            };
            for ((size, a), (_, b)) in off.sizes.iter().zip(&on.sizes) {
                let r = |x: Duration, y: Duration| y.as_secs_f64() / x.as_secs_f64().max(1e-12);
                let _ = writeln!(
                    s,
                    "| {} | {}K | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    if pressure { "yes" } else { "no" },
                    size / 1024,
                    r(a.p50, b.p50),
                    r(a.p99, b.p99),
                    r(a.p999, b.p999),
                    b.mbs / a.mbs.max(1e-9),
                    b.minflt as f64 / (a.minflt as f64).max(1.0)
                );
            }
        }
        s += "\npool status after each case:\n";
        for case in &self.cases {
            let _ = writeln!(
                s,
                "  page_pool={} pressure={}: {}",
                case.pool, case.pressure, case.status
            );
        }
        s
    }
}
