//! Stored extents compressed again in place: the one way the dictionary pass
//! ([`super::dict_rewrite`]) and defragment ([`super::defrag`]) change how an extent is
//! stored without changing its bytes — as btrfs's defrag rewrites extents through writeback.
//!
//! The new stored bytes are reserved first, as a write's are (`store::space`): a rewrite
//! never takes room promised to written data, and a full store is ENOSPC with the batch's
//! extents left as they were. Crash rules are writeback's: the new values go in with `put_value` in one transaction,
//! and the old stored bytes are freed by its commit. Nothing is locked while a batch is
//! compressed; the transaction then replaces an extent only if its item is still the one
//! read (an extent's item carries a sequence number unique to each write) and no write of
//! it is waiting for writeback, so a write, truncate or punch hole that came in between
//! wins, and the rewritten extent keeps exactly the bytes the file had.

use std::ops::Range;

use redb::ReadableTable;

use crate::error::FsError;
use crate::store::space::Reservation;
use crate::store::{self, EXTENTS, INODES};
use crate::volume::data::encode::{encode_batch, value, Decision};
use crate::volume::Volume;

/// An extent to compress again: its key, its item as read, and its decoded bytes.
pub(super) struct Candidate {
    pub ino: u64,
    pub idx: u64,
    pub item: Vec<u8>,
    pub data: Vec<u8>,
}

impl Candidate {
    /// `value`'s extent `(ino, idx)` decoded, unless it is waiting for writeback (the write
    /// wins) or damaged (left for fsck and the reader to report).
    pub(super) fn read(vol: &Volume, ino: u64, idx: u64, value: &[u8]) -> Option<Candidate> {
        if vol.da.dirty(ino, idx).is_some() {
            return None;
        }
        let h = Volume::header(ino, 0, value).ok()?;
        let mut data = vec![0; h.ram_len as usize];
        vol.decode_into(ino, 0, value, &mut data).ok()?;
        Some(Candidate {
            ino,
            idx,
            item: value.to_vec(),
            data,
        })
    }
}

/// The stored bytes replacing `item` gives back: none when other items share them (a copy
/// made with copy_file_range), so a pass that keeps only smaller extents leaves those alone.
fn freed_by_replacing(snap: &redb::ReadTransaction, item: &[u8]) -> Result<u64, FsError> {
    Ok(match store::records::stored(item) {
        Ok(store::records::Stored::External(at, _)) if store::shared::is_shared(snap, at)? => 0,
        _ => store::records::stored_len(item),
    })
}

/// How a batch is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spread {
    /// One extent per request, on the calling thread: a niced background pass takes only
    /// what CPU the mount's own work leaves.
    Here,
    /// The whole batch on the offload's workers at once.
    Workers,
}

impl Volume {
    /// A reservation of `bytes` in the store, after what [`Volume::make_room`] gives back
    /// if it does not fit at once; else ENOSPC.
    fn reserve_or_make_room(&self, bytes: u64) -> Result<Reservation, FsError> {
        if let Some(r) = self.store.space().try_reserve(bytes) {
            return Ok(r);
        }
        self.make_room();
        self.store
            .space()
            .try_reserve(bytes)
            .ok_or(FsError::Errno(libc::ENOSPC))
    }

    /// Up to `max` extents of `ino` with indexes in `range`, decoded (see
    /// [`Candidate::read`]), from one snapshot, and the index to go on from.
    pub(super) fn extents_of(
        &self,
        ino: u64,
        range: Range<u64>,
        max: usize,
    ) -> Result<(Vec<Candidate>, Option<u64>), FsError> {
        // Held until they are decoded: the bytes it names stay where they are.
        let snap = self.store.read()?;
        let extents = snap.open_table(EXTENTS)?;
        let mut items = Vec::new();
        let mut next = None;
        for r in extents.range((ino, range.start)..(ino, range.end))? {
            let (k, v) = r?;
            let idx = k.value().1;
            if items.len() == max {
                next = Some(idx);
                break;
            }
            if self.da.dirty(ino, idx).is_none() {
                items.push((idx, v.value().to_vec()));
            }
        }
        Ok((self.decode_candidates(ino, items), next))
    }

    /// `items` of `ino` decoded in one batch on the offload's workers, as a read's extents
    /// are; when one of them is damaged, one at a time, leaving that one out.
    fn decode_candidates(&self, ino: u64, items: Vec<(u64, Vec<u8>)>) -> Vec<Candidate> {
        let mut data: Vec<Vec<u8>> = items
            .iter()
            .map(|(_, item)| {
                let len = Volume::header(ino, 0, item).map_or(0, |h| h.ram_len as usize);
                vec![0; len]
            })
            .collect();
        let whole = items
            .iter()
            .zip(data.iter_mut())
            .map(|((_, item), out)| (0, item.as_slice(), out.as_mut_slice()))
            .collect();
        if self.decode_batch(ino, whole).is_ok() {
            let decoded = items.into_iter().zip(data);
            return decoded
                .map(|((idx, item), data)| Candidate {
                    ino,
                    idx,
                    item,
                    data,
                })
                .collect();
        }
        items
            .into_iter()
            .filter_map(|(idx, item)| Candidate::read(self, ino, idx, &item))
            .collect()
    }

    /// Compress each candidate as its decision says and put, in one transaction, those still
    /// current whose new stored length `keep(new, freed)` accepts (`freed`: what replacing
    /// the old one gives back, 0 for a shared one): the extents replaced.
    pub(super) fn replace_extents(
        &self,
        candidates: &[Candidate],
        decisions: &[Decision],
        spread: Spread,
        keep: impl Fn(u64, u64) -> bool,
    ) -> Result<u64, FsError> {
        if candidates.is_empty() {
            return Ok(0);
        }
        let extents: Vec<(&[u8], &Decision)> = candidates
            .iter()
            .zip(decisions)
            .map(|(c, d)| (c.data.as_slice(), d))
            .collect();
        let mut outs = vec![Vec::new(); extents.len()];
        let shapes: Vec<_> = match spread {
            Spread::Workers => encode_batch(&self.offload, &extents, &mut outs),
            Spread::Here => extents
                .iter()
                .zip(outs.iter_mut())
                .flat_map(|(e, out)| {
                    encode_batch(
                        &self.offload,
                        std::slice::from_ref(e),
                        std::slice::from_mut(out),
                    )
                })
                .collect(),
        };
        let mut values = Vec::with_capacity(candidates.len());
        let snap = self.store.read()?;
        for (((c, d), shape), out) in candidates.iter().zip(decisions).zip(shapes).zip(&outs) {
            let Ok(shape) = shape else { continue };
            let Some(v) = value(shape, d, &c.data, out)? else {
                continue;
            };
            if keep(v.1.len() as u64, freed_by_replacing(&snap, &c.item)?) {
                values.push((c, v));
            }
        }
        drop(snap);
        // The new bytes are written before the commit frees the old ones (copy on write):
        // they are reserved as a write's are, so a rewrite never takes the room of data a
        // write was promised, and a full store answers ENOSPC with nothing changed.
        let bytes = values.iter().map(|(_, v)| v.1.len() as u64).sum();
        let _room = self.reserve_or_make_room(bytes)?;
        let txn = self.store.write()?;
        let mut n = 0;
        for (c, v) in values {
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
            delta.apply(&mut inode);
            txn.open_table(INODES)?
                .insert(c.ino, inode.to_bytes().as_slice())?;
            n += 1;
        }
        self.store.commit(txn, false)?;
        Ok(n)
    }
}
