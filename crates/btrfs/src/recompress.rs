//! Recompress files in place: read each file's data, compress it in 128 KiB extents on the
//! engine's streams at any level, and hand the finished extents to the kernel with
//! `BTRFS_IOC_ENCODED_WRITE`, so the file's bytes never change while its extents do.
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

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wring_engine::{Algorithm, CompressSpec, Engine, Outcome, Policy};

use crate::error::{BtrfsError, Op, Refusal};
use crate::fsinfo::{
    has_cap_sys_admin, has_xattr, inode_flags, is_on_btrfs, overlaps, shared_ranges, FS_APPEND_FL,
    FS_IMMUTABLE_FL, FS_NOCOMP_FL, FS_NOCOW_FL,
};
use crate::guard::{restore_times, LeaseRefused, LeaseState, Stamp, WriteLease};
use crate::ioctl::{encoded_write, Compression, EncodedWrite, MAX_UNCOMPRESSED};
use crate::search::{btrfs_info, DiskCompression, FileExtentItem, ItemKind};
use crate::stat::{file_items, StatReport};
use crate::walk::{walk, Found};

/// How to recompress.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Algorithm and level (zlib, lzo or zstd: what btrfs can read).
    pub spec: CompressSpec,
    /// Compression threads.
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
    /// A path problem (not btrfs, unreadable).
    #[error(transparent)]
    Btrfs(#[from] BtrfsError),
}

/// Recompress every regular file under `paths`. `engine` should have at least `opts.jobs`
/// streams.
pub fn recompress(
    engine: &Engine,
    paths: &[PathBuf],
    opts: &Options,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<Summary, RecompressError> {
    let algorithm = match opts.spec.algorithm {
        Some(a @ (Algorithm::Zlib | Algorithm::Lzo | Algorithm::Zstd)) => a,
        _ => return Err(RecompressError::Unsupported(opts.spec)),
    };
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
        ..Summary::default()
    };
    let jobs = opts.jobs.max(1);
    std::thread::scope(|scope| {
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        for _ in 0..jobs {
            let rx = Arc::clone(&job_rx);
            let tx = done_tx.clone();
            let policy = opts.policy;
            let spec = opts.spec;
            scope.spawn(move || worker(engine, spec, algorithm, policy, &rx, &tx));
        }
        drop(done_tx);
        let mut pool = Pool {
            jobs: job_tx,
            done: done_rx,
            in_flight: 0,
            limit: 2 * jobs + 2,
            next_id: 0,
        };
        for f in found {
            match f {
                Found::File(path, size) => {
                    on_event(Event::FileStarted(&path));
                    let report = process_file(
                        &mut pool,
                        &path,
                        size,
                        opts,
                        algorithm,
                        &mut summary,
                        on_event,
                    );
                    on_event(Event::FileDone(&report));
                    summary.files.push(report);
                }
                Found::Passed(path, why) => on_event(Event::Passed(&path, why.to_string())),
            }
        }
        drop(pool); // closes the job channel: workers end
    });
    Ok(summary)
}

/// One piece of data to compress.
struct Job {
    id: u64,
    data: Vec<u8>,
}

/// Its result: `Some(bytes)` compressed (and checked to decompress to the input), `None` when
/// it does not compress (or early abort gave up).
struct Done {
    id: u64,
    data: Vec<u8>,
    result: Result<Option<Vec<u8>>, String>,
}

