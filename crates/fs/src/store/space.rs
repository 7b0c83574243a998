//! Space: what the store may still take from the filesystem it lives on, the reservations of
//! data not yet written back, and the global reserve that lets a full store free space.
//!
//! Mirrors btrfs's space reservation. delalloc-space.c: a buffered write reserves its worst
//! case (here the raw size of every extent it dirties, plus the metadata its commit adds)
//! before it is accepted, and the reservation goes once the extent is written, so what
//! compression saved is free again. space-info.c: a reservation that does not fit first
//! flushes delalloc and commits the transaction (which unpins the space freed since), and
//! only then gives ENOSPC. block-rsv.c's global reserve: space kept back for unlink,
//! truncate and the commit that makes them durable, so a full filesystem can always be
//! emptied.
//!
//! Differs in what "free" is: the store lives in files of another filesystem, so free space
//! is that filesystem's `statvfs` (`f_bavail`), plus what the data file gives back at the next
//! durable commit, less what reservations hold. And the global reserve is a real file,
//! `wring.reserve`, preallocated when the store is mounted: when a write of the database file
//! meets ENOSPC (the store's filesystem is full, whoever filled it), the reserve gives its
//! blocks back to the filesystem and the write is tried again ([`super::dbfile`]). While the
//! reserve is short, what it lacks counts as used, so new data is refused while there is
//! still room to delete; the committer tops it up once there is space again.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::medium::Medium;
use crate::error::{errno, FsError};

/// The file holding the global reserve, in the store directory.
pub const RESERVE_FILE: &str = "wring.reserve";
/// Room normal operations leave free besides the global reserve: the database pages a commit
/// may write before the next check sees them.
pub const MARGIN: u64 = 1 << 20;
/// Metadata one extent's commit adds: its item in the extents table and its share of the
/// pages redb rewrites.
pub const EXTENT_META: u64 = 512;
/// Room an operation that adds a name, an inode or an attribute needs (btrfs reserves
/// metadata for those too, and gives ENOSPC on a full filesystem).
pub const META_OP: u64 = 64 << 10;
/// The global reserve: 1/32 of the store's filesystem, within these bounds (btrfs's global
/// reserve is sized from its metadata and capped at 512 MiB).
const RESERVE_MIN: u64 = 1 << 20;
const RESERVE_MAX: u64 = 64 << 20;
/// The reserve is handed over in steps of at least this much.
const RESCUE_STEP: u64 = 1 << 20;
/// A free-space probe is reused this long while the filesystem is far from full.
const PROBE_TTL: Duration = Duration::from_millis(100);
/// Free bytes beyond which a recent probe is good enough.
const FAR_FROM_FULL: u64 = 1 << 30;
/// Refusals for lack of room are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Data is stored in whole blocks of the filesystem below (at most).
pub const BLOCK: u64 = 4096;

/// Where free space is measured.
pub enum Probe {
    /// The filesystem holding this directory (`statvfs`).
    Dir(std::ffi::CString),
    /// A simulated disk.
    #[cfg(test)]
    Sim(super::simdisk::SimDisk),
    /// No limit known (a store opened for fsck, which writes nothing).
    Unlimited,
}

impl Probe {
    /// The filesystem holding `dir`.
    pub fn dir(dir: &Path) -> Result<Probe, FsError> {
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| errno(libc::EINVAL))?;
        Ok(Probe::Dir(c))
    }

    /// (bytes free to unprivileged users, total bytes).
    fn measure(&self) -> io::Result<(u64, u64)> {
        match self {
            Probe::Dir(path) => {
                let st = rustix::fs::statvfs(path.as_c_str())?;
                Ok((
                    st.f_bavail.saturating_mul(st.f_frsize),
                    st.f_blocks.saturating_mul(st.f_frsize),
                ))
            }
            #[cfg(test)]
            Probe::Sim(disk) => Ok(disk.space()),
            Probe::Unlimited => Ok((u64::MAX / 4, u64::MAX / 4)),
        }
    }
}

/// The global reserve: a preallocated file whose blocks are given to the database file
/// when the filesystem is full.
struct GlobalReserve {
    file: Option<Medium>,
    /// Bytes it holds now.
    size: u64,
    /// Bytes it should hold.
    target: u64,
}

