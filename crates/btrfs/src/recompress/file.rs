//! The work on one file: open it, check every skip rule, take the write lease, flush and plan
//! it, send its pieces through a [`Lane`] of the offload (compression and the decode check),
//! and write each finished extent back with `BTRFS_IOC_ENCODED_WRITE` (fs/btrfs/inode.c:
//! btrfs_do_encoded_write()) or a plain COW `pwrite`, checking the lease and the inode's stamp
//! before every write; then fdatasync, put mtime/atime back and let go of the lease.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::OFlags;
use wring_engine::Algorithm;

use super::pipeline::{Checked, Lane};
use super::plan::{gains, plan, round_up, Group, Piece};
use super::{FileReport, Options, Skip, Status};
use crate::error::{BtrfsError, Op, Refusal};
use crate::fsinfo::{
    has_xattr, inode_flags, is_on_btrfs, shared_ranges, FS_APPEND_FL, FS_IMMUTABLE_FL,
    FS_NOCOMP_FL, FS_NOCOW_FL,
};
use crate::guard::{restore_times, LeaseRefused, LeaseState, Stamp, WriteLease};
use crate::ioctl::{encoded_write, Compression, EncodedWrite};
use crate::search::{btrfs_info, FileExtentItem, ItemKind};
use crate::stat::file_items;

/// Why work on a file stopped early.
pub(super) enum Stop {
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
pub(super) struct Work<'a> {
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

