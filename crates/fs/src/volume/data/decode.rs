//! The read side of an extent: its stored bytes (in the item, or in the data file), the
//! checksum, and decompression through the engine's offload API — one extent on the calling
//! thread, a read's whole extents as one batch on the offload's workers.
//!
//! Mirrors fs/btrfs/compression.c's btrfs_submit_compressed_read()/end_bbio_compressed_read()
//! with file-item.c's checksum check: a mismatch or a decoder error is EIO and a log line
//! naming the file and offset. Differs in decoding a read's extents in parallel (btrfs decodes
//! each bio's extent in its end_io worker).
//!
//! Destinations: an extent a read covers whole decodes straight into the reply. One it covers
//! in part is decoded whole for the cache of decoded extents, into pages of the engine's page
//! pool ([`Volume::decode_pages`], EROFS's reserved pages for the parts of a pcluster no page
//! cache page asks for): the offload decodes into a contiguous per-thread staging buffer that
//! is kept between reads, which is then scattered into the pages (one memcpy, no allocation
//! once the pool holds the pages). The pages go back to the pool when the cache drops the
//! extent; an empty or disabled pool falls back to the allocator, counted as misses.

use std::cell::RefCell;

use wring_engine::dict::Dictionary;
use wring_engine::offload::{BatchJob, Op};
use wring_engine::pool::PageBuf;
use wring_engine::{compressed_limit, Algorithm};

use crate::error::{errno, FsError};
use crate::options::MAX_MAX_EXTENT;
use crate::store::records::{checksum, stored, Encoding, ExtentHeader, Stored};
use crate::volume::{lock, Volume};

