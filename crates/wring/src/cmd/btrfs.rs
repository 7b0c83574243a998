//! `wring btrfs ...`: recompress files in place through encoded writes, verify every extent
//! against the kernel's reads, and a compsize-style report. Thin: the work is in wring-btrfs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wring_btrfs::recompress::{max_jobs, recompress, Event, Options, Skip, Status, Summary};
use wring_btrfs::stat::{human_bytes, stat_paths, StatReport, Usage};
use wring_btrfs::walk::{walk, Found};
use wring_btrfs::{verify_path, Compression, Report};
use wring_engine::{CompressSpec, Engine, EngineConfig, Policy};

/// btrfs subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Recompress files in place at any level, content unchanged (BTRFS_IOC_ENCODED_WRITE)
    Recompress(RecompressArgs),
    /// Check that every extent, decoded by wring, equals the kernel's normal read
    Verify(VerifyArgs),
    /// compsize-style report, with extent counts per algorithm and a ratio histogram
    Stat(StatArgs),
}

/// Options of `wring btrfs recompress`.
#[derive(clap::Args)]
pub struct RecompressArgs {
    /// Algorithm and level, as btrfs's mount option: zstd:19, zlib:9, lzo, zstd:-3
    #[arg(short = 'c', long = "compress", default_value = "zstd:3")]
    compress: String,
    /// Compression threads, 1 up to the number of cores (default: all cores)
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// Rewrite an extent only if it shrinks by at least this many percent
    #[arg(long, default_value_t = 0.0)]
    min_gain: f64,
    /// Report what would be done; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Also recompress files marked nodatacow or NOCOMPRESS
    #[arg(long)]
    force: bool,
    /// Compress every extent fully instead of giving up early on incompressible data
    #[arg(long)]
    no_early_abort: bool,
    /// List every file, not only those skipped or failed
    #[arg(short, long)]
    verbose: bool,
    /// Files and directories (recursed, staying on one btrfs)
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Options of `wring btrfs verify`.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// List every file
    #[arg(short, long)]
    verbose: bool,
    /// Files and directories (recursed, staying on one btrfs)
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Options of `wring btrfs stat`.
#[derive(clap::Args)]
pub struct StatArgs {
    /// Sizes in bytes
    #[arg(short, long)]
    bytes: bool,
    /// Also list what was passed over (other filesystems, special files)
    #[arg(short, long)]
    verbose: bool,
    /// Files and directories (recursed, staying on one btrfs)
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

pub fn run(c: Command) -> Result<()> {
    match c {
        Command::Recompress(a) => run_recompress(a),
        Command::Verify(a) => run_verify(a),
        Command::Stat(a) => run_stat(a),
    }
}

fn parse_spec(text: &str) -> Result<CompressSpec> {
    let (spec, warning) =
        CompressSpec::parse(text).with_context(|| format!("in --compress {text}"))?;
    if let Some(w) = warning {
        eprintln!("wring: {w}");
    }
    Ok(spec)
}

fn run_recompress(a: RecompressArgs) -> Result<()> {
    let spec = parse_spec(&a.compress)?;
    if !(0.0..100.0).contains(&a.min_gain) {
        bail!("--min-gain {} is not a percentage in 0..100", a.min_gain);
    }
    let jobs = jobs_for(a.jobs)?;
    let engine = Arc::new(Engine::new(EngineConfig {
        streams: jobs,
        ..Default::default()
    }));
    let opts = Options {
        spec,
        jobs,
        min_gain: a.min_gain,
        dry_run: a.dry_run,
        force: a.force,
        policy: if a.no_early_abort {
            Policy::Force
        } else {
            Policy::EarlyAbort
        },
    };
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut files_total, mut files_done) = (0u64, 0u64);
    let verbose = a.verbose;
    let started = Instant::now();
    let summary = recompress(&engine, &a.paths, &opts, &mut |event| match event {
        Event::Planned { files, bytes } => {
            files_total = files;
            bar.set_length(bytes);
            bar.set_message(format!("files 0/{files}"));
        }
        Event::FileStarted(_) => {}
        Event::Bytes(n) => bar.inc(n),
        Event::FileDone(r) => {
            files_done += 1;
            bar.set_message(format!("files {files_done}/{files_total}"));
            let line = match &r.status {
                Status::Done if verbose => Some(format!(
                    "{}: {} extents compressed, {} rewritten raw, {} kept, {} saved",
                    r.path.display(),
                    r.compressed_extents,
                    human_bytes(r.raw_bytes).trim(),
                    human_bytes(r.kept_bytes).trim(),
                    signed_bytes(r.saved)
                )),
                Status::Done => None,
                Status::Skipped(s) => Some(format!("{}: skipped: {s}", r.path.display())),
                Status::Failed(e) => Some(format!(
                    "{}: failed (content unchanged): {e}",
                    r.path.display()
                )),
            };
            if let Some(line) = line {
                bar.suspend(|| eprintln!("{line}"));
            }
            if let Some(stall) = r.stall {
                bar.suspend(|| {
                    eprintln!(
                        "{}: WARNING: wring stalled {:.1}s between a lease check and a write; a concurrent writer could have been overwritten",
                        r.path.display(),
                        stall.as_secs_f64()
                    )
                });
            }
        }
        Event::Passed(path, why) if verbose => {
            bar.suspend(|| eprintln!("{}: passed over: {why}", path.display()))
        }
        Event::Passed(..) => {}
    })?;
    bar.finish_and_clear();
    print_summary(
        &summary,
        spec,
        jobs,
        started.elapsed().as_secs_f64(),
        a.dry_run,
    );
    if let Some(left) = summary.full {
        bail!(
            "the filesystem is full (no space left, or over quota): the run stopped with {left} \
             file(s) not started; every file's content is unchanged (a file stopped midway keeps \
             its old extents where no new one was written). Free space and run it again"
        );
    }
    let failed = summary
        .files
        .iter()
        .filter(|f| matches!(f.status, Status::Failed(_)))
        .count();
    if failed > 0 {
        bail!("{failed} file(s) failed (their content is unchanged)");
    }
    Ok(())
}

/// `-j`: 1 up to the threads this machine runs at once (the default).
fn jobs_for(asked: Option<usize>) -> Result<usize> {
    let max = max_jobs();
    match asked {
        None => Ok(max),
        Some(0) => bail!("-j 0 asks for no compression threads; use -j 1 to -j {max}"),
        Some(j) if j > max => bail!(
            "-j {j} asks for more compression threads than this machine runs at once ({max}); use -j 1 to -j {max}"
        ),
        Some(j) => Ok(j),
    }
}

fn signed_bytes(v: i64) -> String {
    if v < 0 {
        format!("-{}", human_bytes(v.unsigned_abs()).trim())
    } else {
        human_bytes(v as u64).trim().to_string()
    }
}

fn print_summary(s: &Summary, spec: CompressSpec, jobs: usize, secs: f64, dry_run: bool) {
    let compressed: u64 = s.files.iter().map(|f| f.compressed_extents).sum();
    let compressed_bytes: u64 = s.files.iter().map(|f| f.compressed_bytes).sum();
    let raw: u64 = s.files.iter().map(|f| f.raw_bytes).sum();
    let shared: u64 = s.files.iter().map(|f| f.shared_bytes).sum();
    let bytes: u64 = s.files.iter().map(|f| f.size).sum();
    let mut skipped: std::collections::BTreeMap<String, usize> = Default::default();
    for f in &s.files {
        if let Status::Skipped(k) = &f.status {
            *skipped.entry(skip_kind(k)).or_default() += 1;
        }
    }
    let verb = if dry_run { "would write" } else { "wrote" };
    println!(
        "{spec} on {jobs} thread(s): {} of {} files done; {verb} {compressed} compressed extents ({} of data) and rewrote {} raw; {} in shared extents left alone; {:.1}s, {:.1} MB/s",
        s.done(),
        s.files.len(),
        human_bytes(compressed_bytes).trim(),
        human_bytes(raw).trim(),
        human_bytes(shared).trim(),
        secs,
        bytes as f64 / 1e6 / secs.max(1e-9),
    );
    for (why, n) in &skipped {
        println!("  skipped {n}: {why}");
    }
    println!(
        "{:<8} {:<8} {:<12} {:<12} {:<12}",
        "", "Perc", "Disk Usage", "Uncompressed", "Referenced"
    );
    let row = |name: &str, u: &Usage| {
        println!(
            "{:<8} {:<8} {:<12} {:<12} {:<12}",
            name,
            format!("{:3}%", u.percent()),
            human_bytes(u.disk),
            human_bytes(u.uncompressed),
            human_bytes(u.referenced)
        )
    };
    row("before", &s.before.total());
    match &s.after {
        Some(after) => {
            row("after", &after.total());
            let (b, a) = (s.before.total().disk, after.total().disk);
            println!(
                "disk usage {} -> {} ({} saved)",
                human_bytes(b).trim(),
                human_bytes(a).trim(),
                signed_bytes(b as i64 - a as i64)
            );
        }
        None => println!("would save about {}", signed_bytes(s.saved())),
    }
}

fn skip_kind(k: &Skip) -> String {
    match k {
        Skip::ChangedDuringRun(_) => "changed during the run".into(),
        Skip::LeaseUnavailable(_) => "could not take a write lease".into(),
        other => other.to_string(),
    }
}

fn run_verify(a: VerifyArgs) -> Result<()> {
    if !wring_btrfs::fsinfo::has_cap_sys_admin() {
        bail!("wring btrfs verify needs CAP_SYS_ADMIN (encoded reads); run it as root");
    }
    let engine = Engine::new(EngineConfig::default());
    let mut total = Report::default();
    let (mut files, mut errors) = (0usize, 0usize);
    for found in walk(&a.paths)? {
        let Found::File(path, _) = found else {
            continue;
        };
        files += 1;
        match verify_path(&engine, &path) {
            Ok(report) => {
                for bad in report.failures() {
                    println!("{}: {bad}", path.display());
                }
                if a.verbose {
                    println!(
                        "{}: {} extents, {} compressed, {}",
                        path.display(),
                        report.extents(),
                        report.compressed_extents(),
                        if report.is_ok() { "ok" } else { "MISMATCH" }
                    );
                }
                total.merge(report);
            }
            Err(e @ wring_btrfs::BtrfsError::NeedsCapSysAdmin { .. }) => return Err(e.into()),
            Err(e) => {
                errors += 1;
                println!("{}: could not check: {e}", path.display());
            }
        }
    }
    let failures = total.failures().count();
    println!(
        "{files} files, {} extents checked ({} compressed): {failures} mismatches, {errors} unreadable",
        total.extents(),
        total.compressed_extents()
    );
    for (c, t) in &total.tally {
        let name = if *c == Compression::None {
            "none/holes".to_string()
        } else {
            c.to_string()
        };
        println!(
            "  {name:<10} {:>8} extents {:>12} stored for {:>12} file bytes{}",
            t.extents,
            t.encoded_bytes,
            t.file_bytes,
            if t.failed > 0 {
                format!(", {} FAILED", t.failed)
            } else {
                String::new()
            }
        );
    }
    if failures > 0 || errors > 0 {
        bail!("{failures} extent(s) did not match, {errors} file(s) could not be checked");
    }
    Ok(())
}

fn run_stat(a: StatArgs) -> Result<()> {
    if !wring_btrfs::fsinfo::has_cap_sys_admin() {
        bail!("wring btrfs stat needs CAP_SYS_ADMIN (tree search); run it as root");
    }
    let (report, passed): (StatReport, _) = stat_paths(&a.paths)?;
    for (path, why) in &passed {
        if a.verbose || !why.starts_with("not a regular") {
            eprintln!("{}: {why}", path.display());
        }
    }
    if report.total().uncompressed == 0 {
        eprintln!("wring: no data extents (empty files, or data still in the page cache)");
    }
    print!("{}", report.render(a.bytes));
    Ok(())
}
