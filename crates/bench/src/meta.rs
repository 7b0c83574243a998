//! `wring bench meta`: many small files, the way a new user meets a filesystem — unpack a
//! source tree, list and stat it, copy it, (clone a git repository and ask its status), delete
//! it, each step followed by a sync — on the kernel's btrfs ([`KernelFs`], a loop image), on a
//! wring mount (started as `wring mount` starts it, [`Launcher`]) and on two FUSE floors: when
//! `bindfs` is installed, a plain FUSE pass-through over the work directory, and, when libfuse's
//! optimized example `passthrough_hp` is there (`scripts/passthrough-hp.sh` builds it from
//! Debian's fuse3 source), that server over a kernel btrfs with the same `compress-force=`: the
//! same round trips the kernel's FUSE client makes for wring, with a kernel filesystem behind
//! them — what FUSE itself costs, so what wring spends beyond it is its own. Printed as seconds
//! and ratios.
//!
//! The tree is a tar of directories every machine has (`/usr/share/doc`, `/usr/include` by
//! default), made with `--sort=name` so the same machine always unpacks the same entries in
//! the same order. For wring the mount's own counters (`wring status`: FUSE requests by
//! opcode, store transactions, commit time, writeback waits) are read before and after each
//! step and shown per tree entry: where the time per file goes.
//!
//! Mirrors no kernel file; fs.rs's sibling for metadata.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use serde::Serialize;
use wring_engine::CompressSpec;
use wring_fs::PID_XATTR;

use crate::fs::{drop_caches, quote, sh, wring_sync, Launcher, WringMount};
use crate::kernel::{require_root, KernelFs};
use crate::BenchError;

/// What to run.
#[derive(Debug, Clone)]
pub struct MetaConfig {
    /// Directories tarred into the tree (absolute paths).
    pub sources: Vec<PathBuf>,
    /// Fewest entries the tree must have.
    pub min_entries: usize,
    /// Compression, btrfs's spelling (`zstd:1`): `compress-force=` on both filesystems.
    pub method: String,
    /// How to start wring's daemon.
    pub launcher: Launcher,
    /// More mount options for wring (`uring=0`, `threads=2`); empty for none.
    pub wring_options: String,
    /// Scratch directory (the tar, the store, bindfs's backing directory).
    pub work: PathBuf,
    /// A git repository to clone (and `git status`, then a checkout a hundred commits back and
    /// `git gc`, in the clone); none: no git steps.
    pub git: Option<PathBuf>,
    /// Run the plain FUSE pass-through (bindfs) when it is installed.
    pub bindfs: bool,
    /// libfuse's `passthrough_hp`, run over a kernel btrfs (the FUSE floor); none: not run.
    pub passthrough_hp: Option<PathBuf>,
    /// Why there is no `passthrough_hp` (the report says so).
    pub floor_missing: String,
    /// Seconds per stress-ng stressor ([`STRESSORS`]) on each filesystem when stress-ng is
    /// installed; 0: none.
    pub stress_secs: u32,
    /// Numbers of small files for the cost-per-file curve (each made fresh: open, write 100
    /// bytes, close, 1,000 to a directory, then a sync); empty: no curve.
    pub curve: Vec<usize>,
}

/// One point of the cost-per-file curve.
#[derive(Debug, Clone, Serialize)]
pub struct CurveRow {
    /// Files made.
    pub files: usize,
    /// Microseconds per file on the kernel's btrfs.
    pub kernel_us: f64,
    /// Microseconds per file on wring.
    pub wring_us: f64,
    /// The daemon's resident memory after making them, bytes.
    pub wring_rss: u64,
}

/// The stress-ng stressors run on each filesystem: directories, hard links, renames, xattrs.
pub const STRESSORS: [&str; 4] = ["dir", "link", "rename", "xattr"];

/// One stress-ng stressor on every filesystem: bogo operations per second (real time).
#[derive(Debug, Clone, Serialize)]
pub struct StressRow {
    /// The stressor.
    pub stressor: String,
    /// On the kernel's btrfs.
    pub kernel: f64,
    /// On wring.
    pub wring: f64,
    /// On bindfs, when it ran.
    pub bindfs: Option<f64>,
}

/// One step on every filesystem.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    /// `tar -x`, `find + stat`, …
    pub step: String,
    /// Seconds on the kernel's btrfs.
    pub kernel_s: f64,
    /// Seconds on wring.
    pub wring_s: f64,
    /// Seconds on bindfs, when it ran.
    pub bindfs_s: Option<f64>,
    /// Seconds on passthrough_hp over a kernel btrfs, when it ran.
    pub floor_s: Option<f64>,
    /// wring's counters during the step, per tree entry (FUSE requests by opcode, store
    /// transactions), and `commit_ms`/`writeback_wait_ms` in total.
    pub wring_counters: BTreeMap<String, f64>,
    /// The daemon's resident memory after the step, bytes.
    pub wring_rss: u64,
}

