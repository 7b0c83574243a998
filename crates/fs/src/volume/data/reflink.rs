//! copy_file_range(2) within the mount: the destination shares the source's stored extents
//! (compressed as they are, a reference each, nothing decoded or written again) wherever
//! whole extents line up, and only the unaligned ends are copied byte by byte.
//!
//! Mirrors btrfs's reflink (fs/btrfs/reflink.c: btrfs_remap_file_range → btrfs_clone, which
//! copies each file extent item with a new reference to its disk extent and copies inline
//! extents' bytes), reached as the kernel reaches it: vfs_copy_file_range tries the remap and
//! falls back to copying. FUSE carries no FICLONE, so `cp --reflink=always` cannot ask for
//! it; plain `cp` (coreutils ≥ 9 tries copy_file_range first) gets it.
//!
//! An extent of the source is shared when it lies wholly inside the copied range and the
//! destination's extent it lands on lies wholly inside it too: the offsets must be the same
//! distance from an extent boundary and both files cut in extents of one size. The source's
//! last extent, which ends at its size, is shared as well when the copy runs to that size and
//! the destination has nothing after the copy's end (its bytes past the end are zeros, as
//! every file's are past its size). Everything else is read and written, in order: the head,
//! then the shared extents, one transaction per batch of 1,024, then the tail. A crash leaves
//! the destination with some prefix of that done, and fsck's reference counts hold either
//! way; an error after part of the copy answers the bytes copied, as a short write does.

use redb::ReadableTable;

use crate::error::{errno, FsError};
use crate::store::extents::Delta;
use crate::store::records::{Inode, Kind, Time, FLAG_APPEND, FLAG_IMMUTABLE, FLAG_NOCOW};
use crate::store::{self, EXTENTS, INODES};
use crate::volume::data::extent::file_end;
use crate::volume::{Caller, Volume};

/// The most one request copies: the kernel's reply carries a 32-bit count, and `cp` asks
/// again for the rest.
const MAX_COPY: u64 = 1 << 30;
/// The most one request copies byte by byte when nothing can be shared (a request stays
/// short; `cp` asks again).
const MAX_BYTE_COPY: u64 = 16 << 20;
/// Extents shared by one transaction (the store's writer is held that long).
const BATCH: u64 = 1024;
/// Bytes one read-and-write step of the byte copy moves.
const STEP: u64 = 1 << 20;

/// One copy_file_range request: `len` bytes from `ino_in` at `off_in` to `ino_out` at
/// `off_out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyRange {
    /// The source file.
    pub ino_in: u64,
    /// Where in the source.
    pub off_in: u64,
    /// The destination file.
    pub ino_out: u64,
    /// Where in the destination.
    pub off_out: u64,
    /// How many bytes.
    pub len: u64,
}

/// The extents a request shares: source extent indexes `first..last`, landing `shift` bytes
/// further on in the destination (a multiple of the extent size `es`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    es: u64,
    first: u64,
    last: u64,
}

impl Volume {
    /// copy_file_range from the kernel (after its checks: both files open the right way, not
    /// directories, the ranges of one file not overlapping): the bytes copied, which may be
    /// fewer than asked (at the source's end, or [`MAX_COPY`]). `caller`, a process without
    /// CAP_FSETID, first loses the destination's set-ID bits, as the kernel's file_modified()
    /// drops them (the mount took FUSE_HANDLE_KILLPRIV_V2, and COPY_FILE_RANGE carries no
    /// flag for it).
    pub fn copy_range(&self, req: CopyRange, caller: Option<Caller>) -> Result<u64, FsError> {
        self.writable()?;
        let (src, dst) = (self.inode(req.ino_in)?, self.inode(req.ino_out)?);
        if src.kind == Kind::Dir || dst.kind == Kind::Dir {
            return Err(errno(libc::EISDIR));
        }
        if src.kind != Kind::File || dst.kind != Kind::File {
            return Err(errno(libc::EINVAL));
        }
        if dst.flags & (FLAG_IMMUTABLE | FLAG_APPEND) != 0 {
            return Err(errno(libc::EPERM));
        }
        if req.off_in >= src.size || req.len == 0 {
            return Ok(0);
        }
        let len = req.len.min(src.size - req.off_in).min(MAX_COPY);
        let req = CopyRange { len, ..req };
        if req.ino_in == req.ino_out
            && req.off_in < req.off_out.saturating_add(len)
            && req.off_out < req.off_in.saturating_add(len)
        {
            return Err(errno(libc::EINVAL));
        }
        file_end(req.off_out, len)?;
        if let Some(c) = caller {
            self.drop_privs(req.ino_out, c, true)?;
        }
        let mut done = 0;
        match self.copy_parts(&req, &src, &dst, &mut done) {
            Ok(()) => Ok(done),
            // What was copied stays copied: a short count, as a write's.
            Err(e) if done > 0 => {
                log::warn!("copy_file_range stopped after {done} bytes: {e}");
                Ok(done)
            }
            Err(e) => Err(e),
        }
    }

