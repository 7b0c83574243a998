//! `wring bench dict`: what trained dictionaries (`dict=auto`) save on small files, against
//! the same store without them (`dict=off`) and the kernel's btrfs at the same
//! `compress-force=zstd:L` — bytes stored (wring's stat report, compsize's disk usage), the
//! time of `tar -x` (with the durable commit, and on wring the training and rewrite pass it
//! sets off) and the time of reading every file back from a fresh mount. One tree of small
//! files (files of at most 16 KiB of the sources) and whole trees (every file), each at
//! every level asked for. Needs root (loop-mounted btrfs, FUSE).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use wring_engine::{Algorithm, CompressSpec};

use crate::error::BenchError;
use crate::fs::{fresh_store, quote, sh, wring_sync, wring_usage, Launcher, WringMount};
use crate::kernel::{image_size, usage, KernelFs};
use crate::metrics::median;

/// What to measure.
#[derive(Debug, Clone)]
pub struct DictConfig {
    /// Directories whose files of at most `small` bytes make the small-file tree.
    pub sources: Vec<PathBuf>,
    /// Largest file of the small-file tree.
    pub small: u64,
    /// Directories taken whole, one tree each.
    pub whole: Vec<PathBuf>,
    /// zstd levels.
    pub levels: Vec<i32>,
    /// More mount options for wring, after `compress-force=` and `dict=` (e.g.
    /// `dict_train=256K`).
    pub wring_options: String,
    /// How to start wring.
    pub launcher: Launcher,
    /// Scratch directory.
    pub work: PathBuf,
}

/// One tree at one level.
#[derive(Debug, Clone, Serialize)]
pub struct DictRow {
    /// The tree (`small files of …` or a directory).
    pub tree: String,
    /// Files in it.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// zstd level.
    pub level: i32,
    /// Bytes stored: kernel btrfs (compsize), wring dict=off, wring dict=auto.
    pub stored: [u64; 3],
    /// Seconds of tar -x and the durable commit: kernel, off, auto.
    pub tar_s: [f64; 3],
    /// Seconds after that until the training and rewrite pass it set off were done, and a
    /// durable commit after them (dict=auto; 0 elsewhere): kernel, off, auto.
    pub background_s: [f64; 3],
    /// Seconds reading every file back from a fresh mount, the median of three: kernel,
    /// off, auto.
    pub read_s: [f64; 3],
    /// Dictionaries the store holds after the run (dict=auto).
    pub dicts: usize,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct DictReport {
    /// Every row.
    pub rows: Vec<DictRow>,
}

fn progress(msg: &str) {
    eprintln!("bench dict: {msg}");
}

/// A tree's tar in `work`: (path, files, bytes of the files).
fn make_tar(
    work: &Path,
    name: &str,
    sources: &[PathBuf],
    small: Option<u64>,
) -> Result<(PathBuf, usize, u64), BenchError> {
    let list = work.join(format!("{name}.list"));
    let tar = work.join(format!("{name}.tar"));
    let size = small.map_or(String::new(), |s| format!(" -size -{}c", s + 1));
    let dirs: Vec<String> = sources
        .iter()
        .map(|p| quote(p.strip_prefix("/").unwrap_or(p)))
        .collect();
    sh(&format!(
        "cd / && find {} -type f{size} -print | sort > {}",
        dirs.join(" "),
        quote(&list)
    ))?;
    sh(&format!(
        "tar --format=gnu -cf {} -C / -T {} 2>/dev/null || test -s {0}",
        quote(&tar),
        quote(&list)
    ))?;
    let text = std::fs::read_to_string(&list)
        .map_err(|e| BenchError::io(format!("reading {}", list.display()), e))?;
    let mut bytes = 0;
    let mut files = 0;
    for l in text.lines() {
        if let Ok(m) = std::fs::symlink_metadata(Path::new("/").join(l)) {
            files += 1;
            bytes += m.len();
        }
    }
    if files == 0 {
        return Err(BenchError::Spec(format!("no files in {}", dirs.join(" "))));
    }
    Ok((tar, files, bytes))
}

fn timed(f: impl FnOnce() -> Result<(), BenchError>) -> Result<f64, BenchError> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64())
}

fn read_all(root: &Path) -> Result<(), BenchError> {
    sh(&format!(
        "find {} -type f -exec cat {{}} + > /dev/null",
        quote(root)
    ))
}

/// Reads of a tree, each from a fresh mount.
const READS: usize = 3;

/// (stored, tar s, read s) on the kernel's btrfs.
fn kernel(tar: &Path, bytes: u64, level: i32) -> Result<(u64, f64, f64), BenchError> {
    let spec = CompressSpec::new(Algorithm::Zstd, level);
    let mut fs = KernelFs::mount(spec, image_size(bytes))?;
    progress(&format!("btrfs {}: tar -x", fs.options()));
    let root = fs.path().to_path_buf();
    let tar_s = timed(|| {
        sh(&format!("tar -xf {} -C {}", quote(tar), quote(&root)))?;
        fs.sync()
    })?;
    let stored = usage(&root)?.disk;
    let mut reads = Vec::new();
    for _ in 0..READS {
        fs.remount()?;
        progress(&format!("btrfs {}: read back", fs.options()));
        reads.push(timed(|| read_all(fs.path()))?);
    }
    Ok((stored, tar_s, median(&reads)))
}

/// The `dicts:` line of a mount's status.
fn dict_line(mnt: &Path) -> Result<String, BenchError> {
    let text = crate::fs::status_text(mnt)?;
    Ok(text
        .lines()
        .find(|l| l.starts_with("dicts:"))
        .unwrap_or_default()
        .to_string())
}

