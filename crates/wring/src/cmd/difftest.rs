//! `wring difftest`: the kernel as the oracle, for soak runs (CI runs the same passes with a
//! budget, in crates/fs/tests/difftest.rs). Mounts a fresh store with this binary's daemon
//! and runs wring-difftest's passes against tmpfs or btrfs. Needs root. Thin: parse, call
//! wring_difftest, print.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use wring_difftest::{crash, exhaustive, random, Daemon, Mount, Oracle, OracleKind, Report};

/// `wring difftest` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The pass: random, exhaustive, crash, or all three
    #[arg(value_parser = ["random", "exhaustive", "crash", "all"], default_value = "all")]
    pass: String,
    /// The long mode: a million random operations, every sequence of up to 3 namespace
    /// operations over two names in two directories, 500 kills (btrfs is the usual oracle)
    #[arg(long)]
    long: bool,
    /// The kernel filesystem answering for the kernel: tmpfs, btrfs (a loop-mounted
    /// image), or a directory on any filesystem
    #[arg(long, default_value = "tmpfs", value_name = "tmpfs|btrfs|DIR")]
    oracle: String,
    /// Mount options for the wring mount (allow_other is always added), e.g. uring=0
    #[arg(short = 'o', long = "options", default_value = "")]
    options: String,
    /// The first seed (random and crash passes)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Random operations in all, over every seed and thread (default: 18,000, or a million
    /// with --long)
    #[arg(long)]
    ops: Option<u64>,
    /// Threads of the random pass, each in its own directory
    #[arg(long, default_value_t = 3)]
    threads: usize,
    /// Names in the random pool
    #[arg(long, default_value_t = 4)]
    names: usize,
    /// Kills of the crash pass (default: 25, or 500 with --long)
    #[arg(long)]
    rounds: Option<u64>,
    /// Batches of the exhaustive pass run at once
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Leave O_TMPFILE out (a transport without it)
    #[arg(long)]
    no_tmpfile: bool,
    /// Where the store, the mount point and the oracle go (default: a new directory under
    /// the temporary directory, removed at the end)
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Write each failure's script into DIR (failure-N.sh)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Run `wring difftest`.
pub fn run(args: Args) -> Result<()> {
    wring_fs::options::Options::parse(&args.options).context("--options")?;
    let kind = match args.oracle.as_str() {
        "tmpfs" => OracleKind::Tmpfs,
        "btrfs" => OracleKind::Btrfs,
        dir if std::path::Path::new(dir).is_dir() => OracleKind::Dir(dir.into()),
        other => bail!("--oracle {other}: not tmpfs, btrfs or a directory"),
    };
    let (base, temp) = match &args.work_dir {
        Some(d) => (d.clone(), false),
        None => {
            let d = std::env::temp_dir().join(format!("wring-difftest-{}", std::process::id()));
            (d, true)
        }
    };
    std::fs::create_dir_all(&base).with_context(|| format!("making {}", base.display()))?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut mount = Mount::new(&base, Daemon::Wring(exe), &args.options)?;
    let oracle = Oracle::new(&base, &kind)?;
    let started = Instant::now();
    let report = passes(&args, &mut mount, &oracle);
    drop(mount);
    drop(oracle);
    if temp {
        let _ = std::fs::remove_dir_all(&base);
    }
    let report = report?;
    println!(
        "{} operations, {} trees compared, {} failures, {:.0} s (oracle: {})",
        report.ops,
        report.trees,
        report.failures.len(),
        started.elapsed().as_secs_f64(),
        args.oracle
    );
    write_failures(&report, args.out.as_deref())?;
    if !report.failures.is_empty() {
        bail!("wring diverged from the kernel");
    }
    Ok(())
}

/// The passes `args` asks for, one after the other.
fn passes(args: &Args, mount: &mut Mount, oracle: &Oracle) -> Result<Report> {
    let all = args.pass == "all";
    let mut report = Report::default();
    if all || args.pass == "random" {
        report.absorb(random_pass(args, mount, oracle)?);
    }
    if all || args.pass == "exhaustive" {
        let plans = match args.long {
            true => exhaustive::Plan::long(),
            false => exhaustive::Plan::ci(),
        };
        let total = plans.iter().map(exhaustive::Plan::count).sum();
        let bar = bar(total, "exhaustive");
        let r = exhaustive::run(mount, oracle, &plans, args.jobs, &|done, _| {
            bar.set_position(done)
        })?;
        bar.finish_and_clear();
        report.absorb(r);
    }
    if all || args.pass == "crash" {
        let rounds = args.rounds.unwrap_or(if args.long { 500 } else { 25 });
        let bar = bar(rounds, "crash");
        for r in 0..rounds {
            let cfg = crash::Config {
                seed: args.seed.wrapping_add(r),
                rounds: 1,
                names: args.names,
                tmpfile: !args.no_tmpfile,
                ..crash::Config::default()
            };
            report.absorb(crash::run(mount, oracle, &cfg)?);
            bar.inc(1);
        }
        bar.finish_and_clear();
    }
    Ok(report)
}

/// Seeds of the random pass until the operations are run, 2,000 per thread a seed.
fn random_pass(args: &Args, mount: &mut Mount, oracle: &Oracle) -> Result<Report> {
    let total = args
        .ops
        .unwrap_or(if args.long { 1_000_000 } else { 18_000 });
    let per_seed = 2000 * args.threads.max(1) as u64;
    let bar = bar(total, "random");
    let mut report = Report::default();
    let mut seed = args.seed;
    while report.ops < total {
        let cfg = random::Config {
            seed,
            threads: args.threads.max(1),
            ops: per_seed
                .min(total - report.ops)
                .div_ceil(args.threads.max(1) as u64),
            names: args.names,
            tmpfile: !args.no_tmpfile,
            ..random::Config::default()
        };
        let r = random::run(mount, oracle, &cfg)?;
        let ran = r.ops.max(1);
        report.absorb(r);
        bar.inc(ran);
        seed += 1;
        if report.failures.len() >= 10 {
            break;
        }
    }
    bar.finish_and_clear();
    Ok(report)
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {eta}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

/// Print each failure; with `out`, write its script there too.
fn write_failures(report: &Report, out: Option<&std::path::Path>) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    for (k, f) in report.failures.iter().enumerate() {
        writeln!(stdout, "\n{}\n{}", f.what, f.script)?;
        if let Some(dir) = out {
            std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
            let p = dir.join(format!("failure-{}.sh", k + 1));
            std::fs::write(&p, &f.script).with_context(|| format!("writing {}", p.display()))?;
        }
    }
    Ok(())
}
