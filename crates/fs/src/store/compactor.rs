//! The compactor of a store whose extents are in a bucket: segments whose live bytes fell
//! under a threshold (overwritten and deleted extents), and runs of small segments (frequent
//! fsyncs), have their live extents copied into new segments; the extent items are re-pointed
//! in one durable commit; the old objects are deleted once no read snapshot can still see
//! them.
//!
//! Mirrors btrfs's balance with a usage filter (`btrfs balance start -dusage=50`, which
//! relocates data block groups under 50% full: relocation.c copies the extents, switches the
//! references, then frees the group). It differs in running by itself (a thread per writing
//! mount, every second, `compact=1`, `compact_threshold=PERCENT`) and in merging small
//! segments, which btrfs's fixed-size block groups do not have.
//!
//! Crash-safe at every step (docs/objstore.md, "Compaction"): the copies are in the bucket
//! before the commit that points at them; an item is re-pointed only if it still names the
//! address that was copied (a writer may have replaced it since: that copy is freed); the old
//! segments are deleted only after that commit is durable. A crash leaves orphans (all dead)
//! that a later pass deletes, never an item naming a deleted object.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::ReadableTable;
use wring_objstore::{Addr, ObjStore, SegmentUsage};

use super::objects::Objects;
use super::records::{self, Stored};
use super::{lock, Store, EXTENTS};
use crate::error::{errno, io, FsError};

/// How often the compactor looks at the bucket.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// The most a pass waits before trying again after an error.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A segment whose object is under this fraction of the segment size is small: runs of them
/// are merged (1/`SMALL_DIVISOR`).
const SMALL_DIVISOR: u64 = 4;
/// Live bytes one pass copies at most, in segment sizes, or [`PASS_BYTES`] if that is more
/// (at least one segment is taken): with a pass a second, compaction reads and writes at
/// most about that much a second beside the writers.
const PASS_SEGMENTS: u64 = 4;
/// See [`PASS_SEGMENTS`].
const PASS_BYTES: u64 = 16 << 20;

/// What one compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Segments chosen (under the threshold, or small ones merged).
    pub picked: usize,
    /// Stored extents copied and their items re-pointed (a shared one counts once).
    pub moved: u64,
    /// Stored bytes copied for them.
    pub moved_bytes: u64,
    /// Extents a writer replaced between the copy and the commit (their copies were freed).
    pub raced: u64,
    /// Segment objects deleted.
    pub deleted: u64,
    /// Emptied segments still waiting for old read snapshots to end.
    pub waiting: u64,
}

/// What the compactor does in one of its ticks.
pub enum Tick {
    /// Nothing to do now (compaction is off, or no store to compact).
    Idle,
    /// A pass ran, or failed.
    Ran(Result<CompactReport, FsError>),
    /// The mount is gone: the thread ends.
    Gone,
}

/// Totals for `wring status`.
#[derive(Default)]
struct Totals {
    passes: AtomicU64,
    rewritten: AtomicU64,
    moved: AtomicU64,
    moved_bytes: AtomicU64,
    raced: AtomicU64,
    deleted: AtomicU64,
    errors: AtomicU64,
}

/// The compactor's thread, its totals and the state of a pass.
#[derive(Default)]
pub struct Compaction {
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    totals: Totals,
    last_error: Mutex<Option<String>>,
}

