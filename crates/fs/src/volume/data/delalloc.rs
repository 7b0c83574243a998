//! Delayed allocation: a write queues whole extents and returns; their compression runs on the
//! engine's offload API and its completions commit them, so the FUSE write returns after one
//! copy, as a btrfs buffered write returns once the page cache holds the data.
//!
//! Mirrors btrfs's delalloc ranges and async_cow (inode.c: cow_file_range_async queues
//! compress_file_range on a workqueue, whose ordered completion submits the compressed
//! extent; fsync starts and waits for writeback first). As in the kernel, the mount has no
//! writeback threads of its own: a queued extent becomes an offload request (its dirty buffer
//! shared, not copied), and the request's completion handler — seed 004's acomp callback,
//! running on the offload's worker — commits it with whatever else has finished and submits
//! what is still queued. A request the offload cannot take yet (its queue is full) waits in
//! the queue for the next completion, write, fsync or the committer's tick. Without a handler
//! (a volume that is not mounted: fsck, tests) writes are written back by the writer.
//!
//! Differs in buffering whole extents, not pages, and in being short-lived: the kernel's page
//! cache above the mount already absorbs small writes, so this buffer only lets compression
//! overlap with the writer (a FUSE close waits for every write reply) and is bounded by
//! [`DIRTY_LIMIT`].
//!
//! Ordering rules that keep reads and crashes right:
//! - A dirty extent is visible to reads and read-modify-writes from the moment it is queued
//!   until its writeback has committed it to the store; the dirty entry is removed only after
//!   that commit, under the inode lock, so a reader always finds it in one place or the other.
//! - Each rewrite of an extent gets a new generation; a writeback whose generation is no
//!   longer the dirty one (rewritten, truncated) throws its result away.
//! - fsync, sync, setattr and truncate wait for (and help with) the inode's writeback first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

use wring_engine::offload::{Complete, Done, Input, Request};

use crate::error::{chain, errno, FsError};
use crate::store::records::{covered, Encoding, Time, FLAG_NOCOMPRESS};
use crate::store::space::Reservation;
use crate::store::{self, INODES};
use crate::volume::data::encode::{encode_batch, op_for, shape, value, Decision, Shape};
use crate::volume::{lock, Volume};

/// Bytes of dirty extents beyond which writers wait (and help) for writeback.
pub(crate) const DIRTY_LIMIT: usize = 64 << 20;
/// Extents a waiting thread (fsync, a throttled writer) takes from the queue at once to
/// compress as one batch.
pub(crate) const BATCH: usize = 4;
/// Output buffers kept for reuse between requests.
const SPARE_BUFFERS: usize = 64;
/// Inodes whose finished extents one writeback transaction commits at most (btrfs commits
/// every ordered extent that finished into the running transaction).
pub(crate) const BATCH_INODES: usize = 64;
/// Bytes of finished extents (before compression) left for a batch at most.
const READY_BYTES: usize = 8 << 20;

/// An extent value: its header and stored bytes.
type Value<'a> = (store::records::ExtentHeader, &'a [u8]);

/// One extent waiting for writeback.
pub(crate) struct Job {
    pub ino: u64,
    pub idx: u64,
    pub gen: u64,
    pub extent_size: u32,
    pub data: Arc<Vec<u8>>,
    pub decision: Decision,
    pub time: Time,
    /// The room reserved for it in the store, given back once it is committed (or fails).
    pub _room: Option<Reservation>,
}

/// A job whose compression (if any) has finished: its shape, and the output holding the
/// compressed bytes.
struct Ready {
    job: Job,
    shape: Result<Shape, FsError>,
    out: Vec<u8>,
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
    /// Generation of the last write's extents.
    last_gen: u64,
    /// A setattr set the times after the writes up to this generation: their writeback
    /// leaves the times alone (a utimens after a write wins, as it does on Linux).
    times_set: u64,
    /// Jobs queued, in flight or ready.
    jobs: usize,
    /// Bytes of the file the dirty extents cover ([`covered`]: btrfs's delalloc bytes, which
    /// `st_blocks` adds to the inode's).
    covered: u64,
}

/// A dirty extent: its generation and contents, by (inode, extent index).
type DirtyMap = HashMap<(u64, u64), (u64, Arc<Vec<u8>>)>;

