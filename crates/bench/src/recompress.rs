//! `wring bench recompress`: wring's userspace recompression against the kernel's own
//! compress-force writeback, on the same data, at the same level, in one run.
//!
//! Mirrors the comparison seed 004 asks for: for each spec, on fresh loop-mounted btrfs
//! filesystems (fs/btrfs's writeback compression path — compress_file_range() via the
//! btrfs-delalloc workers — is the reference):
//!
//! * wring: write K copies of the corpus uncompressed, sync, then time
//!   [`recompress`] with one thread and (on another fresh filesystem) with two, including the
//!   final sync;
//! * kernel: mount with `compress-force=<spec>` ([`KernelFs`]), time writing the same files
//!   until `sync -f` returns (levels btrfs does not have, like zstd:19, have no kernel row);
//! * ratio = uncompressed bytes / disk bytes of the files' extents (compsize's columns).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wring_btrfs::recompress::{recompress, Options, Skip, Status};
use wring_btrfs::scratch::{ScratchError, ScratchFs, DEFAULT_IMAGE_SIZE};
use wring_engine::{CompressSpec, Engine, EngineConfig, Policy};

use crate::corpus::Corpus;
use crate::kernel::{usage, write_copies, KernelFs};
use crate::BenchError;

/// The default specs.
pub const DEFAULT_SPECS: [&str; 7] = [
    "zstd:1", "zstd:3", "zstd:9", "zlib:3", "lzo", "zstd:15", "zstd:19",
];

/// What one spec measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The spec.
    pub spec: CompressSpec,
    /// Uncompressed bytes written per run.
    pub bytes: u64,
    /// wring with one thread, MB/s of uncompressed data.
    pub wring_j1: f64,
    /// wring with two threads.
    pub wring_j2: f64,
    /// The kernel's compress-force write, MB/s; None where btrfs has no such level.
    pub kernel: Option<f64>,
    /// wring's ratio (uncompressed / disk).
    pub wring_ratio: f64,
    /// The kernel's.
    pub kernel_ratio: Option<f64>,
}

/// Time wring recompressing `copies` copies of the corpus on `jobs` threads, on a fresh
/// filesystem. Returns (MB/s, ratio, bytes).
fn wring_run(
    corpus: &Corpus,
    copies: usize,
    spec: CompressSpec,
    policy: Policy,
    jobs: usize,
    image: u64,
) -> Result<(f64, f64, u64), BenchError> {
    let fs = ScratchFs::with_size("", image)?;
    let bytes = write_copies(corpus, fs.path(), copies)?;
    fs.sync()?;
    let engine = Arc::new(Engine::new(EngineConfig {
        streams: jobs,
        ..Default::default()
    }));
    let opts = Options {
        jobs,
        policy,
        ..Options::new(spec)
    };
    let start = Instant::now();
    let summary = recompress(&engine, &[fs.path().to_path_buf()], &opts, &mut |_| {})?;
    fs.sync()?;
    let secs = start.elapsed().as_secs_f64();
    // A file small enough to live inline in the metadata (a short file of the corpus, the cut
    // last file of a truncated sample) is left there, as btrfs keeps it: nothing to recompress.
    if let Some(bad) = summary
        .files
        .iter()
        .find(|f| !matches!(f.status, Status::Done | Status::Skipped(Skip::Inline)))
    {
        return Err(BenchError::NotRecompressed {
            path: bad.path.clone(),
            why: format!("{:?}", bad.status),
        });
    }
    let u = usage(fs.path())?;
    Ok((bytes as f64 / 1e6 / secs.max(1e-9), u.ratio(), bytes))
}

/// Time the kernel writing the same data with compress-force=spec. None when btrfs has no such
/// level or this kernel refuses the option.
fn kernel_run(
    corpus: &Corpus,
    copies: usize,
    spec: CompressSpec,
    image: u64,
) -> Result<Option<(f64, f64)>, BenchError> {
    let fs = match KernelFs::mount(spec, image) {
        Ok(fs) => fs,
        Err(BenchError::NotInBtrfs(_) | BenchError::Scratch(ScratchError::Mount { .. })) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let start = Instant::now();
    let bytes = write_copies(corpus, fs.path(), copies)?;
    fs.sync()?;
    let secs = start.elapsed().as_secs_f64();
    let u = fs.usage()?;
    Ok(Some((bytes as f64 / 1e6 / secs.max(1e-9), u.ratio())))
}

/// Run the benchmark for every spec, wring compressing under `policy` (the CLI's default is
/// early abort; `Policy::Force` matches the kernel's compress-force); `note` hears what is going
/// on. Needs root.
pub fn run(
    corpus: &Corpus,
    copies: usize,
    specs: &[CompressSpec],
    policy: Policy,
    note: &mut dyn FnMut(&str),
) -> Result<Vec<Row>, BenchError> {
    crate::kernel::require_root(
        "wring bench recompress",
        "loop devices, mount, encoded writes",
    )?;
    let data = corpus.bytes();
    if data == 0 {
        return Err(BenchError::EmptyCorpus(PathBuf::from(&corpus.source)));
    }
    // Sparse images: room for the uncompressed data, its rewrite and metadata.
    let image = DEFAULT_IMAGE_SIZE.max(data * copies.max(1) as u64 * 3 + (256 << 20));
    let mut rows = Vec::new();
    for &spec in specs {
        note(&format!("{spec}: wring -j1"));
        let (wring_j1, wring_ratio, bytes) = wring_run(corpus, copies, spec, policy, 1, image)?;
        note(&format!("{spec}: wring -j2"));
        let (wring_j2, _, _) = wring_run(corpus, copies, spec, policy, 2, image)?;
        note(&format!("{spec}: kernel compress-force"));
        let kernel = kernel_run(corpus, copies, spec, image)?;
        rows.push(Row {
            spec,
            bytes,
            wring_j1,
            wring_j2,
            kernel: kernel.map(|k| k.0),
            wring_ratio,
            kernel_ratio: kernel.map(|k| k.1),
        });
    }
    Ok(rows)
}

/// The rows as a markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let opt = |v: Option<f64>, digits: usize| {
        v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.digits$}"))
    };
    let mut s = String::from(
        "| spec | wring j1 MB/s | wring j2 MB/s | kernel MB/s | wring/kernel (j2) | wring ratio | kernel ratio | ratio wring/kernel |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.1} | {:.1} | {} | {} | {:.3} | {} | {} |\n",
            r.spec,
            r.wring_j1,
            r.wring_j2,
            opt(r.kernel, 1),
            opt(r.kernel.map(|k| r.wring_j2 / k), 2),
            r.wring_ratio,
            opt(r.kernel_ratio, 3),
            opt(r.kernel_ratio.map(|k| r.wring_ratio / k), 3),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_row_per_spec_and_na_without_kernel() {
        let rows = [Row {
            spec: "zstd:19".parse().unwrap(),
            bytes: 1,
            wring_j1: 10.0,
            wring_j2: 19.5,
            kernel: None,
            wring_ratio: 3.5,
            kernel_ratio: None,
        }];
        let t = markdown(&rows);
        assert!(
            t.lines()
                .nth(2)
                .unwrap()
                .starts_with("| zstd:19 | 10.0 | 19.5 | n/a |"),
            "{t}"
        );
    }
}