/// The segments one pass takes: under the threshold first (emptiest first), then small ones
/// when there are at least two to merge; `PASS_SEGMENTS` segment sizes or `PASS_BYTES` of
/// live bytes at most (at least one segment).
pub fn pick(
    segs: &[SegmentUsage],
    threshold: u8,
    segment_bytes: u64,
    skip: &HashSet<u32>,
) -> Vec<u32> {
    let usable = |s: &&SegmentUsage| s.in_bucket && !skip.contains(&s.segment);
    let mut under: Vec<&SegmentUsage> = segs
        .iter()
        .filter(usable)
        .filter(|s| u128::from(s.live) * 100 < u128::from(threshold) * u128::from(s.object_len))
        .collect();
    under.sort_by_key(|s| (s.live, s.segment));
    let small: Vec<&SegmentUsage> = segs
        .iter()
        .filter(usable)
        .filter(|s| s.object_len.saturating_mul(SMALL_DIVISOR) < segment_bytes)
        .filter(|s| !under.iter().any(|u| u.segment == s.segment))
        .collect();
    let merge = small.len() >= 2 || (small.len() == 1 && !under.is_empty());
    let budget = segment_bytes.saturating_mul(PASS_SEGMENTS).max(PASS_BYTES);
    let (mut out, mut live) = (Vec::new(), 0u64);
    let chosen = under.into_iter().chain(small.into_iter().filter(|_| merge));
    for s in chosen {
        if !out.is_empty() && live.saturating_add(s.live) > budget {
            break;
        }
        live = live.saturating_add(s.live);
        out.push(s.segment);
    }
    out
}

impl Compaction {
    /// Start the compactor thread: `tick` every [`INTERVAL`] until stopped or it says the
    /// mount is gone; after a failed pass it waits longer (doubling, up to a minute).
    pub fn start(&self, mut tick: impl FnMut() -> Tick + Send + 'static) -> Result<(), FsError> {
        let stop = self.stop.clone();
        let handle = std::thread::Builder::new()
            .name("wring-compact".into())
            .spawn(move || {
                let mut backoff = INTERVAL;
                let mut next = Instant::now() + INTERVAL;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::park_timeout(next.saturating_duration_since(Instant::now()));
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if Instant::now() < next {
                        continue;
                    }
                    match tick() {
                        Tick::Gone => return,
                        Tick::Ran(Err(_)) => backoff = (backoff * 2).min(MAX_BACKOFF),
                        Tick::Idle | Tick::Ran(Ok(_)) => backoff = INTERVAL,
                    }
                    next = Instant::now() + backoff;
                }
            })
            .map_err(io("starting the compactor"))?;
        *lock(&self.thread) = Some(handle);
        Ok(())
    }

    /// Stop the thread and wait for its pass to end (not when called from that thread: the
    /// mount's last reference may be dropped there).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let Some(handle) = lock(&self.thread).take() else {
            return;
        };
        if handle.thread().id() == std::thread::current().id() {
            return;
        }
        handle.thread().unpark();
        let _ = handle.join();
    }

    fn count(&self, r: &Result<CompactReport, FsError>) {
        let t = &self.totals;
        t.passes.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(r) => {
                if r.moved > 0 || r.raced > 0 {
                    t.rewritten.fetch_add(r.picked as u64, Ordering::Relaxed);
                }
                t.moved.fetch_add(r.moved, Ordering::Relaxed);
                t.moved_bytes.fetch_add(r.moved_bytes, Ordering::Relaxed);
                t.raced.fetch_add(r.raced, Ordering::Relaxed);
                t.deleted.fetch_add(r.deleted, Ordering::Relaxed);
            }
            Err(e) => {
                t.errors.fetch_add(1, Ordering::Relaxed);
                *lock(&self.last_error) = Some(e.to_string().replace('\n', " "));
            }
        }
    }

    /// `compaction: …` for `wring status`; `threshold` is None when compaction is off.
    fn line(&self, threshold: Option<u8>, waiting: usize) -> String {
        let t = &self.totals;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let state = match threshold {
            Some(p) => format!("on threshold={p}%"),
            None => "off".into(),
        };
        format!(
            "compaction: {state} passes={} segments_rewritten={} extents_moved={} \
             bytes_moved={} raced={} segments_deleted={} waiting={waiting} errors={} \
             last_error={}\n",
            get(&t.passes),
            get(&t.rewritten),
            get(&t.moved),
            get(&t.moved_bytes),
            get(&t.raced),
            get(&t.deleted),
            get(&t.errors),
            lock(&self.last_error).as_deref().unwrap_or("none"),
        )
    }
}

