//! `wring bench ...`: the seeds' tables on wring's engine, with the kernel beside them.
//! Thin: parse, load the corpus, call wring-bench, write the outputs.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use wring_bench::blk::{self, BlkConfig, BlkReport};
use wring_bench::corpus::Corpus;
use wring_bench::kernel::{self, KernelConfig, ReadMethod};
use wring_bench::levels::{self, LevelsConfig};
use wring_bench::machine::{available_parallelism, LoadWatch, Machine};
use wring_bench::offload::{self, OffloadBenchConfig, OffloadReport};
use wring_bench::progress::Progress;
use wring_bench::report::Report;
use wring_bench::sizes;
use wring_bench::streams::{self, StreamsConfig};
use wring_bench::zram::{self, ZramConfig};
use wring_bench::{interrupt, plot};
use wring_engine::size::parse_size;

/// Benchmark subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Ratio, compression and decompression MB/s and workspace memory per algorithm and level
    /// (seeds 000 and 001) on wring's engine, with the managers' overhead over the bare library
    Levels(LevelsArgs),
    /// W concurrent writers under stream limits 1, 2, … and the speed-up over one stream (seed 002)
    Streams(StreamsArgs),
    /// The kernel's btrfs (compress-force on a loop-mounted image) and zram beside wring's
    /// engine, same corpus, same run (needs root)
    Kernel(KernelArgs),
    /// `wring btrfs recompress` at -j 1 and -j 2 against the kernel's compress-force write of
    /// the same data at the same level (needs root)
    Recompress(super::bench_recompress::Args),
    /// Seed 001's experiment through a wring-fs mount, with the kernel's btrfs beside it, and
    /// max_extent=1M against 128K (needs root)
    Fs(super::bench_fs::Args),
    /// Many small files through a wring-fs mount — tar -x, find + stat, cp -a, git clone,
    /// status, checkout + gc, rm -rf — with the kernel's btrfs and the FUSE floor beside it
    /// (needs root)
    Meta(super::bench_meta::Args),
    /// Trained dictionaries on small files: bytes stored with dict=auto against dict=off and
    /// the kernel's btrfs, tar -x and read-back times, at zstd:1, 3 and 9 (needs root)
    Dict(super::bench_dict::Args),
    /// Seed 004's table: per request size, the offload API's CPU provider against a SIMULATED
    /// device (a test double) at a few latencies, with its threshold and with injected failures
    Offload(OffloadArgs),
    /// The block-device table: wring blk (zram in userspace, over NBD) beside nbdkit's
    /// `memory allocator=zstd` and the kernel's /dev/zram0, written and read back with nbdcopy
    /// (needs root for zram; resets /dev/zram0 afterwards)
    Blk(BlkArgs),
    /// Seed 003's page pool: random 4 KiB and 128 KiB reads through a wring-fs mount, pool off
    /// and on, without and with memory pressure (a v1 memory cgroup with a limit and a memory
    /// hog); p50/p99/p99.9, MB/s and the daemon's page faults, as ratios (needs root)
    Pool(PoolArgs),
}

