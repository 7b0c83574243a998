//! `wring bench fs`: seed 001's experiment through a real wring mount against kernel btrfs —
//! write (copy + sync) and read (tar after remount) throughput and ratio per method, then the
//! large-extent comparison (ratio gain, cold random 4 KiB read latency). Needs root. With
//! `--data s3://BUCKET/PREFIX` (or `--data seaweed`), each method also runs on a store whose
//! extents are in a bucket.
//! Thin: parse, call wring_bench::fs, print.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use wring_bench::corpus::CORPUS_ENV;
use wring_bench::fs::{self as bench, Config, Launcher, Objects};
use wring_engine::size::parse_size;
use wring_fs::options::parse_spec;

/// `wring bench fs` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus directory to copy in (default: $WRING_CORPUS)
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Copies of the corpus (3 by default: a write of one 167 MB copy lasts under a second,
    /// short enough for this kind of machine's drift to swing a round by ±20%)
    #[arg(long, default_value_t = 3)]
    copies: usize,
    /// Methods, btrfs's spelling, comma-separated
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lzo,zstd:1,zstd:3,zlib:3"
    )]
    methods: Vec<String>,
    /// wring's max_extent for the main table
    #[arg(long, default_value = "128K")]
    max_extent: String,
    /// The larger max_extent compared against --max-extent ("none" to skip the comparison)
    #[arg(long, default_value = "1M")]
    big_extent: String,
    /// Method of the extent-size comparison
    #[arg(long, default_value = "zstd:3")]
    extent_method: String,
    /// Random 4 KiB reads per latency measurement
    #[arg(long, default_value_t = 2000)]
    random_reads: usize,
    /// Skip kernel btrfs
    #[arg(long)]
    no_kernel: bool,
    /// Scratch directory for stores and mount points
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// More mount options for wring, after compress-force and max_extent (e.g. `uring=0`
    /// for /dev/fuse where the default, `uring=auto`, takes FUSE over io_uring)
    #[arg(short = 'o', long = "options", default_value = "")]
    options: String,
    /// Runs per method and filesystem, alternating; the fastest write and read of each are kept
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Also run each method with its extents in a bucket (mkfs --data): s3://BUCKET/PREFIX
    /// (each run under a prefix of its own below it), or `seaweed` to start a SeaweedFS on
    /// this machine for the run (scripts/setup.sh installs weed)
    #[arg(long, value_name = "URL")]
    data: Option<String>,
    /// The S3 endpoint for --data s3://… (https://HOST[:PORT], or http:// on this machine);
    /// without it, AWS
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Credentials file for --data s3://… (0600; else the AWS_* environment)
    #[arg(long, value_name = "FILE")]
    credentials: Option<PathBuf>,
}

/// `--data`: `seaweed`, or a bucket.
fn objects(args: &Args) -> Result<Option<Objects>> {
    match args.data.as_deref() {
        None => {
            if args.endpoint.is_some() || args.credentials.is_some() {
                bail!("--endpoint and --credentials need --data s3://BUCKET/PREFIX");
            }
            Ok(None)
        }
        Some("seaweed") => {
            if args.endpoint.is_some() || args.credentials.is_some() {
                bail!("--data seaweed starts its own SeaweedFS: --endpoint and --credentials are not for it");
            }
            Ok(Some(Objects::Seaweed))
        }
        Some(url) => {
            let rest = url.strip_prefix("s3://").unwrap_or_default();
            if !rest.contains('/') || rest.starts_with('/') {
                bail!("--data must be s3://BUCKET/PREFIX or seaweed, not '{url}'");
            }
            Ok(Some(Objects::Bucket {
                url: url.to_string(),
                endpoint: args.endpoint.clone(),
                credentials: args.credentials.clone(),
            }))
        }
    }
}

fn size(what: &str, text: &str) -> Result<usize> {
    parse_size(text)
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .with_context(|| format!("{what}: '{text}' is not a size (4K to 4M)"))
}

/// Run `wring bench fs`.
pub fn run(args: Args) -> Result<()> {
    let objects = objects(&args)?;
    wring_fs::options::Options::parse(&args.options).context("--options")?;
    let corpus = match args
        .corpus
        .or_else(|| std::env::var_os(CORPUS_ENV).map(Into::into))
    {
        Some(c) => c,
        None => bail!("no corpus: pass --corpus DIR or set WRING_CORPUS"),
    };
    if !corpus.is_dir() {
        bail!("the corpus {} is not a directory", corpus.display());
    }
    if args.copies == 0 {
        bail!("--copies must be at least 1");
    }
    for m in args.methods.iter().chain([&args.extent_method]) {
        parse_spec("compress-force", m)?;
    }
    let big_extent = match args.big_extent.as_str() {
        "none" | "" => None,
        t => Some(size("--big-extent", t)?),
    };
    let cfg = Config {
        corpus,
        copies: args.copies,
        methods: args.methods,
        max_extent: size("--max-extent", &args.max_extent)?,
        extent_method: args.extent_method,
        big_extent,
        random_reads: args.random_reads,
        kernel: !args.no_kernel,
        launcher: Launcher::Cli(std::env::current_exe().context("finding the wring executable")?),
        wring_options: args.options,
        work: args.work_dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("wring-bench-fs-{}", std::process::id()))
        }),
        repeat: args.repeat.max(1),
        objects,
    };
    let report = bench::run(&cfg);
    let _ = std::fs::remove_dir_all(&cfg.work);
    print!("{}", report?.render());
    Ok(())
}