impl GlobalReserve {
    /// What it lacks: counted as used until it is topped up.
    fn deficit(&self) -> u64 {
        self.target.saturating_sub(self.size)
    }

    /// Grow it towards its target as far as the filesystem lets it (whole steps).
    fn fill(&mut self) {
        let Some(f) = &self.file else {
            return;
        };
        let mut want = self.target;
        while want > self.size {
            match f.allocate(want) {
                Ok(()) => {
                    self.size = want;
                    return;
                }
                Err(_) if want - self.size > RESCUE_STEP => {
                    want = self.size + (want - self.size) / 2 / RESCUE_STEP * RESCUE_STEP;
                    want = want.max(self.size + RESCUE_STEP);
                }
                Err(_) => return,
            }
        }
    }
}

/// Counters for `wring status`.
#[derive(Debug, Default)]
pub struct SpaceCounts {
    /// Operations refused with ENOSPC for lack of room.
    pub enospc: AtomicU64,
    /// Times the global reserve gave blocks to the database file.
    pub rescues: AtomicU64,
    /// Times the database was reopened after an I/O error.
    pub recoveries: AtomicU64,
    /// Of those, times commits that were not durable were lost.
    pub rollbacks: AtomicU64,
}

/// What `wring status` and statfs show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpaceReport {
    /// Free bytes of the store's filesystem.
    pub fs_free: u64,
    /// Total bytes of the store's filesystem.
    pub fs_total: u64,
    /// Bytes the data file gives back at the next durable commit.
    pub reclaimable: u64,
    /// Bytes held by reservations of data not yet written back.
    pub reserved: u64,
    /// Bytes the global reserve holds, and should hold.
    pub reserve: (u64, u64),
    /// Bytes new data may still take.
    pub available: u64,
    /// The database failed and is waiting to be reopened.
    pub degraded: bool,
    /// The last I/O error of the store, if any: (errno, what failed).
    pub last_error: Option<(i32, String)>,
}

impl SpaceReport {
    /// `full`, `degraded` or `ok`, and why.
    pub fn state(&self) -> String {
        if self.degraded {
            return "degraded (the database failed; it is reopened by the next operation)".into();
        }
        if self.reserve.0 < self.reserve.1 {
            return format!(
                "full (the global reserve is in use: {} of {} KiB left; new data gets ENOSPC, \
                 deleting works)",
                self.reserve.0 >> 10,
                self.reserve.1 >> 10
            );
        }
        if self.available < META_OP {
            return "full (new data gets ENOSPC, deleting works)".into();
        }
        "ok".into()
    }
}

#[derive(Default)]
struct State {
    /// Bytes held by reservations.
    reserved: u64,
    /// The last free-space probe: when, (free, total).
    probed: Option<(Instant, (u64, u64))>,
    /// The last I/O error of a store file, for `wring status`.
    last_error: Option<(i32, String)>,
    /// When a refusal was last logged, and refusals since.
    refusals: Option<(Instant, u64)>,
}

/// The store's space (see the module's header).
pub struct SpaceInfo {
    probe: Probe,
    /// Data counts against the store's filesystem (false: it goes to a bucket).
    local_data: AtomicBool,
    state: Mutex<State>,
    reserve: Mutex<GlobalReserve>,
    /// A store file returned an error to redb, which refuses everything until reopened.
    failed: AtomicBool,
    /// Counters for `wring status`.
    pub counts: SpaceCounts,
}

impl fmt::Debug for SpaceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpaceInfo").finish_non_exhaustive()
    }
}

use wring_sync::lock;

/// The errno of an I/O error that means the filesystem has no room.
pub fn no_room(e: &io::Error) -> Option<i32> {
    match e.raw_os_error() {
        Some(n @ (libc::ENOSPC | libc::EDQUOT)) => Some(n),
        _ => None,
    }
}