    /// The parts of `req` in order — the unaligned head copied, the whole extents shared a
    /// batch at a time, the tail copied — with `done` the bytes copied from its start so far.
    fn copy_parts(
        &self,
        req: &CopyRange,
        src: &Inode,
        dst: &Inode,
        done: &mut u64,
    ) -> Result<(), FsError> {
        let end = req.off_in + req.len;
        let Some(p) = plan(req, src, dst) else {
            let to = req.off_in + req.len.min(MAX_BYTE_COPY);
            return self.copy_bytes(req, req.off_in..to, done).map(drop);
        };
        if !self.copy_bytes(req, req.off_in..p.first * p.es, done)? {
            return Ok(());
        }
        let mut from = p.first;
        while from < p.last {
            let upto = p.last.min(from.saturating_add(BATCH));
            match self.share(req, p, from..upto)? {
                Some(hi) => *done = hi - req.off_in,
                // The files changed meanwhile: a bounded rest, byte by byte.
                None => {
                    let at = from * p.es;
                    let to = end.min(at.saturating_add(MAX_BYTE_COPY));
                    return self.copy_bytes(req, at..to, done).map(drop);
                }
            }
            from = upto;
        }
        self.copy_bytes(req, (p.last * p.es).min(end)..end, done)
            .map(drop)
    }