/// `wring bench pool`.
#[derive(clap::Args)]
pub struct PoolArgs {
    /// Uncompressed bytes of the files read (K, M, G suffixes)
    #[arg(long, value_parser = parse_size, default_value = "512M")]
    bytes: u64,
    /// Files they are spread over
    #[arg(long, default_value_t = 8)]
    files: usize,
    /// Compression method (btrfs spelling)
    #[arg(long, default_value = "zstd:1")]
    method: String,
    /// Pages of the pool when on (default: the cache of decoded extents, 32 MiB, plus two extents)
    #[arg(long, default_value_t = 8256)]
    pool_pages: usize,
    /// The memory cgroup's limit under pressure
    #[arg(long, value_parser = parse_size, default_value = "160M")]
    limit: u64,
    /// Memory the hog touches over and over beside the daemon
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    hog: u64,
    /// Random reads per read size and case
    #[arg(long, default_value_t = 4000)]
    reads: usize,
    /// Scratch directory (default: a new one under the temporary directory)
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

/// Options every benchmark takes.
#[derive(clap::Args)]
pub struct CommonArgs {
    /// Corpus directory: every regular file under it, recursively (but the MANIFEST that
    /// `../shared/corpus/build.sh` writes at its top). Default: a deterministic
    /// ~80 MB sample of files every Linux machine has (/usr/share/doc, python's sources under
    /// /usr/lib, shared libraries, /usr/share data). `../shared/corpus/build.sh DIR` builds the
    /// shared Silesia-like corpus.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Use only the first BYTES of the corpus, files in order, the last one cut (K, M, G suffixes)
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    max_bytes: Option<u64>,
    /// Also write the whole report as JSON to FILE; `-` prints it on stdout instead of the
    /// markdown table
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write every row as CSV to FILE (levels, streams, kernel: one long table
    /// table,source,method,…; offload: its own columns); `-` prints it on stdout instead of
    /// the markdown table
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// No progress bar (it is also hidden when stdout is not a terminal)
    #[arg(long, short)]
    quiet: bool,
    /// Time each of wring's phases N times. `levels` and `kernel` report the median and the
    /// spread (levels: default 3, and fast levels get more passes, up to 2 s each); the others
    /// keep the fastest (other load on the machine only ever slows a run down; default 1)
    #[arg(long, value_name = "N")]
    repeat: Option<usize>,
}

/// Options of `wring bench levels`.
#[derive(clap::Args)]
pub struct LevelsArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Only these algorithms, comma-separated (zstd,zlib,lzo,lz4,lz4hc,lzo-rle,deflate)
    #[arg(long, value_delimiter = ',')]
    algorithms: Vec<String>,
    /// Levels: items for every selected algorithm (`1,3,9`, `1..9`, `-5`) or for one
    /// (`zstd:-5,zstd:1..15,zlib:9,lzo`). Default: zstd:-5,zstd:1..15,zstd:19,zlib:1..9,lzo,lz4,lz4hc:9
    #[arg(long, allow_hyphen_values = true)]
    levels: Option<String>,
    /// Engine streams, and threads compressing and decompressing (default: available parallelism)
    #[arg(long)]
    streams: Option<usize>,
    /// Skip timing the bare library call (no manager-overhead column)
    #[arg(long)]
    no_bare: bool,
    /// PNG of ratio against compression speed
    #[arg(
        long,
        value_name = "FILE",
        default_value = "bench-out/bench-levels.png"
    )]
    plot: PathBuf,
    /// Draw no plot
    #[arg(long)]
    no_plot: bool,
    /// Also time the fast levels (zstd:-5, 1 and 3, lz4, lzo, those selected) per extent at
    /// these sizes, engine beside bare: the engine's fixed cost per extent; `none` skips it
    #[arg(long, value_name = "SIZES", default_value = "4K,16K,64K,128K")]
    extent_sizes: String,
}

/// Options of `wring bench streams`.
#[derive(clap::Args)]
pub struct StreamsArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Methods to compress with, comma-separated
    #[arg(long, default_value = streams::DEFAULT_SPECS)]
    methods: String,
    /// Numbers of concurrent writers, comma-separated (default: 1, P and 2P, P = available parallelism)
    #[arg(long, value_delimiter = ',')]
    writers: Vec<usize>,
    /// Stream limits, comma-separated (default: 1, 2, … P)
    #[arg(long, value_delimiter = ',')]
    limits: Vec<usize>,
}

