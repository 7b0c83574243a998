//! `wring bench recompress`: wring's recompression (-j1, -j2) against the kernel's
//! compress-force writeback of the same data at the same level, as a markdown table of MB/s
//! and ratios. Needs root (loop-mounted scratch btrfs). Thin: the work is in wring-bench.

use std::path::PathBuf;

use anyhow::{Context, Result};
use wring_bench::corpus::{Corpus, CORPUS_ENV};
use wring_bench::kernel::require_root;
use wring_bench::recompress::{markdown, run as run_bench, DEFAULT_SPECS};
use wring_engine::{CompressSpec, Policy};

/// Options of `wring bench recompress`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus directory (default: $WRING_CORPUS, else a sample of system files)
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Copies of the corpus written per run
    #[arg(long, default_value_t = 1)]
    copies: usize,
    /// Specs to compare, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_SPECS.map(String::from))]
    specs: Vec<String>,
    /// Compress every extent fully, as the kernel's compress-force does, instead of wring's
    /// default early abort on incompressible data
    #[arg(long)]
    no_early_abort: bool,
    /// Bytes of the default sample of system files (as `wring bench levels` takes) when there
    /// is no corpus
    #[arg(long, default_value_t = 64 << 20)]
    sample_bytes: usize,
}

pub fn run(args: Args) -> Result<()> {
    require_root(
        "wring bench recompress",
        "loop devices, mount, encoded writes",
    )?;
    let specs = args
        .specs
        .iter()
        .map(|s| {
            s.trim()
                .parse::<CompressSpec>()
                .with_context(|| format!("in --specs: {s}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let dir = args
        .corpus
        .or_else(|| std::env::var_os(CORPUS_ENV).map(PathBuf::from));
    let corpus = match &dir {
        Some(d) => {
            Corpus::load(d).with_context(|| format!("loading the corpus {}", d.display()))?
        }
        None => Corpus::default_sample()
            .context("sampling the default corpus")?
            .truncated(args.sample_bytes as u64),
    };
    eprintln!(
        "corpus: {} files, {:.1} MB ({}), {} cop{}",
        corpus.files.len(),
        corpus.bytes() as f64 / 1e6,
        dir.as_ref()
            .map_or("system sample".to_string(), |d| d.display().to_string()),
        args.copies,
        if args.copies == 1 { "y" } else { "ies" }
    );
    let policy = if args.no_early_abort {
        Policy::Force
    } else {
        Policy::EarlyAbort
    };
    let rows = run_bench(&corpus, args.copies, &specs, policy, &mut |note| {
        eprintln!("  {note}")
    })?;
    print!("{}", markdown(&rows));
    Ok(())
}