    /// Copy the source's bytes `range` of `req` through the read and write paths, `done`
    /// following; false when the source ended first (it was cut short meanwhile).
    fn copy_bytes(
        &self,
        req: &CopyRange,
        range: std::ops::Range<u64>,
        done: &mut u64,
    ) -> Result<bool, FsError> {
        let mut at = range.start;
        while at < range.end {
            let n = (range.end - at).min(STEP) as u32;
            let data = self.read(req.ino_in, at, n)?;
            self.write(req.ino_out, at - req.off_in + req.off_out, &data, None)?;
            at += data.len() as u64;
            *done = at - req.off_in;
            if data.len() < n as usize {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Share source extents `idx` of `p` in one transaction, under both files' locks with no
    /// writeback of either pending; the files are checked again there. The source byte offset
    /// the copy has reached, or `None` when the files changed so that `p` no longer holds.
    fn share(
        &self,
        req: &CopyRange,
        p: Plan,
        idx: std::ops::Range<u64>,
    ) -> Result<Option<u64>, FsError> {
        let _g = self.quiesce_both(req.ino_in, req.ino_out);
        let txn = self.store.write()?;
        let (src, mut dst) = {
            let inodes = txn.open_table(INODES)?;
            (
                store::get_inode(&inodes, req.ino_in)?,
                store::get_inode(&inodes, req.ino_out)?,
            )
        };
        // A source cut short since the request was measured: the rest is copied (or not).
        if plan(req, &src, &dst) != Some(p) || src.size < req.off_in + req.len {
            return Ok(None);
        }
        let shift = (req.off_out / p.es) as i128 - (req.off_in / p.es) as i128;
        let to = |i: u64| (i as i128 + shift) as u64;
        let items: Vec<(u64, Vec<u8>)> = {
            let extents = txn.open_table(EXTENTS)?;
            let mut v = Vec::new();
            for r in extents.range((req.ino_in, idx.start)..(req.ino_in, idx.end))? {
                let (k, item) = r?;
                v.push((k.value().1, item.value().to_vec()));
            }
            v
        };
        // What the items change for the destination; `used`, what removing its own gives the
        // store back (a share counts its own).
        let (mut file, mut used) = (Delta::default(), 0i64);
        {
            let mut extents = txn.open_table(EXTENTS)?;
            let mut at = items.iter().peekable();
            for i in idx.clone() {
                match at.next_if(|(j, _)| *j == i) {
                    Some((_, item)) => {
                        file += txn.share_item(&mut extents, (req.ino_out, to(i)), item)?;
                    }
                    None => {
                        let d = txn.remove_item(&mut extents, (req.ino_out, to(i)))?;
                        used += d.used;
                        file += d;
                    }
                }
            }
        }
        store::add_counter(&txn, "used", used)?;
        self.removals
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.forget_cache(req.ino_out, Some(to(idx.start)));
        // At or past the copy's start: the source holds the whole range (checked above).
        let hi = (idx.end * p.es).min(src.size);
        dst.size = dst.size.max(hi - req.off_in + req.off_out);
        dst.extent_size = p.es as u32;
        file.apply(&mut dst);
        let now = Time::now();
        dst.mtime = now;
        dst.ctime = now;
        txn.open_table(INODES)?
            .insert(req.ino_out, dst.to_bytes().as_slice())?;
        self.store.commit(txn, false)?;
        Ok(Some(hi))
    }
}

/// The extents `req` can share between `src` and `dst` as they are (see the module's
/// header); `None` when there are none.
fn plan(req: &CopyRange, src: &Inode, dst: &Inode) -> Option<Plan> {
    let es = u64::from(src.extent_size);
    if es == 0 || (dst.extent_size != 0 && u64::from(dst.extent_size) != es) {
        return None;
    }
    if (src.flags | dst.flags) & FLAG_NOCOW != 0 || req.off_in % es != req.off_out % es {
        return None;
    }
    let end = req.off_in.checked_add(req.len)?;
    let first = req.off_in.div_ceil(es);
    let mut last = end / es;
    // The source's last extent, partly filled, when the copy ends at the source's end and the
    // destination holds nothing after the copy's end.
    let out_end = end - req.off_in + req.off_out;
    if end == src.size && !end.is_multiple_of(es) && last >= first && dst.size <= out_end {
        last += 1;
    }
    (first < last).then_some(Plan { es, first, last })
}

#[cfg(test)]
mod tests {
    use super::{plan, CopyRange, Plan};
    use crate::store::records::{Inode, Kind};

    const E: u64 = 128 << 10;

    fn file(size: u64, es: u64) -> Inode {
        let mut i = Inode::new(Kind::File, 0o644, 0, 0);
        i.size = size;
        i.extent_size = es as u32;
        i
    }

    fn req(off_in: u64, off_out: u64, len: u64) -> CopyRange {
        CopyRange {
            ino_in: 2,
            off_in,
            ino_out: 3,
            off_out,
            len,
        }
    }

    #[test]
    fn whole_extents_inside_the_range_are_shared() {
        let src = file(10 * E, E);
        let p = plan(&req(E / 2, E / 2 + 4 * E, 5 * E), &src, &file(0, 0));
        assert_eq!(
            p,
            Some(Plan {
                es: E,
                first: 1,
                last: 5
            })
        );
    }

    #[test]
    fn offsets_out_of_phase_or_extent_sizes_that_differ_share_nothing() {
        let src = file(10 * E, E);
        assert_eq!(plan(&req(0, 4096, 4 * E), &src, &file(0, 0)), None);
        assert_eq!(plan(&req(0, 0, 4 * E), &src, &file(E, E / 2)), None);
        assert_eq!(plan(&req(0, 0, E - 1), &src, &file(0, 0)), None);
        assert_eq!(plan(&req(0, 0, E), &file(E, 0), &file(0, 0)), None);
    }

    #[test]
    fn the_last_extent_goes_along_only_over_nothing() {
        let src = file(3 * E + 100, E);
        let whole = req(0, 0, 3 * E + 100);
        assert_eq!(plan(&whole, &src, &file(0, 0)).map(|p| p.last), Some(4));
        assert_eq!(
            plan(&whole, &src, &file(3 * E + 100, E)).map(|p| p.last),
            Some(4)
        );
        // The destination has bytes after the copy's end: they stay, so it is written.
        assert_eq!(
            plan(&whole, &src, &file(3 * E + 101, E)).map(|p| p.last),
            Some(3)
        );
        // The copy stops short of the source's end.
        assert_eq!(
            plan(&req(0, 0, 3 * E + 99), &src, &file(0, 0)).map(|p| p.last),
            Some(3)
        );
    }
}
