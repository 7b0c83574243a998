//! Delayed allocation: a write hands whole extents to writeback threads that compress them on
//! the engine's streams and commit them, so the FUSE write returns after one copy, as a btrfs
//! buffered write returns once the page cache holds the data.
//!
//! Mirrors btrfs's delalloc ranges and async_cow (inode.c: cow_file_range_async runs
//! compress_file_range on a workqueue; fsync starts and waits for writeback first). Differs in
//! buffering whole extents, not pages, and in being short-lived: the kernel's page cache above
//! the mount already absorbs small writes, so this buffer only lets compression overlap with
//! the writer (a FUSE close waits for every write reply) and is bounded by [`DIRTY_LIMIT`].
//!
//! Ordering rules that keep reads and crashes right:
//! - A dirty extent is visible to reads and read-modify-writes from the moment it is queued
//!   until its writeback has committed it to the store; the dirty entry is removed only after
//!   that commit, under the inode lock, so a reader always finds it in one place or the other.
//! - Each rewrite of an extent gets a new generation; a writeback whose generation is no
//!   longer the dirty one (rewritten, truncated) throws its result away.
//! - fsync, sync, setattr and truncate wait for (and help with) the inode's writeback first.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use crate::encode::{encode_values, Decision, Encoded};
use crate::error::{errno, FsError};
use crate::store::records::{Time, FLAG_NOCOMPRESS};
use crate::store::{self, INODES};
use crate::volume::{lock, Volume};

thread_local! {
    /// Per thread: the extent values being built (header and stored bytes), reused so writeback
    /// neither allocates nor zeroes per extent.
    static VALUES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Bytes of dirty extents beyond which writers wait (and help) for writeback.
pub const DIRTY_LIMIT: usize = 64 << 20;
/// Consecutive extents of one inode a writeback thread takes at once and commits in one
/// transaction (btrfs commits many ordered extents per transaction too).
pub const BATCH: usize = 4;

/// An encoded extent value (header and stored bytes) and whether it marks NOCOMPRESS.
type Value<'b> = (&'b mut [u8], bool);

/// One extent waiting for writeback.
pub(crate) struct Job {
    pub ino: u64,
    pub idx: u64,
    pub gen: u64,
    pub extent_size: u32,
    pub data: Arc<Vec<u8>>,
    pub decision: Decision,
    pub time: Time,
}

/// Writeback state of one inode with dirty extents.
#[derive(Default)]
struct InodeState {
    /// Size including the dirty extents.
    size: u64,
    /// The extent size the dirty extents were cut with.
    extent_size: u32,
    /// Time of the last write.
    mtime: Time,
    /// Jobs queued or running.
    jobs: usize,
}

/// A dirty extent: its generation and contents, by (inode, extent index).
type DirtyMap = HashMap<(u64, u64), (u64, Arc<Vec<u8>>)>;

#[derive(Default)]
struct State {
    dirty: DirtyMap,
    inodes: HashMap<u64, InodeState>,
    queue: VecDeque<Job>,
    /// Writeback errors not yet reported by an fsync of their inode (btrfs: the mapping's
    /// error), each with whether a sync has reported it already (the superblock's errseq).
    errors: HashMap<u64, (FsError, bool)>,
    jobs: usize,
    bytes: usize,
    next_gen: u64,
    shutdown: bool,
}

/// What a file's dirty extents add to its stored inode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub size: u64,
    pub extent_size: u32,
    pub mtime: Time,
}

/// The delalloc queue of one mount.
#[derive(Default)]
pub(crate) struct Delalloc {
    state: Mutex<State>,
    /// Signalled when a job is queued (workers wait on it).
    work: Condvar,
    /// Signalled when a job finishes (fsync, sync and throttled writers wait on it).
    done: Condvar,
    /// Writeback threads running (changed under the state lock).
    workers: AtomicUsize,
    /// Writeback threads wanted: the mount's streams. Surplus threads exit after their batch.
    wanted: AtomicUsize,
}

