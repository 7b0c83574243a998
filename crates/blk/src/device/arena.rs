//! The size-class arena compressed pages live in: mm/zsmalloc.c's idea in safe Rust.
//!
//! * Objects of 32 to 4096 bytes are served from size classes 16 bytes apart
//!   (`ZS_MIN_ALLOC_SIZE`, `ZS_SIZE_CLASS_DELTA = PAGE_SIZE >> 8`). Each class carves
//!   *zspages* — runs of 1 to 8 pages (`CONFIG_ZSMALLOC_CHAIN_SIZE`'s default) — into equal
//!   objects, choosing the run length that wastes the least of it (`calculate_zspage_chain_size`).
//!   Classes whose zspages would hold the same number of objects in the same number of pages
//!   are merged into the larger one, as zsmalloc does.
//! * The *huge class size* is the smallest object length that lands in a class of one object
//!   on one page, one byte more than the largest class that packs several objects: a
//!   compressed page at least that large saves nothing, and zram stores it raw
//!   ([`Arena::huge_class_size`]). zsmalloc subtracts its in-object handle (7 bytes) from that
//!   figure; wring's objects carry no handle.
//! * A [`Handle`] names an entry in its class's handle table, and the table holds the object's
//!   current place; [`Arena::compact`] moves objects from the sparsest zspages into the fullest
//!   and frees the emptied zspages (`zs_compact`), updating the table, so the owners' handles
//!   stay valid.
//! * Memory is counted in pages of zspages (`zs_get_total_pages`), which is `mem_used_total`.
//!   An allocation that would need a new zspage beyond the limit fails with
//!   [`ArenaError::Limit`] and changes nothing.
//!
//! * Beyond zsmalloc, for wring's larger slots (`slot_size=8K|16K|32K`): an arena is built for
//!   a largest object, [`Arena::with_max_object`]. An object longer than a page is stored in
//!   parts — its whole pages each in the one-page class, its tail in zsmalloc's classes — and
//!   its handle names the list of parts, so it costs its whole pages plus its tail's class, as
//!   fine-grained as a page's. (Classes going on past the page, 16 bytes apart, would hold
//!   few objects per zspage and cost up to a fifth more: measured with `wring bench blk`,
//!   zstd:3 at 32 KiB slots, 9% above `compr_data_size` that way against 2% in parts.) The
//!   huge class size generalizes to "the smallest length costing at least a raw slot": the
//!   slot's pages but one plus zsmalloc's huge class size (a tail in a class of one object on
//!   one page). For 4 KiB this is zsmalloc's figure.
//!
//! Differs from zsmalloc: a zspage is one contiguous heap buffer rather than linked 0-order
//! pages (userspace gets no advantage from order-0 pages and no objects need mapping across a
//! page boundary); each class has one lock, as zsmalloc's `class->lock`; free objects are kept
//! on a per-zspage stack instead of an in-place link list; and the limit is checked before the
//! allocation rather than after (zram allocates, then frees if over `limit_pages`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ArenaError;
use crate::options::PAGE_SIZE;
use crate::sync::{lock, Mutex};

/// The largest object an arena can be built for (`slot_size=32K`).
pub const MAX_OBJECT: usize = 32 * 1024;
/// The smallest object a class serves (`ZS_MIN_ALLOC_SIZE`).
pub const MIN_ALLOC: usize = 32;
/// The step between class sizes (`ZS_SIZE_CLASS_DELTA`).
pub const CLASS_DELTA: usize = PAGE_SIZE >> 8;
/// The most pages one zspage chains (`CONFIG_ZSMALLOC_CHAIN_SIZE`, default 8).
pub const CHAIN_SIZE: usize = 8;

/// An allocated object: its class and its entry in the class's handle table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    class: u16,
    entry: u32,
}

/// Sizing of one class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassInfo {
    /// Object size.
    pub size: usize,
    /// Pages per zspage.
    pub pages: usize,
    /// Objects per zspage.
    pub objs: usize,
}

/// The chain length that wastes least for objects of `size` (zsmalloc's
/// `calculate_zspage_chain_size`: the first length with the best use wins), from the fewest
/// pages that hold one object up to `max_chain`.
fn chain_for(size: usize, max_chain: usize) -> usize {
    let least = size.div_ceil(PAGE_SIZE);
    let mut best = (0, least);
    for pages in least..=max_chain.max(least) {
        let bytes = pages * PAGE_SIZE;
        let used = (bytes - bytes % size) * 100 / bytes;
        if used > best.0 {
            best = (used, pages);
        }
    }
    best.1
}

