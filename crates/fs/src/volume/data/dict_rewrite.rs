//! The rewrite pass: after a dictionary is trained, every small zstd extent that does not
//! use it yet — written before there was one, or with an older one — is decoded and
//! compressed again with it, at its own level, as `btrfs filesystem defragment -c` rewrites
//! extents with a new compression. It runs on the training's thread, at the lowest CPU
//! priority, in batches of [`BATCH`] extents, each batch one transaction. It starts once
//! writing of small extents has paused for a tick (a copy is not slowed by rewriting what it
//! just wrote), and while writing goes on it waits [`BUSY_PAUSE`] between batches.
//!
//! How an extent is replaced, and why a write that comes in between wins, is
//! [`super::recompress`]'s.

use std::sync::Weak;
use std::time::Duration;

use super::recompress::{Candidate, Spread};
use crate::error::FsError;
use crate::store::records::Encoding;
use crate::store::{EXTENTS, XATTRS};
use crate::volume::data::dicts::SMALL;
use crate::volume::data::encode::{Compression, Decision, DictUse};
use crate::volume::names::xattr::dict_switch;
use crate::volume::Volume;

/// Extents per transaction of the pass.
const BATCH: usize = 256;
/// The pause between batches while small extents are being written.
const BUSY_PAUSE: Duration = Duration::from_millis(100);
/// How often a pass waiting to start looks again.
const START_POLL: Duration = Duration::from_millis(500);

/// An extent the pass rewrites, and the zstd level it was compressed at.
type Leveled = (Candidate, i32);

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
    ) -> Result<(Vec<Leveled>, Option<(u64, u64)>), FsError> {
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
            if h.dict == id || h.ram_len as usize > SMALL {
                continue;
            }
            // The file's `wring.dict`, else the mount's `dict=`.
            if !dict_switch(&xattrs, ino)?.unwrap_or(mount) {
                continue;
            }
            out.extend(Candidate::read(self, ino, idx, v.value()).map(|c| (c, level)));
        }
        Ok((out, None))
    }

    /// Compress `candidates` with `newest` and put those still current, and smaller, in one
    /// transaction.
    fn rewrite(&self, newest: &DictUse, candidates: Vec<Leveled>) -> Result<u64, FsError> {
        let decisions: Vec<Decision> = candidates
            .iter()
            .map(|(_, level)| {
                Some(Compression {
                    spec: wring_engine::CompressSpec::new(wring_engine::Algorithm::Zstd, *level),
                    policy: wring_engine::Policy::Force,
                    judge: false,
                    dict: Some(newest.clone()),
                })
            })
            .collect();
        let candidates: Vec<Candidate> = candidates.into_iter().map(|(c, _)| c).collect();
        // One extent per request, on this thread, which is niced (see `Volume::maybe_train`).
        // Only a smaller extent is worth the write.
        self.replace_extents(&candidates, &decisions, Spread::Here, |new, old| new < old)
    }
}
