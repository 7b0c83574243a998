//! The compactor's primitives: per-segment usage, candidates, rewrite of live extents into new
//! segments, commit, and deletion of segments nothing points at. Mirrors btrfs's relocation
//! (`relocate_block_group`): copy what is live, switch the references, then free the group.

use super::*;

impl ObjStore {
    /// Every known segment's usage, by number.
    pub fn segments(&self) -> Vec<SegmentUsage> {
        let st = lock(&self.inner.state);
        st.segs
            .iter()
            .map(|(&segment, i)| SegmentUsage {
                segment,
                object_len: i.object_len,
                live: i.live,
                in_bucket: i.in_bucket,
            })
            .collect()
    }

    /// Segments in the bucket whose live bytes are under `threshold` (0.0 to 1.0) of their
    /// object's size, emptiest first: the compactor's candidates.
    pub fn compaction_candidates(&self, threshold: f64) -> Vec<u32> {
        let mut c: Vec<SegmentUsage> = self
            .segments()
            .into_iter()
            .filter(|s| s.in_bucket && (s.live as f64) < threshold * s.object_len as f64)
            .collect();
        c.sort_by_key(|s| (s.live, s.segment));
        c.into_iter().map(|s| s.segment).collect()
    }

    /// Copy the live extents `extents` (address, length — every live extent of the segments
    /// being compacted) into new segments and sync them; returns what moved, as (old address,
    /// new address, length). Both copies count as live until the caller has committed the new
    /// addresses durably and then calls [`ObjStore::commit_rewrite`] with the map; only after
    /// that does [`ObjStore::delete_segments`] take the old segments (see docs/objstore.md for
    /// why this order is crash-safe). On an error nothing moved: the copies made so far are
    /// freed and the old extents stay as they were.
    pub fn rewrite(&self, extents: &[(Addr, u64)]) -> Result<Vec<(Addr, Addr, u64)>> {
        let mut map = Vec::with_capacity(extents.len());
        if let Err(e) = self.copy_extents(extents, &mut map) {
            for &(_, new, len) in &map {
                self.free(new, len);
            }
            return Err(e);
        }
        Ok(map)
    }

    /// `rewrite`'s copying: read, append, then sync the lot.
    pub(super) fn copy_extents(
        &self,
        extents: &[(Addr, u64)],
        map: &mut Vec<(Addr, Addr, u64)>,
    ) -> Result<()> {
        let mut buf = Vec::new();
        for &(old, len) in extents {
            if len > MAX_EXTENT {
                return Err(Error::TooLarge(format!(
                    "an extent of {len} bytes at {old} is over the limit of {MAX_EXTENT}: the \
                     metadata naming it is corrupt"
                )));
            }
            buf.resize(len as usize, 0);
            self.read(old, &mut buf)?;
            map.push((old, self.append(&buf)?, len));
        }
        self.sync()
    }

    /// The caller has durably committed the new addresses of a [`ObjStore::rewrite`]: the old
    /// extents count as dead from now on, and segments left with no live bytes may be deleted.
    pub fn commit_rewrite(&self, map: &[(Addr, Addr, u64)]) {
        for &(old, _, len) in map {
            self.free(old, len);
        }
    }

    /// Delete segment objects the caller's durable metadata no longer points at. Refuses a
    /// segment that still has live bytes, or that is open or not uploaded yet.
    pub fn delete_segments(&self, segs: &[u32]) -> Result<()> {
        for &seg in segs {
            {
                let st = lock(&self.inner.state);
                match st.segs.get(&seg) {
                    Some(i) if i.live > 0 => {
                        return Err(Error::InUse {
                            segment: seg,
                            live: i.live,
                        })
                    }
                    Some(i) if i.in_bucket => {}
                    _ => return Err(self.missing(seg)),
                }
            }
            let path = self.key(seg);
            let what = format!("deleting {}", self.url(&path));
            match self.block(self.inner.store.delete(&path)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => return Err(Error::Request { what, source }),
            }
            self.inner.n.deletes.fetch_add(1, Ordering::Relaxed);
            let mut st = lock(&self.inner.state);
            st.segs.remove(&seg);
            st.indexes.remove(&seg);
            drop(st);
            lock(&self.inner.cache).remove_segment(seg);
        }
        Ok(())
    }
}
