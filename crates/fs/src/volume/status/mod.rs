//! `wring status`: the live options the way /proc/mounts shows btrfs's, then the engine's
//! counters, gathered into one [`Status`] that prints as text (`name=value` lines, as zram's
//! mm_stat and io_stat files show theirs; see `text.rs`) and as JSON (`wring status --json`),
//! so the two always show the same figures.
//!
//! Mirrors no single kernel file: btrfs has no per-mount view of its workspaces, so the names
//! follow the kernel concepts (workspace, stream, page pool, delalloc) they count.
//!
//! A store whose extents are in a bucket adds the object store's figures: what is in the
//! bucket (segments, live and dead bytes), the local cache against its limit, what waits for
//! upload, requests made and the last upload error.
//!
//! JSON names carry their units: `_bytes` are bytes, `_seconds` seconds, `_pages` 4 KiB pages;
//! a name without a unit is a count.

mod figures;
pub(crate) mod prometheus;
#[cfg(test)]
mod tests;
mod text;

pub(crate) use figures::{
    Codec, Delalloc, Dicts, Objects, Offload, PagePool, Space, StoreUse, Transport, Uring,
    Workspaces,
};

use serde::Serialize;

use crate::counters::{DelayedFigures, EncodingFigure, FuseFigures, TxnFigures, WaitFigures};
use crate::volume::Volume;

/// Everything `wring status` shows of a live mount.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// The live options, as /proc/mounts shows them.
    pub options: String,
    /// One per algorithm's workspace manager.
    pub workspaces: Vec<Workspaces>,
    /// The page pool partial reads decode into.
    pub page_pool: PagePool,
    /// The offload API's CPU provider.
    pub offload_cpu: Offload,
    /// Each algorithm's compression and decompression on the offload's providers.
    pub codecs: Vec<Codec>,
    /// Data written but not yet compressed and stored.
    pub delalloc: Delalloc,
    /// The extents writeback stored since the mount, by encoding (raw, algorithm and level):
    /// bytes in and bytes stored.
    pub writeback: Vec<EncodingFigure>,
    /// What the extents store (absent when the store could not be read).
    pub store: Option<StoreUse>,
    /// Free space, reservations and the global reserve.
    pub space: Space,
    /// The bucket, on a store whose extents are in one.
    pub objects: Option<Objects>,
    /// The compactor's `compaction: …` line, on a store in a bucket (text: its counters are
    /// kept by the store and not yet given out one by one).
    pub compaction: Option<String>,
    /// The trained dictionaries (absent when they could not be read).
    pub dicts: Option<Dicts>,
    /// FUSE requests by opcode.
    pub fuse: FuseFigures,
    /// Bytes FUSE WRITE requests wrote (bytes in, before compression).
    pub written_bytes: u64,
    /// The store's transactions and commits.
    pub transactions: TxnFigures,
    /// Requests that waited for a file's writeback.
    pub writeback_waits: WaitFigures,
    /// Delayed inode items.
    pub delayed_inodes: DelayedFigures,
    /// Which FUSE transport serves the mount (filled in by the transport).
    pub transport: Transport,
}

impl Status {
    /// The figures of `vol` now; the transport's are left for the transport to fill in.
    pub fn of(vol: &Volume) -> Status {
        let (dirty, jobs) = vol.delalloc_totals();
        let stats = vol.engine().stats();
        let offload = vol.offload.stats();
        let o = vol.options();
        Status {
            options: o.to_string(),
            workspaces: stats.managers.iter().map(Workspaces::from).collect(),
            page_pool: PagePool::from(&stats.pool),
            offload_cpu: Offload::from(&offload),
            codecs: Codec::all(&offload),
            delalloc: Delalloc {
                dirty_bytes: dirty as u64,
                extents: jobs as u64,
                in_flight: vol.da.in_flight() as u64,
            },
            writeback: vol.written_by.figures(),
            store: vol.store_usage().ok().map(StoreUse::from),
            space: Space::of(&vol.store.space_report(), &vol.store.space().counts),
            objects: vol.store.objects().map(|ob| Objects::from(&ob.stats())),
            compaction: vol
                .store
                .compaction_line(o.compact.then_some(o.compact_threshold)),
            dicts: vol.dict_status().ok().map(|d| Dicts::of(o.dict, &d)),
            fuse: vol.ops.figures(),
            written_bytes: vol.ops.written(),
            transactions: vol.store.counts.figures(),
            writeback_waits: vol.wb_waits.figures(),
            delayed_inodes: vol.store.delayed_counts.figures(vol.store.delayed_len()),
            transport: Transport::default(),
        }
    }

    /// The JSON form (`wring status --json`).
    pub fn json(&self) -> String {
        // Plain numbers, strings and options: nothing here can fail to serialize.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