impl SpaceInfo {
    /// The space of a store measured by `probe`, with its global reserve in `reserve` (grown
    /// to its target now, as far as the filesystem allows).
    pub fn new(probe: Probe, reserve: Option<Medium>, local_data: bool) -> SpaceInfo {
        let total = probe.measure().map_or(0, |m| m.1);
        let target = match reserve {
            Some(_) => (total / 32).clamp(RESERVE_MIN, RESERVE_MAX) / BLOCK * BLOCK,
            None => 0,
        };
        let size = reserve.as_ref().and_then(|f| f.size().ok()).unwrap_or(0);
        let mut global = GlobalReserve {
            file: reserve,
            size: size.min(target),
            target,
        };
        if size > target {
            // A reserve made on a larger filesystem: cut to this one's target.
            if let Some(f) = &global.file {
                let _ = f.set_len(target);
            }
        }
        global.fill();
        SpaceInfo {
            probe,
            local_data: AtomicBool::new(local_data),
            state: Mutex::default(),
            reserve: Mutex::new(global),
            failed: AtomicBool::new(false),
            counts: SpaceCounts::default(),
        }
    }

    /// No limit and no reserve (a store opened for fsck).
    pub fn unlimited() -> SpaceInfo {
        SpaceInfo::new(Probe::Unlimited, None, true)
    }

    /// Whether data bytes count against the store's filesystem.
    pub fn local_data(&self) -> bool {
        self.local_data.load(Ordering::Relaxed)
    }

    /// Say whether data bytes count against the store's filesystem (false for a store whose
    /// extents are in a bucket: only its database is here).
    pub fn set_local_data(&self, local: bool) {
        self.local_data.store(local, Ordering::Relaxed);
    }

    /// (free, total) bytes of the store's filesystem, probed again unless a recent probe
    /// found it far from full.
    fn measure(&self, st: &mut State) -> (u64, u64) {
        if let Some((at, m)) = st.probed {
            if at.elapsed() < PROBE_TTL && m.0 > FAR_FROM_FULL.saturating_add(st.reserved) {
                return m;
            }
        }
        // Unknown: nothing is refused on its account.
        let m = self.probe.measure().unwrap_or((u64::MAX / 4, u64::MAX / 4));
        st.probed = Some((Instant::now(), m));
        m
    }

    /// Bytes normal operations may still take, `reclaimable` being what the data file gives
    /// back at the next durable commit.
    fn available_locked(&self, st: &mut State, reclaimable: u64) -> u64 {
        let (free, _) = self.measure(st);
        let deficit = lock(&self.reserve).deficit();
        free.saturating_add(reclaimable)
            .saturating_sub(st.reserved)
            .saturating_sub(deficit)
            .saturating_sub(MARGIN)
    }