impl Store {
    /// Start the compactor of a writing store in a bucket (nothing for others): `tick` runs a
    /// pass when it should ([`Store::compact_counted`]) — the mount decides, from its live
    /// options, whether compaction is on and its threshold.
    pub fn start_compactor(
        &self,
        tick: impl FnMut() -> Tick + Send + 'static,
    ) -> Result<(), FsError> {
        match self.data.objects() {
            Some(o) if !self.read_only() && o.holder().is_some() => self.compaction.start(tick),
            _ => Ok(()),
        }
    }

    /// Stop the compactor, waiting for a pass in progress (unmount, before the final commit).
    pub fn stop_compactor(&self) {
        self.compaction.stop();
    }

    /// `compaction: …` for `wring status`, with the live threshold (None: compaction is off);
    /// None for a store not in a bucket.
    pub fn compaction_line(&self, threshold: Option<u8>) -> Option<String> {
        let o = self.data.objects()?;
        let waiting = lock(&o.doomed).iter().map(|(_, s)| s.len()).sum();
        Some(self.compaction.line(threshold, waiting))
    }

    /// One pass, counted for `wring status` and logged when it did something or failed.
    pub fn compact_counted(&self, threshold: u8) -> Result<CompactReport, FsError> {
        let r = self.compact(threshold);
        self.compaction.count(&r);
        match &r {
            Ok(r) if r.moved + r.raced + r.deleted > 0 => log::info!(
                "compaction: {} segments, {} extents ({} bytes) moved, {} raced, {} deleted",
                r.picked,
                r.moved,
                r.moved_bytes,
                r.raced,
                r.deleted
            ),
            Ok(_) => {}
            Err(e) => log::warn!("compaction failed (retried later): {e}"),
        }
        r
    }

    /// One compaction pass at `threshold` percent live bytes: delete what earlier passes
    /// emptied once its readers are gone, pick segments, copy their live extents, re-point
    /// the items in one durable commit, then doom the emptied segments. Nothing to do for a
    /// store not in a bucket; EROFS on one opened for fsck.
    pub fn compact(&self, threshold: u8) -> Result<CompactReport, FsError> {
        let Some(o) = self.data.objects() else {
            return Ok(CompactReport::default());
        };
        if self.read_only() || o.holder().is_none() {
            return Err(errno(libc::EROFS));
        }
        if o.frozen() {
            return Ok(CompactReport::default());
        }
        let _one = lock(&o.compacting);
        let mut report = CompactReport::default();
        delete_doomed(o, &mut report)?;
        let skip: HashSet<u32> = lock(&o.doomed)
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        let segment_bytes = o
            .spec()
            .segment_bytes
            .unwrap_or(u64::from(wring_objstore::config::SEGMENT_BYTES));
        let picked = pick(&o.store().segments(), threshold, segment_bytes, &skip);
        if picked.is_empty() {
            return Ok(report);
        }
        report.picked = picked.len();
        let items = self.live_items(&picked)?;
        if !items.is_empty() {
            self.move_items(o, &items, &mut report)?;
        }
        doom_empty(o, &picked);
        delete_doomed(o, &mut report)?;
        Ok(report)
    }

    /// Every extent item whose stored bytes are in one of `segments`: (key, address, length).
    fn live_items(&self, segments: &[u32]) -> Result<Vec<Item>, FsError> {
        let wanted: BTreeSet<u32> = segments.iter().copied().collect();
        let txn = self.read()?;
        let table = txn.open_table(EXTENTS)?;
        let mut items = Vec::new();
        for r in table.iter()? {
            let (k, v) = r?;
            if let Ok(Stored::External(at, len)) = records::stored(v.value()) {
                let addr = Addr::from_raw(at);
                if wanted.contains(&addr.segment()) {
                    items.push((k.value(), addr, len));
                }
            }
        }
        Ok(items)
    }

