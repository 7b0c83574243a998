//! Recompress files in place: read each file's data, compress it in 128 KiB extents through
//! the engine's offload (`-j` CPU workers) at any level, and hand the finished extents to the
//! kernel with `BTRFS_IOC_ENCODED_WRITE`, so the file's bytes never change while its extents do.
//!
//! This module holds the API and the report types; `plan.rs` decides which ranges become which
//! extents, `file.rs` does the work on one file (skip rules, lease, writes), and `pipeline.rs`
//! overlaps files: the next files are read and compressed while earlier ones are checked and
//! written.
//!
//! Mirrors what `btrfs filesystem defragment -c<alg>` does in the kernel (fs/btrfs/defrag.c
//! rewrites ranges so writeback compresses them), moved to userspace: the compression is
//! wring's, at levels btrfs's writeback cannot use, and the extents enter the file the way
//! `btrfs receive --compressed-data` puts them there (fs/btrfs/inode.c:
//! btrfs_do_encoded_write()).
//!
//! # Why a crash or kill never changes a file's content
//!
//! From fs/btrfs/inode.c btrfs_do_encoded_write() and the ordered-extent machinery
//! (fs/btrfs/ordered-data.c, btrfs_finish_one_ordered()):
//!
//! 1. An encoded write never writes over the file's current data. It refuses NODATASUM inodes
//!    (`-EINVAL`; nodatacow implies nodatasum), so there is no in-place (NOCOW) path; it
//!    reserves a *new* extent (`btrfs_reserve_extent`), copies our bytes into fresh pages and
//!    submits them there (`btrfs_submit_compressed_write`).
//! 2. The file's extent items are changed only when that I/O has completed: the ordered extent
//!    (`BTRFS_ORDERED_ENCODED | BTRFS_ORDERED_COMPRESSED`) finishes by dropping the old items
//!    for the range and inserting the new one, with its checksums, under one transaction
//!    handle. Until the transaction commits, the committed trees still point at the old
//!    extents, and extents freed by the drop stay pinned (not reusable) until that commit.
//! 3. A btrfs transaction commit is atomic (new tree roots become visible only with the
//!    superblock write, after the data and metadata they reference are on disk). So after a
//!    crash each range of the file is described by either the old items (old extent, intact)
//!    or the new ones (new extent, fully written): never a mix within a range, never a torn
//!    extent. The log tree changes nothing here: wring never fsyncs mid-file, and a logged
//!    range also references only completed extents.
//! 4. Both versions hold the same bytes: wring compresses exactly what a normal read returned
//!    under a write lease ([`crate::guard`]), decompresses its own output and compares it with
//!    the input before writing, and writes each extent at the offset it was read from with
//!    `len == unencoded_len` and `unencoded_offset == 0`, never past i_size. Ranges that are
//!    rewritten raw (below) go through the normal COW write path, with the same argument.
//! 5. Killing wring between or during ioctls only stops it early: an accepted encoded write is
//!    completed by the kernel (the ordered extent does not depend on the process), a refused
//!    one changed nothing. What a kill can leave is a file partly recompressed — and, for an
//!    uncompressed extent only partly rewritten, the old extent still allocated until a later
//!    run or rewrite frees it: space, never data.
//!
//! # What is rewritten
//!
//! The file's `EXTENT_DATA` items (tree search, after an fdatasync so they are current) are
//! grouped by the data extent they reference. Holes, preallocated ranges, inline files,
//! encrypted extents and extents shared with other files or snapshots (`FIEMAP_EXTENT_SHARED`)
//! are left alone: a hole stays a hole. A group of a *compressed* extent is judged whole: it is
//! rewritten only if the new extents together take at least `min_gain` percent (and at least
//! one sector) less than the old extent; otherwise it stays. An *uncompressed* extent is judged
//! 128 KiB at a time; once any piece of it gains, its other pieces are rewritten raw too
//! (normal `pwrite`), so the old extent is freed rather than pinned by the pieces left over.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wring_engine::{CompressSpec, Engine, Policy};

use crate::error::BtrfsError;
use crate::fsinfo::has_cap_sys_admin;
use crate::ioctl::Compression;
use crate::search::btrfs_info;
use crate::stat::StatReport;
use crate::walk::{walk, Found};

mod file;
mod pipeline;
mod plan;

/// How to recompress.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Algorithm and level (zlib, lzo or zstd: what btrfs can read).
    pub spec: CompressSpec,
    /// CPU workers compressing (the offload's streams), 1 up to the machine's parallelism.
    pub jobs: usize,
    /// Least gain, in percent of the old on-disk size, for an extent to be rewritten.
    pub min_gain: f64,
    /// Only report what would be done.
    pub dry_run: bool,
    /// Also recompress files marked nodatacow or NOCOMPRESS.
    pub force: bool,
    /// When to try compressing (default: early abort on incompressible data).
    pub policy: Policy,
}

