//! The rewrite pass: after a dictionary is trained, every small zstd extent that does not
//! use it yet — written before there was one, or with an older one — is decoded and
//! compressed again with it, at its own level, as `btrfs filesystem defragment -c` rewrites
//! extents with a new compression. It runs on the training's thread, at the lowest CPU
//! priority, in batches of [`BATCH`] extents, each batch one transaction. It starts once
//! writing of small extents has paused for a tick (a copy is not slowed by rewriting what it
//! just wrote), and while writing goes on it waits [`BUSY_PAUSE`] between batches.
//!
//! Crash rules are writeback's: the new values go in with `put_value` in one transaction,
//! and the old stored bytes are freed by its commit. Nothing is locked while a batch is
//! compressed; the transaction then replaces an extent only if its item is still the one
//! read (an extent's item carries a sequence number unique to each write) and no write of
//! it is waiting for writeback, so a write, truncate or punch hole that came in between
//! wins, and the rewritten extent keeps exactly the bytes the file had.

use std::sync::Weak;
use std::time::Duration;

use redb::ReadableTable;

use crate::error::FsError;
use crate::store::records::Encoding;
use crate::store::{self, EXTENTS, INODES, XATTRS};
use crate::volume::data::dicts::SMALL;
use crate::volume::data::encode::{encode_batch, value, Compression, Decision, DictUse};
use crate::volume::names::xattr::dict_switch;
use crate::volume::Volume;

/// Extents per transaction of the pass.
const BATCH: usize = 256;
/// The pause between batches while small extents are being written.
const BUSY_PAUSE: Duration = Duration::from_millis(100);
/// How often a pass waiting to start looks again.
const START_POLL: Duration = Duration::from_millis(500);

/// An extent the pass rewrites: its key, its item as read, and its decoded bytes.
struct Candidate {
    ino: u64,
    idx: u64,
    item: Vec<u8>,
    data: Vec<u8>,
    level: i32,
}

impl Volume {
    /// Rewrite every small zstd extent with the newest dictionary, batch by batch, while the
    /// mount lives; a second pass runs if a newer dictionary came meanwhile.
    pub(crate) fn rewrite_small(weak: &Weak<Volume>) {
        let Some(vol) = weak.upgrade() else {
            return;
        };
        if !vol.dicts.start_rewrite() {
            return;
        }
        drop(vol);
        let mut from = (0u64, 0u64);
        let mut rewritten = 0u64;
        let mut started = false;
        loop {
            let Some(vol) = weak.upgrade() else {
                return;
            };
            match (started, vol.dicts.quiet()) {
                (_, true) => started = true,
                (false, false) => {
                    drop(vol);
                    std::thread::sleep(START_POLL);
                    continue;
                }
                (true, false) => std::thread::sleep(BUSY_PAUSE),
            }
            let Some(newest) = vol.dicts.newest() else {
                vol.dicts.end_rewrite();
                return;
            };
            match vol.rewrite_batch(&newest, &mut from) {
                Ok(Some(n)) => {
                    rewritten += n;
                    vol.dicts.rewrote(n);
                }
                Ok(None) => {
                    vol.dicts.end_rewrite();
                    if vol.dicts.newest().map(|d| d.id) != Some(newest.id) {
                        // A newer dictionary came during the pass: go again with it.
                        drop(vol);
                        return Volume::rewrite_small(weak);
                    }
                    log::info!(
                        "rewrote {rewritten} small extents with dictionary {}",
                        newest.id
                    );
                    return;
                }
                Err(e) => {
                    log::error!("rewriting small extents with dictionary {}: {e}", newest.id);
                    vol.dicts.end_rewrite();
                    return;
                }
            }
        }
    }

    /// One pass with `newest` on this thread, to the end or the first error; the extents
    /// rewritten.
    #[cfg(test)]
    pub(crate) fn rewrite_all(&self, newest: &DictUse) -> u64 {
        let mut from = (0, 0);
        let mut n = 0;
        while let Ok(Some(done)) = self.rewrite_batch(newest, &mut from) {
            n += done;
            self.dicts.rewrote(done);
        }
        n
    }

    /// Rewrite the next batch of candidates from `from` on; `None` when the scan is done.
    fn rewrite_batch(
        &self,
        newest: &DictUse,
        from: &mut (u64, u64),
    ) -> Result<Option<u64>, FsError> {
        if self.store.read_only() {
            return Ok(None);
        }
        let (candidates, next) = self.candidates(newest.id, *from)?;
        let Some(next) = next else {
            if candidates.is_empty() {
                return Ok(None);
            }
            *from = (u64::MAX, u64::MAX);
            return self.rewrite(newest, candidates).map(Some);
        };
        *from = next;
        self.rewrite(newest, candidates).map(Some)
    }

