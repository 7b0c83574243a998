//! `wring defrag`: what `btrfs filesystem defragment -c` does, for people without
//! btrfs-progs, through the same ioctl (BTRFS_IOC_DEFRAG_RANGE), with what btrfs's ABI cannot
//! carry through btrfs-progs 6.2: a level, and any zstd level up to 22. A progress bar counts
//! the bytes of the files done.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use wring_engine::CompressSpec;
use wring_fs::{in_btrfs_defrag, DefragArgs, BTRFS_IOC_DEFRAG_RANGE, DEFRAG_START_IO};

/// `wring defrag`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Compress again with ALG[:LEVEL]: zlib (1-9), lzo, or zstd (-15 to 22); without a level,
    /// the algorithm's default. Without -c the
    /// extents stay as they are (wring's extents are fixed windows; there is nothing to merge)
    /// and the files' dirty data is written back
    #[arg(short = 'c', long = "compress", value_name = "ALG[:LEVEL]")]
    compress: Option<String>,
    /// Descend into directories (files only, symlinks not followed, one filesystem)
    #[arg(short = 'r', long)]
    recursive: bool,
    /// First byte of each file to rewrite
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Bytes to rewrite from --start (default: to the end)
    #[arg(long)]
    len: Option<u64>,
    /// Files (or, with -r, directories) on a wring mount
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Run `wring defrag`.
pub fn run(args: Args) -> Result<()> {
    let compress = args.compress.as_deref().map(spec).transpose()?;
    let mut files = Vec::new();
    for p in &args.paths {
        collect(p, args.recursive, &mut files)?;
    }
    let total: u64 = files.iter().map(|(_, len)| len).sum();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let len = args.len.unwrap_or(u64::MAX);
    let range = match compress {
        Some(spec) => DefragArgs::compressing(spec, args.start, len),
        None => DefragArgs {
            start: args.start,
            len,
            flags: DEFRAG_START_IO,
            ..DefragArgs::whole()
        },
    };
    let mut failed = 0;
    for (path, len) in &files {
        bar.set_message(path.display().to_string());
        if let Err(e) = defrag(path, &range) {
            bar.suspend(|| eprintln!("wring defrag: {}: {e:#}", path.display()));
            failed += 1;
        }
        bar.inc(*len);
    }
    bar.finish_and_clear();
    let done = files.len() - failed;
    println!("defragmented {done} of {} files", files.len());
    if failed > 0 {
        bail!("{failed} files could not be defragmented");
    }
    Ok(())
}

/// The spec of `-c`, if btrfs's ioctl can carry its algorithm.
fn spec(text: &str) -> Result<CompressSpec> {
    let s = CompressSpec::parse_strict(text)
        .with_context(|| format!("-c {text}: expected zlib[:1-9], lzo or zstd[:-15..22]"))?;
    match s.algorithm {
        Some(a) if in_btrfs_defrag(a) => Ok(s),
        _ => bail!("-c {text}: btrfs's defragment ioctl carries zlib, lzo and zstd only"),
    }
}

/// The regular files at `path` (under it with `recursive`), with their sizes.
fn collect(path: &Path, recursive: bool, out: &mut Vec<(PathBuf, u64)>) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).with_context(|| path.display().to_string())?;
    if meta.is_file() {
        out.push((path.to_path_buf(), meta.len()));
    } else if meta.is_dir() && recursive {
        walk(path, meta.dev(), out)?;
    } else if meta.is_dir() {
        bail!("{} is a directory (-r descends into it)", path.display());
    }
    Ok(())
}

fn walk(dir: &Path, dev: u64, out: &mut Vec<(PathBuf, u64)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| dir.display().to_string())?
        .collect::<Result<_, _>>()
        .with_context(|| dir.display().to_string())?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let meta = e
            .metadata()
            .with_context(|| e.path().display().to_string())?;
        if meta.dev() != dev {
            continue;
        }
        if meta.is_file() {
            out.push((e.path(), meta.len()));
        } else if meta.is_dir() {
            walk(&e.path(), dev, out)?;
        }
    }
    Ok(())
}

/// One BTRFS_IOC_DEFRAG_RANGE on `path`, opened read-only as btrfs-progs opens it.
fn defrag(path: &Path, range: &DefragArgs) -> Result<()> {
    let f = std::fs::File::open(path)?;
    let mut arg = range.to_bytes();
    // SAFETY: `arg` is the 48-byte struct the request's size names, alive across the call;
    // the kernel only reads it (an _IOW request).
    let r = unsafe {
        libc::ioctl(
            f.as_raw_fd(),
            BTRFS_IOC_DEFRAG_RANGE as libc::Ioctl,
            arg.as_mut_ptr(),
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOTTY) {
            bail!("not on a wring mount or btrfs (the defragment ioctl is unknown here)");
        }
        return Err(e.into());
    }
    Ok(())
}
