//! `wring bench kernel`: seed 001's experiment against the real kernel, beside wring's engine.
//!
//! For each method: a fresh btrfs image is loop-mounted with `compress-force=METHOD`; K copies
//! of the corpus are written into it and synced (copy and sync timed together, as the seed);
//! the ratio comes from the extents of every file, read with BTRFS_IOC_ENCODED_READ (file bytes
//! over bytes on disk, each extent rounded up to 4 KiB like wring's rows, and unrounded); the
//! filesystem is remounted so that nothing is cached, and everything is read back — by
//! `tar cf - . | (discarded)` as the seed, or by reading every file — timed. wring's engine row
//! for the same method and level is measured in the same run and printed beside it.
//!
//! The image is a sparse file whose blocks may still sit in the host's page cache, so the read
//! measures the filesystem and decompression rather than the disk. Methods the kernel's btrfs
//! lacks (lz4, lz4hc, zstd above 15) get wring's row and "n/a".
//!
//! [`KernelFs`] is every benchmark's one kernel run: `kernel` here, `recompress` and `fs` mount
//! the kernel's btrfs through it, with the option [`CompressSpec::btrfs_option`] gives.

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;
use wring_btrfs::scratch::ScratchFs;
use wring_btrfs::stat::{stat_paths, Usage};
use wring_btrfs::Extents;
use wring_engine::CompressSpec;

use crate::corpus::Corpus;
use crate::interrupt::{self, Cleanup};
use crate::levels::{LevelBench, LevelRow, LevelsConfig};
use crate::metrics::{mb_per_s, Stored, Versus};
use crate::progress::Progress;
use crate::BenchError;

/// Methods `wring bench kernel` measures by default: seed 001's.
pub const DEFAULT_METHODS: &str = "lzo,zlib:3,zstd:1,zstd:3,zstd:9,zstd:15";

/// How the filesystem is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMethod {
    /// `tar cf - -C MOUNT .` with its output read and discarded (as `| cat > /dev/null`;
    /// GNU tar writing to /dev/null itself would skip reading file data).
    Tar,
    /// Every file read in order, 1 MiB at a time, by one thread.
    Files,
}

impl ReadMethod {
    /// How the report describes it.
    pub fn describe(self) -> &'static str {
        match self {
            ReadMethod::Tar => "tar cf - . | cat >/dev/null (one reader)",
            ReadMethod::Files => "every file read in 1 MiB reads (one reader)",
        }
    }
}

/// Settings of the btrfs part.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Methods, as btrfs mount options spell them.
    pub methods: Vec<CompressSpec>,
    /// Copies of the corpus written per method.
    pub copies: usize,
    /// wring's streams.
    pub streams: usize,
    /// How to read back.
    pub read: ReadMethod,
    /// Also time wring's bare library call.
    pub bare: bool,
    /// Measure wring this many times and report the median.
    pub repeat: usize,
}

/// The kernel's btrfs on one method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelFigures {
    /// Mount options used.
    pub options: String,
    /// Copies written.
    pub copies: usize,
    /// Extents as encoded reads returned them; `incompressible` counts the uncompressed ones.
    pub stored: Stored,
    /// File bytes over disk bytes, extents rounded up to 4 KiB.
    pub ratio: f64,
    /// The same, unrounded.
    pub ratio_unrounded: f64,
    /// Seconds to write every copy and sync.
    pub write_secs: f64,
    /// Seconds to read everything back after a remount.
    pub read_secs: f64,
    /// Input MB/s of write and sync.
    pub compress_mbps: f64,
    /// MB/s of the read-back.
    pub decompress_mbps: f64,
    /// How it was read.
    pub read_method: ReadMethod,
}

/// One method: wring's engine and the kernel's btrfs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    /// The method as btrfs spells it.
    pub spec: String,
    /// wring's engine on the corpus.
    pub wring: LevelRow,
    /// The kernel's btrfs, when it has the method.
    pub kernel: Option<KernelFigures>,
    /// Why the kernel's figures are missing.
    pub kernel_note: Option<String>,
    /// wring over kernel: ratio, compression and decompression speed.
    pub wring_over_kernel: Option<Versus>,
}

/// Parse `--methods` (btrfs spellings; `no` is refused).
pub fn parse_methods(list: &str) -> Result<Vec<CompressSpec>, BenchError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (spec, warning) =
            CompressSpec::parse(item).map_err(|e| BenchError::Spec(format!("--methods: {e}")))?;
        if let Some(w) = warning {
            return Err(BenchError::Spec(format!("--methods: {w}")));
        }
        if spec.algorithm.is_none() {
            return Err(BenchError::Spec("--methods: 'no' measures nothing".into()));
        }
        if !out.contains(&spec) {
            out.push(spec);
        }
    }
    if out.is_empty() {
        return Err(BenchError::Spec("--methods is empty".into()));
    }
    Ok(out)
}

