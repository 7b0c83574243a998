//! File data: the extent map (file offset → stored extent or hole), the write path that cuts
//! data into extents and compresses them in parallel through the engine's offload API, the
//! read path (extents decoded in `decode.rs`), and truncate.
//!
//! Mirrors fs/btrfs/inode.c (compress_file_range, inode_need_compress, the NOCOMPRESS rule,
//! btrfs_truncate) and file-item.c (a checksum per extent; a mismatch is EIO and a log line).
//! Differs in aligning extents to the file's extent size (`max_extent` when the file was first
//! written), so a partial overwrite is a read-modify-write of exactly one extent, and in keeping
//! the level of every extent.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use redb::ReadableTable;
use wring_engine::{CompressSpec, Policy};

use crate::error::{errno, FsError};
use crate::options::{Compress, Options};
use crate::store::extents::Extents;
use crate::store::records::{
    Encoding, ExtentHeader, Inode, Kind, Time, FLAG_NOCOMPRESS, MAX_FILE_SIZE,
};
use crate::store::space::extent_cost;
use crate::store::{self, Txn, EXTENTS, INODES, XATTRS};
use crate::volume::data::encode::{encode_batch, Compression, Decision};
use crate::volume::names::fsflags;
use crate::volume::Volume;
use crate::PROP_XATTR;

/// The `compression` property of an inode: `None` when unset, `Some(spec)` otherwise
/// (`Some(CompressSpec::NONE)` for `none`).
pub(crate) fn property<T: ReadableTable<(u64, &'static [u8]), &'static [u8]>>(
    xattrs: &T,
    ino: u64,
) -> Result<Option<CompressSpec>, FsError> {
    let Some(v) = xattrs.get((ino, PROP_XATTR.as_bytes()))? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(v.value()).into_owned();
    Ok(CompressSpec::parse(&text).ok().map(|(s, _)| s))
}

/// What to do with new data of an inode: spec and policy, or raw; and whether an extent that
/// does not compress marks the inode NOCOMPRESS (only under `compress`, never with a property).
fn decide(opts: &Options, inode: &Inode, prop: Option<CompressSpec>) -> Decision {
    let force = matches!(opts.compress, Compress::Force(_));
    let compress = |spec, policy, judge| {
        Some(Compression {
            spec,
            policy,
            judge,
            dict: None,
        })
    };
    match prop {
        Some(spec) if spec.algorithm.is_none() => None,
        Some(spec) if force => compress(spec, Policy::Force, false),
        Some(spec) => compress(spec, Policy::Heuristic, false),
        None => match opts.compress {
            Compress::No => None,
            Compress::Force(s) => compress(s, Policy::Force, false),
            Compress::Heuristic(_) if inode.flags & FLAG_NOCOMPRESS != 0 => None,
            // chattr +C: nodatacow, which btrfs never compresses.
            _ if inode.flags & crate::store::records::FLAG_NOCOW != 0 => None,
            Compress::Heuristic(s) => compress(s, Policy::Heuristic, true),
        },
    }
}

/// A decision that stores data the way extent `h` was stored: at its algorithm and level, or
/// raw; it marks nothing.
fn same_encoding(h: ExtentHeader) -> Decision {
    match h.encoding {
        Encoding::Raw => None,
        Encoding::Compressed(alg, level) => Some(Compression {
            spec: CompressSpec::new(alg, level),
            policy: Policy::Force,
            judge: false,
            // The cut extent keeps its algorithm and level; the newest dictionary's turn
            // comes with its next rewrite.
            dict: None,
        }),
    }
}

/// Whether a write reserves room for its data first.
#[derive(Clone, Copy)]
enum Room {
    /// New data: reserve its raw size, or give ENOSPC.
    Reserve,
    /// Zeros written while freeing space: nothing to reserve (they mostly become holes).
    Free,
}

/// Where a read finds an extent's bytes.
enum Source<'v> {
    /// Dirty, not yet written back.
    Dirty(Arc<Vec<u8>>),
    /// A stored extent value.
    Stored(&'v [u8]),
}

/// One extent's part of a read: its source and the slice of the reply it fills.
struct Item<'v, 'o> {
    idx: u64,
    cstart: u64,
    /// Offset in the extent of the first byte wanted.
    skip: usize,
    /// The read wants the whole extent (decode straight into `dst`).
    whole: bool,
    src: Source<'v>,
    dst: &'o mut [u8],
}
/// A read's view: pending writeback, dirty extents (index, bytes), store snapshot and the
/// inode's record as of that snapshot.
type ReadView<'v> = (
    Option<super::delalloc::Pending>,
    Vec<(u64, Arc<Vec<u8>>)>,
    store::Snapshot<'v>,
    Inode,
);

