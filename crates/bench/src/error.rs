//! The library's one error type.

use std::io;
use std::path::PathBuf;

/// Why a benchmark could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or device operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The engine's compression workers could not be started.
    #[error("could not start the compression workers: {0}")]
    Workers(#[source] wring_engine::Error),
    /// The corpus has no data to compress.
    #[error("the corpus at {0} holds no readable, non-empty files")]
    EmptyCorpus(PathBuf),
    /// A compression spec or level list that cannot be understood.
    #[error("{0}")]
    Spec(String),
    /// The engine failed on an extent.
    #[error("{spec}: extent {index}: {source}")]
    Engine {
        /// The spec being measured.
        spec: String,
        /// Which extent, in corpus order.
        index: usize,
        /// The engine's error.
        #[source]
        source: wring_engine::Error,
    },
    /// A decompressed extent differs from its input.
    #[error("{spec}: extent {index} does not decompress to its input")]
    Mismatch {
        /// The spec being measured.
        spec: String,
        /// Which extent, in corpus order.
        index: usize,
    },
    /// A scratch btrfs could not be made, mounted or removed.
    #[error("scratch btrfs: {0}")]
    Scratch(#[from] wring_btrfs::scratch::ScratchError),
    /// An encoded read failed while measuring the kernel's extents.
    #[error("reading extents: {0}")]
    Btrfs(#[from] wring_btrfs::BtrfsError),
    /// zram could not be configured or measured.
    #[error("zram: {0}")]
    Zram(String),
    /// The benchmark needs root.
    #[error("{what} needs root ({why})")]
    NotRoot {
        /// The benchmark.
        what: &'static str,
        /// What it does that needs root.
        why: &'static str,
    },
    /// The kernel's btrfs cannot compress with the method asked for.
    #[error("the kernel's btrfs cannot compress this way: {0}")]
    NotInBtrfs(#[from] wring_engine::NotInBtrfs),
    /// `wring btrfs recompress` failed as a whole.
    #[error(transparent)]
    Recompress(#[from] wring_btrfs::recompress::RecompressError),
    /// A file the benchmark wrote was not recompressed.
    #[error("recompress of {path} did not finish: {why}")]
    NotRecompressed {
        /// The file.
        path: PathBuf,
        /// Its status.
        why: String,
    },
    /// A wring mount daemon did not start.
    #[error("{what}: {source}")]
    WringMount {
        /// What was being mounted.
        what: String,
        /// Why it did not become ready.
        #[source]
        source: wring_fs::daemon::StartError,
    },
    /// A wring filesystem operation (mkfs, umount, an xattr) failed.
    #[error("{what}: {source}")]
    Fs {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: wring_fs::FsError,
    },
    /// A program the benchmark runs (cp, tar) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A wring filesystem's stat report lacks a figure.
    #[error("the stat report of {path} has no {field}: {report}")]
    StatReport {
        /// The path asked about.
        path: PathBuf,
        /// The figure missing.
        field: String,
        /// The report.
        report: String,
    },
    /// The user pressed Ctrl-C; everything set up has been undone.
    #[error("interrupted")]
    Interrupted,
    /// The plot could not be drawn or written.
    #[error("plot {path}: {reason}")]
    Plot {
        /// The PNG file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The CSV report could not be produced.
    #[error("csv: {0}")]
    Csv(#[from] csv::Error),
    /// The JSON report could not be produced.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl BenchError {
    /// An I/O error with a description of what was being done.
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        BenchError::Io {
            what: what.into(),
            source,
        }
    }
}