/// Wait (up to ten minutes) until no training or rewrite pass runs or is due.
fn settle(mnt: &Path) -> Result<(), BenchError> {
    let until = Instant::now() + Duration::from_secs(600);
    while dict_line(mnt)?.contains("busy=1") {
        crate::interrupt::check()?;
        if Instant::now() > until {
            return Err(BenchError::Spec(format!(
                "the dictionaries of {} were still busy after ten minutes",
                mnt.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// What one wring run measured.
struct WringRun {
    stored: u64,
    tar_s: f64,
    background_s: f64,
    read_s: f64,
    dicts: usize,
}

/// One run on wring with `dict` (`auto` or `off`).
fn wring(cfg: &DictConfig, tar: &Path, level: i32, dict: &str) -> Result<WringRun, BenchError> {
    let base = cfg.work.join(format!("wring-{dict}"));
    let (store, mnt) = fresh_store(&base)?;
    let mut opts = format!("compress-force=zstd:{level},dict={dict}");
    if !cfg.wring_options.is_empty() {
        opts = format!("{opts},{}", cfg.wring_options);
    }
    let m = WringMount::mount(&cfg.launcher, &store, &mnt, &opts)?;
    progress(&format!("wring {opts}: tar -x"));
    let tar_s = timed(|| {
        sh(&format!("tar -xf {} -C {}", quote(tar), quote(&mnt)))?;
        wring_sync(&mnt)
    })?;
    // What the write set off: the training and the rewrite pass, then the durable commit.
    let background_s = timed(|| {
        settle(&mnt)?;
        wring_sync(&mnt)
    })?;
    let stored = wring_usage(&mnt)?.1;
    let line = dict_line(&mnt)?;
    let dicts = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("count=")?.parse().ok())
        .unwrap_or(0);
    m.umount()?;
    let mut reads = Vec::new();
    for _ in 0..READS {
        let m = WringMount::mount(&cfg.launcher, &store, &mnt, &opts)?;
        progress(&format!("wring {opts}: read back"));
        reads.push(timed(|| read_all(&mnt))?);
        m.umount()?;
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(WringRun {
        stored,
        tar_s,
        background_s,
        read_s: median(&reads),
        dicts,
    })
}

/// Run every tree at every level.
pub fn run(cfg: &DictConfig) -> Result<DictReport, BenchError> {
    crate::kernel::require_root("wring bench dict", "it mounts btrfs and FUSE")?;
    std::fs::create_dir_all(&cfg.work)
        .map_err(|e| BenchError::io(format!("creating {}", cfg.work.display()), e))?;
    let mut trees = vec![(
        format!(
            "files ≤ {} KiB of {}",
            cfg.small >> 10,
            cfg.sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        make_tar(&cfg.work, "small", &cfg.sources, Some(cfg.small))?,
    )];
    for (i, w) in cfg.whole.iter().enumerate() {
        let t = make_tar(
            &cfg.work,
            &format!("whole-{i}"),
            std::slice::from_ref(w),
            None,
        )?;
        trees.push((w.display().to_string(), t));
    }
    let mut rows = Vec::new();
    for (tree, (tar, files, bytes)) in &trees {
        for &level in &cfg.levels {
            progress(&format!("{tree} ({files} files) at zstd:{level}"));
            let k = kernel(tar, *bytes, level)?;
            let off = wring(cfg, tar, level, "off")?;
            let auto = wring(cfg, tar, level, "auto")?;
            rows.push(DictRow {
                tree: tree.clone(),
                files: *files,
                bytes: *bytes,
                level,
                stored: [k.0, off.stored, auto.stored],
                tar_s: [k.1, off.tar_s, auto.tar_s],
                background_s: [0.0, off.background_s, auto.background_s],
                read_s: [k.2, off.read_s, auto.read_s],
                dicts: auto.dicts,
            });
        }
    }
    Ok(DictReport { rows })
}

fn ratio(a: f64, b: f64) -> String {
    match b {
        b if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

impl DictReport {
    /// The report as JSON.
    pub fn json(&self) -> Result<String, BenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// A markdown table: bytes stored and times, with dictionaries against without them and
    /// against the kernel.
    pub fn markdown(&self) -> String {
        let mut s = String::from(
            "wring bench dict: compress-force=zstd:L on the kernel's btrfs and on wring with \
             dict=off and dict=auto; stored bytes from compsize and wring's stat; tar -x \
             with the durable commit; then, on dict=auto, the training and rewrite pass it \
             set off (bg); reads from a fresh mount, median of three; one run\n\n\
             | tree | files | MB | level | btrfs MB | off MB | auto MB | auto/off | auto/btrfs \
             | dicts | tar -x btrfs s | off s | auto s | auto/off | bg s | read btrfs s | off s \
             | auto s | auto/off |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &self.rows {
            let mb = |b: u64| format!("{:.2}", b as f64 / 1e6);
            s += &format!(
                "| {} | {} | {} | zstd:{} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} \
                 | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |\n",
                r.tree,
                r.files,
                mb(r.bytes),
                r.level,
                mb(r.stored[0]),
                mb(r.stored[1]),
                mb(r.stored[2]),
                ratio(r.stored[2] as f64, r.stored[1] as f64),
                ratio(r.stored[2] as f64, r.stored[0] as f64),
                r.dicts,
                r.tar_s[0],
                r.tar_s[1],
                r.tar_s[2],
                ratio(r.tar_s[2], r.tar_s[1]),
                r.background_s[2],
                r.read_s[0],
                r.read_s[1],
                r.read_s[2],
                ratio(r.read_s[2], r.read_s[1]),
            );
        }
        s
    }
}