/// Run the btrfs part: for each method, wring's row and the kernel's. Needs root.
pub fn run_btrfs(
    corpus: &Corpus,
    cfg: &KernelConfig,
    progress: &Progress,
) -> Result<Vec<KernelRow>, BenchError> {
    require_root(
        "wring bench kernel",
        "loop devices, mount, encoded reads, zram",
    )?;
    let mut lcfg = LevelsConfig::new(cfg.methods.clone(), cfg.streams);
    lcfg.bare = cfg.bare;
    lcfg.passes = cfg.repeat.max(1);
    let mut bench = LevelBench::new(corpus, &lcfg)?;
    let kernel_steps = cfg.copies as u64 + 3;
    progress.add_steps(cfg.methods.len() as u64 * (bench.steps() + kernel_steps));
    let mut rows = Vec::new();
    for &spec in &cfg.methods {
        let wring = bench.measure(spec, progress)?;
        let (kernel, kernel_note) = match spec.btrfs_option() {
            Ok(option) => (
                Some(measure_kernel(corpus, spec, &option, cfg, progress)?),
                None,
            ),
            Err(why) => {
                for _ in 0..kernel_steps {
                    progress.done();
                }
                (None, Some(why.to_string()))
            }
        };
        let wring_over_kernel = kernel.as_ref().map(|k| {
            Versus::of(
                [wring.ratio, wring.compress_mbps, wring.decompress_mbps],
                [k.ratio, k.compress_mbps, k.decompress_mbps],
            )
        });
        rows.push(KernelRow {
            spec: spec.to_string(),
            wring,
            kernel,
            kernel_note,
            wring_over_kernel,
        });
    }
    Ok(rows)
}

/// Whether this process runs as root, as the benchmarks' kernel runs need (loop devices,
/// mounts, encoded reads, zram, dropping the page cache). Production's check; tests have their
/// own in wring-testing.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// [`BenchError::NotRoot`] naming `what` and `why`, unless this process runs as root.
pub fn require_root(what: &'static str, why: &'static str) -> Result<(), BenchError> {
    if is_root() {
        Ok(())
    } else {
        Err(BenchError::NotRoot { what, why })
    }
}

/// A fresh scratch btrfs (sparse image, loop device) mounted with `compress-force=OPTION`, the
/// option [`CompressSpec::btrfs_option`] gives: the kernel side of every benchmark. Dropping it
/// unmounts and removes everything.
#[derive(Debug)]
pub struct KernelFs {
    scratch: ScratchFs,
    options: String,
}

impl KernelFs {
    /// Make and mount one of `image` bytes compressing as `spec`. [`BenchError::NotInBtrfs`]
    /// when btrfs has no such method; a `Scratch` mount error when this kernel refuses it.
    pub fn mount(spec: CompressSpec, image: u64) -> Result<KernelFs, BenchError> {
        let options = format!("compress-force={}", spec.btrfs_option()?);
        let scratch = ScratchFs::with_size(&options, image)?;
        Ok(KernelFs { scratch, options })
    }

    /// The mount options (`compress-force=zstd:3`).
    pub fn options(&self) -> &str {
        &self.options
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.scratch.path()
    }

    /// Write everything out (`sync -f`): the end of a timed write.
    pub fn sync(&self) -> Result<(), BenchError> {
        Ok(self.scratch.sync()?)
    }

    /// Unmount and mount again, so reads come from the disk image, not the page cache.
    pub fn remount(&mut self) -> Result<(), BenchError> {
        Ok(self.scratch.remount()?)
    }

    /// compsize's totals of every file on it.
    pub fn usage(&self) -> Result<Usage, BenchError> {
        usage(self.path())
    }
}

/// compsize's totals (file bytes, disk bytes) of every file under `root`, on btrfs.
pub fn usage(root: &Path) -> Result<Usage, BenchError> {
    Ok(stat_paths(&[root.to_path_buf()])?.0.total())
}

/// Write `copies` copies of the corpus under `root` (`copy-0/…`, `copy-1/…`, at least one),
/// keeping relative paths; returns the bytes written.
pub fn write_copies(corpus: &Corpus, root: &Path, copies: usize) -> Result<u64, BenchError> {
    for copy in 0..copies.max(1) {
        write_copy(corpus, &copy_dir(root, copy))?;
    }
    Ok(corpus.bytes() * copies.max(1) as u64)
}

/// Size of the sparse image for `bytes` of data: room for it three times over, at least 2 GiB.
pub fn image_size(bytes: u64) -> u64 {
    (bytes.saturating_mul(3))
        .max(2 << 30)
        .next_multiple_of(1 << 20)
}