fn worker(
    engine: &Engine,
    spec: CompressSpec,
    algorithm: Algorithm,
    policy: Policy,
    jobs: &Mutex<mpsc::Receiver<Job>>,
    done: &mpsc::Sender<Done>,
) {
    let mut dst = vec![0u8; MAX_UNCOMPRESSED];
    let mut check = vec![0u8; MAX_UNCOMPRESSED];
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A panic (a bug) must still answer the job, or the run would wait for it forever.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compress_checked(
                engine, spec, algorithm, policy, &job.data, &mut dst, &mut check,
            )
        }))
        .unwrap_or_else(|_| Err("compressing the extent panicked".into()));
        if done
            .send(Done {
                id: job.id,
                data: job.data,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Compress one extent and decode the result again before it goes anywhere near the file.
fn compress_checked(
    engine: &Engine,
    spec: CompressSpec,
    algorithm: Algorithm,
    policy: Policy,
    data: &[u8],
    dst: &mut [u8],
    check: &mut [u8],
) -> Result<Option<Vec<u8>>, String> {
    match engine.compress_with(spec, policy, data, dst) {
        Ok(Outcome::Compressed(n)) => {
            let out = &mut check[..data.len()];
            match engine.decompress(algorithm, &dst[..n], out) {
                Ok(_) if out[..] == data[..] => Ok(Some(dst[..n].to_vec())),
                Ok(_) => Err("the compressed extent does not decompress to its input".into()),
                Err(e) => Err(format!("the compressed extent does not decompress: {e}")),
            }
        }
        Ok(Outcome::Incompressible | Outcome::Skipped) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

struct Pool {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<Done>,
    in_flight: usize,
    limit: usize,
    next_id: u64,
}

impl Pool {
    fn submit(&mut self, data: Vec<u8>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        // The workers live as long as the pool; a send fails only if they all panicked, and
        // then `recv` reports it.
        let _ = self.jobs.send(Job { id, data });
        self.in_flight += 1;
        id
    }

    fn recv(&mut self) -> Option<Done> {
        let d = self.done.recv().ok()?;
        self.in_flight -= 1;
        Some(d)
    }

    /// Wait for everything in flight and throw it away.
    fn drain(&mut self) {
        while self.in_flight > 0 && self.recv().is_some() {}
    }
}

/// A file range to compress as one extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    start: u64,
    len: u64,
}

/// The ranges referencing one data extent.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    /// Judged as a whole (a compressed extent) or per piece (an uncompressed one).
    joint: bool,
    /// Disk bytes of the extent.
    old_disk: u64,
    pieces: Vec<Piece>,
}

/// What the items of a file say to do. Also returns the bytes in shared extents.
fn plan(items: &[FileExtentItem], size: u64, shared: &[(u64, u64)]) -> (Vec<Group>, u64) {
    let mut order: Vec<u64> = Vec::new();
    let mut by_extent: HashMap<u64, Vec<&FileExtentItem>> = HashMap::new();
    for item in items {
        if item.kind != ItemKind::Regular || item.disk_bytenr == 0 || item.file_offset >= size {
            continue; // holes, prealloc, inline, past EOF
        }
        by_extent
            .entry(item.disk_bytenr)
            .or_insert_with(|| {
                order.push(item.disk_bytenr);
                Vec::new()
            })
            .push(item);
    }
    let mut groups = Vec::new();
    let mut shared_bytes = 0;
    for bytenr in order {
        let refs = &by_extent[&bytenr];
        let range = |i: &FileExtentItem| (i.file_offset, i.end().min(size));
        let is_shared = refs.iter().any(|i| {
            let (s, e) = range(i);
            overlaps(shared, s, e)
        });
        let encrypted = refs.iter().any(|i| i.encryption != 0);
        if is_shared || encrypted {
            shared_bytes += refs.iter().map(|i| range(i).1 - range(i).0).sum::<u64>();
            continue;
        }
        let compressed = refs[0].compression != DiskCompression::None;
        let mut pieces = Vec::new();
        for i in refs {
            let (mut s, e) = range(i);
            while s < e {
                let len = (e - s).min(MAX_UNCOMPRESSED as u64);
                pieces.push(Piece { start: s, len });
                s += len;
            }
        }
        groups.push(Group {
            joint: compressed,
            old_disk: refs[0].disk_num_bytes,
            pieces,
        });
    }
    (groups, shared_bytes)
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Whether going from `old` to `new` disk bytes gains enough.
fn gains(old: u64, new: u64, sector: u64, min_gain: f64) -> bool {
    old >= new + sector && (old - new) as f64 * 100.0 >= min_gain * old as f64
}

/// Why work on a file stopped early.
enum Stop {
    Skip(Skip),
    Fail(BtrfsError),
}

impl From<Stop> for Status {
    fn from(s: Stop) -> Status {
        match s {
            Stop::Skip(s) => Status::Skipped(s),
            Stop::Fail(e) => Status::Failed(e),
        }
    }
}

impl From<BtrfsError> for Stop {
    fn from(e: BtrfsError) -> Stop {
        Stop::Fail(e)
    }
}

/// Everything about the file being worked on.
struct Work<'a> {
    file: &'a File,
    lease: Option<WriteLease<'a>>,
    /// What the inode looks like after our last change.
    expected: Stamp,
    original: Stamp,
    compression: Compression,
    sector: u64,
    opts: &'a Options,
    report: FileReport,
    wrote: bool,
}

impl Work<'_> {
    /// Before any write: the lease is unbroken and the inode unchanged since we last looked.
    fn check(&mut self) -> Result<(), Stop> {
        if let Some(lease) = &mut self.lease {
            if lease.state()? != LeaseState::Held {
                return Err(Stop::Skip(Skip::ChangedDuringRun(
                    "another process opened or truncated it".into(),
                )));
            }
        }
        let now = Stamp::of(self.file)?;
        if !now.unchanged(&self.expected) {
            return Err(Stop::Skip(Skip::ChangedDuringRun(
                "its size, mtime or ctime changed".into(),
            )));
        }
        Ok(())
    }

    /// After a write: note how long since the lease check, and what the inode looks like now.
    fn after_write(&mut self) -> Result<(), Stop> {
        if let Some(lease) = &self.lease {
            if let Err(stall) = lease.check_window() {
                self.report.stall = Some(stall);
            }
        }
        self.wrote = true;
        self.expected = Stamp::of(self.file)?;
        if self.expected.size != self.original.size {
            return Err(Stop::Skip(Skip::ChangedDuringRun(format!(
                "size went from {} to {}",
                self.original.size, self.expected.size
            ))));
        }
        Ok(())
    }

    fn write_compressed(&mut self, piece: Piece, data: &[u8]) -> Result<(), Stop> {
        self.check()?;
        let w = EncodedWrite::whole(data, piece.len, self.compression);
        match encoded_write(self.file, piece.start, &w) {
            Ok(_) => {}
            Err(BtrfsError::WriteRejected {
                reason: Refusal::NoKnownRule,
                ..
            }) => return Err(Stop::Skip(Skip::NoDataSum)),
            Err(e) => return Err(Stop::Fail(e)),
        }
        self.report.compressed_extents += 1;
        self.report.compressed_bytes += piece.len;
        self.after_write()
    }

    fn write_raw(&mut self, piece: Piece, data: &[u8]) -> Result<(), Stop> {
        self.check()?;
        self.file
            .write_all_at(data, piece.start)
            .map_err(|e| BtrfsError::io(Op::Write, piece.start, e))?;
        self.report.raw_bytes += piece.len;
        self.after_write()
    }

    fn read(&self, piece: Piece) -> Result<Vec<u8>, Stop> {
        let mut buf = vec![0u8; piece.len as usize];
        match self.file.read_exact_at(&mut buf, piece.start) {
            Ok(()) => Ok(buf),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(Stop::Skip(Skip::ChangedDuringRun("it got shorter".into())))
            }
            Err(e) => Err(Stop::Fail(BtrfsError::io(Op::Read, piece.start, e))),
        }
    }
}