thread_local! {
    /// Stored bytes read from the data file, kept between extents so reads do not allocate.
    static STORED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// A decoded extent on its way into pool pages, kept between extents.
    static DECODED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Staging buffers kept for batched reads' stored bytes (beyond these, a read allocates).
const STAGING_KEPT: usize = 64;

/// A whole extent a read decodes: its file offset, its item and the reply slice it fills.
pub(crate) type WholeExtent<'v, 'o> = (u64, &'v [u8], &'o mut [u8]);

impl Volume {
    /// The stored bytes of the item `value`: in the item, or read from the data file into
    /// `buf`. A location the data file cannot hold is corruption.
    fn stored_into<'a>(
        &self,
        ino: u64,
        offset: u64,
        value: &'a [u8],
        buf: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], FsError> {
        let (at, len) = match stored(value) {
            Ok(Stored::Inline(b)) => return Ok(b),
            Ok(Stored::External(at, len)) => (at, len),
            Err(e) => return Err(self.corrupt(ino, offset, e.to_string())),
        };
        let limit = compressed_limit(MAX_MAX_EXTENT).max(MAX_MAX_EXTENT) as u64;
        if len > limit {
            let why = format!("extent item claims {len} stored bytes");
            return Err(self.corrupt(ino, offset, why));
        }
        if buf.len() < len as usize {
            buf.resize(len as usize, 0);
        }
        let buf = &mut buf[..len as usize];
        let bucket = self.store.objects().is_some();
        self.store.read_stored(buf, at).map_err(|e| {
            if bucket && e.kind() != std::io::ErrorKind::InvalidData {
                // The bucket did not answer: an I/O error, not damage.
                let what = format!("{} offset {offset}: reading its extent", self.path_of(ino));
                log::error!("{what}: {e}");
                return FsError::Io { what, source: e };
            }
            let place = if bucket {
                "in the bucket"
            } else {
                "of the data file"
            };
            let why = format!("reading {len} stored bytes at {at} {place}: {e}");
            self.corrupt(ino, offset, why)
        })?;
        Ok(buf)
    }

    /// The stored bytes' checksum and the extent's declared length against the target's.
    fn check_stored(
        &self,
        ino: u64,
        offset: u64,
        h: &ExtentHeader,
        stored: &[u8],
        out_len: usize,
    ) -> Result<(), FsError> {
        let crc = checksum(stored);
        let why = if crc != h.crc {
            format!(
                "checksum mismatch (stored {:08x}, computed {crc:08x})",
                h.crc
            )
        } else if out_len != h.ram_len as usize {
            "extent length mismatch".into()
        } else if h.encoding == Encoding::Raw && stored.len() != out_len {
            "raw extent length mismatch".into()
        } else {
            return Ok(());
        };
        Err(self.corrupt(ino, offset, why))
    }

    /// Verify an extent value's checksum and decode it into `out` (its decoded length), on
    /// this thread.
    pub(crate) fn decode_into(
        &self,
        ino: u64,
        offset: u64,
        value: &[u8],
        out: &mut [u8],
    ) -> Result<(), FsError> {
        let h = Volume::header(ino, offset, value)?;
        STORED.with_borrow_mut(|buf| {
            let stored = self.stored_into(ino, offset, value, buf)?;
            self.check_stored(ino, offset, &h, stored, out.len())?;
            match h.encoding {
                Encoding::Raw => out.copy_from_slice(stored),
                Encoding::Compressed(alg, _) => {
                    let dict = self.extent_dict(ino, offset, &h)?;
                    let mut jobs =
                        [decompress_job(alg, stored, out).with_dictionary(dict.as_ref())];
                    self.offload.run_batch(&mut jobs);
                    self.decoded(ino, offset, &mut jobs[0])?;
                }
            }
            Ok(())
        })
    }

    /// Verify and decode an extent value whole into pages of the page pool (the allocator's
    /// when the pool is off or empty), through this thread's staging buffer.
    pub(crate) fn decode_pages(
        &self,
        ino: u64,
        offset: u64,
        value: &[u8],
    ) -> Result<PageBuf, FsError> {
        let len = Volume::header(ino, offset, value)?.ram_len as usize;
        DECODED.with_borrow_mut(|staged| {
            if staged.len() < len {
                staged.resize(len, 0);
            }
            let staged = &mut staged[..len];
            self.decode_into(ino, offset, value, staged)?;
            let mut pages = self.engine.page_pool().alloc(len);
            pages.copy_from(staged);
            Ok(pages)
        })
    }

    /// Decode whole extents into their reply slices in one batch on the offload.
    pub(crate) fn decode_batch(
        &self,
        ino: u64,
        whole: Vec<WholeExtent<'_, '_>>,
    ) -> Result<(), FsError> {
        let mut staged = self.take_staging(whole.len());
        let result = self.decode_staged(ino, whole, &mut staged);
        self.put_staging(staged);
        result
    }

    fn decode_staged(
        &self,
        ino: u64,
        whole: Vec<WholeExtent<'_, '_>>,
        staged: &mut [Vec<u8>],
    ) -> Result<(), FsError> {
        let mut jobs = Vec::with_capacity(whole.len());
        let mut offsets = Vec::with_capacity(whole.len());
        for ((offset, value, out), buf) in whole.into_iter().zip(staged.iter_mut()) {
            let h = Volume::header(ino, offset, value)?;
            let stored = self.stored_into(ino, offset, value, buf)?;
            self.check_stored(ino, offset, &h, stored, out.len())?;
            match h.encoding {
                Encoding::Raw => out.copy_from_slice(stored),
                Encoding::Compressed(alg, _) => {
                    let dict = self.extent_dict(ino, offset, &h)?;
                    jobs.push(decompress_job(alg, stored, out).with_dictionary(dict.as_ref()));
                    offsets.push(offset);
                }
            }
        }
        self.offload.run_batch(&mut jobs);
        jobs.iter_mut()
            .zip(offsets)
            .try_for_each(|(job, offset)| self.decoded(ino, offset, job))
    }

    /// The dictionary extent `h` was compressed with, if any; one the store lacks or cannot
    /// digest makes the extent corrupt (EIO and a log line).
    fn extent_dict(
        &self,
        ino: u64,
        offset: u64,
        h: &ExtentHeader,
    ) -> Result<Option<Dictionary>, FsError> {
        match h.dict {
            0 => Ok(None),
            id => self
                .dictionary(id)
                .map(Some)
                .map_err(|why| self.corrupt(ino, offset, why)),
        }
    }

    /// A decompression job's result as the filesystem reports it.
    fn decoded(&self, ino: u64, offset: u64, job: &mut BatchJob<'_>) -> Result<(), FsError> {
        match job.result.take() {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.corrupt(ino, offset, e.to_string())),
            None => Err(errno(libc::EIO)),
        }
    }

    fn take_staging(&self, n: usize) -> Vec<Vec<u8>> {
        let mut kept = lock(&self.staging);
        let from = kept.len().saturating_sub(n);
        let mut bufs: Vec<Vec<u8>> = kept.drain(from..).collect();
        drop(kept);
        bufs.resize_with(n, Vec::new);
        bufs
    }

    fn put_staging(&self, bufs: Vec<Vec<u8>>) {
        let mut kept = lock(&self.staging);
        let room = STAGING_KEPT.saturating_sub(kept.len());
        kept.extend(bufs.into_iter().filter(|b| b.capacity() > 0).take(room));
    }
}

fn decompress_job<'a>(algorithm: Algorithm, stored: &'a [u8], out: &'a mut [u8]) -> BatchJob<'a> {
    let len = out.len();
    BatchJob::new(Op::Decompress { algorithm, len }, stored, out)
}