/// Every class up to `max_object` (after merging) and, per 16-byte step, which class serves it.
fn class_table(max_object: usize) -> (Vec<ClassInfo>, Vec<u16>) {
    let max_chain = CHAIN_SIZE.max(max_object / PAGE_SIZE);
    let steps = (max_object - MIN_ALLOC) / CLASS_DELTA + 1;
    let mut classes: Vec<ClassInfo> = Vec::new();
    let mut by_step = vec![0u16; steps];
    // From the largest down: a class identical in shape to the one above it merges into it.
    for step in (0..steps).rev() {
        let size = MIN_ALLOC + step * CLASS_DELTA;
        let pages = chain_for(size, max_chain);
        let info = ClassInfo {
            size,
            pages,
            objs: pages * PAGE_SIZE / size,
        };
        let merge = classes
            .last()
            .is_some_and(|c| c.pages == info.pages && c.objs == info.objs);
        if !merge {
            classes.push(info);
        }
        by_step[step] = (classes.len() - 1) as u16;
    }
    // Store classes smallest first; remap the step table.
    let n = classes.len();
    classes.reverse();
    for c in &mut by_step {
        *c = (n - 1) as u16 - *c;
    }
    (classes, by_step)
}

/// Put `item` in a table at a freed index (from `free`), else at a new one; the index.
fn reuse_or_push<T>(table: &mut Vec<Option<T>>, free: &mut Vec<u32>, item: Option<T>) -> u32 {
    match free.pop() {
        Some(i) => {
            table[i as usize] = item;
            i
        }
        None => {
            table.push(item);
            (table.len() - 1) as u32
        }
    }
}

/// One zspage: its bytes and which objects are in use (by handle-table entry).
#[derive(Debug)]
struct Zspage {
    data: Box<[u8]>,
    owner: Vec<Option<u32>>,
    free: Vec<u16>,
}

impl Zspage {
    fn inuse(&self) -> usize {
        self.owner.len() - self.free.len()
    }
}

/// Where an object is: zspage and object index.
#[derive(Debug, Clone, Copy)]
struct Loc {
    zspage: u32,
    obj: u16,
}

/// One size class under its own lock.
#[derive(Debug)]
struct Class {
    info: ClassInfo,
    zspages: Vec<Option<Zspage>>,
    free_zspages: Vec<u32>,
    /// Zspages with at least one free object, as (free objects, id): the first is the fullest
    /// (zsmalloc's fullness lists, kept ordered so a pick is O(log n)).
    partial: BTreeSet<(usize, u32)>,
    handles: Vec<Option<Loc>>,
    free_handles: Vec<u32>,
}

impl Class {
    fn new(info: ClassInfo) -> Class {
        Class {
            info,
            zspages: Vec::new(),
            free_zspages: Vec::new(),
            partial: BTreeSet::new(),
            handles: Vec::new(),
            free_handles: Vec::new(),
        }
    }

    fn range(&self, loc: Loc) -> std::ops::Range<usize> {
        let start = loc.obj as usize * self.info.size;
        start..start + self.info.size
    }

    fn zspage(&mut self, id: u32) -> &mut Zspage {
        match self.zspages.get_mut(id as usize).and_then(Option::as_mut) {
            Some(z) => z,
            None => unreachable!("a live location names zspage {id}, which does not exist"),
        }
    }

    /// Add an empty zspage; its bytes were allocated by the caller.
    fn add_zspage(&mut self, data: Box<[u8]>) -> u32 {
        let objs = self.info.objs;
        let z = Zspage {
            data,
            owner: vec![None; objs],
            free: (0..objs as u16).rev().collect(),
        };
        let id = reuse_or_push(&mut self.zspages, &mut self.free_zspages, Some(z));
        self.partial.insert((objs, id));
        id
    }

    /// Take a free object of zspage `id` for handle entry `entry`, keeping `partial` in order.
    fn pop_free(&mut self, id: u32, entry: u32) -> Option<Loc> {
        let z = self.zspage(id);
        let before = z.free.len();
        let obj = z.free.pop()?;
        z.owner[obj as usize] = Some(entry);
        self.partial.remove(&(before, id));
        if before > 1 {
            self.partial.insert((before - 1, id));
        }
        Some(Loc { zspage: id, obj })
    }