impl Delalloc {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn wait<'a>(&self, cv: &Condvar, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        cv.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// What dirty extents add to `ino`, if it has any.
    pub fn pending(&self, ino: u64) -> Option<Pending> {
        self.state().inodes.get(&ino).map(|s| Pending {
            size: s.size,
            extent_size: s.extent_size,
            mtime: s.mtime,
        })
    }

    /// The dirty contents of extent `idx` of `ino`.
    pub fn dirty(&self, ino: u64, idx: u64) -> Option<Arc<Vec<u8>>> {
        self.state().dirty.get(&(ino, idx)).map(|d| d.1.clone())
    }

    /// Queue extents (index, whole contents) of `ino`; the file is `size` bytes long after them.
    pub fn enqueue(
        &self,
        ino: u64,
        extent_size: u32,
        size: u64,
        decision: Decision,
        extents: Vec<(u64, Vec<u8>)>,
    ) {
        let time = Time::now();
        let mut st = self.state();
        for (idx, data) in extents {
            st.next_gen += 1;
            let gen = st.next_gen;
            let data = Arc::new(data);
            st.bytes += data.len();
            st.jobs += 1;
            // A superseded job still runs (and throws its result away), so its bytes stay
            // counted until then.
            st.dirty.insert((ino, idx), (gen, data.clone()));
            st.queue.push_back(Job {
                ino,
                idx,
                gen,
                extent_size,
                data,
                decision,
                time,
            });
            let s = st.inodes.entry(ino).or_default();
            s.jobs += 1;
        }
        let s = st.inodes.entry(ino).or_default();
        s.size = s.size.max(size);
        s.extent_size = extent_size;
        s.mtime = time;
        drop(st);
        self.work.notify_all();
    }

    /// Whether `job` is still the dirty version of its extent.
    fn is_current(&self, job: &Job) -> bool {
        self.state()
            .dirty
            .get(&(job.ino, job.idx))
            .is_some_and(|d| d.0 == job.gen)
    }

    /// Account for a finished job: drop its dirty entry if it is still current, keep its error.
    fn finish(&self, job: &Job, err: Option<FsError>) {
        let mut st = self.state();
        if st
            .dirty
            .get(&(job.ino, job.idx))
            .is_some_and(|d| d.0 == job.gen)
        {
            st.dirty.remove(&(job.ino, job.idx));
        }
        st.bytes -= job.data.len();
        st.jobs -= 1;
        if let Some(s) = st.inodes.get_mut(&job.ino) {
            s.jobs -= 1;
            if s.jobs == 0 {
                st.inodes.remove(&job.ino);
            }
        }
        if let Some(e) = err {
            st.errors.entry(job.ino).or_insert((e, false));
        }
        drop(st);
        self.done.notify_all();
    }

    /// Take a queued job (of `ino`, or any) to run on the calling thread.
    fn take(st: &mut State, ino: Option<u64>) -> Option<Job> {
        let pos = st
            .queue
            .iter()
            .position(|j| ino.is_none_or(|i| j.ino == i))?;
        st.queue.remove(pos)
    }

    /// Take the first queued job and up to [`BATCH`] - 1 jobs of the same inode queued right
    /// after it.
    fn take_batch(st: &mut State) -> Vec<Job> {
        let mut jobs: Vec<Job> = st.queue.pop_front().into_iter().collect();
        while jobs.len() < BATCH {
            match st.queue.front() {
                Some(j) if j.ino == jobs[0].ino => jobs.extend(st.queue.pop_front()),
                _ => break,
            }
        }
        jobs
    }

    /// Bytes of dirty extents and extents queued or being written back.
    pub fn totals(&self) -> (usize, usize) {
        let st = self.state();
        (st.bytes, st.jobs)
    }

    /// Writeback threads running.
    pub fn workers(&self) -> usize {
        self.workers.load(Ordering::Relaxed)
    }
}