    /// Up to [`BATCH`] extents from `from` on that want dictionary `id`, decoded, and the key
    /// to go on from (`None`: the end).
    #[allow(clippy::type_complexity)]
    fn candidates(
        &self,
        id: u8,
        from: (u64, u64),
    ) -> Result<(Vec<Candidate>, Option<(u64, u64)>), FsError> {
        let snap = self.store.read()?;
        let extents = snap.open_table(EXTENTS)?;
        let xattrs = snap.open_table(XATTRS)?;
        let mount = self.options().dict;
        let mut out = Vec::new();
        let mut scanned = 0usize;
        for r in extents.range(from..)? {
            let (k, v) = r?;
            let (ino, idx) = k.value();
            scanned += 1;
            if scanned > 16 * BATCH || out.len() == BATCH {
                return Ok((out, Some((ino, idx))));
            }
            let Ok(h) = Volume::header(ino, 0, v.value()) else {
                continue;
            };
            let level = match h.encoding {
                Encoding::Compressed(wring_engine::Algorithm::Zstd, l) => l,
                _ => continue,
            };
            if h.dict == id || h.ram_len as usize > SMALL || self.da.dirty(ino, idx).is_some() {
                continue;
            }
            // The file's `wring.dict`, else the mount's `dict=`.
            if !dict_switch(&xattrs, ino)?.unwrap_or(mount) {
                continue;
            }
            let mut data = vec![0; h.ram_len as usize];
            // A damaged extent is left for fsck and the reader to report.
            if self.decode_into(ino, 0, v.value(), &mut data).is_err() {
                continue;
            }
            out.push(Candidate {
                ino,
                idx,
                item: v.value().to_vec(),
                data,
                level,
            });
        }
        Ok((out, None))
    }

    /// Compress `candidates` with `newest` and put those still current in one transaction.
    fn rewrite(&self, newest: &DictUse, candidates: Vec<Candidate>) -> Result<u64, FsError> {
        if candidates.is_empty() {
            return Ok(0);
        }
        let decisions: Vec<Decision> = candidates
            .iter()
            .map(|c| {
                Some(Compression {
                    spec: wring_engine::CompressSpec::new(wring_engine::Algorithm::Zstd, c.level),
                    policy: wring_engine::Policy::Force,
                    judge: false,
                    dict: Some(newest.clone()),
                })
            })
            .collect();
        let extents: Vec<(&[u8], &Decision)> = candidates
            .iter()
            .zip(&decisions)
            .map(|(c, d)| (c.data.as_slice(), d))
            .collect();
        let mut outs = vec![Vec::new(); candidates.len()];
        // One extent per batch: a batch of one runs on this thread, which is niced (see
        // `Volume::maybe_train`), so the pass takes what CPU the mount's own work leaves.
        let shapes: Vec<_> = extents
            .iter()
            .zip(outs.iter_mut())
            .flat_map(|(e, out)| {
                encode_batch(
                    &self.offload,
                    std::slice::from_ref(e),
                    std::slice::from_mut(out),
                )
            })
            .collect();
        let txn = self.store.write()?;
        let mut n = 0;
        for (((c, d), shape), out) in candidates.iter().zip(&decisions).zip(shapes).zip(&outs) {
            let Ok(shape) = shape else { continue };
            let Some(v) = value(shape, d, &c.data, out)? else {
                continue;
            };
            // Only a smaller extent is worth the write.
            if v.1.len() as u64 >= store::records::stored_len(&c.item) {
                continue;
            }
            let current = txn
                .open_table(EXTENTS)?
                .get((c.ino, c.idx))?
                .map(|g| g.value().to_vec());
            if current.as_deref() != Some(c.item.as_slice())
                || self.da.dirty(c.ino, c.idx).is_some()
            {
                continue;
            }
            let delta = txn.put_value(c.ino, c.idx, Some(v))?;
            let mut inode = store::get_inode(&txn.open_table(INODES)?, c.ino)?;
            inode.disk = inode.disk.saturating_add_signed(delta);
            txn.open_table(INODES)?
                .insert(c.ino, inode.to_bytes().as_slice())?;
            n += 1;
        }
        self.store.commit(txn, false)?;
        Ok(n)
    }
}