    /// Take a free object, fullest partial zspage first (zsmalloc fills almost-full ones).
    fn take_obj(&mut self, entry: u32) -> Option<Loc> {
        let &(_, id) = self.partial.first()?;
        self.pop_free(id, entry)
    }

    /// Give an object back; returns the pages freed if its zspage became empty.
    fn put_obj(&mut self, loc: Loc) -> usize {
        let pages = self.info.pages;
        let z = self.zspage(loc.zspage);
        let before = z.free.len();
        z.owner[loc.obj as usize] = None;
        z.free.push(loc.obj);
        let empty = z.inuse() == 0;
        self.partial.remove(&(before, loc.zspage));
        if empty {
            self.zspages[loc.zspage as usize] = None;
            self.free_zspages.push(loc.zspage);
            pages
        } else {
            self.partial.insert((before + 1, loc.zspage));
            0
        }
    }

    fn new_entry(&mut self, loc: Option<Loc>) -> u32 {
        reuse_or_push(&mut self.handles, &mut self.free_handles, loc)
    }

    fn loc(&self, entry: u32) -> Loc {
        match self.handles.get(entry as usize).copied().flatten() {
            Some(l) => l,
            None => unreachable!("handle entry {entry} is not allocated"),
        }
    }

    /// Move objects out of the sparsest zspages into the fullest; returns pages freed.
    fn compact(&mut self) -> usize {
        let mut freed = 0;
        loop {
            let objs = self.info.objs;
            let mut partial: Vec<(usize, u32)> = self
                .partial
                .iter()
                .map(|&(free, id)| (objs - free, id))
                .collect();
            if partial.len() < 2 {
                return freed;
            }
            partial.sort_unstable();
            let src = partial[0].1;
            let dst = partial[partial.len() - 1].1;
            let free_in_others: usize = partial[1..]
                .iter()
                .map(|&(inuse, _)| self.info.objs - inuse)
                .sum();
            if free_in_others < partial[0].0 {
                // The sparsest zspage cannot be emptied: nothing more to gain.
                return freed;
            }
            match self.migrate_one(src, dst) {
                Some(pages) => freed += pages,
                None => return freed,
            }
        }
    }

    /// Move one object from `src` to `dst`; returns pages freed, `None` if nothing moved.
    fn migrate_one(&mut self, src: u32, dst: u32) -> Option<usize> {
        let size = self.info.size;
        let (obj, entry) = self
            .zspage(src)
            .owner
            .iter()
            .enumerate()
            .find_map(|(i, o)| o.map(|e| (i as u16, e)))?;
        let from = Loc { zspage: src, obj };
        let r = self.range(from);
        let bytes = self.zspage(src).data[r].to_vec();
        let to = self.pop_free(dst, entry)?;
        let r = self.range(to);
        self.zspage(dst).data[r].copy_from_slice(&bytes[..size]);
        self.handles[entry as usize] = Some(to);
        Some(self.put_obj(from))
    }
}

/// Counters of an arena.
#[derive(Debug, Default)]
struct Counters {
    pages: AtomicU64,
    max_pages: AtomicU64,
    compacted: AtomicU64,
}

/// The class id of a handle that names a list of parts (an object longer than a page).
const PARTS: u16 = u16::MAX;

/// The part lists of objects longer than a page, by handle entry.
#[derive(Debug, Default)]
struct Parts {
    lists: Vec<Option<Vec<Handle>>>,
    free: Vec<u32>,
}

/// The arena: every class, the page count and the limit.
#[derive(Debug)]
pub struct Arena {
    classes: Vec<Mutex<Class>>,
    parts: Mutex<Parts>,
    max_object: usize,
    by_step: Vec<u16>,
    huge_class_size: usize,
    counters: Counters,
}

impl Default for Arena {
    fn default() -> Self {
        Arena::new()
    }
}

impl Arena {
    /// An empty arena for objects up to a page (zsmalloc's).
    pub fn new() -> Arena {
        Arena::with_max_object(PAGE_SIZE)
    }

    /// An empty arena for objects up to `max_object` bytes (a slot size: a multiple of
    /// [`PAGE_SIZE`] up to [`MAX_OBJECT`]; other values are rounded into that range).
    pub fn with_max_object(max_object: usize) -> Arena {
        let max_object = max_object
            .next_multiple_of(PAGE_SIZE)
            .clamp(PAGE_SIZE, MAX_OBJECT);
        let (infos, by_step) = class_table(PAGE_SIZE);
        // A class saves memory while an object costs less than a page in it; past that, a
        // tail costs a page, and so the whole object a raw slot.
        let page_huge = infos
            .iter()
            .filter(|c| c.pages < c.objs)
            .map(|c| c.size)
            .max()
            .map_or(PAGE_SIZE, |s| s + 1);
        let huge_class_size = max_object - PAGE_SIZE + page_huge;
        Arena {
            max_object,
            parts: Mutex::new(Parts::default()),
            classes: infos
                .into_iter()
                .map(|i| Mutex::new(Class::new(i)))
                .collect(),
            by_step,
            huge_class_size,
            counters: Counters::default(),
        }
    }