impl Options {
    /// Defaults: early abort, no minimum gain beyond btrfs's one sector, one thread.
    pub fn new(spec: CompressSpec) -> Options {
        Options {
            spec,
            jobs: 1,
            min_gain: 0.0,
            dry_run: false,
            force: false,
            policy: Policy::EarlyAbort,
        }
    }
}

/// Why a file was left alone (or left part-way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The file is not on btrfs.
    NotBtrfs,
    /// Empty.
    Empty,
    /// Its data lives inside the metadata (inline extent): nothing a 128 KiB extent can save.
    Inline,
    /// `chattr +C` (nodatacow): the kernel refuses encoded writes to nodatasum inodes.
    NoDataCow,
    /// The kernel refused the encoded write and no rule explains it: a nodatasum inode.
    NoDataSum,
    /// `chattr +m` / `btrfs property set compression none` (NOCOMPRESS).
    NoCompress,
    /// `chattr +i` or `+a`.
    Immutable,
    /// Another descriptor of the file is open (open for writing, or for reading, or mapped).
    InUse,
    /// It is a running program.
    Running,
    /// Another process holds a lease on it.
    Leased,
    /// It has file capabilities (`security.capability`), which any write strips.
    FileCapabilities,
    /// Someone opened, truncated or changed it while wring worked; what was done so far stays.
    ChangedDuringRun(String),
    /// Leases are not available, so wring cannot watch the file.
    LeaseUnavailable(String),
    /// It disappeared.
    Vanished,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::NotBtrfs => f.write_str("not on btrfs"),
            Skip::Empty => f.write_str("empty"),
            Skip::Inline => f.write_str("inline (stored in the metadata; nothing to gain)"),
            Skip::NoDataCow => f.write_str("nodatacow (chattr +C); --force to try anyway"),
            Skip::NoDataSum => {
                f.write_str("the kernel refuses encoded writes here (nodatasum/nodatacow inode)")
            }
            Skip::NoCompress => f.write_str(
                "marked NOCOMPRESS (chattr +m or compression property none); --force to override",
            ),
            Skip::Immutable => f.write_str("immutable or append-only (chattr +i/+a)"),
            Skip::InUse => f.write_str("open by another process (a write lease was refused)"),
            Skip::Running => f.write_str("a running program"),
            Skip::Leased => f.write_str("another process holds a lease on it"),
            Skip::FileCapabilities => f.write_str(
                "has file capabilities (security.capability), which a write would strip",
            ),
            Skip::ChangedDuringRun(what) => write!(f, "changed during the run ({what})"),
            Skip::LeaseUnavailable(e) => write!(f, "cannot take a write lease: {e}"),
            Skip::Vanished => f.write_str("vanished"),
        }
    }
}

/// How one file ended.
#[derive(Debug)]
pub enum Status {
    /// Looked at, and every extent worth it rewritten (possibly none).
    Done,
    /// Left alone, or left part-way, for this reason.
    Skipped(Skip),
    /// An error stopped work on it; its content is unchanged.
    Failed(BtrfsError),
}

/// What happened to one file.
#[derive(Debug)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub size: u64,
    /// How it ended.
    pub status: Status,
    /// Extents written compressed.
    pub compressed_extents: u64,
    /// File bytes those cover.
    pub compressed_bytes: u64,
    /// File bytes rewritten raw (so an old extent could be freed).
    pub raw_bytes: u64,
    /// File bytes looked at and kept as they were (no gain).
    pub kept_bytes: u64,
    /// File bytes in extents shared with other files or snapshots (left alone).
    pub shared_bytes: u64,
    /// Estimated disk bytes saved (old extents freed minus new ones).
    pub saved: i64,
    /// Set when wring was stalled between a lease check and a write for this long: a concurrent
    /// writer could have slipped in (see [`crate::guard`]).
    pub stall: Option<Duration>,
}

impl FileReport {
    fn new(path: PathBuf, size: u64) -> FileReport {
        FileReport {
            path,
            size,
            status: Status::Done,
            compressed_extents: 0,
            compressed_bytes: 0,
            raw_bytes: 0,
            kept_bytes: 0,
            shared_bytes: 0,
            saved: 0,
            stall: None,
        }
    }
}