/// Open for recompression: read-write (read-only for a dry run), never following a symlink,
/// without touching atime, and non-blocking so another process's lease is an error rather than
/// a wait.
fn open(path: &Path, dry_run: bool) -> Result<File, Skip> {
    let attempt = |write: bool| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOATIME | libc::O_CLOEXEC)
            .open(path)
    };
    match attempt(!dry_run) {
        Ok(f) => {
            // SAFETY: F_GETFL/F_SETFL take ints; clearing O_NONBLOCK keeps later I/O ordinary.
            unsafe {
                let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                if fl >= 0 {
                    libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
            }
            Ok(f)
        }
        Err(e) => Err(match e.raw_os_error() {
            Some(libc::ETXTBSY) => Skip::Running,
            Some(libc::EWOULDBLOCK) => Skip::Leased,
            Some(libc::ENOENT) => Skip::Vanished,
            Some(libc::EPERM) => {
                let flags = attempt(false).ok().and_then(|f| inode_flags(&f).ok());
                match flags {
                    Some(fl) if fl & (FS_IMMUTABLE_FL | FS_APPEND_FL) != 0 => Skip::Immutable,
                    _ => Skip::LeaseUnavailable(format!("open: {e}")),
                }
            }
            _ => Skip::LeaseUnavailable(format!("open: {e}")),
        }),
    }
}