impl Volume {
    /// Run `n` writeback threads for this mount (with none, writes are written back on the
    /// writing thread): start the missing ones; surplus ones exit once their batch is
    /// committed, so a remount to fewer streams gives threads back.
    pub fn set_writeback(self: &Arc<Self>, n: usize) -> Result<(), FsError> {
        let start = {
            let _st = self.da.state();
            self.da.wanted.store(n, Ordering::Relaxed);
            let running = self.da.workers();
            let start = n.saturating_sub(running);
            self.da.workers.store(running + start, Ordering::Relaxed);
            start
        };
        self.da.work.notify_all();
        for i in 0..start {
            let weak = Arc::downgrade(self);
            let da = self.da.clone();
            let spawned = std::thread::Builder::new()
                .name("wring-wb".into())
                .spawn(move || writeback_thread(da, weak));
            if let Err(source) = spawned {
                let _st = self.da.state();
                self.da.workers.fetch_sub(start - i, Ordering::Relaxed);
                return Err(FsError::Io {
                    what: "starting a writeback thread".into(),
                    source,
                });
            }
        }
        Ok(())
    }

    /// Wait until `ino`'s dirty extents (or everyone's) are committed, running queued ones on
    /// this thread meanwhile. Errors met on the way stay for fsync and sync to report.
    pub(crate) fn wait_writeback(&self, ino: Option<u64>) {
        let mut st = self.da.state();
        while Self::left(&st, ino) > 0 {
            st = self.help_or_wait(st, ino);
        }
    }

    /// fsync's flush: [`Volume::wait_writeback`] of `ino`, then report (and forget) the
    /// writeback error it met since its last fsync.
    pub(crate) fn flush_delalloc(&self, ino: u64) -> Result<(), FsError> {
        self.wait_writeback(Some(ino));
        self.da
            .state()
            .errors
            .remove(&ino)
            .map_or(Ok(()), |e| Err(e.0))
    }

    /// sync's flush: everyone's writeback, then the first writeback error no sync has reported
    /// yet. Each error is reported once to sync, and stays for its inode's fsync.
    pub(crate) fn flush_all_delalloc(&self) -> Result<(), FsError> {
        self.wait_writeback(None);
        let mut st = self.da.state();
        let mut first = None;
        for (err, reported) in st.errors.values_mut().filter(|e| !e.1) {
            *reported = true;
            first.get_or_insert_with(|| errno(err.errno()));
        }
        first.map_or(Ok(()), Err)
    }

    fn left(st: &State, ino: Option<u64>) -> usize {
        match ino {
            Some(i) => st.inodes.get(&i).map_or(0, |s| s.jobs),
            None => st.jobs,
        }
    }

    /// Hold a writer back while the dirty bytes are over the limit, helping with writeback.
    pub(crate) fn throttle(&self) {
        let mut st = self.da.state();
        while st.bytes > DIRTY_LIMIT {
            st = self.help_or_wait(st, None);
        }
    }

