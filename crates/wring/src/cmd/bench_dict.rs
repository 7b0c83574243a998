//! `wring bench dict`: trained dictionaries (`dict=auto`) against `dict=off` and the kernel's
//! btrfs on a tree of small files and on whole trees. Needs root. Thin: parse, call
//! wring_bench::dict, print.

use std::path::PathBuf;

use anyhow::{Context, Result};
use wring_bench::dict::{self, DictConfig};
use wring_bench::fs::Launcher;

/// `wring bench dict` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Directories whose small files make the small-file tree, repeatable
    #[arg(
        long = "source",
        default_values = ["/usr/include", "/usr/share/perl5", "/usr/lib/python3"]
    )]
    sources: Vec<PathBuf>,
    /// Largest file of the small-file tree, in bytes
    #[arg(long, default_value_t = 16384)]
    small: u64,
    /// Directories measured whole (small and large files mixed), repeatable; `none` for none
    #[arg(long = "whole", default_values = ["/usr/share/doc"])]
    whole: Vec<PathBuf>,
    /// More mount options for wring, after compress-force and dict (e.g. `dict_train=1M`,
    /// `uring=0`)
    #[arg(short = 'o', long = "options", default_value = "")]
    options: String,
    /// zstd levels, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,3,9")]
    levels: Vec<i32>,
    /// Scratch directory (default: a new one under the temporary directory)
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Also write the report as JSON to FILE (`-`: stdout, instead of the table)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Run `wring bench dict`.
pub fn run(args: Args) -> Result<()> {
    wring_fs::options::Options::parse(&args.options).context("--options")?;
    for &l in &args.levels {
        wring_fs::options::parse_spec("--levels", &format!("zstd:{l}"))?;
    }
    let cfg = DictConfig {
        sources: args.sources,
        small: args.small,
        whole: args
            .whole
            .into_iter()
            .filter(|w| w.as_os_str() != "none")
            .collect(),
        levels: args.levels,
        wring_options: args.options,
        launcher: Launcher::Cli(std::env::current_exe().context("finding the wring executable")?),
        work: args.work_dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("wring-bench-dict-{}", std::process::id()))
        }),
    };
    let report = dict::run(&cfg);
    let _ = std::fs::remove_dir_all(&cfg.work);
    let report = report?;
    match &args.json {
        Some(p) if p.as_os_str() == "-" => print!("{}", report.json()?),
        Some(p) => {
            std::fs::write(p, report.json()?)
                .with_context(|| format!("writing {}", p.display()))?;
            print!("{}", report.markdown());
        }
        None => print!("{}", report.markdown()),
    }
    Ok(())
}