    /// Copy `items`' stored bytes into new segments, once per address (a shared extent's
    /// items all name one), and re-point each item that still names its old address, in one
    /// durable commit; a shared extent's record follows its bytes. Then the old copies count
    /// as dead.
    fn move_items(
        &self,
        o: &Objects,
        items: &[Item],
        report: &mut CompactReport,
    ) -> Result<(), FsError> {
        let store = o.store();
        let mut extents: Vec<(Addr, u64)> = items.iter().map(|&(_, a, l)| (a, l)).collect();
        extents.sort_unstable_by_key(|&(a, l)| (a.raw(), l));
        extents.dedup();
        let map = store.rewrite(&extents)?;
        let txn = match self.write() {
            Ok(t) => t,
            Err(e) => {
                free_copies(store, &map);
                return Err(e);
            }
        };
        // Every copy belongs to the transaction: dropped uncommitted, it frees them all.
        for &(_, new, len) in &map {
            txn.adopt((new.raw(), len));
        }
        // The listed items that still name their address, by address.
        let mut naming: HashMap<(u64, u64), Vec<Named>> = HashMap::new();
        {
            let table = txn.open_table(EXTENTS)?;
            for &(key, old, len) in items {
                let Some(v) = table.get(key)?.map(|v| v.value().to_vec()) else {
                    continue;
                };
                if records::stored(&v) == Ok(Stored::External(old.raw(), len)) {
                    naming.entry((old.raw(), len)).or_default().push((key, v));
                }
            }
        }
        let (mut moved, mut raced) = (Vec::new(), Vec::new());
        let mut table = txn.open_table(EXTENTS)?;
        for &(old, new, len) in &map {
            let names = naming.remove(&(old.raw(), len)).unwrap_or_default();
            // Every item naming the address must move with it: a copy_file_range since the
            // snapshot may have added one this pass did not list (the next pass takes it).
            let refs = super::shared::refs(&txn, old.raw())?;
            if names.is_empty() || names.len() as u64 != refs {
                // The copy is not needed (a writer replaced or removed the items), or not
                // enough.
                raced.push((old, new, len));
                continue;
            }
            for (key, mut v) in names {
                // Dropped uncommitted on an error, the transaction frees the copies.
                records::set_external_offset(&mut v, new.raw()).map_err(|e| e.at(key.0, 0))?;
                table.insert(key, v.as_slice())?;
            }
            super::shared::moved(&txn, old.raw(), new.raw())?;
            moved.push((old, new, len));
        }
        drop(table);
        self.commit(txn, true)?;
        free_copies(store, &raced);
        store.commit_rewrite(&moved);
        report.moved = moved.len() as u64;
        report.moved_bytes = moved.iter().map(|&(_, _, l)| l).sum();
        report.raced = raced.len() as u64;
        Ok(())
    }
}

/// An extent item's key, the address of its stored bytes and their length.
type Item = ((u64, u64), Addr, u64);
/// An extent item's key and its value, as a pass found it naming an address.
type Named = ((u64, u64), Vec<u8>);

/// The copies of a rewrite no item points at: dead now.
fn free_copies(store: &ObjStore, map: &[(Addr, Addr, u64)]) {
    for &(_, new, len) in map {
        store.free(new, len);
    }
}

/// Of `picked`, the segments left without live bytes wait for the read snapshots alive now
/// (any of them may still read an item from before the commit that emptied them).
fn doom_empty(o: &Objects, picked: &[u32]) {
    let segs = o.store().segments();
    let empty: Vec<u32> = picked
        .iter()
        .copied()
        .filter(|p| segs.iter().any(|s| s.segment == *p && s.live == 0))
        .collect();
    if empty.is_empty() {
        return;
    }
    let tag = lock(o.readers()).next_epoch();
    lock(&o.doomed).push((tag, empty));
}