/// Options of `wring bench offload`.
#[derive(clap::Args)]
pub struct OffloadArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Method to compress with
    #[arg(long, default_value = "zstd:1")]
    method: String,
    /// Request sizes, comma-separated (K, M suffixes); the engine's max_extent is the largest,
    /// at least 1M
    #[arg(long, value_delimiter = ',', value_parser = parse_size, default_value = "4K,16K,64K,128K,256K,1M")]
    sizes: Vec<u64>,
    /// Simulated device latencies per submission, comma-separated (ns, us, ms)
    #[arg(long, value_delimiter = ',', value_parser = offload::parse_latency, default_value = "5us,50us,500us")]
    latencies: Vec<std::time::Duration>,
    /// Simulated device latency per input byte, in nanoseconds
    #[arg(long, default_value_t = offload::DEFAULT_PER_BYTE_NS)]
    per_byte_ns: f64,
    /// The device threshold (min_len) of the threshold row, at the middle latency; 0 for no
    /// such row
    #[arg(long, value_parser = parse_size, default_value = "64K")]
    threshold: u64,
    /// CPU worker threads (default: available parallelism)
    #[arg(long)]
    streams: Option<usize>,
    /// Requests in flight at most (the completion queue's window)
    #[arg(long, default_value_t = 32)]
    window: usize,
    /// Requests the simulated device takes in one submission
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Requests the simulated device holds at once (more fall back as busy)
    #[arg(long, default_value_t = 32)]
    device_queue: usize,
    /// PNG of compression MB/s and p50 latency against request size (its directory is made)
    #[arg(
        long,
        value_name = "FILE",
        default_value = "bench-out/bench-offload.png"
    )]
    plot: PathBuf,
    /// Draw no plot
    #[arg(long)]
    no_plot: bool,
}

/// Options of `wring bench blk`.
#[derive(clap::Args)]
pub struct BlkArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The corpus files the mixed input is made of, comma-separated, under --corpus (default:
    /// $WRING_CORPUS or /tmp/wring-corpus); empty (`--files ''`) takes every file
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "executables.tar,dictionary.txt,packages.txt"
    )]
    files: Vec<String>,
    /// wring's devices, comma-separated: ALG[@SLOT][+dict], an algorithm by zram's name
    /// (levels as zstd:3), a slot_size beyond zram's 4K (zstd:3@16K), +dict for a zstd
    /// dictionary trained on the input
    #[arg(long, default_value = blk::DEFAULT_WRING)]
    wring: String,
    /// zram algorithms, comma-separated (`none`: no zram rows)
    #[arg(long, default_value = blk::DEFAULT_ZRAM)]
    zram_algorithms: String,
    /// No nbdkit memory rows (allocator=zstd, and the sparse allocator's transport ceiling)
    #[arg(long)]
    no_nbdkit: bool,
    /// wring's streams, zram's threads (default: available parallelism)
    #[arg(long)]
    streams: Option<usize>,
    /// Reset /dev/zram0 even if it was already initialised (never when it is swap or mounted)
    #[arg(long)]
    zram_force: bool,
    /// Directory for the input and read-back files and the sockets
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    work_dir: PathBuf,
}

/// How `wring bench kernel` reads the filesystem back.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ReadArg {
    /// `tar cf - . | cat > /dev/null`, as seed 001
    Tar,
    /// Read every file, 1 MiB at a time
    Files,
}

/// Options of `wring bench kernel`.
#[derive(clap::Args)]
pub struct KernelArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Copies of the corpus written to each btrfs
    #[arg(long, default_value_t = 1)]
    copies: usize,
    /// btrfs methods as mount options spell them, comma-separated (lz4, lz4hc and zstd above 15
    /// get wring's row and n/a)
    #[arg(long, default_value = kernel::DEFAULT_METHODS, allow_hyphen_values = true)]
    methods: String,
    /// wring's streams (default: available parallelism; zram gets as many writers)
    #[arg(long)]
    streams: Option<usize>,
    /// How to read the filesystem back after the remount
    #[arg(long, value_enum, default_value_t = ReadArg::Tar)]
    read: ReadArg,
    /// Also time wring's bare library call
    #[arg(long)]
    bare: bool,
    /// Skip the btrfs part
    #[arg(long)]
    no_btrfs: bool,
    /// Skip the zram part
    #[arg(long)]
    no_zram: bool,
    /// zram algorithms, comma-separated (default: lzo-rle, lzo and lz4, where offered)
    #[arg(long, value_delimiter = ',')]
    zram_algorithms: Vec<String>,
    /// Reset /dev/zram0 even if it was already initialised (never when it is swap or mounted)
    #[arg(long)]
    zram_force: bool,
    /// PNG of ratio against compression speed, the kernel's points beside wring's
    #[arg(
        long,
        value_name = "FILE",
        default_value = "bench-out/bench-kernel.png"
    )]
    plot: PathBuf,
    /// Draw no plot
    #[arg(long)]
    no_plot: bool,
}

pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Levels(a) => {
            install_ctrlc();
            run_levels(a)
        }
        Command::Streams(a) => {
            install_ctrlc();
            run_streams(a)
        }
        Command::Kernel(a) => {
            install_ctrlc();
            run_kernel(a)
        }
        Command::Recompress(a) => super::bench_recompress::run(a),
        Command::Fs(a) => super::bench_fs::run(a),
        Command::Meta(a) => super::bench_meta::run(a),
        Command::Dict(a) => {
            install_ctrlc();
            super::bench_dict::run(a)
        }
        Command::Offload(a) => {
            install_ctrlc();
            run_offload(a)
        }
        Command::Blk(a) => {
            install_ctrlc();
            run_blk(a)
        }
        Command::Pool(a) => run_pool(a),
    }
}

/// First Ctrl-C: stop at the next step and undo mounts and zram; again, or when nothing needs
/// undoing: exit at once.
fn install_ctrlc() {
    let result = ctrlc::set_handler(|| {
        if interrupt::needs_cleanup() && !interrupt::requested() {
            eprintln!("\nwring bench: interrupted; cleaning up (Ctrl-C again to quit at once)");
            interrupt::request();
        } else {
            eprintln!("\nwring bench: interrupted");
            std::process::exit(130);
        }
    });
    if let Err(e) = result {
        log::warn!("no Ctrl-C handler: {e}");
    }
}

struct Setup {
    corpus: Corpus,
    progress: Progress,
    machine: Machine,
}

impl CommonArgs {
    /// `--repeat`, 1 when not given.
    fn repeat(&self) -> usize {
        self.repeat.unwrap_or(1).max(1)
    }
}

/// The note saying how many timings each figure is the fastest of.
fn repeat_note(report: &mut Report, repeat: usize) {
    if repeat > 1 {
        report.notes.push(format!(
            "every wring timing is the fastest of {repeat} runs"
        ));
    }
}

/// The note saying what the figures of a levels table are made of.
fn passes_note(report: &mut Report, cfg: &LevelsConfig) {
    let fast = if cfg.pass_budget > 0.0 {
        format!(
            ", more for fast levels until {} s or {} passes",
            cfg.pass_budget,
            levels::MAX_PASSES
        )
    } else {
        String::new()
    };
    let slow = if cfg.slow_after > 0.0 && cfg.passes > 2 {
        format!(
            " (2 for slow levels, once their passes have taken {} s)",
            cfg.slow_after
        )
    } else {
        String::new()
    };
    let phase = if cfg.min_phase > 0.0 {
        format!(
            "; a decompression shorter than {} s is repeated within its pass and timed per repetition",
            cfg.min_phase
        )
    } else {
        String::new()
    };
    if cfg.passes > 1 || cfg.pass_budget > 0.0 {
        report.notes.push(format!(
            "every wring figure is the median of at least {} passes{slow}{fast}{phase}; ±: half the range between the slowest and fastest pass, relative to the median; overhead is taken per pass (engine and bare run back to back)",
            cfg.passes
        ));
    }
}

fn setup(common: &CommonArgs) -> Result<Setup> {
    let progress = Progress::new(!common.quiet && std::io::stdout().is_terminal());
    let mut corpus = match &common.corpus {
        Some(dir) => {
            Corpus::load(dir).with_context(|| format!("loading --corpus {}", dir.display()))?
        }
        None => Corpus::default_sample().context("sampling the default corpus")?,
    };
    if let Some(max) = common.max_bytes {
        corpus = corpus.truncated(max);
    }
    if corpus.bytes() == 0 {
        bail!("the corpus is empty");
    }
    Ok(Setup {
        corpus,
        progress,
        machine: Machine::detect(),
    })
}

