//! The data file (`DIR/wring.data`): extents' stored bytes live here, and the extent items in
//! the database point at them (offset, length), as btrfs's EXTENT_DATA items point into data
//! block groups.
//!
//! Mirrors btrfs's data space handling: an allocator over free ranges, and *pinned* extents —
//! space freed by a transaction is reused only after a durable commit no longer references it
//! (btrfs unpins at transaction commit), so a crash never finds an extent item pointing at
//! overwritten bytes. Differs in keeping the free space in memory only, rebuilt at mount from
//! the extent items (btrfs keeps a free-space tree), and in one more rule a userspace store
//! needs: freed space also waits until every read snapshot that could still see the old item
//! has ended (btrfs readers hold the page cache pages instead).
//!
//! Space that becomes free is given back to the filesystem below at once: the whole blocks
//! of a freed range are punched out of the file (FALLOC_FL_PUNCH_HOLE, as btrfs's discard
//! gives freed extents back to a thin device), the free tail is cut off, and a mount punches
//! what no commit refers to (extents a crash or a failed commit left). So the data file holds
//! about the live data, and a full filesystem gets its space back when files are deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::sync::Mutex;

use super::medium::Medium;
use crate::error::{io, FsError};

/// Allocation unit: every extent starts on a multiple of it (a small price against slivers).
pub const UNIT: u64 = 256;

/// The filesystem below frees space in blocks of this size: a hole is punched only over
/// whole blocks.
const BLOCK: u64 = 4096;

/// One extent's place in the data file.
pub type Range = (u64, u64);

/// The data file and its space.
pub struct DataFile {
    file: Medium,
    space: Mutex<Space>,
    readers: Mutex<Readers>,
}

/// Free space, end of the used part, and freed space not yet reusable.
#[derive(Default)]
struct Space {
    /// start → length.
    free: BTreeMap<u64, u64>,
    /// (length, start), for best fit.
    by_len: BTreeSet<(u64, u64)>,
    /// Everything at or past `end` is free.
    end: u64,
    /// Freed by committed transactions since the last durable commit.
    pinned: Vec<Range>,
    /// Unpinned by a durable commit, waiting for read snapshots of epochs <= the tag.
    waiting: Vec<(u64, Vec<Range>)>,
    /// Whole blocks in `pinned` and `waiting`: what the next durable commit gives back.
    held: u64,
    /// The largest `end` since the file was last cut to `end`.
    high: u64,
    /// Ranges of damaged extent items found at mount (past the end of the file, or sharing
    /// bytes with another item), with how many items name each: freeing one would hand out
    /// bytes that are, or will be, another extent's. Their release frees nothing.
    damaged: BTreeMap<Range, usize>,
}

/// Read snapshots alive, by the epoch they started in (shared by both data backends: the
/// data file reuses freed space, and the object store's compactor deletes segments, only
/// once no snapshot that could still see them is alive).
#[derive(Default)]
pub struct Readers {
    epoch: u64,
    active: BTreeMap<u64, usize>,
}

impl Readers {
    /// Register a reader in the current epoch (call before opening its snapshot).
    pub fn enter(readers: &Mutex<Readers>) -> ReaderGuard<'_> {
        let mut r = lock(readers);
        let epoch = r.epoch;
        *r.active.entry(epoch).or_default() += 1;
        ReaderGuard { readers, epoch }
    }

    /// End the current epoch; returns its tag. Every reader registered so far has an epoch
    /// at or below it.
    pub fn next_epoch(&mut self) -> u64 {
        let tag = self.epoch;
        self.epoch += 1;
        tag
    }

    /// Whether a reader registered in an epoch at or below `tag` is still alive.
    pub fn any_up_to(&self, tag: u64) -> bool {
        self.active
            .keys()
            .next()
            .is_some_and(|&oldest| oldest <= tag)
    }
}

/// A registered reader: space it could see is not reused while it lives.
pub struct ReaderGuard<'a> {
    readers: &'a Mutex<Readers>,
    epoch: u64,
}

impl Drop for ReaderGuard<'_> {
    fn drop(&mut self) {
        let mut r = lock(self.readers);
        if let Some(n) = r.active.get_mut(&self.epoch) {
            *n -= 1;
            if *n == 0 {
                r.active.remove(&self.epoch);
            }
        }
    }
}