#[derive(Default)]
struct State {
    dirty: DirtyMap,
    inodes: HashMap<u64, InodeState>,
    /// Jobs not yet submitted.
    queue: VecDeque<Job>,
    /// Jobs submitted to the offload, by generation (the request's tag).
    flight: HashMap<u64, Job>,
    /// Jobs finished and waiting for their commit.
    ready: Vec<Ready>,
    /// A thread is committing ready jobs (and takes whatever becomes ready meanwhile).
    committing: bool,
    /// Writeback errors not yet reported by an fsync of their inode (btrfs: the mapping's
    /// error), each with whether a sync has reported it already (the superblock's errseq).
    errors: HashMap<u64, (FsError, bool)>,
    jobs: usize,
    bytes: usize,
    next_gen: u64,
    /// Output buffers to reuse.
    spare: Vec<Vec<u8>>,
}

/// What a file's dirty extents add to its stored inode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub size: u64,
    /// Bytes of the file the dirty extents cover.
    pub covered: u64,
    pub extent_size: u32,
    /// The last write's time, unless a setattr set the times after it.
    pub mtime: Option<Time>,
}

/// The delalloc queue of one mount.
#[derive(Default)]
pub(crate) struct Delalloc {
    state: Mutex<State>,
    /// Signalled when a job finishes or becomes ready (fsync, sync and throttled writers
    /// wait on it).
    done: Condvar,
    /// The completion handler once the mount runs writeback asynchronously.
    handler: OnceLock<Arc<dyn Complete>>,
}

/// A job's writeback error: the job's position in its group, the error whole (with its
/// causes) for the log line, and what its inode's next fsync reports.
struct Failed {
    at: usize,
    logged: String,
    error: FsError,
}

impl Failed {
    /// `error`, logged and reported as it is.
    fn new(at: usize, error: FsError) -> Failed {
        Failed {
            at,
            logged: chain(&error),
            error,
        }
    }
}

/// The writeback's completion handler: the acomp callback that commits.
struct Writeback {
    da: Weak<Delalloc>,
    vol: Weak<Volume>,
}

impl Complete for Writeback {
    fn complete(&self, done: Done) {
        let Some(da) = self.da.upgrade() else {
            return;
        };
        let Some(job) = da.state().flight.remove(&done.tag) else {
            log::error!("writeback: a completion for no request ({})", done.tag);
            return;
        };
        let shape = shape(&job.data, &job.decision, Some(done.result));
        da.push_ready(Ready {
            job,
            shape,
            out: done.output,
        });
        // Finished extents wait for a batch's worth (or the committer's next tick, at most a
        // second): a stream of small files' extents is committed in one transaction per
        // batch instead of one each, as btrfs's finished ordered extents join the running
        // transaction. Whoever waits for them — fsync, sync, a truncate — commits what is
        // ready itself; readers see them as dirty extents until then.
        let defer = {
            let st = da.state();
            let bytes: usize = st.ready.iter().map(|r| r.job.data.len()).sum();
            st.ready.len() < BATCH_INODES && bytes < READY_BYTES
        };
        // While the volume is being dropped (unmount) its final sync commits what is ready.
        if let Some(vol) = self.vol.upgrade() {
            if !defer {
                vol.commit_ready();
            }
            vol.submit_writeback();
        }
    }
}