    /// The classes, smallest first.
    pub fn classes(&self) -> Vec<ClassInfo> {
        self.classes.iter().map(|c| lock(c).info).collect()
    }

    /// The largest object the arena holds (the slot size it was built for).
    pub fn max_object(&self) -> usize {
        self.max_object
    }

    /// Objects at least this large are stored raw as a whole slot (zsmalloc's
    /// `zs_huge_class_size`).
    pub fn huge_class_size(&self) -> usize {
        self.huge_class_size
    }

    /// What an object of `len` bytes really costs: the size of the class that serves it
    /// (`zs_lookup_class_index`'s class), or for one longer than a page, its whole pages and
    /// its tail's class.
    pub fn class_size(&self, len: usize) -> usize {
        let len = len.min(self.max_object);
        let whole = len.saturating_sub(1) / PAGE_SIZE * PAGE_SIZE;
        let i = self.class_index(len - whole);
        whole + lock(&self.classes[i]).info.size
    }

    fn class_index(&self, len: usize) -> usize {
        let step = len.saturating_sub(MIN_ALLOC).div_ceil(CLASS_DELTA);
        self.by_step[step] as usize
    }

    /// Store `bytes` as a new object. `limit_pages` of 0 means no limit. On failure nothing
    /// is stored.
    pub fn store(&self, bytes: &[u8], limit_pages: u64) -> Result<Handle, ArenaError> {
        if bytes.len() > self.max_object {
            return Err(ArenaError::TooLarge(bytes.len()));
        }
        if bytes.len() <= PAGE_SIZE {
            return self.store_one(bytes, limit_pages);
        }
        let mut list = Vec::with_capacity(bytes.len().div_ceil(PAGE_SIZE));
        for part in bytes.chunks(PAGE_SIZE) {
            match self.store_one(part, limit_pages) {
                Ok(h) => list.push(h),
                Err(e) => {
                    list.into_iter().for_each(|h| self.free_one(h));
                    return Err(e);
                }
            }
        }
        let mut parts = lock(&self.parts);
        let Parts { lists, free } = &mut *parts;
        let entry = reuse_or_push(lists, free, Some(list));
        Ok(Handle {
            class: PARTS,
            entry,
        })
    }

    /// An object's parts (itself when it is not a list).
    fn parts_of(&self, handle: Handle) -> Vec<Handle> {
        if handle.class != PARTS {
            return vec![handle];
        }
        let parts = lock(&self.parts);
        match parts.lists.get(handle.entry as usize) {
            Some(Some(list)) => list.clone(),
            _ => panic!("wring-blk arena: handle {handle:?} names no object"),
        }
    }

    /// Store one part of at most a page.
    fn store_one(&self, bytes: &[u8], limit_pages: u64) -> Result<Handle, ArenaError> {
        let index = self.class_index(bytes.len());
        let mut class = lock(&self.classes[index]);
        let entry = class.new_entry(None);
        let loc = match class.take_obj(entry) {
            Some(loc) => loc,
            None => {
                let data = match self.new_zspage(class.info.pages, limit_pages) {
                    Ok(d) => d,
                    Err(e) => {
                        class.handles[entry as usize] = None;
                        class.free_handles.push(entry);
                        return Err(e);
                    }
                };
                class.add_zspage(data);
                match class.take_obj(entry) {
                    Some(loc) => loc,
                    None => unreachable!("a new zspage has free objects"),
                }
            }
        };
        class.handles[entry as usize] = Some(loc);
        let r = class.range(loc);
        let dst = &mut class.zspage(loc.zspage).data[r];
        dst[..bytes.len()].copy_from_slice(bytes);
        Ok(Handle {
            class: index as u16,
            entry,
        })
    }