    /// Run one queued job (of `ino`, or any) on this thread, or wait for one to finish.
    fn help_or_wait<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        ino: Option<u64>,
    ) -> MutexGuard<'a, State> {
        match Delalloc::take(&mut st, ino) {
            Some(job) => {
                drop(st);
                self.writeback(vec![job]);
                self.da.state()
            }
            None => self.da.wait(&self.da.done, st),
        }
    }

    /// The inode lock of `ino`, taken once no writeback of it is queued or running.
    pub(crate) fn quiesce(&self, ino: u64) -> MutexGuard<'_, ()> {
        loop {
            self.wait_writeback(Some(ino));
            let g = self.inode_lock(ino);
            if self.da.pending(ino).is_none() {
                return g;
            }
        }
    }

    /// Compress dirty extents of one inode and commit them in one transaction.
    fn writeback(&self, jobs: Vec<Job>) {
        let Some(ino) = jobs.first().map(|j| j.ino) else {
            return;
        };
        VALUES.with_borrow_mut(|bufs| {
            if bufs.len() < jobs.len() {
                bufs.resize_with(jobs.len(), Vec::new);
            }
            // A panic (a bug) must not leave the jobs unfinished: every fsync, sync and unmount
            // would wait for them forever. It fails them with EIO instead.
            let encoded = self.unless_panic(ino, || self.encode_jobs(&jobs, bufs));
            let g = self.inode_lock(ino);
            let errors = encoded
                .and_then(|enc| {
                    self.unless_panic(ino, || self.commit_encoded(ino, &jobs, enc, bufs))
                })
                .unwrap_or_else(|| vec![(0, errno(libc::EIO))]);
            for (i, e) in &errors {
                let job = &jobs[*i];
                log::error!(
                    "writeback of {} offset {} failed: {e}",
                    self.path_of(ino),
                    job.idx * job.extent_size as u64
                );
            }
            // One error for the inode is what its next fsync reports.
            let mut err = errors.into_iter().map(|e| e.1).next();
            for job in &jobs {
                self.da.finish(job, err.take());
            }
            drop(g);
        })
    }

    /// `f()`, or `None` (and a log line) when it panicked.
    fn unless_panic<T>(&self, ino: u64, f: impl FnOnce() -> T) -> Option<T> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        if r.is_err() {
            log::error!(
                "writeback of {} panicked; its extents fail with EIO",
                self.path_of(ino)
            );
        }
        r.ok()
    }

    /// Commit the encoded extents of `jobs` that are still current, in one transaction;
    /// returns the errors met, by job.
    fn commit_encoded(
        &self,
        ino: u64,
        jobs: &[Job],
        encoded: Vec<Result<Option<(usize, bool)>, FsError>>,
        bufs: &mut [Vec<u8>],
    ) -> Vec<(usize, FsError)> {
        let mut errors = Vec::new();
        let mut values = Vec::new();
        for (i, ((job, enc), buf)) in jobs.iter().zip(encoded).zip(bufs.iter_mut()).enumerate() {
            match enc {
                Ok(enc) if self.da.is_current(job) => {
                    values.push((job, enc.map(|(len, mark)| (&mut buf[..len], mark))));
                }
                Ok(_) => {}
                Err(e) => errors.push((i, e)),
            }
        }
        if !values.is_empty() {
            if let Err(e) = self.commit_jobs(ino, values) {
                errors.push((0, e));
            }
        }
        errors
    }

    /// Encode jobs' extents into `bufs` (header and stored bytes) with the one encoder.
    fn encode_jobs(&self, jobs: &[Job], bufs: &mut [Vec<u8>]) -> Vec<Result<Encoded, FsError>> {
        let extents: Vec<(&[u8], Decision)> = jobs
            .iter()
            .map(|j| (j.data.as_slice(), j.decision))
            .collect();
        encode_values(&self.offload, &extents, bufs)
    }

    /// Commit jobs' extent values of `ino` (`None`: a hole) with the inode's size and times,
    /// in one transaction.
    fn commit_jobs(&self, ino: u64, values: Vec<(&Job, Option<Value<'_>>)>) -> Result<(), FsError> {
        let txn = self.store.write()?;
        let mut inode = match store::get_inode(&txn.open_table(INODES)?, ino) {
            Ok(i) => i,
            // Deleted meanwhile: nothing to keep.
            Err(FsError::Errno(libc::ENOENT)) => return Ok(()),
            Err(e) => return Err(e),
        };
        for (job, value) in values {
            let mark = value.as_ref().is_some_and(|v| v.1);
            let delta = self.put_value(&txn, ino, job.idx, value.map(|v| v.0))?;
            let end = job.idx * job.extent_size as u64 + job.data.len() as u64;
            inode.size = inode.size.max(end);
            if inode.extent_size == 0 {
                inode.extent_size = job.extent_size;
            }
            inode.disk = inode.disk.saturating_add_signed(delta);
            if mark {
                inode.flags |= FLAG_NOCOMPRESS;
            }
            crate::volume::apply_write_time(&mut inode, job.time);
        }
        txn.open_table(INODES)?
            .insert(ino, inode.to_bytes().as_slice())?;
        self.store.commit(txn, false)
    }

    /// Stop the writeback threads (after the last writeback).
    pub(crate) fn stop_writeback(&self) {
        self.da.state().shutdown = true;
        self.da.work.notify_all();
    }
}