impl Volume {
    pub(super) fn extent_size(&self, inode: &Inode) -> u64 {
        match inode.extent_size {
            0 => self.options().max_extent as u64,
            n => n as u64,
        }
    }

    /// The error for a corrupt extent, with its log line naming the file and offset.
    pub(crate) fn corrupt(&self, ino: u64, offset: u64, reason: String) -> FsError {
        log::error!(
            "corrupt extent: {} offset {offset}: {reason}",
            self.path_of(ino)
        );
        FsError::Corrupt {
            ino,
            offset,
            reason,
        }
    }

    /// The decoded length of an extent value of a file cut in `extent_size` extents: more than
    /// one extent is a damaged header, EIO with a log line.
    fn ram_len(
        &self,
        ino: u64,
        offset: u64,
        value: &[u8],
        extent_size: u64,
    ) -> Result<u64, FsError> {
        let len = Volume::header(ino, offset, value)?.ram_len as u64;
        if len > extent_size {
            let why = format!(
                "extent header gives {len} bytes, more than the file's {extent_size}-byte extents"
            );
            return Err(self.corrupt(ino, offset, why));
        }
        Ok(len)
    }

    /// Read up to `size` bytes at `offset`: dirty extents first (they are newer), then the
    /// store. Extents the read covers whole are decoded straight into the reply, in parallel on
    /// the engine's streams; partly covered ones go through the cache of decoded extents.
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, FsError> {
        let mut out = Vec::new();
        self.read_into(ino, offset, size, &mut out)?;
        Ok(out)
    }

    /// [`Volume::read`] into `out` (resized to what was read), so a caller can reuse one
    /// buffer: only the parts no extent fills (holes) are zeroed.
    pub fn read_into(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), FsError> {
        if offset > MAX_FILE_SIZE {
            // A negative loff_t: read(2) says EINVAL.
            return Err(errno(libc::EINVAL));
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let r = self.read_counted(ino, offset, size, out);
        self.reads.fetch_sub(1, Ordering::Relaxed);
        r
    }

    /// What a read of `offset..+size` sees: the inode's pending writeback, its dirty extents
    /// in range, and a snapshot of the store with the inode's record as of it, taken in that
    /// order (a dirty extent committed meanwhile is in the snapshot) with no removal of data
    /// in between.
    fn read_view(&self, ino: u64, offset: u64, size: u32) -> Result<ReadView<'_>, FsError> {
        loop {
            let removals = self.removals.load(Ordering::SeqCst);
            let pending = self.da.pending(ino);
            let mut dirty = Vec::new();
            if let Some(p) = pending.filter(|_| size > 0) {
                let e = p.extent_size as u64;
                for idx in offset / e..=offset.saturating_add(size as u64 - 1) / e {
                    if let Some(d) = self.da.dirty(ino, idx) {
                        dirty.push((idx, d));
                    }
                }
            }
            let (txn, record) = self.store.snapshot_with(ino)?;
            if self.removals.load(Ordering::SeqCst) == removals {
                return Ok((pending, dirty, txn, record?));
            }
        }
    }