/// Progress, as it happens.
#[derive(Debug)]
pub enum Event<'a> {
    /// The walk is done: this many files of this many bytes to look at.
    Planned {
        /// Regular files found.
        files: u64,
        /// Their total size.
        bytes: u64,
    },
    /// Starting on a file.
    FileStarted(&'a Path),
    /// This many more file bytes are dealt with.
    Bytes(u64),
    /// A file is finished.
    FileDone(&'a FileReport),
    /// The walk passed over this path.
    Passed(&'a Path, String),
}

/// The whole run.
#[derive(Debug, Default)]
pub struct Summary {
    /// Every file, in walk order.
    pub files: Vec<FileReport>,
    /// compsize-style usage of the files before.
    pub before: StatReport,
    /// And after (None in a dry run).
    pub after: Option<StatReport>,
    /// The filesystem filled up (ENOSPC or EDQUOT): the run stopped, leaving this many files
    /// unstarted. Every file is unchanged in content, the one that met the error too.
    pub full: Option<usize>,
}

impl Summary {
    /// Files fully processed.
    pub fn done(&self) -> usize {
        self.files
            .iter()
            .filter(|f| matches!(f.status, Status::Done))
            .count()
    }

    /// Estimated bytes saved (in a dry run, what would be saved).
    pub fn saved(&self) -> i64 {
        self.files.iter().map(|f| f.saved).sum()
    }
}

/// Errors that stop the whole run (per-file problems are in [`FileReport`]s).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecompressError {
    /// Not allowed.
    #[error("wring btrfs recompress needs CAP_SYS_ADMIN (encoded writes and tree search); run it as root")]
    NeedsCapSysAdmin,
    /// The spec names something btrfs cannot store.
    #[error("btrfs stores zlib, lzo and zstd extents only; {0} is not one of them")]
    Unsupported(CompressSpec),
    /// LZO on a filesystem whose sectors are not 4 KiB.
    #[error("wring writes lzo for 4 KiB sectors; {} has {sector_size}-byte sectors", path.display())]
    LzoSector {
        /// The path.
        path: PathBuf,
        /// Its sector size.
        sector_size: u32,
    },
    /// More compression workers asked for than the machine runs at once.
    #[error("-j {jobs} asks for more compression threads than this machine runs at once; use -j 1 to -j {max}")]
    TooManyJobs {
        /// Asked for.
        jobs: usize,
        /// `std::thread::available_parallelism`.
        max: usize,
    },
    /// The compression offload could not start.
    #[error("cannot start the compression workers: {0}")]
    Offload(#[source] wring_engine::Error),
    /// A file lane could not start.
    #[error("cannot start a recompress thread: {0}")]
    Thread(#[source] std::io::Error),
    /// A path problem (not btrfs, unreadable).
    #[error(transparent)]
    Btrfs(#[from] BtrfsError),
}

/// The most `-j` accepts: the threads this machine runs at once.
pub fn max_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Recompress every regular file under `paths` with `opts.jobs` CPU workers of one
/// [`wring_engine::offload::Offload`] on `engine`; several files are read, compressed, checked
/// and written at once (see `pipeline.rs`).
pub fn recompress(
    engine: &Arc<Engine>,
    paths: &[PathBuf],
    opts: &Options,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Summary, RecompressError> {
    let algorithm = opts
        .spec
        .btrfs_algorithm()
        .map_err(|_| RecompressError::Unsupported(opts.spec))?;
    let max = max_jobs();
    if opts.jobs > max {
        return Err(RecompressError::TooManyJobs {
            jobs: opts.jobs,
            max,
        });
    }
    if !has_cap_sys_admin() {
        return Err(RecompressError::NeedsCapSysAdmin);
    }
    let found = walk(paths)?;
    for p in paths {
        let f = File::open(p).map_err(|source| BtrfsError::Path {
            path: p.clone(),
            source,
        })?;
        let sector_size = btrfs_info(&f)?.sector_size;
        if Compression::for_algorithm(algorithm, sector_size).is_none() {
            return Err(RecompressError::LzoSector {
                path: p.clone(),
                sector_size,
            });
        }
    }
    let (mut files, mut bytes) = (0, 0);
    for f in &found {
        if let Found::File(_, size) = f {
            files += 1;
            bytes += size;
        }
    }
    on_event(Event::Planned { files, bytes });
    let mut summary = Summary {
        after: (!opts.dry_run).then(StatReport::default),
        full: None,
        ..Summary::default()
    };
    pipeline::run(engine, found, opts, algorithm, &mut summary, on_event)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wring_engine::EngineConfig;

    #[test]
    fn more_jobs_than_the_machine_runs_are_refused_naming_j_and_the_range() {
        let engine = Arc::new(Engine::new(EngineConfig::default()));
        let opts = Options {
            jobs: max_jobs() + 1,
            ..Options::new(CompressSpec::parse("zstd:3").map(|(s, _)| s).unwrap())
        };
        let err = recompress(
            &engine,
            &[PathBuf::from("/nonexistent")],
            &opts,
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            matches!(err, RecompressError::TooManyJobs { .. }),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&format!("-j {}", max_jobs() + 1)), "{text}");
        assert!(
            text.contains(&format!("-j 1 to -j {}", max_jobs())),
            "{text}"
        );
    }
}