    fn new_zspage(&self, pages: usize, limit_pages: u64) -> Result<Box<[u8]>, ArenaError> {
        let before = self
            .counters
            .pages
            .fetch_add(pages as u64, Ordering::AcqRel);
        if limit_pages != 0 && before + pages as u64 > limit_pages {
            self.counters
                .pages
                .fetch_sub(pages as u64, Ordering::AcqRel);
            return Err(ArenaError::Limit {
                limit_pages,
                used_pages: before,
            });
        }
        let bytes = pages * PAGE_SIZE;
        let mut v: Vec<u8> = Vec::new();
        if v.try_reserve_exact(bytes).is_err() {
            self.counters
                .pages
                .fetch_sub(pages as u64, Ordering::AcqRel);
            return Err(ArenaError::OutOfMemory { bytes });
        }
        v.resize(bytes, 0);
        self.counters
            .max_pages
            .fetch_max(before + pages as u64, Ordering::AcqRel);
        Ok(v.into_boxed_slice())
    }

    /// Copy the object's first `out.len()` bytes into `out`.
    pub fn read(&self, handle: Handle, out: &mut [u8]) {
        for (part, out) in self
            .parts_of(handle)
            .into_iter()
            .zip(out.chunks_mut(PAGE_SIZE))
        {
            self.read_one(part, out);
        }
    }

    fn read_one(&self, handle: Handle, out: &mut [u8]) {
        let mut class = lock(&self.classes[handle.class as usize]);
        let loc = class.loc(handle.entry);
        let r = class.range(loc);
        let n = out.len().min(r.len());
        out[..n].copy_from_slice(&class.zspage(loc.zspage).data[r][..n]);
    }

    /// Free an object.
    pub fn free(&self, handle: Handle) {
        if handle.class == PARTS {
            let list = {
                let mut parts = lock(&self.parts);
                let list = parts
                    .lists
                    .get_mut(handle.entry as usize)
                    .and_then(Option::take);
                parts.free.push(handle.entry);
                list
            };
            list.into_iter().flatten().for_each(|h| self.free_one(h));
            return;
        }
        self.free_one(handle);
    }

    fn free_one(&self, handle: Handle) {
        let mut class = lock(&self.classes[handle.class as usize]);
        let loc = class.loc(handle.entry);
        class.handles[handle.entry as usize] = None;
        class.free_handles.push(handle.entry);
        let freed = class.put_obj(loc);
        drop(class);
        if freed != 0 {
            self.counters
                .pages
                .fetch_sub(freed as u64, Ordering::AcqRel);
        }
    }

    /// Compact every class (`zs_compact`); returns the pages freed by this call.
    pub fn compact(&self) -> u64 {
        let mut freed = 0u64;
        for c in &self.classes {
            let n = lock(c).compact() as u64;
            if n != 0 {
                self.counters.pages.fetch_sub(n, Ordering::AcqRel);
                freed += n;
            }
        }
        self.counters.compacted.fetch_add(freed, Ordering::AcqRel);
        freed
    }

    /// Pages held by zspages now (`zs_get_total_pages`).
    pub fn total_pages(&self) -> u64 {
        self.counters.pages.load(Ordering::Acquire)
    }

    /// The most pages ever held at once (reset with [`Arena::reset_max`]).
    pub fn max_pages(&self) -> u64 {
        self.counters.max_pages.load(Ordering::Acquire)
    }

    /// Set the high-water mark to the current use (zram's `mem_used_max` write of 0).
    pub fn reset_max(&self) {
        self.counters
            .max_pages
            .store(self.total_pages(), Ordering::Release);
    }

    /// Zero the high-water mark (to the current use) and the compaction count (`reset`).
    pub fn reset_counters(&self) {
        self.reset_max();
        self.counters.compacted.store(0, Ordering::Release);
    }