    /// Read a piece into `buf` (resized to the piece's length).
    fn read_into(&self, piece: Piece, buf: &mut Vec<u8>) -> Result<(), Stop> {
        buf.resize(piece.len as usize, 0);
        match self.file.read_exact_at(buf, piece.start) {
            Ok(()) => Ok(()),
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
            // Clearing O_NONBLOCK keeps later I/O ordinary; a failure leaves it set, as before.
            if let Ok(fl) = rustix::fs::fcntl_getfl(&f) {
                let _ = rustix::fs::fcntl_setfl(&f, fl.difference(OFlags::NONBLOCK));
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

/// A file finished: its report, and its extent items before and after (for the summary's
/// compsize-style usage; `after` only when the run writes).
pub(super) struct Finished {
    pub(super) report: FileReport,
    pub(super) before: Option<Vec<FileExtentItem>>,
    pub(super) after: Option<Vec<FileExtentItem>>,
}

/// Recompress one file through `lane`; `on_bytes` hears of the file bytes dealt with.
pub(super) fn process_file(
    lane: &mut Lane,
    path: &Path,
    size: u64,
    opts: &Options,
    algorithm: Algorithm,
    on_bytes: &mut dyn FnMut(u64),
) -> Finished {
    let mut report = FileReport::new(path.to_path_buf(), size);
    let file = match open(path, opts.dry_run) {
        Ok(f) => f,
        Err(skip) => {
            on_bytes(size);
            report.status = Status::Skipped(skip);
            return Finished {
                report,
                before: None,
                after: None,
            };
        }
    };
    let (mut report, before) = match prepare(&file, opts, algorithm, &report.path) {
        Ok((work, groups, items)) => (run_groups(lane, work, groups, on_bytes), Some(items)),
        Err(stop) => {
            // Left as it is: it counts the same before and after.
            on_bytes(size);
            report.status = stop.into();
            (report, file_items(&file).ok())
        }
    };
    report.size = size;
    let mut after = None;
    if !opts.dry_run {
        // After the fdatasync in run_groups the items are current; a file we skipped counts as
        // it is.
        match file_items(&file) {
            Ok(items) => after = Some(items),
            Err(e) => {
                if matches!(report.status, Status::Done) {
                    report.status = Status::Failed(e);
                }
            }
        }
    }
    Finished {
        report,
        before,
        after,
    }
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

/// Compress a planned file's pieces, judge its groups and write what gains.
fn run_groups(
    lane: &mut Lane,
    mut work: Work<'_>,
    groups: Vec<Group>,
    on_bytes: &mut dyn FnMut(u64),
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
    // Every piece in file order, as (group, piece); a piece's tag is its index here.
    let order: Vec<(usize, usize)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, grp)| (0..grp.pieces.len()).map(move |p| (g, p)))
        .collect();
    let mut next = 0;
    let mut expected = 0u64;
    let mut arrived: BTreeMap<u64, Checked> = BTreeMap::new();
    let mut counted = 0u64;
    let outcome = (|| -> Result<(), Stop> {
        loop {
            while next < order.len() && lane.has_room(arrived.len()) {
                let (g, p) = order[next];
                let piece = groups[g].pieces[p];
                let mut data = lane.buffer();
                work.read_into(piece, &mut data)?;
                lane.compress(next as u64, data)
                    .map_err(|e| compress_failed(piece, e))?;
                next += 1;
            }
            let Some(checked) = lane.next() else {
                if next < order.len() {
                    continue;
                }
                break;
            };
            arrived.insert(checked.tag, checked);
            // Written in file order: a piece that finished early waits for those before it.
            while let Some(Checked { tag, data, result }) = arrived.remove(&expected) {
                expected += 1;
                let Some(&(g, p)) = usize::try_from(tag).ok().and_then(|i| order.get(i)) else {
                    continue;
                };
                let compressed = result.map_err(|e| compress_failed(groups[g].pieces[p], e))?;
                let n = settle(
                    &mut work,
                    lane,
                    &groups[g],
                    &mut states[g],
                    p,
                    data,
                    compressed,
                )?;
                counted += n;
                on_bytes(n);
            }
        }
        Ok(())
    })();
    if let Err(stop) = outcome {
        lane.drain();
        let _ = finish_file(&mut work);
        on_bytes(total.saturating_sub(counted));
        work.report.status = stop.into();
        return work.report;
    }
    on_bytes(total.saturating_sub(planned.max(counted)));
    if let Err(stop) = finish_file(&mut work) {
        work.report.status = stop.into();
    }
    work.report
}

/// One piece's result, in file order: judge it (alone, or once its group is all in) and write
/// what gains. Returns the file bytes now dealt with.
fn settle(
    work: &mut Work<'_>,
    lane: &mut Lane,
    group: &Group,
    state: &mut GroupState,
    p: usize,
    data: Vec<u8>,
    compressed: Option<Vec<u8>>,
) -> Result<u64, Stop> {
    state.pending -= 1;
    if group.joint {
        state.results[p] = Some((data, compressed));
        if state.pending == 0 {
            finish_joint(work, lane, group, state)?;
            return Ok(group.pieces.iter().map(|p| p.len).sum());
        }
        return Ok(0);
    }
    lane.recycle(data);
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
            lane.recycle(c);
            state.touched = true;
        }
        Some(c) => {
            lane.recycle(c);
            state.untouched.push(piece);
        }
        None => state.untouched.push(piece),
    }
    if state.pending == 0 {
        finish_pieces(work, lane, state)?;
    }
    Ok(piece.len)
}

/// A piece the offload could not compress or whose result did not decode to its input.
fn compress_failed(piece: Piece, why: String) -> Stop {
    Stop::Fail(BtrfsError::io(
        Op::Write,
        piece.start,
        io::Error::other(why),
    ))
}

/// A compressed extent's group: rewrite all its ranges if together they gain enough.
fn finish_joint(
    work: &mut Work<'_>,
    lane: &mut Lane,
    group: &Group,
    state: &mut GroupState,
) -> Result<(), Stop> {
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
            lane.recycle(data);
            if let Some(c) = compressed {
                lane.recycle(c);
                work.report.compressed_extents += 1;
                work.report.compressed_bytes += piece.len;
            } else {
                work.report.raw_bytes += piece.len;
            }
            continue;
        }
        match &compressed {
            Some(c) => work.write_compressed(piece, c)?,
            None => work.write_raw(piece, &data)?,
        }
        lane.recycle(data);
        if let Some(c) = compressed {
            lane.recycle(c);
        }
    }
    Ok(())
}

/// An uncompressed extent's group, all pieces judged: if any was rewritten, rewrite the rest
/// raw so the old extent is freed.
fn finish_pieces(work: &mut Work<'_>, lane: &mut Lane, state: &mut GroupState) -> Result<(), Stop> {
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
        let mut data = lane.buffer();
        work.read_into(piece, &mut data)?;
        work.write_raw(piece, &data)?;
        lane.recycle(data);
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