/// Delete the doomed segments no read snapshot can see any more.
fn delete_doomed(o: &Objects, report: &mut CompactReport) -> Result<(), FsError> {
    let ready: Vec<(u64, Vec<u32>)> = {
        let readers = lock(o.readers());
        let mut doomed = lock(&o.doomed);
        let (ready, wait) = std::mem::take(&mut *doomed)
            .into_iter()
            .partition(|(tag, _)| !readers.any_up_to(*tag));
        *doomed = wait;
        ready
    };
    let mut result = Ok(());
    for (tag, segs) in ready {
        let r = if result.is_ok() {
            o.store().delete_segments(&segs)
        } else {
            Ok(())
        };
        match r {
            Ok(()) => report.deleted += segs.len() as u64,
            Err(e) => {
                // Kept for the next pass (some may be gone already: a delete of a missing
                // object is not an error, and one with live bytes again is refused).
                let left: Vec<u32> = segs
                    .into_iter()
                    .filter(|s| o.store().segments().iter().any(|u| u.segment == *s))
                    .collect();
                if !left.is_empty() {
                    lock(&o.doomed).push((tag, left));
                }
                if result.is_ok() {
                    result = Err(e.into());
                }
            }
        }
    }
    report.waiting = lock(&o.doomed).iter().map(|(_, s)| s.len() as u64).sum();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(segment: u32, object_len: u64, live: u64) -> SegmentUsage {
        SegmentUsage {
            segment,
            object_len,
            live,
            in_bucket: true,
        }
    }

    #[test]
    fn picks_under_the_threshold_emptiest_first_within_the_budget() {
        let m = 1 << 20;
        let segs = [
            seg(1, m, m / 2),      // 50%: not under 50
            seg(2, m, m / 10),     // 10%
            seg(3, m, 0),          // orphan
            seg(4, m, m * 4 / 10), // 40%
            SegmentUsage {
                in_bucket: false,
                ..seg(5, m, 0)
            },
        ];
        assert_eq!(pick(&segs, 50, m, &HashSet::new()), vec![3, 2, 4]);
        assert_eq!(pick(&segs, 50, m, &[2].into()), vec![3, 4]);
        assert_eq!(pick(&segs, 5, m, &HashSet::new()), vec![3]);
        // The budget: PASS_BYTES (16 MiB) of live bytes here, stopping before passing it.
        let many: Vec<_> = (1..=50).map(|n| seg(n, m, m * 4 / 10)).collect();
        assert_eq!(pick(&many, 50, m, &HashSet::new()).len(), 40);
        // PASS_SEGMENTS segment sizes when that is more: 4 x 16 MiB.
        let big: Vec<_> = (1..=10)
            .map(|n| seg(n, 16 * m, 16 * m * 45 / 100))
            .collect();
        assert_eq!(pick(&big, 50, 16 * m, &HashSet::new()).len(), 8);
        // One segment over the budget is still taken.
        assert_eq!(
            pick(&[seg(1, 64 * m, 30 * m)], 50, m, &HashSet::new()),
            vec![1]
        );
    }

    #[test]
    fn merges_small_segments_only_in_company() {
        let m = 1 << 20;
        let one = [seg(1, m, m), seg(2, 4096, 4000)];
        assert!(pick(&one, 50, m, &HashSet::new()).is_empty());
        let two = [seg(1, m, m), seg(2, 4096, 4000), seg(3, 8192, 8000)];
        assert_eq!(pick(&two, 50, m, &HashSet::new()), vec![2, 3]);
        let with_dead = [seg(1, m, m / 4), seg(2, 4096, 4000)];
        assert_eq!(pick(&with_dead, 50, m, &HashSet::new()), vec![1, 2]);
    }

    #[test]
    fn threshold_never_picks_a_full_segment() {
        // A fresh segment is its extents plus a 12-byte index entry each and a 32-byte
        // trailer: at the highest threshold accepted (95%) it is not a candidate.
        let len = 2049 + 12 + 32;
        assert!(pick(&[seg(1, len, 2049)], 95, len, &HashSet::new()).is_empty());
    }
}
