//! `wring bench meta`: many small files through a wring mount against the kernel's btrfs, the
//! FUSE floor (libfuse's passthrough_hp over a kernel btrfs) and a plain FUSE pass-through
//! (bindfs) — tar -x, find + stat, cp -a, git clone, status, checkout + gc, rm -rf,
//! and stress-ng's dir, link, rename and xattr stressors.
//! Needs root. Thin: parse, call wring_bench::meta, print.

use std::path::PathBuf;

use anyhow::{Context, Result};
use wring_bench::fs::Launcher;
use wring_bench::meta::{self, MetaConfig};
use wring_fs::options::parse_spec;

/// `wring bench meta` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Directories tarred into the tree (sorted by name), repeatable
    #[arg(long = "source", default_values = ["/usr/share/doc", "/usr/include"])]
    sources: Vec<PathBuf>,
    /// Fewest entries the tree must have
    #[arg(long, default_value_t = 10_000)]
    min_entries: usize,
    /// Compression method (btrfs spelling), compress-force on both filesystems
    #[arg(long, default_value = "zstd:1")]
    method: String,
    /// A git repository to clone, run `git status` in, check out a hundred commits back and
    /// `git gc` (default: the one the current directory is in, if any; `none` for no git steps)
    #[arg(long)]
    git: Option<String>,
    /// More mount options for wring, after compress-force (e.g. `uring=0` for /dev/fuse where
    /// the default, `uring=auto`, takes FUSE over io_uring; `threads=2`)
    #[arg(short = 'o', long = "options", default_value = "")]
    options: String,
    /// Skip the plain FUSE pass-through (bindfs)
    #[arg(long)]
    no_bindfs: bool,
    /// libfuse's passthrough_hp, run over a kernel btrfs as the FUSE floor (default:
    /// $WRING_PASSTHROUGH_HP, passthrough_hp on the PATH, or target/passthrough_hp/ as
    /// scripts/passthrough-hp.sh builds it; `none`: no floor)
    #[arg(long, value_name = "PATH")]
    passthrough_hp: Option<PathBuf>,
    /// Seconds per stress-ng stressor (dir, link, rename, xattr) on each filesystem, when
    /// stress-ng is installed; 0 for none
    #[arg(long, default_value_t = 10)]
    stress_secs: u32,
    /// Numbers of small files for the cost-per-file curve, comma-separated ("none": no curve)
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    curve: Vec<String>,
    /// Scratch directory (default: a new one under the temporary directory)
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Also write the whole report as JSON to FILE (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write one line per step as CSV to FILE (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// The top of the git work tree the current directory is in.
fn current_repo() -> Option<PathBuf> {
    let o = std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()?;
    let top = String::from_utf8_lossy(&o.stdout).trim().to_string();
    (o.status.success() && !top.is_empty()).then(|| top.into())
}

/// Run `wring bench meta`.
pub fn run(args: Args) -> Result<()> {
    parse_spec("compress-force", &args.method)?;
    wring_fs::options::Options::parse(&args.options).context("--options")?;
    let git = match args.git.as_deref() {
        Some("none") => None,
        Some(p) => Some(PathBuf::from(p)),
        None => current_repo(),
    };
    let curve = args
        .curve
        .iter()
        .filter(|c| c.as_str() != "none")
        .map(|c| {
            c.parse::<usize>()
                .with_context(|| format!("--curve: '{c}' is not a number"))
        })
        .collect::<Result<Vec<_>>>()?;
    let floor = match args.passthrough_hp {
        Some(p) if p.as_os_str() == "none" => Err("--passthrough-hp none".to_string()),
        Some(p) => Ok(p),
        None => meta::find_passthrough_hp(),
    };
    let cfg = MetaConfig {
        sources: args.sources,
        min_entries: args.min_entries,
        method: args.method,
        launcher: Launcher::Cli(std::env::current_exe().context("finding the wring executable")?),
        wring_options: args.options,
        work: args.work_dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("wring-bench-meta-{}", std::process::id()))
        }),
        git,
        bindfs: !args.no_bindfs,
        floor_missing: floor.as_ref().err().cloned().unwrap_or_default(),
        passthrough_hp: floor.ok(),
        stress_secs: args.stress_secs,
        curve,
    };
    let report = meta::run(&cfg);
    let _ = std::fs::remove_dir_all(&cfg.work);
    let report = report?;
    let mut table = true;
    for (path, text) in [(&args.json, report.json()?), (&args.csv, report.csv()?)] {
        match path {
            Some(p) if p.as_os_str() == "-" => {
                print!("{text}");
                table = false;
            }
            Some(p) => {
                std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?
            }
            None => {}
        }
    }
    if table {
        print!("{}", report.markdown());
    }
    Ok(())
}