use wring_sync::lock;

fn round_up(n: u64) -> u64 {
    n.div_ceil(UNIT) * UNIT
}

/// Whole blocks of a range.
fn blocks(len: u64) -> u64 {
    len / BLOCK * BLOCK
}

fn held(ranges: &[Range]) -> u64 {
    ranges.iter().map(|r| blocks(r.1)).sum()
}

impl Space {
    /// The free space of a file `len` bytes long whose extent items reference `used`
    /// (see [`DataFile::new`]).
    fn of(len: u64, mut used: Vec<Range>) -> Space {
        let mut space = Space::default();
        let mut damaged = |r: Range| *space.damaged.entry(r).or_insert(0) += 1;
        used.retain(|&(start, n)| {
            let inside = start.checked_add(n).is_some_and(|e| e <= len);
            if !inside {
                damaged((start, n));
            }
            inside
        });
        used.sort_unstable();
        let mut at = 0u64;
        let mut free = Vec::new();
        // The range reaching furthest so far: the one a range starting before `at` overlaps.
        let mut cover: Option<Range> = None;
        for (start, n) in used {
            let end = start.saturating_add(round_up(n.max(1)));
            if start > at {
                free.push((at, start - at));
            } else if let Some(c) = cover.filter(|_| start < at) {
                damaged(c);
                damaged((start, n));
            }
            if end > at {
                at = end;
                cover = Some((start, n));
            }
        }
        for (s, l) in free {
            space.free.insert(s, l);
            space.by_len.insert((l, s));
        }
        space.end = at;
        space
    }

    /// Make `start..+len` free; returns the whole blocks that are free now and were not
    /// before (to punch), if any.
    fn insert_free(&mut self, start: u64, len: u64) -> Option<Range> {
        let freed = (start, start + len);
        let (mut start, mut len) = (start, len);
        if let Some((&s, &l)) = self.free.range(..start).next_back() {
            if s + l == start {
                self.remove_free(s, l);
                start = s;
                len += l;
            }
        }
        if let Some(&l) = self.free.get(&(start + len)) {
            self.remove_free(start + len, l);
            len += l;
        }
        if start + len >= self.end {
            // The tail is free: the used part ends earlier (the file is cut there).
            self.end = start;
            return None;
        }
        self.free.insert(start, len);
        self.by_len.insert((len, start));
        // The blocks the freed part touches that lie wholly in the free range.
        let lo = (freed.0 / BLOCK * BLOCK).max(start).div_ceil(BLOCK) * BLOCK;
        let hi = blocks(
            freed
                .1
                .div_ceil(BLOCK)
                .saturating_mul(BLOCK)
                .min(start + len),
        );
        (hi > lo).then(|| (lo, hi - lo))
    }

    fn remove_free(&mut self, start: u64, len: u64) {
        self.free.remove(&start);
        self.by_len.remove(&(len, start));
    }

    fn allocate(&mut self, len: u64) -> u64 {
        let len = round_up(len.max(1));
        let fit = self.by_len.range((len, 0)..).next().copied();
        match fit {
            Some((l, s)) => {
                self.remove_free(s, l);
                if l > len {
                    self.free.insert(s + len, l - len);
                    self.by_len.insert((l - len, s + len));
                }
                s
            }
            None => {
                let s = self.end;
                self.end += len;
                s
            }
        }
    }

    /// Free a range an extent item referenced; returns the blocks to punch. A damaged item's
    /// range (past the used part of the file, or overlapping space already free) is left
    /// alone: freeing it would move the end of the used part or hand the same bytes out twice.
    fn release(&mut self, (start, len): Range) -> Option<Range> {
        if let Some(n) = self.damaged.get_mut(&(start, len)) {
            *n -= 1;
            if *n == 0 {
                self.damaged.remove(&(start, len));
            }
            log::warn!("data file: not freeing {len} bytes at {start}: a damaged extent item's");
            return None;
        }
        let len = round_up(len.max(1));
        let end = start.checked_add(len).filter(|&e| e <= self.end);
        let overlaps_free = |end: u64| {
            self.free
                .range(..end)
                .next_back()
                .is_some_and(|(&s, &l)| s + l > start)
        };
        match end {
            Some(end) if !overlaps_free(end) => self.insert_free(start, len),
            _ => {
                log::warn!(
                    "data file: not freeing {len} bytes at {start}: a damaged extent item's \
                     range (the used part ends at {})",
                    self.end
                );
                None
            }
        }
    }
}