impl Delalloc {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        wring_sync::wait(&self.done, g)
    }

    /// What dirty extents add to `ino`, if it has any.
    pub(crate) fn pending(&self, ino: u64) -> Option<Pending> {
        self.state().inodes.get(&ino).map(|s| Pending {
            size: s.size,
            covered: s.covered,
            extent_size: s.extent_size,
            mtime: (s.last_gen > s.times_set).then_some(s.mtime),
        })
    }

    /// A setattr set `ino`'s times: the writeback of what was written so far must not move
    /// them (called under the inode lock, before that setattr commits).
    pub(crate) fn times_set(&self, ino: u64) {
        let mut st = self.state();
        let gen = st.next_gen;
        if let Some(s) = st.inodes.get_mut(&ino) {
            s.times_set = gen;
        }
    }

    /// Whether `job`'s writeback sets its inode's times (no setattr set them since).
    fn sets_times(&self, job: &Job) -> bool {
        self.state()
            .inodes
            .get(&job.ino)
            .is_none_or(|s| job.gen > s.times_set)
    }

    /// The dirty contents of extent `idx` of `ino`.
    pub(crate) fn dirty(&self, ino: u64, idx: u64) -> Option<Arc<Vec<u8>>> {
        self.state().dirty.get(&(ino, idx)).map(|d| d.1.clone())
    }

    /// Queue extents (index, whole contents) of `ino`; the file is `size` bytes long after
    /// them. `room` is what was reserved for them: each job holds its share.
    pub(crate) fn enqueue(
        &self,
        ino: u64,
        extent_size: u32,
        size: u64,
        decision: Decision,
        extents: Vec<(u64, Vec<u8>)>,
        mut room: Option<Reservation>,
    ) {
        let time = Time::now();
        let mut st = self.state();
        for (idx, data) in extents {
            let share = room.as_mut().map(|r| r.split_extent(data.len()));
            st.next_gen += 1;
            let gen = st.next_gen;
            let len = data.len();
            let data = Arc::new(data);
            st.bytes += data.len();
            st.jobs += 1;
            // A superseded job still runs (and throws its result away), so its bytes stay
            // counted until then.
            let was = st.dirty.insert((ino, idx), (gen, data.clone()));
            let was = was.map_or(0, |(_, d)| covered(d.len() as u32));
            st.queue.push_back(Job {
                ino,
                idx,
                gen,
                extent_size,
                data,
                decision: crate::volume::data::dicts::for_len(&decision, len),
                time,
                _room: share,
            });
            let s = st.inodes.entry(ino).or_default();
            s.jobs += 1;
            s.covered = (s.covered + covered(len as u32)).saturating_sub(was);
        }
        let gen = st.next_gen;
        let s = st.inodes.entry(ino).or_default();
        s.size = s.size.max(size);
        s.extent_size = extent_size;
        s.mtime = time;
        s.last_gen = gen;
    }

    /// Whether `job` is still the dirty version of its extent.
    fn is_current(&self, job: &Job) -> bool {
        self.state()
            .dirty
            .get(&(job.ino, job.idx))
            .is_some_and(|d| d.0 == job.gen)
    }

    fn push_ready(&self, ready: Ready) {
        self.state().ready.push(ready);
        self.done.notify_all();
    }

    /// Account for a finished job: drop its dirty entry if it is still current, keep its error,
    /// keep its output buffer for reuse.
    fn finish(&self, job: &Job, err: Option<FsError>, out: Vec<u8>) {
        let mut st = self.state();
        if st
            .dirty
            .get(&(job.ino, job.idx))
            .is_some_and(|d| d.0 == job.gen)
        {
            st.dirty.remove(&(job.ino, job.idx));
            if let Some(s) = st.inodes.get_mut(&job.ino) {
                s.covered = s.covered.saturating_sub(covered(job.data.len() as u32));
            }
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
        if out.capacity() > 0 && st.spare.len() < SPARE_BUFFERS {
            st.spare.push(out);
        }
        drop(st);
        self.done.notify_all();
    }

    /// Take up to `n` queued jobs (of `ino`, or any), oldest first.
    fn take(st: &mut State, ino: Option<u64>, n: usize) -> Vec<Job> {
        let mut jobs = Vec::new();
        let mut i = 0;
        while jobs.len() < n && i < st.queue.len() {
            if ino.is_none_or(|x| st.queue[i].ino == x) {
                jobs.extend(st.queue.remove(i));
            } else {
                i += 1;
            }
        }
        jobs
    }

    /// The store lost commits that were not durable: the next fsync of each of `inos` (and
    /// the next sync) reports EIO.
    pub(crate) fn lost(&self, inos: &[u64]) {
        let mut st = self.state();
        for &ino in inos {
            st.errors.insert(ino, (errno(libc::EIO), false));
        }
    }

    /// Bytes of dirty extents and extents queued or being written back.
    pub(crate) fn totals(&self) -> (usize, usize) {
        let st = self.state();
        (st.bytes, st.jobs)
    }

    /// Extents submitted to the offload and not yet back.
    pub(crate) fn in_flight(&self) -> usize {
        self.state().flight.len()
    }
}