    /// Reserve `bytes` for data not yet written back; `None` when they do not fit in the
    /// space free now. What the next durable commit gives back does not count: the data
    /// must find its blocks when it is written back, so the caller commits first
    /// (`Volume::make_room`) and tries again.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        let mut st = lock(&self.state);
        if self.available_locked(&mut st, 0) < bytes {
            return None;
        }
        st.reserved += bytes;
        Some(Reservation {
            space: Arc::clone(self),
            bytes,
        })
    }

    /// ENOSPC unless `bytes` fit (an operation that adds metadata and reserves nothing).
    pub fn check(&self, bytes: u64, reclaimable: u64) -> Result<(), FsError> {
        let mut st = lock(&self.state);
        let available = self.available_locked(&mut st, reclaimable);
        if available < bytes {
            self.note_refusal(&mut st, bytes, available);
            return Err(errno(libc::ENOSPC));
        }
        Ok(())
    }

    /// An operation that wanted `bytes` was refused for lack of room: counted, and logged
    /// at most every [`LOG_EVERY`] with the refusals since.
    pub fn refused(&self, bytes: u64, reclaimable: u64) {
        let mut st = lock(&self.state);
        let available = self.available_locked(&mut st, reclaimable);
        self.note_refusal(&mut st, bytes, available);
    }

    fn note_refusal(&self, st: &mut State, bytes: u64, available: u64) {
        self.counts.enospc.fetch_add(1, Ordering::Relaxed);
        let since = match st.refusals {
            Some((at, n)) if at.elapsed() < LOG_EVERY => {
                st.refusals = Some((at, n + 1));
                return;
            }
            Some((_, n)) => n,
            None => 0,
        };
        st.refusals = Some((Instant::now(), 0));
        let r = lock(&self.reserve);
        log::warn!(
            "the store is full: ENOSPC for an operation that needs {} KiB ({} KiB available \
             net of {} KiB reserved for data not yet written back and a global reserve of \
             {}/{} KiB{})",
            bytes.div_ceil(1024),
            available >> 10,
            st.reserved >> 10,
            r.size >> 10,
            r.target >> 10,
            match since {
                0 => String::new(),
                n => format!("; {n} more refused since the last such line"),
            }
        );
    }

    fn release(&self, bytes: u64) {
        let mut st = lock(&self.state);
        st.reserved = st.reserved.saturating_sub(bytes);
        // What was just written is not in an older probe.
        st.probed = None;
    }

    /// A write of the database file met a full filesystem: give it at least `need` bytes
    /// of the global reserve. False when the reserve is empty.
    pub fn rescue(&self, need: u64) -> bool {
        let mut r = lock(&self.reserve);
        let Some(f) = &r.file else {
            return false;
        };
        if r.size == 0 {
            return false;
        }
        let step = need.div_ceil(RESCUE_STEP).max(1) * RESCUE_STEP;
        let to = r.size.saturating_sub(step);
        if f.set_len(to).is_err() {
            return false;
        }
        let first = r.size == r.target;
        r.size = to;
        lock(&self.state).probed = None;
        self.counts.rescues.fetch_add(1, Ordering::Relaxed);
        if first {
            log::warn!(
                "the store's filesystem is full: the global reserve gives its blocks to the \
                 database ({} of {} KiB left); new data gets ENOSPC until space is freed",
                to >> 10,
                r.target >> 10
            );
        }
        true
    }

    /// Top the global reserve up when the filesystem has room again (the committer's tick).
    pub fn refill(&self) {
        let mut r = lock(&self.reserve);
        if r.deficit() == 0 {
            return;
        }
        let before = r.size;
        r.fill();
        if r.size != before {
            lock(&self.state).probed = None;
            if r.deficit() == 0 {
                log::info!("the global reserve is whole again ({} KiB)", r.size >> 10);
            }
        }
    }

    /// A store file returned `e` to redb: the database refuses everything until reopened.
    pub fn failed(&self, what: &str, e: &io::Error) {
        let first = !self.failed.swap(true, Ordering::SeqCst);
        if first {
            log::error!("the store's {what} failed: {e}; the database is reopened");
        }
        lock(&self.state).last_error = Some((e.raw_os_error().unwrap_or(libc::EIO), what.into()));
    }

    /// Whether the database must be reopened before its next transaction.
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// The database was reopened.
    pub fn recovered(&self, rolled_back: bool) {
        self.failed.store(false, Ordering::SeqCst);
        self.counts.recoveries.fetch_add(1, Ordering::Relaxed);
        if rolled_back {
            self.counts.rollbacks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The errno operations get while the database cannot be reopened: the last failure's
    /// when it was a full filesystem, else EIO.
    pub fn failure_errno(&self) -> i32 {
        match lock(&self.state).last_error {
            Some((e @ (libc::ENOSPC | libc::EDQUOT), _)) => e,
            _ => libc::EIO,
        }
    }

    /// The figures, probed now.
    pub fn report(&self, reclaimable: u64) -> SpaceReport {
        let mut st = lock(&self.state);
        st.probed = None;
        let available = self.available_locked(&mut st, reclaimable);
        let (fs_free, fs_total) = st.probed.map_or((0, 0), |p| p.1);
        let r = lock(&self.reserve);
        SpaceReport {
            fs_free,
            fs_total,
            reclaimable,
            reserved: st.reserved,
            reserve: (r.size, r.target),
            available,
            degraded: self.is_failed(),
            last_error: st.last_error.clone(),
        }
    }
}

/// Bytes reserved for data not yet written back; given back when dropped.
pub struct Reservation {
    space: Arc<SpaceInfo>,
    bytes: u64,
}

impl Reservation {
    /// Split `bytes` off into a reservation of their own (at most what this one holds).
    pub fn split(&mut self, bytes: u64) -> Reservation {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Reservation {
            space: Arc::clone(&self.space),
            bytes,
        }
    }

    /// Split off the share of one extent of `len` raw bytes (see [`extent_cost`]).
    pub fn split_extent(&mut self, len: usize) -> Reservation {
        let cost = extent_cost(len, self.space.local_data());
        self.split(cost)
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.space.release(self.bytes);
        }
    }
}