    /// [`Volume::read_into`] while counted in `reads`.
    fn read_counted(
        &self,
        ino: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), FsError> {
        let (pending, dirty, txn, inode) = self.read_view(ino, offset, size)?;
        if inode.kind == Kind::Dir {
            return Err(errno(libc::EISDIR));
        }
        self.accessed(ino, &inode);
        let file_size = inode.size.max(pending.map_or(0, |p| p.size));
        if offset >= file_size || size == 0 {
            out.clear();
            return Ok(());
        }
        let end = file_size.min(offset.saturating_add(size as u64));
        // `out` keeps its length between calls, so only growth is zero-filled here: every
        // byte is written below (extents, or zeros for holes), whatever it held before.
        out.resize((end - offset) as usize, 0);
        let e = match (inode.extent_size, pending) {
            (0, None) => {
                out.fill(0);
                return Ok(());
            }
            (0, Some(p)) => p.extent_size as u64,
            (n, _) => n as u64,
        };
        let extents = txn.open_table(EXTENTS)?;
        let mut stored = Vec::new();
        for r in extents.range((ino, offset / e)..=(ino, (end - 1) / e))? {
            let (k, v) = r?;
            let idx = k.value().1;
            if !dirty.iter().any(|d| d.0 == idx) {
                stored.push((idx, v));
            }
        }
        // Cut `out` into one target per extent, in index order.
        let mut items: Vec<Item<'_, '_>> = Vec::new();
        let mut rest: &mut [u8] = out;
        let mut at = offset;
        let mut sources: Vec<(u64, Source<'_>)> = dirty
            .into_iter()
            .map(|(i, d)| (i, Source::Dirty(d)))
            .chain(stored.iter().map(|(i, v)| (*i, Source::Stored(v.value()))))
            .collect();
        sources.sort_by_key(|s| s.0);
        for (idx, src) in sources {
            let cstart = idx * e;
            let len = match &src {
                Source::Dirty(d) => d.len() as u64,
                Source::Stored(v) => self.ram_len(ino, cstart, v, e)?,
            };
            let from = offset.max(cstart);
            let to = end.min(cstart.saturating_add(len));
            if from >= to {
                continue;
            }
            let (gap, tail) = std::mem::take(&mut rest).split_at_mut((from - at) as usize);
            gap.fill(0);
            let (dst, tail) = tail.split_at_mut((to - from) as usize);
            rest = tail;
            at = to;
            items.push(Item {
                idx,
                cstart,
                skip: (from - cstart) as usize,
                whole: from == cstart && to == cstart + len,
                src,
                dst,
            });
        }
        rest.fill(0);
        self.fill(ino, items)
    }

    /// Fill read targets: dirty extents and partly read ones on this thread (the latter
    /// through the cache); the stored extents the read covers whole are decoded straight into
    /// the reply — in one batch on the offload's workers when the read
    /// is alone; on this thread when several reads share the streams.
    fn fill(&self, ino: u64, items: Vec<Item<'_, '_>>) -> Result<(), FsError> {
        let mut whole = Vec::with_capacity(items.len());
        for it in items {
            match it.src {
                Source::Dirty(d) => {
                    let n = it.dst.len();
                    it.dst.copy_from_slice(&d[it.skip..it.skip + n]);
                }
                Source::Stored(v) if it.whole => whole.push((it.cstart, v, it.dst)),
                Source::Stored(v) => {
                    let d = self.decode_extent(ino, it.idx, it.cstart, v)?;
                    d.read_at(it.skip, it.dst);
                }
            }
        }
        if whole.len() <= 1 || self.reads.load(Ordering::Relaxed) > 1 {
            return whole
                .into_iter()
                .try_for_each(|(cstart, v, dst)| self.decode_into(ino, cstart, v, dst));
        }
        self.decode_batch(ino, whole)
    }

    /// Write `data` at `offset`; `kill` (the writer) drops the file's privileges
    /// (set-ID bits, capabilities), as the kernel asks for some writes. The extents touched
    /// are rebuilt whole (a partial one from its dirty or stored contents), their raw size
    /// reserved in the store (see [`crate::store::space`]) and queued for writeback. When
    /// the reservation does not fit, what writeback and a durable commit give back is waited
    /// for once (btrfs flushes delalloc and commits before it gives up); then ENOSPC.
    pub fn write(
        &self,
        ino: u64,
        offset: u64,
        data: &[u8],
        kill: Option<crate::volume::Caller>,
    ) -> Result<(), FsError> {
        self.writable()?;
        self.check_append(ino, offset, data)?;
        if let Some(caller) = kill {
            // Part of the write itself, as file_modified() is in the kernel's write path.
            self.drop_privs(ino, caller, false)?;
        }
        for attempt in 0..2 {
            if self.write_as(ino, offset, data, Room::Reserve)? {
                return Ok(());
            }
            if attempt == 0 {
                self.make_room();
            }
        }
        self.store.refused(data.len() as u64);
        Err(errno(libc::ENOSPC))
    }

    /// Give back what can be given back before an ENOSPC: wait for every writeback (its
    /// reservations go, with what compression saved), delete the orphans nobody holds, and
    /// commit durably (space freed since the last durable commit becomes free).
    pub(crate) fn make_room(&self) {
        self.wait_writeback(None);
        self.purge_forgotten();
        if let Err(e) = self.store.sync() {
            log::warn!("committing to make room: {e}");
        }
    }

    /// [`Volume::write`] once; false when `room` is [`Room::Reserve`] and the reservation
    /// did not fit (nothing was changed).
    fn write_as(&self, ino: u64, offset: u64, data: &[u8], room: Room) -> Result<bool, FsError> {
        if data.is_empty() {
            return Ok(true);
        }
        let end = file_end(offset, data.len() as u64)?;
        self.throttle();
        let g = self.inode_lock(ino);
        let opts = self.options();
        let (rtxn, inode) = self.store.snapshot_with(ino)?;
        let inode = inode?;
        if inode.kind != Kind::File {
            return Err(errno(libc::EINVAL));
        }
        let (prop, dict) = {
            let xattrs = rtxn.open_table(XATTRS)?;
            (
                property(&xattrs, ino)?,
                crate::volume::names::xattr::dict_switch(&xattrs, ino)?,
            )
        };
        let pending = self.da.pending(ino);
        let e = match pending {
            Some(p) => p.extent_size as u64,
            None => self.extent_size(&inode),
        };
        let new_size = inode.size.max(pending.map_or(0, |p| p.size)).max(end);
        let mut chunks = Vec::new();
        {
            let extents = rtxn.open_table(EXTENTS)?;
            for idx in offset / e..=(end - 1) / e {
                let cstart = idx * e;
                let clen = e.min(new_size - cstart) as usize;
                let ws = (offset.max(cstart) - cstart) as usize;
                let we = (end.min(cstart + e) - cstart) as usize;
                let src = &data[(cstart + ws as u64 - offset) as usize
                    ..(cstart + we as u64 - offset) as usize];
                let buf = if ws == 0 && we >= clen {
                    src.to_vec()
                } else {
                    let mut buf = match self.da.dirty(ino, idx) {
                        Some(d) => d.as_ref().clone(),
                        None => match extents.get((ino, idx))? {
                            Some(v) => {
                                self.ram_len(ino, cstart, v.value(), e)?;
                                self.decode_extent(ino, idx, cstart, v.value())?.to_vec()
                            }
                            None => Vec::new(),
                        },
                    };
                    buf.resize(clen.max(buf.len()), 0);
                    buf[ws..we].copy_from_slice(src);
                    buf
                };
                chunks.push((idx, buf));
            }
        }
        drop(rtxn);
        let reservation = match room {
            Room::Reserve => {
                let local = self.store.space().local_data();
                let cost = chunks.iter().map(|c| extent_cost(c.1.len(), local)).sum();
                match self.store.reserve(cost) {
                    Some(r) => Some(r),
                    None => return Ok(false),
                }
            }
            Room::Free => None,
        };
        let mut decision = decide(&opts, &inode, prop);
        self.with_dictionary(&mut decision, &chunks, dict);
        self.da
            .enqueue(ino, e as u32, new_size, decision, chunks, reservation);
        drop(g);
        if self.writeback_is_async() {
            self.submit_writeback();
        } else {
            self.flush_delalloc(ino)?;
        }
        Ok(true)
    }

    /// fallocate(2): mode 0 extends the size (nothing can be reserved ahead in a compressed
    /// store, as btrfs cannot for compressed extents either); `KEEP_SIZE` alone does nothing;
    /// `PUNCH_HOLE|KEEP_SIZE` and `ZERO_RANGE` write zeros, which become holes extent by extent.
    /// Other modes are EOPNOTSUPP.
    ///
    /// `caller` (a process without CAP_FSETID) loses the file's privileges first, whatever the
    /// mode, as btrfs_fallocate's file_modified() drops them.
    pub fn fallocate(
        &self,
        ino: u64,
        (offset, len, mode): (u64, u64, i32),
        caller: Option<crate::volume::Caller>,
    ) -> Result<(), FsError> {
        let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let punch = mode & libc::FALLOC_FL_PUNCH_HOLE != 0;
        let zero = mode & libc::FALLOC_FL_ZERO_RANGE != 0;
        let known =
            libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & !known != 0 || (punch && (!keep || zero)) {
            return Err(errno(libc::EOPNOTSUPP));
        }
        if len == 0 {
            return Err(errno(libc::EINVAL));
        }
        let end = file_end(offset, len)?;
        let inode = self.inode(ino)?;
        match inode.kind {
            Kind::File => {}
            Kind::Dir => return Err(errno(libc::EISDIR)),
            _ => return Err(errno(libc::ENODEV)),
        }
        self.writable()?;
        fsflags::guard(&inode, fsflags::Mutation::Fallocate(mode))?;
        if let Some(caller) = caller {
            self.drop_privs(ino, caller, true)?;
        }
        if !punch && !zero && end > inode.size {
            // Room for what the call adds past the end (posix_fallocate's ENOSPC). Held only
            // for the call: a compressed store cannot set blocks aside for data it has not
            // seen, as btrfs cannot for compressed extents.
            self.store
                .check_room(end - offset.max(inode.size))
                .or_else(|_| {
                    self.make_room();
                    self.store.check_room(end - offset.max(inode.size))
                })?;
        }
        if punch || zero {
            let zend = if keep { end.min(inode.size) } else { end };
            if let Some((a, b)) = self.punch_whole(ino, offset, zend)? {
                self.write_zeros(ino, offset, a)?;
                self.write_zeros(ino, b, zend)?;
            }
        }
        if !keep && end > self.inode(ino)?.size {
            let set = crate::volume::SetAttr {
                size: Some(end),
                ..Default::default()
            };
            self.setattr(ino, &set)?;
        }
        Ok(())
    }

    /// Turn the whole extents inside `offset..end` into holes in one transaction, in time
    /// proportional to the extents that exist, not to the range. Returns the byte range they
    /// cover (empty when none lies wholly inside), whose sides the caller zeroes by writing;
    /// `None` when the file stores nothing, so there is nothing to zero.
    fn punch_whole(&self, ino: u64, offset: u64, end: u64) -> Result<Option<(u64, u64)>, FsError> {
        if offset >= end {
            return Ok(None);
        }
        let _g = self.quiesce(ino);
        let txn = self.store.write()?;
        let mut inode = store::get_inode(&txn.open_table(INODES)?, ino)?;
        if inode.extent_size == 0 {
            return Ok(None);
        }
        let e = inode.extent_size as u64;
        let first = offset.div_ceil(e);
        let last = end / e;
        let bytes = |i: u64| i.checked_mul(e);
        let (Some(a), Some(b)) = (bytes(first), bytes(last)) else {
            return Ok(Some((end, end)));
        };
        if first >= last {
            return Ok(Some((end, end)));
        }
        let holes: Extents = {
            let extents = txn.open_table(EXTENTS)?;
            let mut v = Vec::new();
            for r in extents.range((ino, first)..(ino, last))? {
                v.push((r?.0.value().1, None));
            }
            v
        };
        if !holes.is_empty() {
            self.removals.fetch_add(1, Ordering::SeqCst);
            txn.put_extents(ino, holes)?.apply(&mut inode);
            self.forget_cache(ino, Some(first));
        }
        let now = Time::now();
        inode.mtime = now;
        inode.ctime = now;
        txn.open_table(INODES)?
            .insert(ino, inode.to_bytes().as_slice())?;
        self.store.commit(txn, false)?;
        Ok(Some((a, b)))
    }

    /// Write zeros over `from..to` (they become holes extent by extent).
    fn write_zeros(&self, ino: u64, from: u64, to: u64) -> Result<(), FsError> {
        static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZEROS.len() as u64);
            // Part of freeing space (punch hole, zero range): reserves nothing.
            self.write_as(ino, at, &ZEROS[..n as usize], Room::Free)?;
            at += n;
        }
        Ok(())
    }

    /// Truncate or extend to `size` within `txn` (the caller holds the inode lock).
    pub(crate) fn truncate_in(
        &self,
        txn: &Txn<'_>,
        ino: u64,
        inode: &mut Inode,
        size: u64,
    ) -> Result<(), FsError> {
        if inode.kind != Kind::File {
            return Err(errno(libc::EINVAL));
        }
        if size > MAX_FILE_SIZE {
            return Err(errno(libc::EFBIG));
        }
        if size < inode.size && inode.extent_size != 0 {
            let e = inode.extent_size as u64;
            let keep = size.div_ceil(e);
            let mut encoded = Vec::new();
            let mut cut_value = None;
            {
                let extents = txn.open_table(EXTENTS)?;
                for r in extents.range((ino, keep)..=(ino, u64::MAX))? {
                    encoded.push((r?.0.value().1, None));
                }
                if !size.is_multiple_of(e) {
                    let idx = size / e;
                    let cstart = idx * e;
                    if let Some(v) = extents.get((ino, idx))? {
                        let data = self.decode_extent(ino, idx, cstart, v.value())?;
                        if data.len() as u64 > size - cstart {
                            // The cut extent keeps its encoding (btrfs keeps the extent and
                            // only shortens the reference); it judges nothing.
                            let h = Volume::header(ino, cstart, v.value())?;
                            let mut cut = vec![0; (size - cstart) as usize];
                            data.read_at(0, &mut cut);
                            let decision = same_encoding(h);
                            let mut out = [Vec::new()];
                            let shapes =
                                encode_batch(&self.offload, &[(&cut, &decision)], &mut out);
                            let Ok([shape]) = <[_; 1]>::try_from(shapes) else {
                                return Err(errno(libc::EIO));
                            };
                            // Whole, for the log line where it is reduced to an errno for
                            // the kernel.
                            let shape = shape?;
                            cut_value = Some((idx, shape, decision, cut, out));
                        }
                    }
                }
            }
            self.removals.fetch_add(1, Ordering::SeqCst);
            let mut delta = txn.put_extents(ino, encoded)?;
            if let Some((idx, shape, decision, cut, [out])) = cut_value {
                let value = super::encode::value(shape, &decision, &cut, &out)?;
                delta += txn.put_value(ino, idx, value)?;
            }
            delta.apply(inode);
            self.forget_cache(ino, Some(keep.saturating_sub(1)));
        }
        inode.size = size;
        if size == 0 {
            inode.extent_size = 0;
        }
        let now = Time::now();
        inode.mtime = now;
        inode.ctime = now;
        Ok(())
    }

    /// Make `ino`'s data durable (fsync/fdatasync): its writeback, then a durable commit of
    /// everything so far; a writeback error since the last fsync is reported here.
    pub fn fsync(&self, ino: u64) -> Result<(), FsError> {
        let r = self.flush_delalloc(ino);
        self.store.sync()?;
        r
    }
}

/// The end of `len` bytes at `offset` from the kernel, as Linux checks a write or fallocate
/// (rw_verify_area, generic_write_check_limits, vfs_fallocate): an offset that is a negative
/// loff_t is EINVAL, an end past MAX_LFS_FILESIZE (or past u64) is EFBIG.
pub(crate) fn file_end(offset: u64, len: u64) -> Result<u64, FsError> {
    if offset > MAX_FILE_SIZE {
        return Err(errno(libc::EINVAL));
    }
    offset
        .checked_add(len)
        .filter(|&end| end <= MAX_FILE_SIZE)
        .ok_or(errno(libc::EFBIG))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_ranges_past_the_largest_offset_are_refused() {
        let max = MAX_FILE_SIZE;
        assert_eq!(file_end(0, 10).unwrap(), 10);
        assert_eq!(file_end(max - 1, 1).unwrap(), max);
        assert_eq!(file_end(max, 1).unwrap_err().errno(), libc::EFBIG);
        assert_eq!(file_end(max + 1, 1).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(
            file_end(u64::MAX, u64::MAX).unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(file_end(1, u64::MAX).unwrap_err().errno(), libc::EFBIG);
    }
}