#[allow(clippy::too_many_arguments)]
fn process_file(
    pool: &mut Pool,
    path: &Path,
    size: u64,
    opts: &Options,
    algorithm: Algorithm,
    summary: &mut Summary,
    on_event: &mut dyn FnMut(Event<'_>),
) -> FileReport {
    let mut report = FileReport::new(path.to_path_buf(), size);
    let file = match open(path, opts.dry_run) {
        Ok(f) => f,
        Err(skip) => {
            on_event(Event::Bytes(size));
            report.status = Status::Skipped(skip);
            return report;
        }
    };
    let mut report = match prepare(&file, opts, algorithm, &report.path) {
        Ok((work, groups, items)) => {
            summary.before.add_file(&items);
            run_groups(pool, work, groups, on_event)
        }
        Err(stop) => {
            // Left as it is: it counts the same before and after.
            if let Ok(items) = file_items(&file) {
                summary.before.add_file(&items);
            }
            on_event(Event::Bytes(size));
            report.status = stop.into();
            report
        }
    };
    report.size = size;
    if let Some(after) = &mut summary.after {
        // After the fdatasync in run_groups the items are current; a file we skipped counts as
        // it is.
        match file_items(&file) {
            Ok(items) => after.add_file(&items),
            Err(e) => {
                if matches!(report.status, Status::Done) {
                    report.status = Status::Failed(e);
                }
            }
        }
    }
    report
}

type Prepared<'a> = (Work<'a>, Vec<Group>, Vec<FileExtentItem>);