fn run_levels(a: LevelsArgs) -> Result<()> {
    let algorithms = levels::parse_algorithms(&a.algorithms)?;
    let specs = levels::parse_specs(&algorithms, a.levels.as_deref())?;
    let s = setup(&a.common)?;
    let streams = a.streams.unwrap_or_else(available_parallelism).max(1);
    let mut cfg = LevelsConfig::new(specs, streams);
    cfg.bare = !a.no_bare;
    cfg.passes = a.common.repeat.unwrap_or(levels::DEFAULT_PASSES).max(1);
    cfg.pass_budget = levels::DEFAULT_PASS_BUDGET;
    cfg.slow_after = levels::DEFAULT_SLOW_AFTER;
    cfg.min_phase = levels::DEFAULT_MIN_PHASE;
    let mut report = Report::new("levels", s.machine, s.corpus.info(), streams);
    let sizes = extent_sizes(&a.extent_sizes)?;
    let mut load = LoadWatch::start();
    report.levels = levels::run(&s.corpus, &cfg, &s.progress, Some(&mut load))?;
    let fast = sizes::fast_specs(&cfg.specs);
    if cfg.bare && !sizes.is_empty() && !fast.is_empty() {
        report.extent_sizes =
            sizes::run(&s.corpus, &fast, &sizes, &cfg, &s.progress, Some(&mut load))?;
        report.notes.push(format!(
            "per extent size: whole extents of that size spread over the corpus, up to {} MiB of them, under the packed store's rule (a 4 KiB extent is tried); µs = thread time per extent (wall time × streams ÷ extents); added = engine − bare",
            sizes::BYTES_PER_SIZE >> 20
        ));
    }
    report.load_during = Some(load.finish());
    passes_note(&mut report, &cfg);
    report.notes.push(
        "memory KB = one workspace for that level (codec state plus its 128 KiB extent buffer); the engine holds at most one per stream".into(),
    );
    if cfg.bare {
        report.notes.push("bare = the same extents through a codec state per thread with no workspace manager; overhead = engine time / bare time".into());
    }
    s.progress.finish();
    finish(&report, &a.common, (!a.no_plot).then_some(a.plot.as_path()))
}

/// `--extent-sizes`: a comma-separated list of sizes, or `none`.
fn extent_sizes(text: &str) -> Result<Vec<usize>> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    Ok(text
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .map(sizes::parse_size)
        .collect::<Result<_, _>>()?)
}

fn run_streams(a: StreamsArgs) -> Result<()> {
    let specs = kernel::parse_methods(&a.methods)?;
    let s = setup(&a.common)?;
    let p = available_parallelism();
    let mut cfg = StreamsConfig::defaults(specs, p);
    if !a.writers.is_empty() {
        cfg.writers = a.writers.iter().map(|&w| w.max(1)).collect();
    }
    if !a.limits.is_empty() {
        cfg.limits = a.limits.iter().map(|&l| l.max(1)).collect();
    }
    cfg.repeat = a.common.repeat();
    let mut report = Report::new("streams", s.machine, s.corpus.info(), p);
    report.streams_rows = streams::run(&s.corpus, &cfg, &s.progress)?;
    repeat_note(&mut report, cfg.repeat);
    report.notes.push("each writer compresses the whole corpus extent by extent through one shared engine (as each dd wrote the same file in seed 002); MB/s counts every writer's input".into());
    s.progress.finish();
    finish(&report, &a.common, None)
}