impl DataFile {
    /// The data file on `file`, with `used` the ranges the extent items reference; everything
    /// else is free. Damaged items' ranges (past the end of the file, where reading fails, or
    /// sharing bytes with another item) are remembered so that deleting them frees nothing.
    pub fn new(file: Medium, used: Vec<Range>) -> Result<DataFile, FsError> {
        let len = Self::len_of(&file)?;
        Ok(DataFile {
            file,
            space: Mutex::new(Space::of(len, used)),
            readers: Mutex::default(),
        })
    }

    fn len_of(file: &Medium) -> Result<u64, FsError> {
        file.size()
            .map_err(io("reading the length of the data file"))
    }

    /// Start again from the extent items `used` of a commit the store went back to (after a
    /// failed commit): what later commits wrote and freed is forgotten. No reader may be
    /// alive.
    pub fn rebuild(&self, used: Vec<Range>) -> Result<(), FsError> {
        let len = Self::len_of(&self.file)?;
        let mut space = lock(&self.space);
        *space = Space::of(len, used);
        space.high = len;
        Ok(())
    }

    /// Give the filesystem back what no commit refers to: cut the file after the used part,
    /// and punch the free blocks inside it (a mount does; fsck leaves the file as it is).
    pub fn trim(&self) -> Result<(), FsError> {
        let mut space = lock(&self.space);
        self.set_len(&mut space)?;
        let holes: Vec<Range> = space.free.iter().map(|(&s, &l)| (s, l)).collect();
        self.punch(holes.into_iter().filter_map(|(s, l)| {
            let lo = s.div_ceil(BLOCK) * BLOCK;
            let hi = blocks(s + l);
            (hi > lo).then(|| (lo, hi - lo))
        }));
        Ok(())
    }

    /// Punch `holes` (whole blocks no extent uses) out of the file. Called with the space
    /// locked: nothing can be allocated there meanwhile. A failure only keeps the blocks.
    fn punch(&self, holes: impl IntoIterator<Item = Range>) {
        for (at, len) in holes {
            if let Err(e) = self.file.punch(at, len) {
                log::warn!("data file: punching {len} free bytes at {at}: {e}");
                return;
            }
        }
    }

    /// Cut the file after the used part: nothing past `end` is referenced by any commit.
    fn set_len(&self, space: &mut Space) -> Result<(), FsError> {
        self.file
            .set_len(space.end)
            .map_err(io("cutting the data file"))?;
        space.high = space.end;
        Ok(())
    }

    /// Space for `len` bytes, never overlapping anything a commit or a live snapshot may see.
    pub fn allocate(&self, len: u64) -> u64 {
        let mut space = lock(&self.space);
        self.reuse_waiting(&mut space);
        let at = space.allocate(len);
        space.high = space.high.max(space.end);
        at
    }

    /// Give back space allocated but never referenced by a commit.
    pub fn release(&self, range: Range) {
        let mut space = lock(&self.space);
        let hole = space.release(range);
        self.punch(hole);
    }

    /// Space a committed transaction stopped referencing: reusable after a durable commit.
    pub fn pin(&self, ranges: impl IntoIterator<Item = Range>) {
        let ranges: Vec<Range> = ranges.into_iter().collect();
        let mut space = lock(&self.space);
        space.held += held(&ranges);
        space.pinned.extend(ranges);
    }

    /// What the next durable commit gives back (whole blocks freed since the last one, and
    /// those waiting for old readers).
    pub fn reclaimable(&self) -> u64 {
        lock(&self.space).held
    }

    /// A durable commit has happened: pinned space becomes free once the snapshots that
    /// started before it have ended.
    pub fn unpin(&self) {
        let mut space = lock(&self.space);
        let batch = std::mem::take(&mut space.pinned);
        if !batch.is_empty() {
            let tag = lock(&self.readers).next_epoch();
            space.waiting.push((tag, batch));
        }
        self.reuse_waiting(&mut space);
        if space.end < space.high {
            // Best effort: a failed truncate only leaves the file longer than needed.
            let _ = self.set_len(&mut space);
        }
    }