fn writeback_thread(da: Arc<Delalloc>, vol: Weak<Volume>) {
    loop {
        let jobs = {
            let mut st = da.state();
            loop {
                if st.shutdown {
                    return;
                }
                if da.workers() > da.wanted.load(Ordering::Relaxed) {
                    // A remount lowered the streams: this thread is surplus.
                    da.workers.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
                let jobs = Delalloc::take_batch(&mut st);
                if !jobs.is_empty() {
                    break jobs;
                }
                st = da.wait(&da.work, st);
            }
        };
        let Some(v) = vol.upgrade() else {
            // The mount is going away; its final flush runs what is left.
            let mut st = da.state();
            for job in jobs.into_iter().rev() {
                st.queue.push_front(job);
            }
            drop(st);
            da.done.notify_all();
            return;
        };
        v.writeback(jobs);
    }
}

#[cfg(test)]
mod tests {
    use crate::error::errno;
    use crate::inode::{NewInode, SetAttr};
    use crate::store::{Store, ROOT};
    use crate::{Options, Volume};

    /// A fresh store under the temp dir and the volume on it (no writeback threads).
    fn scratch(name: &str) -> (std::path::PathBuf, Volume) {
        let dir = std::env::temp_dir().join(format!("wring-da-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        (dir, vol)
    }

    /// A writeback error is fsync's to report, once, to its inode; a sync reports it once too;
    /// waiting for writeback (setattr, `wring stat`) reports nothing and keeps it.
    #[test]
    fn a_writeback_error_is_kept_for_fsync_and_reported_once_to_sync() {
        let (dir, vol) = scratch("errors");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let (b, _) = vol.create(ROOT, b"b", NewInode::file(0o644)).unwrap();
        vol.da
            .state()
            .errors
            .insert(a, (errno(libc::ENOSPC), false));
        let chmod = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        vol.setattr(a, &chmod).unwrap();
        vol.stat_report(ROOT).unwrap();
        assert_eq!(vol.sync().map_err(|e| e.errno()), Err(libc::ENOSPC));
        assert_eq!(vol.sync().map_err(|e| e.errno()), Ok(()));
        assert_eq!(vol.fsync(b).map_err(|e| e.errno()), Ok(()));
        assert_eq!(vol.fsync(a).map_err(|e| e.errno()), Err(libc::ENOSPC));
        assert_eq!(vol.fsync(a).map_err(|e| e.errno()), Ok(()));
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An xattr change between a write and its writeback moves ctime on; the write's mtime
    /// still lands (a setattr, which would win, waits for the writeback instead).
    #[test]
    fn a_write_keeps_its_mtime_when_ctime_moved_on_before_its_writeback() {
        let (dir, vol) = scratch("mtime");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let created = vol.inode(a).unwrap().mtime;
        // Queued as a write queues it, with no writeback thread to take it yet.
        vol.da
            .enqueue(a, 128 * 1024, 4096, None, vec![(0, vec![7u8; 4096])]);
        let written = vol.da.pending(a).unwrap().mtime;
        vol.setxattr(a, b"user.tag", b"1", 0).unwrap();
        vol.flush_delalloc(a).unwrap();
        let inode = vol.inode(a).unwrap();
        assert!(written > created);
        assert_eq!(inode.mtime, written);
        assert!(inode.ctime > written);
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