/// Checks, lease, flush and plan.
fn prepare<'a>(
    file: &'a File,
    opts: &'a Options,
    algorithm: Algorithm,
    path: &Path,
) -> Result<Prepared<'a>, Stop> {
    let stop = std::convert::identity::<Stop>;
    let skip = Stop::Skip;
    if !is_on_btrfs(file).map_err(|e| stop(e.into()))? {
        return Err(skip(Skip::NotBtrfs));
    }
    let stamp = Stamp::of(file).map_err(|e| stop(e.into()))?;
    if stamp.size == 0 {
        return Err(skip(Skip::Empty));
    }
    let flags = inode_flags(file).map_err(|e| stop(e.into()))?;
    if flags & FS_NOCOW_FL != 0 && !opts.force {
        return Err(skip(Skip::NoDataCow));
    }
    if flags & FS_NOCOMP_FL != 0 && !opts.force {
        return Err(skip(Skip::NoCompress));
    }
    if has_xattr(file, "security.capability").map_err(|e| stop(e.into()))? {
        return Err(skip(Skip::FileCapabilities));
    }
    let lease = if opts.dry_run {
        None
    } else {
        match WriteLease::take(file) {
            Ok(l) => Some(l),
            Err(LeaseRefused::InUse) => return Err(skip(Skip::InUse)),
            Err(LeaseRefused::Unavailable(e)) => {
                return Err(skip(Skip::LeaseUnavailable(e.to_string())))
            }
        }
    };
    if !opts.dry_run {
        // Delalloc and ordered extents become items, so the tree shows the whole file.
        file.sync_data()
            .map_err(|e| stop(BtrfsError::io(Op::Sync, 0, e).into()))?;
    }
    let stamp = Stamp::of(file).map_err(|e| stop(e.into()))?;
    let items = file_items(file).map_err(|e| stop(e.into()))?;
    if items
        .iter()
        .any(|i| matches!(i.kind, ItemKind::Inline { .. }))
    {
        return Err(skip(Skip::Inline));
    }
    let info = btrfs_info(file).map_err(|e| stop(e.into()))?;
    let compression = Compression::for_algorithm(algorithm, info.sector_size).ok_or_else(|| {
        stop(Stop::Fail(BtrfsError::WriteRejected {
            offset: 0,
            reason: Refusal::NoEncodingForSector {
                algorithm,
                sector_size: u64::from(info.sector_size),
            },
        }))
    })?;
    let shared = shared_ranges(file).map_err(|e| stop(e.into()))?;
    let (groups, shared_bytes) = plan(&items, stamp.size, &shared);
    let mut r = FileReport::new(path.to_path_buf(), stamp.size);
    r.shared_bytes = shared_bytes;
    Ok((
        Work {
            file,
            lease,
            expected: stamp,
            original: stamp,
            compression,
            sector: u64::from(info.sector_size.max(512)),
            opts,
            report: r,
            wrote: false,
        },
        groups,
        items,
    ))
}

/// A piece's input and, when it compressed, its compressed bytes.
type PieceResult = (Vec<u8>, Option<Vec<u8>>);

/// Where a group stands while its pieces are compressed.
struct GroupState {
    pending: usize,
    /// Joint groups: each piece's original data and result, once in.
    results: Vec<Option<PieceResult>>,
    /// Per-piece groups: pieces not rewritten, and whether any was.
    untouched: Vec<Piece>,
    touched: bool,
}

fn run_groups(
    pool: &mut Pool,
    mut work: Work<'_>,
    groups: Vec<Group>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> FileReport {
    let total = work.original.size;
    let planned: u64 = groups.iter().flat_map(|g| &g.pieces).map(|p| p.len).sum();
    let mut states: Vec<GroupState> = groups
        .iter()
        .map(|g| GroupState {
            pending: g.pieces.len(),
            results: vec![None; if g.joint { g.pieces.len() } else { 0 }],
            untouched: Vec::new(),
            touched: false,
        })
        .collect();
    let mut queue: VecDeque<(usize, usize)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, grp)| (0..grp.pieces.len()).map(move |p| (g, p)))
        .collect();
    let mut ids: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut counted = 0u64;
    let outcome = (|| -> Result<(), Stop> {
        loop {
            while pool.in_flight < pool.limit {
                let Some((g, p)) = queue.pop_front() else {
                    break;
                };
                let data = work.read(groups[g].pieces[p])?;
                ids.insert(pool.submit(data), (g, p));
            }
            if pool.in_flight == 0 {
                break;
            }
            let Some(done) = pool.recv() else {
                return Err(Stop::Fail(BtrfsError::io(
                    Op::Write,
                    0,
                    io::Error::other("the compression threads stopped"),
                )));
            };
            let Some((g, p)) = ids.remove(&done.id) else {
                continue;
            };
            let compressed = done.result.map_err(|e| {
                Stop::Fail(BtrfsError::io(
                    Op::Write,
                    groups[g].pieces[p].start,
                    io::Error::other(e),
                ))
            })?;
            let group = &groups[g];
            let state = &mut states[g];
            state.pending -= 1;
            if group.joint {
                state.results[p] = Some((done.data, compressed));
                if state.pending == 0 {
                    finish_joint(&mut work, group, state)?;
                    let n = group.pieces.iter().map(|p| p.len).sum();
                    counted += n;
                    on_event(Event::Bytes(n));
                }
            } else {
                let piece = group.pieces[p];
                let old = round_up(piece.len, work.sector);
                match compressed {
                    Some(c)
                        if gains(
                            old,
                            round_up(c.len() as u64, work.sector),
                            work.sector,
                            work.opts.min_gain,
                        ) =>
                    {
                        work.report.saved += (old - round_up(c.len() as u64, work.sector)) as i64;
                        if !work.opts.dry_run {
                            work.write_compressed(piece, &c)?;
                        } else {
                            work.report.compressed_extents += 1;
                            work.report.compressed_bytes += piece.len;
                        }
                        state.touched = true;
                    }
                    _ => state.untouched.push(piece),
                }
                counted += piece.len;
                on_event(Event::Bytes(piece.len));
                if state.pending == 0 {
                    finish_pieces(&mut work, group, state)?;
                }
            }
        }
        Ok(())
    })();
    if let Err(stop) = outcome {
        pool.drain();
        let _ = finish_file(&mut work);
        on_event(Event::Bytes(total.saturating_sub(counted)));
        work.report.status = stop.into();
        return work.report;
    }
    on_event(Event::Bytes(total.saturating_sub(planned.max(counted))));
    if let Err(stop) = finish_file(&mut work) {
        work.report.status = stop.into();
    }
    work.report
}