/// One method on a fresh scratch btrfs: write and sync, measure extents, remount, read.
fn measure_kernel(
    corpus: &Corpus,
    spec: CompressSpec,
    option: &str,
    cfg: &KernelConfig,
    progress: &Progress,
) -> Result<KernelFigures, BenchError> {
    let copies = cfg.copies.max(1);
    let total = corpus.bytes() * copies as u64;
    let _cleanup = Cleanup::enter();
    progress.step(format!("btrfs {option}: mkfs and mount"));
    let mut scratch = KernelFs::mount(spec, image_size(total))?;
    let options = scratch.options().to_string();
    let root = scratch.path().to_path_buf();

    let t = Instant::now();
    for copy in 0..copies {
        interrupt::check()?;
        progress.step(format!("btrfs {option}: writing copy {}", copy + 1));
        write_copy(corpus, &copy_dir(&root, copy))?;
        progress.done();
    }
    progress.step(format!("btrfs {option}: sync"));
    scratch.sync()?;
    let write_secs = t.elapsed().as_secs_f64();
    progress.done();

    interrupt::check()?;
    progress.step(format!("btrfs {option}: reading extents"));
    let mut stored = Stored::default();
    for copy in 0..copies {
        for f in &corpus.files {
            interrupt::check()?;
            count_extents(&copy_dir(&root, copy).join(&f.name), &mut stored)?;
        }
    }
    progress.done();

    interrupt::check()?;
    progress.step(format!("btrfs {option}: remount and read back"));
    scratch.remount()?;
    let t = Instant::now();
    let read = match cfg.read {
        ReadMethod::Tar => read_with_tar(&root)?,
        ReadMethod::Files => read_files(corpus, &root, copies)?,
    };
    let read_secs = t.elapsed().as_secs_f64();
    progress.done();
    if read < total {
        return Err(BenchError::io(
            format!("reading back {}", root.display()),
            std::io::Error::other(format!("read {read} bytes of {total}")),
        ));
    }
    drop(scratch);
    Ok(KernelFigures {
        options,
        copies,
        ratio: stored.ratio(),
        ratio_unrounded: stored.ratio_unrounded(),
        stored,
        compress_mbps: mb_per_s(total, write_secs),
        decompress_mbps: mb_per_s(total, read_secs),
        write_secs,
        read_secs,
        read_method: cfg.read,
    })
}

fn copy_dir(root: &Path, copy: usize) -> PathBuf {
    root.join(format!("copy-{copy}"))
}

/// Write every corpus file under `dir`, keeping relative paths.
fn write_copy(corpus: &Corpus, dir: &Path) -> Result<(), BenchError> {
    let mut made: HashSet<PathBuf> = HashSet::new();
    for f in &corpus.files {
        interrupt::check()?;
        let path = dir.join(&f.name);
        if let Some(parent) = path.parent() {
            if made.insert(parent.to_path_buf()) {
                fs::create_dir_all(parent)
                    .map_err(|e| BenchError::io(format!("creating {}", parent.display()), e))?;
            }
        }
        fs::write(&path, &f.data)
            .map_err(|e| BenchError::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

/// Add the extents of `path` to `stored`: file bytes each covers, and bytes on disk
/// (`None` for an uncompressed extent, which counts raw).
fn count_extents(path: &Path, stored: &mut Stored) -> Result<(), BenchError> {
    let file = wring_btrfs::open_for_encoded_read(path)?;
    let size = file
        .metadata()
        .map_err(|e| BenchError::io(format!("stat {}", path.display()), e))?
        .len();
    for extent in Extents::new(&file)? {
        let extent = extent?;
        let covered = extent.len.min(size.saturating_sub(extent.offset)) as usize;
        let disk = extent
            .compression
            .is_compressed()
            .then_some(extent.data.len());
        stored.add(covered, disk);
    }
    Ok(())
}

/// `tar cf - -C root .`, its output read and thrown away; returns the bytes tar produced.
fn read_with_tar(root: &Path) -> Result<u64, BenchError> {
    let mut child = Command::new("tar")
        .arg("-cf")
        .arg("-")
        .arg("-C")
        .arg(root)
        .arg(".")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::io("running tar (install tar)", e))?;
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| BenchError::io("tar", std::io::Error::other("no stdout")))?;
    let bytes = drain(&mut out).map_err(|e| BenchError::io("reading tar's output", e))?;
    let status = child
        .wait_with_output()
        .map_err(|e| BenchError::io("waiting for tar", e))?;
    if !status.status.success() {
        return Err(BenchError::io(
            "tar",
            std::io::Error::other(String::from_utf8_lossy(&status.stderr).trim().to_string()),
        ));
    }
    Ok(bytes)
}

/// Read every corpus file of every copy; returns the bytes read.
fn read_files(corpus: &Corpus, root: &Path, copies: usize) -> Result<u64, BenchError> {
    let mut total = 0;
    for copy in 0..copies {
        for f in &corpus.files {
            interrupt::check()?;
            let path = copy_dir(root, copy).join(&f.name);
            let mut file = fs::File::open(&path)
                .map_err(|e| BenchError::io(format!("opening {}", path.display()), e))?;
            total += drain(&mut file)
                .map_err(|e| BenchError::io(format!("reading {}", path.display()), e))?;
        }
    }
    Ok(total)
}

/// Read `r` to its end in 1 MiB reads, discarding the data; the byte count.
fn drain(r: &mut impl Read) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