impl StepRow {
    /// wring / kernel.
    pub fn vs_kernel(&self) -> f64 {
        self.wring_s / self.kernel_s.max(1e-9)
    }

    /// wring / bindfs.
    pub fn vs_bindfs(&self) -> Option<f64> {
        self.bindfs_s.map(|b| self.wring_s / b.max(1e-9))
    }

    /// wring / passthrough_hp (the FUSE floor).
    pub fn vs_floor(&self) -> Option<f64> {
        self.floor_s.map(|b| self.wring_s / b.max(1e-9))
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct MetaReport {
    /// Entries in the tree (files, directories, links).
    pub entries: usize,
    /// Bytes of the tar.
    pub tar_bytes: u64,
    /// What was tarred.
    pub sources: Vec<PathBuf>,
    /// `compress-force=…` on both.
    pub options: String,
    /// Whether bindfs ran.
    pub bindfs: bool,
    /// The passthrough_hp that ran as the floor, or why none did.
    pub floor: Result<PathBuf, String>,
    /// How wring's mount was served, as its status says (`io_uring (uring=auto)`, `/dev/fuse
    /// (uring=0)`): passthrough_hp 3.14 serves /dev/fuse only.
    pub wring_transport: String,
    /// One row per step.
    pub rows: Vec<StepRow>,
    /// One row per stress-ng stressor (none when stress-ng is not installed).
    pub stress: Vec<StressRow>,
    /// The cost-per-file curve.
    pub curve: Vec<CurveRow>,
}

/// A step: its name, the shell command on a filesystem rooted at the argument, and whether
/// a sync follows it.
struct Step {
    name: &'static str,
    sync: bool,
    cmd: Box<dyn Fn(&Path) -> String>,
}

fn steps(tar: &Path, git: Option<&Path>) -> Vec<Step> {
    let tar = quote(tar);
    let mut s = vec![
        Step {
            name: "tar -x",
            sync: true,
            cmd: Box::new(move |r| format!("mkdir {0}/a && tar -xf {tar} -C {0}/a", quote(r))),
        },
        Step {
            name: "find + stat",
            sync: false,
            cmd: Box::new(|r| {
                format!(
                    "find {}/a -type f -printf '%s %m %T@\\n' > /dev/null",
                    quote(r)
                )
            }),
        },
        Step {
            name: "cp -a",
            sync: true,
            cmd: Box::new(|r| format!("cp -a {0}/a {0}/b", quote(r))),
        },
    ];
    if let Some(repo) = git {
        let repo = quote(repo);
        s.push(Step {
            name: "git clone",
            sync: true,
            cmd: Box::new(move |r| format!("git clone -q --no-hardlinks {repo} {}/g", quote(r))),
        });
        s.push(Step {
            name: "git status",
            sync: false,
            cmd: Box::new(|r| format!("git -C {}/g status --porcelain > /dev/null", quote(r))),
        });
        s.push(Step {
            name: "git checkout + gc",
            sync: true,
            cmd: Box::new(|r| {
                // A hundred commits back (the first commit of a shorter history), then gc:
                // many files rewritten, then loose objects packed and removed.
                let g = format!("{}/g", quote(r));
                format!(
                    "c=$(git -C {g} rev-list --max-count=1 --skip=100 HEAD); \
                     [ -n \"$c\" ] || c=$(git -C {g} rev-list --max-parents=0 HEAD | head -n 1); \
                     git -C {g} checkout -q --detach \"$c\" && git -C {g} gc -q"
                )
            }),
        });
    }
    s.push(Step {
        name: "rm -rf",
        sync: true,
        cmd: Box::new(|r| format!("rm -rf {0}/a {0}/b {0}/g", quote(r))),
    });
    s
}

fn progress(msg: &str) {
    eprintln!("bench meta: {msg}");
}

/// The tree's tar in `work`, sorted by name; returns (path, entries, bytes).
fn make_tar(cfg: &MetaConfig) -> Result<(PathBuf, usize, u64), BenchError> {
    let tar = cfg.work.join("tree.tar");
    let rel: Vec<String> = cfg
        .sources
        .iter()
        .map(|p| quote(p.strip_prefix("/").unwrap_or(p)))
        .collect();
    sh(&format!(
        "tar --sort=name --format=gnu -cf {} -C / {} 2>/dev/null || test -s {0}",
        quote(&tar),
        rel.join(" ")
    ))?;
    let list = Command::new("tar")
        .arg("-tf")
        .arg(&tar)
        .output()
        .map_err(|e| BenchError::io("running tar -tf", e))?;
    let entries = list.stdout.iter().filter(|&&b| b == b'\n').count();
    let bytes = std::fs::metadata(&tar)
        .map_err(|e| BenchError::io(format!("reading {}", tar.display()), e))?
        .len();
    if entries < cfg.min_entries {
        return Err(BenchError::Spec(format!(
            "the tree of {} has {entries} entries, fewer than the {} asked for; add \
             directories with --source",
            rel.join(" "),
            cfg.min_entries
        )));
    }
    Ok((tar, entries, bytes))
}

/// Run `steps` on the filesystem at `root`, syncing with `sync`; `each` sees every step's
/// result. Returns seconds per step.
fn run_steps(
    label: &str,
    root: &Path,
    tar: &Path,
    steps: &[Step],
    sync: &dyn Fn() -> Result<(), BenchError>,
    each: &mut dyn FnMut(usize) -> Result<(), BenchError>,
) -> Result<Vec<f64>, BenchError> {
    // The tar in the page cache, the dirty pages of whatever ran before written out.
    sh(&format!("cat {} > /dev/null", quote(tar)))?;
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    let mut secs = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        crate::interrupt::check()?;
        progress(&format!("{label}: {}", s.name));
        let t = Instant::now();
        sh(&(s.cmd)(root))?;
        if s.sync {
            sync()?;
        }
        secs.push(t.elapsed().as_secs_f64());
        each(i)?;
    }
    Ok(secs)
}

/// Whether `stress-ng` is on the PATH.
pub fn stress_ng_installed() -> bool {
    Command::new("stress-ng")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Each of [`STRESSORS`] for `secs` seconds, one instance, in a directory under `root`:
/// bogo operations per second (real time), from stress-ng's YAML report.
fn stress(label: &str, root: &Path, secs: u32) -> Result<Vec<f64>, BenchError> {
    let dir = root.join("stress");
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    let yaml = std::env::temp_dir().join(format!("wring-bench-meta-{}.yaml", std::process::id()));
    let mut out = Vec::new();
    for s in STRESSORS {
        crate::interrupt::check()?;
        progress(&format!("{label}: stress-ng --{s} for {secs} s"));
        let _ = std::fs::remove_file(&yaml);
        let run = sh(&format!(
            "cd {d} && stress-ng --{s} 1 --timeout {secs} --metrics-brief --temp-path {d} --yaml {y} > /dev/null 2>&1",
            d = quote(&dir),
            y = quote(&yaml)
        ));
        // A stressor the filesystem fails counts as no operations; the others still run.
        let ops = match run {
            Ok(()) => std::fs::read_to_string(&yaml)
                .ok()
                .and_then(|t| ops_per_second(&t)),
            Err(e) => {
                progress(&format!("{label}: stress-ng --{s} failed: {e}"));
                None
            }
        };
        out.push(ops.unwrap_or(0.0));
    }
    let _ = std::fs::remove_file(&yaml);
    sh(&format!("rm -rf {}", quote(&dir)))?;
    Ok(out)
}

/// `bogo-ops-per-second-real-time` of stress-ng's YAML report.
fn ops_per_second(yaml: &str) -> Option<f64> {
    yaml.lines()
        .find_map(|l| l.trim().strip_prefix("bogo-ops-per-second-real-time:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Seconds to make each of `cfg.curve`'s numbers of small files under `root` (fresh each
/// time, removed afterwards, untimed), with `each` called after each point.
fn curve(
    cfg: &MetaConfig,
    label: &str,
    root: &Path,
    sync: &dyn Fn() -> Result<(), BenchError>,
    each: &mut dyn FnMut() -> u64,
) -> Result<Vec<(f64, u64)>, BenchError> {
    let mut out = Vec::new();
    let body = [b'x'; 100];
    for &n in &cfg.curve {
        crate::interrupt::check()?;
        progress(&format!("{label}: {n} small files"));
        let top = root.join(format!("curve-{n}"));
        let t = Instant::now();
        for i in 0..n {
            let dir = top.join(format!("d{}", i / 1000));
            if i % 1000 == 0 {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
            }
            let f = dir.join(format!("f{i}"));
            std::fs::write(&f, body)
                .map_err(|e| BenchError::io(format!("writing {}", f.display()), e))?;
        }
        sync()?;
        let secs = t.elapsed().as_secs_f64();
        out.push((secs, each()));
        sh(&format!("rm -rf {}", quote(&top)))?;
        sync()?;
    }
    Ok(out)
}

/// [`stress`] when asked for and stress-ng is installed, else nothing.
fn stress_if(cfg: &MetaConfig, label: &str, root: &Path) -> Result<Vec<f64>, BenchError> {
    match cfg.stress_secs > 0 && stress_ng_installed() {
        true => stress(label, root, cfg.stress_secs),
        false => Ok(Vec::new()),
    }
}

/// `sync -f` of the filesystem holding `path`.
fn syncfs(path: &Path) -> Result<(), BenchError> {
    let f =
        File::open(path).map_err(|e| BenchError::io(format!("opening {}", path.display()), e))?;
    // SAFETY: syncfs on an open descriptor.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(BenchError::io(
            format!("syncfs {}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn kernel_steps(cfg: &MetaConfig, tar: &Path, steps: &[Step]) -> Result<KernelSteps, BenchError> {
    let spec: CompressSpec = cfg
        .method
        .parse()
        .map_err(|e| BenchError::Spec(format!("{}: {e}", cfg.method)))?;
    let fs = KernelFs::mount(spec, 4 << 30)?;
    let label = format!("btrfs {}", fs.options());
    let secs = run_steps(
        &label,
        fs.path(),
        tar,
        steps,
        &|| fs.sync(),
        &mut |_| Ok(()),
    )?;
    let stressed = stress_if(cfg, &label, fs.path())?;
    let points = curve(cfg, &label, fs.path(), &|| fs.sync(), &mut || 0)?;
    Ok((fs.options().to_string(), secs, stressed, points))
}

/// The mount's counters: `name=value` of the `fuse:`, `transactions:` and `writeback_waits:`
/// lines of its status.
fn counters(mnt: &Path) -> Result<BTreeMap<String, f64>, BenchError> {
    let text = crate::fs::status_text(mnt)?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((head, rest)) = line.split_once(": ") else {
            continue;
        };
        let prefix = match head {
            "fuse" => "",
            "fuse_ms" => "ms_",
            "transactions" => "txn_",
            "writeback_waits" => "writeback_wait_",
            _ => continue,
        };
        for (k, v) in rest.split_whitespace().filter_map(|kv| kv.split_once('=')) {
            if let Ok(v) = v.parse::<f64>() {
                out.insert(format!("{prefix}{k}"), v);
            }
        }
    }
    Ok(out)
}

/// The transport the mount's status names (`transport:` line).
fn transport(mnt: &Path) -> Result<String, BenchError> {
    let text = crate::fs::status_text(mnt)?;
    let found = text.lines().find_map(|l| l.strip_prefix("transport: "));
    Ok(found.unwrap_or("an unknown transport").to_string())
}

/// What changed between two readings, per entry (times in total).
fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    entries: usize,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            let total = k.ends_with("_ms") || k.starts_with("ms_");
            (d > 0.0).then(|| (k.clone(), if total { d } else { d / entries as f64 }))
        })
        .collect()
}

/// Resident bytes of process `pid`.
fn rss(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim()));
    status
        .ok()
        .and_then(|s| {
            let l = s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
            l.split_whitespace().next()?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Seconds, counters and memory per step on wring, the stressors' operations per second, and
/// the curve's (seconds, resident bytes).
type WringSteps = (
    Vec<f64>,
    Vec<BTreeMap<String, f64>>,
    Vec<u64>,
    Vec<f64>,
    Vec<(f64, u64)>,
    String,
);

/// The options, seconds per step, the stressors' operations per second and the curve's
/// (seconds, 0) on the kernel's btrfs.
type KernelSteps = (String, Vec<f64>, Vec<f64>, Vec<(f64, u64)>);

fn wring_steps(
    cfg: &MetaConfig,
    tar: &Path,
    steps: &[Step],
    entries: usize,
) -> Result<WringSteps, BenchError> {
    let base = cfg.work.join("wring");
    let (store, mnt) = crate::fs::fresh_store(&base)?;
    let mut opts = format!("compress-force={}", cfg.method);
    if !cfg.wring_options.is_empty() {
        opts = format!("{opts},{}", cfg.wring_options);
    }
    let m = WringMount::mount(&cfg.launcher, &store, &mnt, &opts)?;
    let pid = wring_fs::daemon::get_xattr(&mnt, PID_XATTR)
        .map(|p| String::from_utf8_lossy(&p).into_owned())
        .unwrap_or_default();
    let mut last = counters(&mnt)?;
    let transport = transport(&mnt)?;
    let (mut per, mut mem) = (Vec::new(), Vec::new());
    let secs = run_steps(
        &format!("wring {opts}"),
        &mnt,
        tar,
        steps,
        &|| wring_sync(&mnt),
        &mut |_| {
            let now = counters(&mnt)?;
            per.push(delta(&last, &now, entries));
            mem.push(rss(&pid));
            last = now;
            Ok(())
        },
    )?;
    let stressed = stress_if(cfg, &format!("wring {opts}"), &mnt)?;
    let points = curve(
        cfg,
        &format!("wring {opts}"),
        &mnt,
        &|| wring_sync(&mnt),
        &mut || rss(&pid),
    )?;
    m.umount()?;
    let _ = std::fs::remove_dir_all(&base);
    Ok((secs, per, mem, stressed, points, transport))
}

/// A FUSE pass-through (bindfs, passthrough_hp) in the foreground as a child; unmounted and
/// waited for when dropped.
struct Passthrough {
    mnt: PathBuf,
    child: Option<Child>,
}

impl Drop for Passthrough {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.mnt)
            .status();
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

/// Whether `bindfs` is on the PATH.
pub fn bindfs_installed() -> bool {
    Command::new("bindfs")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn bindfs_steps(
    cfg: &MetaConfig,
    tar: &Path,
    steps: &[Step],
) -> Result<(Vec<f64>, Vec<f64>), BenchError> {
    let base = cfg.work.join("bindfs");
    let (src, mnt) = (base.join("src"), base.join("mnt"));
    for d in [&src, &mnt] {
        std::fs::create_dir_all(d)
            .map_err(|e| BenchError::io(format!("creating {}", d.display()), e))?;
    }
    let guard = Passthrough::start(Command::new("env"), Path::new("bindfs"), "-f", &src, &mnt)?;
    let secs = run_steps(
        "bindfs",
        &mnt,
        tar,
        steps,
        &|| syncfs(&mnt),
        &mut |_| Ok(()),
    )?;
    let stressed = stress_if(cfg, "bindfs", &mnt)?;
    drop(guard);
    let _ = std::fs::remove_dir_all(&base);
    Ok((secs, stressed))
}

impl Passthrough {
    /// `program FOREGROUND src mnt` (run by `launch`), in the foreground as a child (so the
    /// guard can wait for it after unmounting), once `mnt` is mounted.
    fn start(
        mut launch: Command,
        program: &Path,
        foreground: &str,
        src: &Path,
        mnt: &Path,
    ) -> Result<Passthrough, BenchError> {
        let name = program.display().to_string();
        let child = launch
            .arg(program)
            .arg(foreground)
            .arg(src)
            .arg(mnt)
            .spawn()
            .map_err(|e| BenchError::io(format!("starting {name}"), e))?;
        let guard = Passthrough {
            mnt: mnt.to_path_buf(),
            child: Some(child),
        };
        wait_mounted(&name, mnt)?;
        Ok(guard)
    }
}

/// The floor: passthrough_hp serving a directory of a kernel btrfs with the method's
/// `compress-force=`; each step's sync is the FUSE mount's syncfs (the kernel's writeback of
/// FUSE's cache) and then the btrfs's, so the data is on the btrfs as wring's durable commit
/// puts it in the store.
fn floor_steps(
    cfg: &MetaConfig,
    program: &Path,
    tar: &Path,
    steps: &[Step],
) -> Result<Vec<f64>, BenchError> {
    let spec: CompressSpec = cfg
        .method
        .parse()
        .map_err(|e| BenchError::Spec(format!("{}: {e}", cfg.method)))?;
    let fs = KernelFs::mount(spec, 4 << 30)?;
    let src = fs.path().join("src");
    let mnt = cfg.work.join("passthrough_hp");
    for d in [&src, &mnt] {
        std::fs::create_dir_all(d)
            .map_err(|e| BenchError::io(format!("creating {}", d.display()), e))?;
    }
    // passthrough_hp holds an O_PATH descriptor for every inode the kernel knows: a tree of
    // ten thousand entries needs more than the default 1,024 open files (the hard limit).
    let mut launch = Command::new("sh");
    launch.args(["-c", "ulimit -n \"$(ulimit -Hn)\" && exec \"$0\" \"$@\""]);
    let guard = Passthrough::start(launch, program, "--foreground", &src, &mnt)?;
    let label = format!("passthrough_hp over btrfs {}", fs.options());
    let secs = run_steps(
        &label,
        &mnt,
        tar,
        steps,
        &|| {
            syncfs(&mnt)?;
            fs.sync()
        },
        &mut |_| Ok(()),
    )?;
    drop(guard);
    let _ = std::fs::remove_dir(&mnt);
    Ok(secs)
}

/// Whether passthrough_hp can serve the steps: it holds an O_PATH descriptor for every inode
/// the kernel knows, and the kernel forgets none without memory pressure, so the steps need
/// the tree twice (tar -x, cp -a) and the clone's files in open files, under the hard limit
/// (which root cannot raise without CAP_SYS_RESOURCE: 20,000 on some VMs).
fn floor_fits(entries: usize, git: Option<&Path>) -> Result<(), String> {
    let clone = git.map_or(0, |repo| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .arg("ls-files")
            .output()
            .map_or(0, |o| o.stdout.split(|&b| b == b'\n').count())
    });
    let need = 2 * entries + clone * 5 / 4 + 1024;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit, which `lim` is.
    let hard = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } {
        0 => lim.rlim_max,
        _ => return Ok(()),
    };
    match need as u64 <= hard {
        true => Ok(()),
        false => Err(format!(
            "passthrough_hp holds a descriptor per inode: these steps need about {need} open \
             files ({entries} entries twice, {clone} files cloned), over the hard limit of \
             {hard}; a smaller tree fits (e.g. --source /usr/include --min-entries 5000 --git none)"
        )),
    }
}

/// Where libfuse's `passthrough_hp` is: `$WRING_PASSTHROUGH_HP`, then `passthrough_hp` on the
/// PATH, then where `scripts/passthrough-hp.sh` puts it (`target/passthrough_hp/` beside the
/// running binary's `target/release/`); or why there is none.
pub fn find_passthrough_hp() -> Result<PathBuf, String> {
    let runs = |p: &Path| {
        Command::new(p)
            .arg("--help")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--foreground"))
    };
    if let Some(p) = std::env::var_os("WRING_PASSTHROUGH_HP") {
        let p = PathBuf::from(p);
        return match runs(&p) {
            true => Ok(p),
            false => Err(format!(
                "WRING_PASSTHROUGH_HP={} is not libfuse's passthrough_hp",
                p.display()
            )),
        };
    }
    let mut tried = vec![PathBuf::from("passthrough_hp")];
    if let Ok(exe) = std::env::current_exe() {
        if let Some(target) = exe.parent().and_then(Path::parent) {
            tried.push(target.join("passthrough_hp").join("passthrough_hp"));
        }
    }
    tried.into_iter().find(|p| runs(p)).ok_or_else(|| {
        "libfuse's passthrough_hp was not found (scripts/passthrough-hp.sh builds it from \
         Debian's fuse3 source; or --passthrough-hp PATH)"
            .to_string()
    })
}

/// Wait (up to 10 s) until `mnt` is a mount point.
fn wait_mounted(name: &str, mnt: &Path) -> Result<(), BenchError> {
    let mnt = mnt
        .canonicalize()
        .map_err(|e| BenchError::io(format!("resolving {}", mnt.display()), e))?;
    for _ in 0..1000 {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let target = mnt.display().to_string();
        if mounts
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(target.as_str()))
        {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(BenchError::io(
        format!("{name} did not mount {}", mnt.display()),
        std::io::ErrorKind::TimedOut.into(),
    ))
}

/// Run the whole benchmark.
pub fn run(cfg: &MetaConfig) -> Result<MetaReport, BenchError> {
    require_root(
        "bench meta",
        "FUSE and loop mounts, dropping the page cache",
    )?;
    std::fs::create_dir_all(&cfg.work)
        .map_err(|e| BenchError::io(format!("creating {}", cfg.work.display()), e))?;
    progress("making the tree's tar");
    let (tar, entries, tar_bytes) = make_tar(cfg)?;
    let steps = steps(&tar, cfg.git.as_deref());
    drop_caches()?;
    let (options, kernel, kernel_stress, kernel_curve) = kernel_steps(cfg, &tar, &steps)?;
    let (wring, counters, mem, wring_stress, wring_curve, wring_transport) =
        wring_steps(cfg, &tar, &steps, entries)?;
    let curve = cfg
        .curve
        .iter()
        .zip(kernel_curve.iter().zip(&wring_curve))
        .map(|(&n, (k, w))| CurveRow {
            files: n,
            kernel_us: k.0 * 1e6 / n.max(1) as f64,
            wring_us: w.0 * 1e6 / n.max(1) as f64,
            wring_rss: w.1,
        })
        .collect();
    let (bindfs, bindfs_stress) = match cfg.bindfs && bindfs_installed() {
        true => {
            let (b, s) = bindfs_steps(cfg, &tar, &steps)?;
            (Some(b), Some(s))
        }
        false => (None, None),
    };
    let floor_ran = match &cfg.passthrough_hp {
        Some(p) => floor_fits(entries, cfg.git.as_deref()).map(|()| p.clone()),
        None => Err(cfg.floor_missing.clone()),
    };
    let floor = match &floor_ran {
        Ok(p) => {
            progress("passthrough_hp over a kernel btrfs (the FUSE floor)");
            Some(floor_steps(cfg, p, &tar, &steps)?)
        }
        Err(_) => None,
    };
    let stress = STRESSORS
        .iter()
        .zip(kernel_stress.iter().zip(&wring_stress))
        .enumerate()
        .map(|(i, (name, (k, w)))| StressRow {
            stressor: name.to_string(),
            kernel: *k,
            wring: *w,
            bindfs: bindfs_stress.as_ref().and_then(|b| b.get(i).copied()),
        })
        .collect();
    let rows = steps
        .iter()
        .enumerate()
        .map(|(i, s)| StepRow {
            step: s.name.to_string(),
            kernel_s: kernel[i],
            wring_s: wring[i],
            bindfs_s: bindfs.as_ref().map(|b| b[i]),
            floor_s: floor.as_ref().map(|b| b[i]),
            wring_counters: counters[i].clone(),
            wring_rss: mem[i],
        })
        .collect();
    Ok(MetaReport {
        entries,
        tar_bytes,
        sources: cfg.sources.clone(),
        options,
        bindfs: bindfs.is_some(),
        floor: floor_ran,
        wring_transport,
        rows,
        stress,
        curve,
    })
}

impl MetaReport {
    /// The whole report as JSON.
    pub fn json(&self) -> Result<String, BenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// One line per step: step, seconds on each filesystem, ratios.
    pub fn csv(&self) -> Result<String, BenchError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "step",
            "kernel_s",
            "wring_s",
            "bindfs_s",
            "passthrough_hp_s",
            "wring_vs_kernel",
            "wring_vs_bindfs",
            "wring_vs_passthrough_hp",
            "wring_rss",
        ])?;
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        for r in &self.rows {
            w.write_record([
                r.step.clone(),
                format!("{:.4}", r.kernel_s),
                format!("{:.4}", r.wring_s),
                opt(r.bindfs_s),
                opt(r.floor_s),
                format!("{:.3}", r.vs_kernel()),
                opt(r.vs_bindfs()),
                opt(r.vs_floor()),
                r.wring_rss.to_string(),
            ])?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| BenchError::io("writing csv", e.into_error()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The markdown table, then wring's counters per entry.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "wring bench meta: {} entries ({:.0} MB tar of {}), {} on both, each step \
             followed by sync where marked; one run\n\n",
            self.entries,
            self.tar_bytes as f64 / 1e6,
            self.sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            self.options
        );
        s += "| step | kernel btrfs | wring | wring / kernel | passthrough_hp (FUSE floor) | wring / floor | bindfs | wring / bindfs | daemon RSS |\n";
        s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        let secs = |v: Option<f64>| v.map_or("-".into(), |b| format!("{b:.2} s"));
        let times = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}×"));
        for r in &self.rows {
            let (f, rf) = (secs(r.floor_s), times(r.vs_floor()));
            let (b, rb) = (secs(r.bindfs_s), times(r.vs_bindfs()));
            let _ = writeln!(
                s,
                "| {} | {:.2} s | {:.2} s | {:.2}× | {f} | {rf} | {b} | {rb} | {:.0} MB |",
                r.step,
                r.kernel_s,
                r.wring_s,
                r.vs_kernel(),
                r.wring_rss as f64 / 1e6
            );
        }
        s += "\nwring's FUSE requests and store transactions per entry (times: total ms):\n\n";
        for r in &self.rows {
            let fields: Vec<String> = r
                .wring_counters
                .iter()
                .map(|(k, v)| match k.ends_with("_ms") || k.starts_with("ms_") {
                    true => format!("{k}={v:.0}"),
                    false => format!("{k}={v:.2}"),
                })
                .collect();
            let _ = writeln!(s, "- {}: {}", r.step, fields.join(" "));
        }
        if !self.stress.is_empty() {
            s += "\nstress-ng, one instance each, bogo ops/s (real time); kernel / wring is how \
                  many times slower wring is:\n\n";
            s += "| stressor | kernel btrfs | wring | kernel / wring | bindfs | bindfs / wring |\n";
            s += "|---|---:|---:|---:|---:|---:|\n";
            for r in &self.stress {
                let slower = |x: f64| x / r.wring.max(1e-9);
                let b = r.bindfs.map_or("-".into(), |b| format!("{b:.0}"));
                let rb = r
                    .bindfs
                    .map_or("-".into(), |b| format!("{:.2}×", slower(b)));
                let _ = writeln!(
                    s,
                    "| {} | {:.0} | {:.0} | {:.2}× | {b} | {rb} |",
                    r.stressor,
                    r.kernel,
                    r.wring,
                    slower(r.kernel)
                );
            }
        }
        if !self.curve.is_empty() {
            s += "\nCost per file (open, write 100 bytes, close; 1,000 to a directory; then \
                  sync):\n\n";
            s += "| files | kernel btrfs | wring | wring / kernel | daemon RSS |\n";
            s += "|---:|---:|---:|---:|---:|\n";
            for r in &self.curve {
                let _ = writeln!(
                    s,
                    "| {} | {:.0} µs | {:.0} µs | {:.2}× | {:.0} MB |",
                    r.files,
                    r.kernel_us,
                    r.wring_us,
                    r.wring_us / r.kernel_us.max(1e-9),
                    r.wring_rss as f64 / 1e6
                );
            }
        }
        let _ = writeln!(
            s,
            "\nwring's mount was served through {}.",
            self.wring_transport
        );
        match &self.floor {
            Ok(p) if self.wring_transport.starts_with("io_uring") => {
                let _ = writeln!(
                    s,
                    "The floor is {} over /dev/fuse (the 3.14 example has no io_uring): the \
                     transports differ.",
                    p.display()
                );
            }
            Ok(_) => {}
            Err(why) => {
                let _ = writeln!(s, "\n(no passthrough_hp floor: {why})");
            }
        }
        if !self.bindfs {
            s += "\n(no bindfs: it is not installed (`apt-get install bindfs`) or --no-bindfs)\n";
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stress_ng_yaml_gives_real_time_ops() {
        let y = "metrics:\n    - stressor: xattr\n      bogo-ops: 2188\n      \
                 bogo-ops-per-second-real-time: 728.97\n";
        assert_eq!(ops_per_second(y), Some(728.97));
        assert_eq!(ops_per_second("metrics:\n"), None);
    }

    #[test]
    fn counters_are_read_per_entry_and_times_in_total() {
        let before: BTreeMap<String, f64> =
            [("lookup".into(), 10.0), ("txn_commit_ms".into(), 5.0)].into();
        let after: BTreeMap<String, f64> = [
            ("lookup".into(), 30.0),
            ("create".into(), 10.0),
            ("txn_commit_ms".into(), 25.0),
        ]
        .into();
        let d = delta(&before, &after, 10);
        assert_eq!(d["lookup"], 2.0);
        assert_eq!(d["create"], 1.0);
        assert_eq!(d["txn_commit_ms"], 20.0);
    }

    #[test]
    fn the_table_has_a_row_per_step_with_as_many_cells_as_the_header() {
        let r = MetaReport {
            entries: 3,
            tar_bytes: 1000,
            sources: vec!["/usr/include".into()],
            options: "compress-force=zstd:1".into(),
            bindfs: false,
            floor: Ok("/usr/bin/passthrough_hp".into()),
            wring_transport: "/dev/fuse (uring=0)".into(),
            rows: vec![StepRow {
                step: "tar -x".into(),
                kernel_s: 1.0,
                wring_s: 2.0,
                bindfs_s: None,
                floor_s: Some(0.5),
                wring_counters: [("create".into(), 1.0)].into(),
                wring_rss: 0,
            }],
            stress: vec![StressRow {
                stressor: "dir".into(),
                kernel: 100.0,
                wring: 25.0,
                bindfs: None,
            }],
            curve: vec![CurveRow {
                files: 10_000,
                kernel_us: 50.0,
                wring_us: 400.0,
                wring_rss: 40_000_000,
            }],
        };
        let md = r.markdown();
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 9, "{md}");
        assert!(
            md.contains("| 10000 | 50 µs | 400 µs | 8.00× | 40 MB |"),
            "{md}"
        );
        let cells = |l: &str| l.matches('|').count();
        let (rows, stress) = rows.split_at(3);
        let stress = &stress[..3];
        assert!(stress.iter().all(|l| cells(l) == cells(stress[0])), "{md}");
        assert!(md.contains("| dir | 100 | 25 | 4.00× | - | - |"), "{md}");
        assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{md}");
        assert!(md.contains("2.00×"), "{md}");
        assert!(md.contains("| 0.50 s | 4.00× | - | - |"), "{md}");
        assert!(r.csv().unwrap().lines().count() == 2);
    }
}