/// A compressed extent's group: rewrite all its ranges if together they gain enough.
fn finish_joint(work: &mut Work<'_>, group: &Group, state: &mut GroupState) -> Result<(), Stop> {
    let sector = work.sector;
    let new: u64 = state
        .results
        .iter()
        .zip(&group.pieces)
        .map(|(r, piece)| match r {
            Some((_, Some(c))) => round_up(c.len() as u64, sector),
            _ => round_up(piece.len, sector),
        })
        .sum();
    let len: u64 = group.pieces.iter().map(|p| p.len).sum();
    if !gains(group.old_disk, new, sector, work.opts.min_gain) {
        work.report.kept_bytes += len;
        return Ok(());
    }
    work.report.saved += group.old_disk as i64 - new as i64;
    for (r, &piece) in state.results.iter_mut().zip(&group.pieces) {
        let Some((data, compressed)) = r.take() else {
            continue;
        };
        if work.opts.dry_run {
            if compressed.is_some() {
                work.report.compressed_extents += 1;
                work.report.compressed_bytes += piece.len;
            } else {
                work.report.raw_bytes += piece.len;
            }
            continue;
        }
        match compressed {
            Some(c) => work.write_compressed(piece, &c)?,
            None => work.write_raw(piece, &data)?,
        }
    }
    Ok(())
}

/// An uncompressed extent's group, all pieces judged: if any was rewritten, rewrite the rest
/// raw so the old extent is freed.
fn finish_pieces(work: &mut Work<'_>, _group: &Group, state: &mut GroupState) -> Result<(), Stop> {
    let untouched = std::mem::take(&mut state.untouched);
    if !state.touched {
        work.report.kept_bytes += untouched.iter().map(|p| p.len).sum::<u64>();
        return Ok(());
    }
    for piece in untouched {
        if work.opts.dry_run {
            work.report.raw_bytes += piece.len;
            continue;
        }
        let data = work.read(piece)?;
        work.write_raw(piece, &data)?;
    }
    Ok(())
}