    /// Move waiting batches no live snapshot can see into the free space.
    fn reuse_waiting(&self, space: &mut Space) {
        if space.waiting.is_empty() {
            return;
        }
        let readers = lock(&self.readers);
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut space.waiting)
            .into_iter()
            .partition(|(tag, _)| !readers.any_up_to(*tag));
        drop(readers);
        space.waiting = wait;
        let mut holes = Vec::new();
        for (_, batch) in ready {
            space.held = space.held.saturating_sub(held(&batch));
            holes.extend(batch.into_iter().filter_map(|r| space.release(r)));
        }
        self.punch(coalesce(holes, space.end));
    }

    /// Register a reader (call before opening its snapshot).
    pub fn reader(&self) -> ReaderGuard<'_> {
        Readers::enter(&self.readers)
    }

    /// Write `bytes` at `offset`.
    pub fn write_at(&self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        self.file.write_all_at(bytes, offset)
    }

    /// Read exactly `buf.len()` bytes at `offset` (a short file is an error).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// Make every write so far durable (before a durable commit refers to it).
    pub fn sync(&self) -> Result<(), FsError> {
        self.file.sync_data().map_err(io("syncing the data file"))
    }

    /// The real file, for the flusher (none on a simulated disk).
    pub fn file(&self) -> Option<&File> {
        self.file.file()
    }

    /// (free bytes inside the used part, end of the used part).
    pub fn usage(&self) -> (u64, u64) {
        let s = lock(&self.space);
        (s.free.values().sum(), s.end)
    }
}