/// What an extent of `len` raw bytes reserves: its blocks and the metadata its commit adds.
pub fn extent_cost(len: usize, local_data: bool) -> u64 {
    let data = match local_data {
        true => (len as u64).div_ceil(BLOCK) * BLOCK,
        false => 0,
    };
    data + EXTENT_META
}

#[cfg(test)]
mod tests {
    use super::super::simdisk::SimDisk;
    use super::*;

    fn space(capacity: u64) -> (SimDisk, Arc<SpaceInfo>) {
        let disk = SimDisk::with_capacity(capacity);
        let reserve = Medium::Sim(disk.new_file());
        let s = SpaceInfo::new(Probe::Sim(disk.clone()), Some(reserve), true);
        (disk, Arc::new(s))
    }

    #[test]
    fn reservations_hold_room_until_dropped() {
        let (_disk, s) = space(64 << 20);
        let r = s.report(0);
        assert_eq!(r.reserve, (2 << 20, 2 << 20), "1/32 of the disk");
        assert_eq!(r.available, (64 << 20) - (2 << 20) - MARGIN);
        let a = s.try_reserve(40 << 20).expect("fits");
        assert!(
            s.try_reserve(40 << 20).is_none(),
            "does not fit beside the first"
        );
        assert!(s.try_reserve(20 << 20).is_some());
        // Space the next durable commit gives back counts for df and metadata, not for data.
        assert!(s.try_reserve(40 << 20).is_none());
        assert!(s.check(40 << 20, 30 << 20).is_ok());
        assert!(s.report(30 << 20).available > 40 << 20);
        assert!(s.check(META_OP, 0).is_ok());
        drop(a);
        assert!(s.try_reserve(40 << 20).is_some(), "given back");
    }

    #[test]
    fn a_split_reservation_gives_back_each_part() {
        let (_disk, s) = space(64 << 20);
        let mut r = s.try_reserve(10 << 20).unwrap();
        let part = r.split(4 << 20);
        assert_eq!((r.bytes(), part.bytes()), (6 << 20, 4 << 20));
        drop(r);
        assert_eq!(s.report(0).reserved, 4 << 20);
        drop(part);
        assert_eq!(s.report(0).reserved, 0);
    }

    #[test]
    fn the_reserve_gives_its_blocks_and_is_refilled() {
        let (disk, s) = space(64 << 20);
        let hog = disk.new_file();
        let free = disk.space().0;
        redb::StorageBackend::set_len(&hog, free).unwrap();
        assert_eq!(disk.space().0, 0);
        assert!(s.check(META_OP, 0).is_err(), "full");
        assert!(s.rescue(10_000));
        assert_eq!(disk.space().0, 1 << 20, "one step given");
        assert!(s.report(0).state().starts_with("full (the global reserve"));
        assert!(s.rescue(3 << 20), "what is left");
        assert!(!s.rescue(1), "empty");
        redb::StorageBackend::set_len(&hog, 0).unwrap();
        assert!(s.check(META_OP, 0).is_ok(), "room again");
        s.refill();
        assert_eq!(s.report(0).reserve, (2 << 20, 2 << 20));
        assert_eq!(s.report(0).state(), "ok");
    }

    #[test]
    fn a_reserve_that_does_not_fit_is_counted_as_used() {
        let disk = SimDisk::with_capacity(64 << 20);
        let hog = disk.new_file();
        redb::StorageBackend::set_len(&hog, (63 << 20) + (512 << 10)).unwrap();
        let reserve = Medium::Sim(disk.new_file());
        let s = Arc::new(SpaceInfo::new(
            Probe::Sim(disk.clone()),
            Some(reserve),
            true,
        ));
        assert_eq!(s.report(0).reserve, (0, 2 << 20));
        assert_eq!(s.report(0).available, 0);
        assert!(s.try_reserve(1).is_none());
    }
}