    /// Pages freed by compaction since creation (`pages_compacted`).
    pub fn pages_compacted(&self) -> u64 {
        self.counters.compacted.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_and_huge_class_is_one_object_on_one_page() {
        let a = Arena::new();
        for len in 1..=PAGE_SIZE {
            let c = a.classes()[a.class_index(len)];
            assert!(c.size >= len, "{len} -> class {}", c.size);
        }
        let h = a.huge_class_size();
        assert!(h > PAGE_SIZE / 2 && h <= PAGE_SIZE, "huge class size {h}");
        let c = a.classes()[a.class_index(h)];
        assert_eq!((c.pages, c.objs), (1, 1));
        let below = a.classes()[a.class_index(h - 1)];
        assert!(below.objs > below.pages, "class below huge: {below:?}");
    }

    #[test]
    fn larger_arenas_store_objects_in_parts_costing_whole_pages_and_a_tail() {
        let page = Arena::new();
        // The 4 KiB arena's figure before larger slots existed (one object on one page from
        // 3633 bytes up, with 8-page chains and no in-object handle).
        assert_eq!(page.huge_class_size(), 3633);
        for slot in [8192, 16384, MAX_OBJECT] {
            let a = Arena::with_max_object(slot);
            assert_eq!(a.max_object(), slot);
            assert_eq!(a.classes(), page.classes(), "{slot}: zsmalloc's classes");
            // An object costs its whole pages and its tail's class in a 4 KiB arena, never
            // less than itself.
            for len in (1..=slot).step_by(5) {
                let cost = a.class_size(len);
                assert!(cost >= len, "{slot}: {len} costs {cost}");
                let tail = len - (len - 1) / PAGE_SIZE * PAGE_SIZE;
                assert_eq!(cost - (len - tail), page.class_size(tail), "{slot}: {len}");
            }
            // Below the huge class size an object costs less than a raw slot; at it, not.
            let h = a.huge_class_size();
            assert_eq!(h, slot - PAGE_SIZE + page.huge_class_size(), "{slot}");
            assert!(
                a.class_size(h - 1) < slot && a.class_size(h) >= slot,
                "{slot}"
            );
            // Objects of every shape read back and are counted by the pages they take.
            let mut stored = Vec::new();
            for len in [slot, h - 1, PAGE_SIZE + 1, 2 * PAGE_SIZE, 100] {
                let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
                stored.push((a.store(&bytes, 0).unwrap(), bytes));
            }
            for (handle, bytes) in &stored {
                let mut back = vec![0u8; bytes.len()];
                a.read(*handle, &mut back);
                assert!(&back == bytes, "{slot}: {} bytes", bytes.len());
            }
            let pages = a.total_pages();
            for (handle, _) in stored {
                a.free(handle);
            }
            assert!(pages >= (slot / PAGE_SIZE) as u64, "{slot}: {pages}");
            assert_eq!(a.total_pages(), 0, "{slot}: freed objects keep pages");
            // At the limit a large object fails whole: nothing of it stays.
            let big = vec![3u8; slot];
            let err = a.store(&big, (slot / PAGE_SIZE - 1) as u64).unwrap_err();
            assert!(matches!(err, ArenaError::Limit { .. }), "{err}");
            assert_eq!(
                a.total_pages(),
                0,
                "{slot}: a failed store left parts behind"
            );
            assert!(matches!(
                a.store(&vec![0u8; slot + 1], 0),
                Err(ArenaError::TooLarge(_))
            ));
        }
    }

    #[test]
    fn store_read_free_and_limit() {
        let a = Arena::new();
        let h = a.store(b"hello", 0).unwrap();
        let mut out = [0u8; 5];
        a.read(h, &mut out);
        assert_eq!(&out, b"hello");
        let pages = a.total_pages();
        assert!(pages >= 1);
        // At the limit, a class with no zspage yet cannot grow; the stored object is intact.
        let err = a.store(&[7u8; 3000], pages).unwrap_err();
        assert!(matches!(err, ArenaError::Limit { .. }), "{err}");
        a.read(h, &mut out);
        assert_eq!(&out, b"hello");
        a.free(h);
        assert_eq!(a.total_pages(), 0);
    }

    #[test]
    fn compact_frees_sparse_zspages_and_keeps_contents() {
        let a = Arena::new();
        let objs = a.classes()[a.class_index(1000)].objs;
        let handles: Vec<(Handle, u8)> = (0..objs * 6)
            .map(|i| {
                let b = (i % 251) as u8;
                (a.store(&[b; 1000], 0).unwrap(), b)
            })
            .collect();
        let full = a.total_pages();
        // Free all but one object of every zspage's worth.
        let kept: Vec<(Handle, u8)> = handles
            .iter()
            .enumerate()
            .filter_map(|(i, &hb)| {
                if i % objs == 0 {
                    Some(hb)
                } else {
                    a.free(hb.0);
                    None
                }
            })
            .collect();
        assert_eq!(a.total_pages(), full, "no zspage became empty");
        let freed = a.compact();
        assert!(freed > 0 && a.total_pages() < full, "freed {freed}");
        assert_eq!(a.pages_compacted(), freed);
        for (h, b) in kept {
            let mut out = [0u8; 1000];
            a.read(h, &mut out);
            assert!(out.iter().all(|&x| x == b));
        }
    }
}