/// Make it durable, put mtime/atime back, let go of the lease.
fn finish_file(work: &mut Work<'_>) -> Result<(), Stop> {
    if work.wrote {
        // Waits for the ordered extents, so the new items are in the tree (and on disk once
        // the log or the transaction commits).
        work.file
            .sync_data()
            .map_err(|e| BtrfsError::io(Op::Sync, 0, e))?;
        let held = match &mut work.lease {
            Some(l) => l.state()? == LeaseState::Held,
            None => true,
        };
        // Only when nobody else touched the file do its old times still describe it.
        if held && Stamp::of(work.file)?.unchanged(&work.expected) {
            restore_times(work.file, &work.original)?;
        }
    }
    if let Some(l) = &mut work.lease {
        l.release();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(
        off: u64,
        bytenr: u64,
        disk: u64,
        ram: u64,
        num: u64,
        c: u8,
        kind: ItemKind,
    ) -> FileExtentItem {
        FileExtentItem {
            file_offset: off,
            generation: 1,
            ram_bytes: ram,
            compression: DiskCompression::from_raw(c),
            encryption: 0,
            kind,
            disk_bytenr: bytenr,
            disk_num_bytes: disk,
            offset: 0,
            num_bytes: num,
        }
    }

    #[test]
    fn plan_splits_uncompressed_extents_and_keeps_holes_prealloc_and_shared() {
        let k = 1024u64;
        let items = [
            item(0, 1 << 20, 300 * k, 300 * k, 300 * k, 0, ItemKind::Regular),
            item(300 * k, 0, 0, 100 * k, 100 * k, 0, ItemKind::Regular), // hole
            item(
                400 * k,
                2 << 20,
                64 * k,
                64 * k,
                64 * k,
                0,
                ItemKind::Prealloc,
            ),
            item(
                464 * k,
                3 << 20,
                16 * k,
                128 * k,
                128 * k,
                3,
                ItemKind::Regular,
            ),
            item(592 * k, 4 << 20, 8 * k, 8 * k, 8 * k, 0, ItemKind::Regular), // shared
            item(
                600 * k,
                5 << 20,
                12 * k,
                12 * k,
                12 * k,
                0,
                ItemKind::Regular,
            ), // ends past EOF
        ];
        let size = 605 * k + 7;
        let (groups, shared) = plan(&items, size, &[(592 * k, 600 * k)]);
        assert_eq!(shared, 8 * k);
        assert_eq!(groups.len(), 3);
        assert!(!groups[0].joint);
        assert_eq!(
            groups[0].pieces,
            [
                Piece {
                    start: 0,
                    len: 128 * k
                },
                Piece {
                    start: 128 * k,
                    len: 128 * k
                },
                Piece {
                    start: 256 * k,
                    len: 44 * k
                },
            ]
        );
        assert!(groups[1].joint);
        assert_eq!(groups[1].old_disk, 16 * k);
        assert_eq!(
            groups[2].pieces,
            [Piece {
                start: 600 * k,
                len: 5 * k + 7
            }]
        );
    }

    #[test]
    fn plan_groups_the_pieces_of_a_partly_overwritten_extent() {
        let k = 1024u64;
        let mut a = item(0, 1 << 20, 32 * k, 128 * k, 32 * k, 3, ItemKind::Regular);
        let mut b = item(
            64 * k,
            1 << 20,
            32 * k,
            128 * k,
            64 * k,
            3,
            ItemKind::Regular,
        );
        b.offset = 64 * k;
        a.offset = 0;
        let middle = item(
            32 * k,
            2 << 20,
            32 * k,
            32 * k,
            32 * k,
            0,
            ItemKind::Regular,
        );
        let (groups, _) = plan(&[a, middle, b], 128 * k, &[]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].pieces.len(), 2);
        assert_eq!(groups[0].old_disk, 32 * k);
    }

    #[test]
    fn gain_needs_a_sector_and_the_minimum_percentage() {
        assert!(gains(131072, 65536, 4096, 0.0));
        assert!(!gains(8192, 8192, 4096, 0.0));
        assert!(!gains(131072, 131072 - 4096, 4096, 10.0));
        assert!(gains(131072, 131072 - 16384, 4096, 10.0));
    }
}