/// `holes` sorted, touching ones joined, and cut at `end` (the file is cut there): one punch
/// per free run instead of one per freed extent. Each punch on a filesystem mounted with
/// `discard` waits for the device, so an rm -rf of 10,000 small files made the durable commit
/// after it wait seconds for 10,000 of them.
fn coalesce(mut holes: Vec<Range>, end: u64) -> Vec<Range> {
    holes.sort_unstable();
    let end = end / BLOCK * BLOCK;
    let mut out: Vec<Range> = Vec::with_capacity(holes.len());
    for (at, len) in holes {
        let hi = at.saturating_add(len).min(end);
        if hi <= at {
            continue;
        }
        match out.last_mut() {
            Some((s, l)) if *s + *l >= at => *l = (*l).max(hi - *s),
            _ => out.push((at, hi - at)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_joined_sorted_and_cut_at_the_end() {
        let holes = vec![
            (8192, 4096),
            (0, 4096),
            (4096, 4096),
            (20480, 8192),
            (16384, 4096),
        ];
        assert_eq!(coalesce(holes, 1 << 20), vec![(0, 12288), (16384, 12288)]);
        // Past the end of the used part the file is cut, not punched; a partial block stays.
        let holes = vec![(0, 4096), (8192, 8192), (20480, 4096)];
        assert_eq!(coalesce(holes, 12288 + 256), vec![(0, 4096), (8192, 4096)]);
        assert_eq!(coalesce(vec![(8192, 4096)], 4096), vec![]);
        // Overlapping reports (a block two freed extents share) are punched once.
        assert_eq!(
            coalesce(vec![(0, 8192), (4096, 4096)], 1 << 20),
            vec![(0, 8192)]
        );
    }
    use std::path::Path;

    /// A data file in a fresh directory, removed when the first value drops.
    struct Dir(std::path::PathBuf);

    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn open(used: Vec<Range>) -> (Dir, DataFile) {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "wring-data-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let len = used.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
        File::create(dir.join("data"))
            .unwrap()
            .set_len(len)
            .unwrap();
        (Dir(dir.clone()), open_at(&dir.join("data"), used))
    }

    /// The data file at `path` as a mount opens it: cut after the used part.
    fn open_at(path: &Path, used: Vec<Range>) -> DataFile {
        let d = DataFile::new(Medium::open(path).unwrap(), used).unwrap();
        d.trim().unwrap();
        d
    }

    #[test]
    fn gaps_between_used_ranges_are_reused_best_fit() {
        let (_t, d) = open(vec![(1024, 100), (0, 256), (4096, 300)]);
        assert_eq!(d.usage(), (768 + 2816, 4096 + 512));
        // 512 fits the gap at 256 (768 long) better than the one at 1280 (2816 long).
        assert_eq!(d.allocate(500), 256);
        assert_eq!(d.allocate(3000), 4608);
        assert_eq!(d.allocate(2000), 1280);
    }

    #[test]
    fn freed_space_waits_for_durable_commit_and_old_readers() {
        let (_t, d) = open(vec![]);
        let a = d.allocate(1000);
        let b = d.allocate(1000);
        assert_eq!((a, b), (0, 1024));
        let r = d.reader();
        d.pin([(a, 1000)]);
        assert_eq!(d.allocate(1000), 2048, "pinned space is not reused");
        d.unpin();
        assert_eq!(d.allocate(1000), 3072, "an older reader may still see it");
        let late = d.reader();
        drop(r);
        assert_eq!(d.allocate(1000), a, "reusable once the old reader is gone");
        drop(late);
    }

    #[test]
    fn a_damaged_range_is_not_freed() {
        let (_t, d) = open(vec![]);
        let a = d.allocate(3 * UNIT);
        let b = d.allocate(UNIT);
        // Past the used part: the end stays where it is.
        d.release((1 << 40, UNIT));
        d.release((u64::MAX - 10, UNIT));
        assert_eq!(d.allocate(UNIT), b + UNIT);
        // Freed twice, or overlapping a free range: handed out once.
        d.release((a, UNIT));
        d.release((a, UNIT));
        d.release((a, 2 * UNIT));
        assert_eq!(d.allocate(UNIT), a);
        assert_eq!(d.allocate(UNIT), b + 2 * UNIT);
    }

    #[test]
    fn freeing_the_tail_shrinks_the_file() {
        let (t, d) = open(vec![]);
        let a = d.allocate(5000);
        let b = d.allocate(5000);
        d.write_at(&[1u8; 5000], a).unwrap();
        d.write_at(&[2u8; 5000], b).unwrap();
        d.pin([(b, 5000)]);
        d.unpin();
        assert_eq!(d.usage(), (0, 5120));
        let len = std::fs::metadata(t.path().join("data")).unwrap().len();
        assert_eq!(len, 5120);
        d.release((a, 5000));
        assert_eq!(d.usage(), (0, 0));
    }

    #[test]
    fn ranges_past_the_end_of_the_file_are_not_kept() {
        let (t, _) = open(vec![(0, 1000)]);
        let d = open_at(&t.path().join("data"), vec![(0, 1000), (1 << 40, 10)]);
        assert_eq!(d.usage(), (0, 1024));
        assert_eq!(d.allocate(10), 1024);
    }

    /// A damaged item's range past the end of the file is free for new extents; deleting the
    /// damaged item later must not free it under them. Two items sharing bytes: deleting
    /// either frees nothing the other still names.
    #[test]
    fn deleting_a_damaged_item_frees_nothing_another_extent_uses() {
        let (t, _) = open(vec![(0, 1024)]);
        let dangling = (2048, 1024);
        let d = open_at(&t.path().join("data"), vec![(0, 1024), dangling]);
        let new: Vec<u64> = (0..3).map(|_| d.allocate(1024)).collect();
        assert!(new.contains(&2048), "{new:?}");
        d.release(dangling);
        assert_eq!(d.usage().0, 0, "nothing freed");
        assert_eq!(d.allocate(1024), 4096);

        let (_t, d) = open(vec![(0, 2048), (1024, 1024), (4096, 512)]);
        d.release((1024, 1024));
        d.release((0, 2048));
        assert_eq!(d.usage(), (2048, 4608), "the shared bytes stay used");
        d.release((4096, 512));
        assert_eq!(d.usage(), (0, 2048));
    }

    #[test]
    fn released_neighbours_coalesce() {
        let (_t, d) = open(vec![(10_000, 10)]);
        let xs: Vec<u64> = (0..4).map(|_| d.allocate(UNIT)).collect();
        for &x in &xs {
            d.release((x, UNIT));
        }
        assert_eq!(d.usage().0, 10_000);
        assert_eq!(d.allocate(10_000 / UNIT * UNIT), 0);
    }
}