impl Volume {
    /// Write back asynchronously from now on: a write queues its extents and submits them to
    /// the offload, whose completions commit them. Without this, writes are written back by
    /// the writing thread.
    pub fn start_writeback(self: &Arc<Self>) {
        let handler: Arc<dyn Complete> = Arc::new(Writeback {
            da: Arc::downgrade(&self.da),
            vol: Arc::downgrade(self),
        });
        let _ = self.da.handler.set(handler);
    }

    /// Whether writeback runs on the offload's completions.
    pub(crate) fn writeback_is_async(&self) -> bool {
        self.da.handler.get().is_some()
    }

    /// Submit queued extents to the offload while it takes them (never waiting for a slot: a
    /// completion handler calls this too); raw and zero extents need no compression and are
    /// committed here.
    pub(crate) fn submit_writeback(&self) {
        let Some(handler) = self.da.handler.get() else {
            return;
        };
        let mut direct = false;
        loop {
            let (job, out) = {
                let mut st = self.da.state();
                let Some(job) = st.queue.pop_front() else {
                    break;
                };
                let out = st.spare.pop().unwrap_or_default();
                (job, out)
            };
            let Some(op) = op_for(&job.data, &job.decision) else {
                let shape = shape(&job.data, &job.decision, None);
                self.da.push_ready(Ready { job, shape, out });
                direct = true;
                continue;
            };
            let request = Request {
                op,
                input: Input::Shared(Arc::clone(&job.data)),
                output: out,
                tag: job.gen,
            };
            let gen = job.gen;
            let dict = crate::volume::data::encode::dictionary(&job.decision).cloned();
            // In the map before the offload can complete it.
            self.da.state().flight.insert(gen, job);
            if let Err(e) = self
                .offload
                .try_submit_dict_with(request, dict.as_ref(), handler)
            {
                let request = e.into_request();
                let mut st = self.da.state();
                if let Some(job) = st.flight.remove(&gen) {
                    st.queue.push_front(job);
                }
                if st.spare.len() < SPARE_BUFFERS {
                    st.spare.push(request.output);
                }
                drop(st);
                // Back in the queue: a thread that waits for this inode's writeback found it
                // in flight and sleeps; it must look again and take it (nothing else would
                // wake it when no other request is out).
                self.da.done.notify_all();
                break;
            }
        }
        if direct {
            self.commit_ready();
        }
    }

    /// Commit every finished job — unless another thread is committing, which then takes
    /// them too (a group commit: a compression worker never waits for the store's write lock
    /// behind another, and one transaction holds every extent that finished meanwhile, of
    /// up to [`BATCH_INODES`] inodes).
    pub(crate) fn commit_ready(&self) {
        {
            let mut st = self.da.state();
            if st.committing {
                return;
            }
            st.committing = true;
        }
        loop {
            let mut ready = {
                let mut st = self.da.state();
                if st.ready.is_empty() {
                    st.committing = false;
                    drop(st);
                    // Waiters that left ready jobs to this committer look again.
                    self.da.done.notify_all();
                    return;
                }
                std::mem::take(&mut st.ready)
            };
            ready.sort_by_key(|r| (r.job.ino, r.job.idx));
            let mut groups: Vec<Vec<Ready>> = Vec::new();
            for r in ready {
                match groups.last_mut() {
                    Some(g) if g[0].job.ino == r.job.ino => g.push(r),
                    _ => groups.push(vec![r]),
                }
            }
            let mut groups = groups.into_iter().peekable();
            while let Some(first) = groups.next() {
                // The first inode's lock is waited for; the others join while their locks
                // are free (a request holding one, which may wait for this very writeback,
                // is never waited for while another lock is held).
                let mut locks = crate::volume::InodeLocks::new(self, first[0].job.ino);
                let mut batch = vec![first];
                while batch.len() < BATCH_INODES {
                    match groups.peek() {
                        Some(g) if locks.try_add(g[0].job.ino) => {
                            batch.extend(groups.next());
                        }
                        _ => break,
                    }
                }
                let errors = self.commit_batch(&batch);
                self.finish_groups(batch, errors);
                drop(locks);
            }
        }
    }