fn run_kernel(a: KernelArgs) -> Result<()> {
    kernel::require_root(
        "wring bench kernel",
        "loop devices, mount, encoded reads, zram",
    )?;
    let methods = kernel::parse_methods(&a.methods)?;
    let s = setup(&a.common)?;
    let streams = a.streams.unwrap_or_else(available_parallelism).max(1);
    let mut report = Report::new("kernel", s.machine, s.corpus.info(), streams);
    if !a.no_btrfs {
        let cfg = KernelConfig {
            methods,
            copies: a.copies.max(1),
            streams,
            read: match a.read {
                ReadArg::Tar => ReadMethod::Tar,
                ReadArg::Files => ReadMethod::Files,
            },
            bare: a.bare,
            repeat: a.common.repeat(),
        };
        report.btrfs = kernel::run_btrfs(&s.corpus, &cfg, &s.progress)?;
        let mut passes = LevelsConfig::new(Vec::new(), streams);
        passes.passes = cfg.repeat;
        passes_note(&mut report, &passes);
        report.notes.push("btrfs: the kernel compresses at writeback on its own workers; its write+sync MB/s includes the filesystem and the loop device, its read MB/s the filesystem, decompression and tar".into());
    }
    if !a.no_zram {
        let mut cfg = ZramConfig::new(streams);
        cfg.algorithms = a.zram_algorithms.clone();
        cfg.force = a.zram_force;
        let (rows, huge) = zram::run(&s.corpus, &cfg, &s.progress)?;
        report.zram = rows;
        report.zram_huge_class = Some(huge);
        report.notes.push(format!("zram: {streams} writers and readers; wring's pages are stored compressed below zsmalloc's huge class size ({huge} bytes here) and whole otherwise"));
    }
    s.progress.finish();
    finish(&report, &a.common, (!a.no_plot).then_some(a.plot.as_path()))
}

fn run_offload(a: OffloadArgs) -> Result<()> {
    let specs = kernel::parse_methods(&a.method)?;
    let [spec] = specs[..] else {
        bail!("--method takes one method (e.g. zstd:1), not {}", a.method);
    };
    let s = setup(&a.common)?;
    let streams = a.streams.unwrap_or_else(available_parallelism).max(1);
    let mut cfg = OffloadBenchConfig::defaults(spec, streams);
    cfg.sizes = a
        .sizes
        .iter()
        .map(|&n| usize::try_from(n).context("--sizes: a size does not fit in memory"))
        .collect::<Result<_>>()?;
    let threshold = usize::try_from(a.threshold).context("--threshold is too large")?;
    cfg.providers = offload::default_providers(&a.latencies, a.per_byte_ns, threshold);
    cfg.window = a.window.max(1);
    cfg.batch = a.batch.max(1);
    cfg.device_queue = a.device_queue.max(1);
    cfg.repeat = a.common.repeat();
    let rows = offload::run(&s.corpus, &cfg, &s.progress)?;
    let mut report = OffloadReport::new(s.machine, s.corpus.info(), &cfg, rows);
    if cfg.repeat > 1 {
        report.notes.push(format!(
            "every timing is the fastest of {} runs",
            cfg.repeat
        ));
    }
    s.progress.finish();
    emit_tables(
        &a.common,
        || report.json(),
        || report.csv(),
        || report.markdown(),
    )?;
    if !a.no_plot {
        plot_dir(&a.plot)?;
        if !offload::plot(&report, &a.plot)? {
            eprintln!(
                "wring bench: no TrueType font found (install fonts-dejavu-core); {} has no labels",
                a.plot.display()
            );
        }
        eprintln!("wring bench: plot written to {}", a.plot.display());
    }
    let bad: u64 = report.rows.iter().map(|r| r.mismatches).sum();
    if bad > 0 {
        bail!("{bad} requests did not decompress to their input: the offload path corrupts data");
    }
    Ok(())
}