    /// Commit the finished jobs of `batch` (one group per inode, each inode's lock held) in
    /// one transaction; when that fails, each group alone, as before batching, so one
    /// inode's error (a damaged item) fails only its own jobs. The errors met, per group.
    fn commit_batch(&self, batch: &[Vec<Ready>]) -> Vec<Vec<Failed>> {
        if batch.len() > 1 {
            let shared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.commit_shared(batch)
            }));
            if let Ok(Ok(errors)) = shared {
                return errors;
            }
        }
        batch
            .iter()
            .map(|group| {
                let ino = group[0].job.ino;
                // A panic (a bug) must not leave the jobs unfinished: every fsync, sync and
                // unmount would wait for them forever. It fails them with EIO instead.
                self.unless_panic(ino, || {
                    let (mut errors, values) = self.values_of(group);
                    if !values.is_empty() {
                        let r = self.store.write().and_then(|txn| {
                            self.put_jobs(&txn, ino, values)?;
                            self.store.commit(txn, false)
                        });
                        if let Err(e) = r {
                            errors.push(Failed::new(0, e));
                        }
                    }
                    errors
                })
                .unwrap_or_else(|| vec![Failed::new(0, errno(libc::EIO))])
            })
            .collect()
    }

    /// [`Volume::commit_batch`]'s one transaction for every group.
    fn commit_shared(&self, batch: &[Vec<Ready>]) -> Result<Vec<Vec<Failed>>, FsError> {
        let txn = self.store.write()?;
        let mut all = Vec::with_capacity(batch.len());
        for group in batch {
            let (errors, values) = self.values_of(group);
            if !values.is_empty() {
                self.put_jobs(&txn, group[0].job.ino, values)?;
            }
            all.push(errors);
        }
        self.store.commit(txn, false)?;
        Ok(all)
    }

    /// Finish the jobs of each group with its first error (what the inode's next fsync
    /// reports), logging every error whole, and tell the kernel the inodes' attributes
    /// changed.
    fn finish_groups(&self, batch: Vec<Vec<Ready>>, errors: Vec<Vec<Failed>>) {
        for (group, errors) in batch.into_iter().zip(errors) {
            let ino = group[0].job.ino;
            for f in &errors {
                let job = &group[f.at].job;
                log::error!(
                    "writeback of {} offset {} failed: {}",
                    self.path_of(ino),
                    job.idx * job.extent_size as u64,
                    f.logged
                );
            }
            let mut err = errors.into_iter().map(|f| f.error).next();
            for r in group {
                self.da.finish(&r.job, err.take(), r.out);
            }
            self.attrs_changed(ino);
        }
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

    /// The extent values of the jobs of `group` that are still current, and the errors met
    /// by position in the group. A compression error stays in its job (its `Ready`, which
    /// [`Volume::commit_batch`] may look at twice): its inode's fsync gets its errno, the log
    /// line the whole error.
    #[allow(clippy::type_complexity)]
    fn values_of<'g>(
        &self,
        group: &'g [Ready],
    ) -> (Vec<Failed>, Vec<(&'g Job, Option<Value<'g>>, bool)>) {
        let mut errors = Vec::new();
        let mut values = Vec::new();
        for (i, r) in group.iter().enumerate() {
            let s = match &r.shape {
                Ok(s) => *s,
                Err(e) => {
                    errors.push(Failed {
                        at: i,
                        logged: chain(e),
                        error: errno(e.errno()),
                    });
                    continue;
                }
            };
            match value(s, &r.job.decision, &r.job.data, &r.out) {
                Ok(v) if self.da.is_current(&r.job) => {
                    values.push((&r.job, v, matches!(s, Shape::Raw { mark: true })));
                }
                Ok(_) => {}
                Err(e) => errors.push(Failed::new(i, e)),
            }
        }
        (errors, values)
    }

    /// Put jobs' extent values of `ino` (`None`: a hole; `true`: marks NOCOMPRESS) with the
    /// inode's size and times into `txn`.
    fn put_jobs(
        &self,
        txn: &crate::volume::delayed::VolTxn<'_>,
        ino: u64,
        values: Vec<(&Job, Option<Value<'_>>, bool)>,
    ) -> Result<(), FsError> {
        let mut inode = match store::get_inode(&txn.open_table(INODES)?, ino) {
            Ok(i) => i,
            // Deleted meanwhile: nothing to keep.
            Err(FsError::Errno(libc::ENOENT)) => return Ok(()),
            Err(e) => return Err(e),
        };
        for (job, value, mark) in values {
            if let Some((h, stored)) = &value {
                let encoding = match h.encoding {
                    Encoding::Raw => None,
                    Encoding::Compressed(a, l) => Some((a, l)),
                };
                self.written_by
                    .record(encoding, job.data.len(), stored.len());
            }
            let delta = txn.put_value(ino, job.idx, value)?;
            let end = job.idx * job.extent_size as u64 + job.data.len() as u64;
            inode.size = inode.size.max(end);
            if inode.extent_size == 0 {
                inode.extent_size = job.extent_size;
            }
            delta.apply(&mut inode);
            if mark {
                inode.flags |= FLAG_NOCOMPRESS;
            }
            if self.da.sets_times(job) {
                crate::volume::apply_write_time(&mut inode, job.time);
            }
        }
        txn.open_table(INODES)?
            .insert(ino, inode.to_bytes().as_slice())?;
        Ok(())
    }

    /// Compress queued jobs on the offload as one batch, waiting for it, and commit them: how a
    /// thread that waits for writeback helps.
    fn write_back_here(&self, jobs: Vec<Job>) {
        let mut outs: Vec<Vec<u8>> = {
            let mut st = self.da.state();
            jobs.iter()
                .map(|_| st.spare.pop().unwrap_or_default())
                .collect()
        };
        let extents: Vec<(&[u8], &Decision)> = jobs
            .iter()
            .map(|j| (j.data.as_slice(), &j.decision))
            .collect();
        let shapes = encode_batch(&self.offload, &extents, &mut outs);
        drop(extents);
        for ((job, shape), out) in jobs.into_iter().zip(shapes).zip(outs) {
            self.da.push_ready(Ready { job, shape, out });
        }
        self.commit_ready();
    }

    /// Wait until `ino`'s dirty extents (or everyone's) are committed, writing back queued
    /// ones on this thread meanwhile. Errors met on the way stay for fsync and sync to report.
    pub(crate) fn wait_writeback(&self, ino: Option<u64>) {
        if Self::left(&self.da.state(), ino) == 0 {
            return;
        }
        let t = std::time::Instant::now();
        self.wait_until(ino, |st| Self::left(st, ino) == 0);
        self.wb_waits.waited(t);
    }

    /// Help with writeback (of `ino`, or anyone's) until `enough`.
    fn wait_until(&self, ino: Option<u64>, enough: impl Fn(&State) -> bool) {
        let mut st = self.da.state();
        while !enough(&st) {
            let jobs = Delalloc::take(&mut st, ino, BATCH);
            if !jobs.is_empty() {
                drop(st);
                self.write_back_here(jobs);
            } else if !st.ready.is_empty() && !st.committing {
                // Finished while the volume could not be reached (it is being dropped).
                drop(st);
                self.commit_ready();
            } else {
                st = self.da.wait(st);
                continue;
            }
            st = self.da.state();
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
        self.wait_until(None, |st| st.bytes <= DIRTY_LIMIT);
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

    /// [`Volume::quiesce`] of two inodes at once (one lock when they share a stripe, else
    /// both in stripe order, so two of these never wait on each other).
    pub(crate) fn quiesce_both(&self, a: u64, b: u64) -> [Option<MutexGuard<'_, ()>>; 2] {
        let (lo, hi) = match Self::stripe(a) <= Self::stripe(b) {
            true => (a, b),
            false => (b, a),
        };
        loop {
            self.wait_writeback(Some(lo));
            self.wait_writeback(Some(hi));
            let g1 = self.inode_lock(lo);
            let g2 = (Self::stripe(lo) != Self::stripe(hi)).then(|| self.inode_lock(hi));
            if self.da.pending(lo).is_none() && self.da.pending(hi).is_none() {
                return [Some(g1), g2];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::error::errno;
    use crate::store::{Store, ROOT};
    use crate::volume::{NewInode, SetAttr};
    use crate::{Options, Volume};

    /// Let the clock inode times come from (the kernel's coarse one) move on.
    fn tick() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    /// A fresh store under the temp dir and the volume on it (no writeback threads).
    fn scratch(name: &str) -> (std::path::PathBuf, Volume) {
        let dir = std::env::temp_dir().join(format!("wring-da-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        (dir, vol)
    }

    /// Small files written back together are committed together: a sync of 64 one-extent
    /// files queued for writeback (as the kernel's writeback of a tar -x leaves them), taken
    /// four at a time (BATCH), commits each four in one transaction — not one per file — and
    /// every file reads back with its size.
    #[test]
    fn the_writeback_of_several_small_files_is_one_transaction() {
        use std::sync::atomic::Ordering;
        const FILES: usize = 64;
        let (dir, vol) = scratch("batch");
        let inos: Vec<u64> = (0..FILES)
            .map(|i| {
                let name = format!("f{i}");
                let (ino, _) = vol
                    .create(ROOT, name.as_bytes(), NewInode::file(0o644))
                    .unwrap();
                let data = name.repeat(50).into_bytes();
                let len = data.len() as u64;
                vol.da
                    .enqueue(ino, 128 << 10, len, None, vec![(0, data)], None);
                ino
            })
            .collect();
        let before = vol.store.counts.writes.load(Ordering::Relaxed);
        vol.sync().unwrap();
        let txns = vol.store.counts.writes.load(Ordering::Relaxed) - before;
        assert!(
            txns <= (FILES / super::BATCH + 1) as u64,
            "{txns} write transactions for the writeback of {FILES} files"
        );
        for (i, &ino) in inos.iter().enumerate() {
            let want = format!("f{i}").repeat(50);
            assert_eq!(vol.read(ino, 0, 4096).unwrap(), want.as_bytes(), "file {i}");
            assert_eq!(vol.inode(ino).unwrap().size, want.len() as u64);
        }
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
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

    /// A setattr of times, mode or owner goes in beside the file's writeback instead of
    /// waiting for it (cp -a's utimens after each file's write serialised every file's
    /// compression); a utimens after a write still wins over the write's later writeback, and
    /// a chmod after it still lets the write move mtime on.
    #[test]
    fn a_setattr_of_times_does_not_wait_for_writeback_and_wins_over_it() {
        let (dir, vol) = scratch("utimens");
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let (b, _) = vol.create(ROOT, b"b", NewInode::file(0o644)).unwrap();
        // Queued as a write queues it, with no writeback thread to take it yet.
        vol.da
            .enqueue(a, 128 * 1024, 4096, None, vec![(0, vec![7u8; 4096])], None);
        vol.da
            .enqueue(b, 128 * 1024, 4096, None, vec![(0, vec![7u8; 4096])], None);
        let written = vol.da.pending(b).unwrap().mtime.unwrap();
        tick();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        let utimens = SetAttr {
            atime: Some(Some(old)),
            mtime: Some(Some(old)),
            ..SetAttr::default()
        };
        let i = vol.setattr(a, &utimens).unwrap();
        assert_eq!(i.size, 4096, "the size the dirty extent adds");
        let chmod = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        vol.setattr(b, &chmod).unwrap();
        assert_eq!(
            vol.da.totals().1,
            2,
            "a setattr waited for the file's writeback"
        );
        let old = crate::store::records::Time::from_system(old);
        assert_eq!(vol.inode(a).unwrap().mtime, old, "before the writeback");
        vol.flush_delalloc(a).unwrap();
        vol.flush_delalloc(b).unwrap();
        let ia = vol.inode(a).unwrap();
        assert_eq!((ia.mtime, ia.size), (old, 4096), "after the writeback");
        let ib = vol.inode(b).unwrap();
        assert_eq!((ib.mtime, ib.perm & 0o777), (written, 0o600));
        assert!(ib.ctime > written, "the chmod's ctime stays");
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
        tick();
        // Queued as a write queues it, with no writeback thread to take it yet.
        vol.da
            .enqueue(a, 128 * 1024, 4096, None, vec![(0, vec![7u8; 4096])], None);
        let written = vol.da.pending(a).unwrap().mtime.unwrap();
        tick();
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