fn run_blk(a: BlkArgs) -> Result<()> {
    let dir = a.common.corpus.clone().unwrap_or_else(|| {
        std::env::var_os(wring_bench::corpus::CORPUS_ENV)
            .map_or_else(|| PathBuf::from("/tmp/wring-corpus"), PathBuf::from)
    });
    let files: Vec<String> = a.files.iter().filter(|f| !f.is_empty()).cloned().collect();
    let mut corpus = blk::load_corpus(&dir, &files)?;
    if let Some(max) = a.common.max_bytes {
        corpus = corpus.truncated(max);
    }
    if corpus.bytes() == 0 {
        bail!("the corpus is empty");
    }
    let streams = a.streams.unwrap_or_else(available_parallelism).max(1);
    let mut cfg = BlkConfig::new(super::blk::plugin()?, streams);
    cfg.wring = list(&a.wring);
    cfg.zram = list(&a.zram_algorithms);
    cfg.nbdkit_zstd = !a.no_nbdkit;
    cfg.nbdkit_sparse = !a.no_nbdkit;
    cfg.zram_force = a.zram_force;
    cfg.work_dir = a.work_dir.clone();
    cfg.repeat = a.common.repeat();
    if !cfg.zram.is_empty() {
        kernel::require_root(
            "wring bench blk",
            "the kernel's zram (or pass --zram-algorithms none)",
        )?;
    }
    let progress = Progress::new(!a.common.quiet && std::io::stdout().is_terminal());
    let rows = blk::run(&corpus, &cfg, &progress)?;
    let pages = blk::page_overheads(&corpus, &cfg, cfg.repeat.max(3), &progress)?;
    progress.finish();
    let mut report = BlkReport::new(Machine::detect(), corpus.info(), streams, rows);
    report.pages = pages;
    if cfg.repeat > 1 {
        report.notes.push(format!(
            "every timing is the fastest of {} write + read rounds over the same device",
            cfg.repeat
        ));
    }
    emit_tables(
        &a.common,
        || report.json(),
        || report.csv(),
        || report.markdown(),
    )
}

fn run_pool(a: PoolArgs) -> Result<()> {
    let cfg = wring_bench::pool::PoolConfig {
        launcher: wring_bench::fs::Launcher::Cli(
            std::env::current_exe().context("finding the wring executable")?,
        ),
        work: a.work_dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("wring-bench-pool-{}", std::process::id()))
        }),
        bytes: a.bytes,
        files: a.files.max(1),
        method: a.method,
        pool_pages: a.pool_pages,
        limit: a.limit,
        hog: a.hog,
        reads: a.reads.max(1),
    };
    let report = wring_bench::pool::run(&cfg);
    let _ = std::fs::remove_dir_all(&cfg.work);
    print!("{}", report?.render());
    Ok(())
}

/// A comma-separated list; `none` or nothing is the empty list.
fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "none")
        .map(String::from)
        .collect()
}

/// Print the markdown (unless JSON or CSV goes to stdout), write the files, draw the plot.
fn finish(report: &Report, common: &CommonArgs, plot_path: Option<&Path>) -> Result<()> {
    emit_tables(
        common,
        || report.json(),
        || report.csv(),
        || report.markdown(),
    )?;
    if let Some(path) = plot_path {
        plot_dir(path)?;
        let outcome = plot::plot(report, path)?;
        if !outcome.labels {
            eprintln!(
                "wring bench: no TrueType font found (install fonts-dejavu-core); {} has no labels",
                path.display()
            );
        }
        eprintln!("wring bench: plot written to {}", path.display());
    }
    Ok(())
}

/// Write a report's tables where `--json` and `--csv` ask, and its markdown table to stdout
/// unless one of them took stdout (`-`). Each form is rendered only when asked for.
fn emit_tables<E>(
    common: &CommonArgs,
    json: impl FnOnce() -> Result<String, E>,
    csv: impl FnOnce() -> Result<String, E>,
    markdown: impl FnOnce() -> String,
) -> Result<()>
where
    anyhow::Error: From<E>,
{
    let mut stdout_taken = false;
    if let Some(path) = &common.json {
        stdout_taken |= emit(path, &json()?)?;
    }
    if let Some(path) = &common.csv {
        stdout_taken |= emit(path, &csv()?)?;
    }
    if !stdout_taken {
        print!("{}", markdown());
    }
    Ok(())
}

/// Write `text` to `path`, or to stdout when `path` is `-`; true when it went to stdout.
fn emit(path: &Path, text: &str) -> Result<bool> {
    if path == Path::new("-") {
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
        return Ok(true);
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wring bench: wrote {}", path.display());
    Ok(false)
}

/// Make the directory a plot goes into (the default, `bench-out/`, is ignored by git).
fn plot_dir(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("making the plot's directory {}", dir.display()))?;
    }
    Ok(())
}
