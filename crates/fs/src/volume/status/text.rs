//! `wring status`'s text: one `name: key=value …` line (or a few) per part of [`Status`], as
//! zram's mm_stat and io_stat files show theirs; sizes human-readable (`3.0M`) where a `raw:`
//! line does not give them exactly, times in milliseconds.
//!
//! Mirrors no kernel file (see the module above); the order is the one `wring status` always
//! printed.

use std::fmt;

use super::{
    Codec, Delalloc, Dicts, Objects, Offload, PagePool, Space, Status, Transport, Workspaces,
};
use crate::volume::stat::human;

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "options: {}", self.options)?;
        for w in &self.workspaces {
            write!(f, "{w}")?;
        }
        write!(f, "{}{}", self.page_pool, self.offload_cpu)?;
        for c in &self.codecs {
            write!(f, "{c}")?;
        }
        write!(f, "{}", self.delalloc)?;
        for w in &self.writeback {
            let level = w.level.map(|l| format!(":{l}")).unwrap_or_default();
            writeln!(
                f,
                "writeback {}{level}: extents={} bytes={} stored={}",
                w.algorithm, w.extents, w.bytes, w.stored_bytes
            )?;
        }
        if let Some(s) = &self.store {
            writeln!(f, "store: used={} inodes={}", human(s.used_bytes), s.inodes)?;
        }
        write!(f, "{}", self.space)?;
        if let Some(o) = &self.objects {
            write!(f, "{o}")?;
        }
        write!(f, "{}", self.compaction.as_deref().unwrap_or_default())?;
        if let Some(d) = &self.dicts {
            write!(f, "{d}")?;
        }
        writeln!(f, "{}fuse_bytes: written={}", self.fuse, self.written_bytes)?;
        write!(
            f,
            "{}{}{}{}",
            self.transactions, self.writeback_waits, self.delayed_inodes, self.transport
        )
    }
}

/// `mem` is what the workspaces reserve (what `workspace_mem` caps), not what is resident:
/// an extent buffer sized for max_extent is only touched as far as extents need.
impl fmt::Display for Workspaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "workspaces {}: count={} busy={} streams={} mem={} peak_mem={} hits={} scans_up={} \
             allocations={} alloc_failures={} waits={} reclaims={} frees={}",
            self.algorithm,
            self.count,
            self.busy,
            self.streams,
            human(self.mem_bytes),
            human(self.peak_mem_bytes),
            self.hits,
            self.scans_up,
            self.allocations,
            self.alloc_failures,
            self.waits,
            self.reclaims,
            self.frees
        )
    }
}

/// Reads of part of an extent decode it into pool pages (hits) or allocator pages (misses; a
/// fallback per extent the pool could not fill while on), `alloc_ms` the time spent
/// allocating those.
impl fmt::Display for PagePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "page_pool: size={} free={} in_use={} locked={} hits={} misses={} fallbacks={} \
             alloc_ms={:.1}",
            self.size_pages,
            self.free_pages,
            self.in_use_pages,
            self.locked_pages,
            self.hits,
            self.misses,
            self.fallbacks,
            self.alloc_nanos as f64 / 1e6
        )
    }
}

impl fmt::Display for Offload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |s: Option<f64>| s.map_or_else(|| "-".into(), |s| format!("{:.3}ms", s * 1e3));
        writeln!(
            f,
            "offload cpu: workers={} in_flight={} submitted={} completed={} service_p50={} \
             service_p99={}",
            self.workers,
            self.in_flight,
            self.submitted,
            self.completed,
            ms(self.service_p50_seconds),
            ms(self.service_p99_seconds)
        )
    }
}

impl fmt::Display for Delalloc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "delalloc: dirty={} extents={} in_flight={}",
            human(self.dirty_bytes),
            self.extents,
            self.in_flight
        )
    }
}

/// Whether the store is full or degraded and why, the figures behind it (free space of the
/// store's filesystem, what the next commit gives back, reservations, the global reserve),
/// what was refused, and the last I/O error of the store.
impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "space: {}\n\
             space raw: available={} fs_free={} fs_total={} reclaimable={} reserved={} \
             global_reserve={}/{} enospc={} reserve_used={} reopened={} rolled_back={}\n\
             space last_error: {}",
            self.state,
            self.available_bytes,
            self.fs_free_bytes,
            self.fs_total_bytes,
            self.reclaimable_bytes,
            self.reserved_bytes,
            self.global_reserve_bytes,
            self.global_reserve_target_bytes,
            self.enospc,
            self.reserve_used,
            self.reopened,
            self.rolled_back,
            self.last_error.as_deref().unwrap_or("none")
        )
    }
}

/// The bucket, the cache, uploads, requests (`objects raw:` the exact byte counts, like
/// compsize's raw line), the last upload error.
impl fmt::Display for Objects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "objects: bucket={} segments={} live={} dead={} cache={}/{} pending={} \
             pending_segments={} uploads_in_flight={} gets={} puts={} deletes={} cache_hits={} \
             cache_misses={}",
            human(self.bucket_bytes),
            self.segments,
            human(self.live_bytes),
            human(self.dead_bytes),
            human(self.cache_bytes),
            human(self.cache_limit_bytes),
            human(self.pending_bytes),
            self.pending_segments,
            self.uploads_in_flight,
            self.gets,
            self.puts,
            self.deletes,
            self.cache_hits,
            self.cache_misses,
        )?;
        writeln!(
            f,
            "objects raw: bucket_bytes={} live_bytes={} dead_bytes={} pending_bytes={} \
             cache_bytes={} get_bytes={} put_bytes={}\n\
             objects last_error: {}",
            self.bucket_bytes,
            self.live_bytes,
            self.dead_bytes,
            self.pending_bytes,
            self.cache_bytes,
            self.get_bytes,
            self.put_bytes,
            self.last_error.as_deref().unwrap_or("none")
        )
    }
}

/// Each dictionary's id and size, the one new small extents use, the samples collected
/// toward the first, and what the last training of this mount measured.
impl fmt::Display for Dicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dicts: {} count={} newest={} samples={} busy={} rewritten={} trainings={} kept={}",
            self.mode,
            self.dicts.len(),
            self.newest,
            human(self.sample_bytes),
            u8::from(self.busy),
            self.rewritten,
            self.trainings,
            self.trainings_kept
        )?;
        if !self.dicts.is_empty() {
            let list: Vec<String> = self
                .dicts
                .iter()
                .map(|d| format!("{}:{}", d.id, human(d.bytes)))
                .collect();
            write!(f, " sizes={}", list.join(","))?;
        }
        if let Some(t) = self.last_training {
            write!(
                f,
                " trained={}: {} samples of {} compress to {} alone, {} with it (saves {}, \
                 zstd:3)",
                t.id,
                t.samples,
                human(t.raw_bytes),
                human(t.alone_bytes),
                human(t.with_bytes),
                human(t.alone_bytes.saturating_sub(t.with_bytes))
            )?;
        }
        writeln!(f)
    }
}

/// `transport: io_uring (uring=auto)` and `uring: queues=2 entries=6 refused=0 requests=N`,
/// the second only when the ring serves.
impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(t) = &self.name {
            writeln!(f, "transport: {t}")?;
        }
        if let Some(u) = &self.uring {
            writeln!(
                f,
                "uring: queues={} entries={} refused={} requests={}",
                u.queues, u.entries, u.refused, u.requests
            )?;
        }
        Ok(())
    }
}

/// One algorithm's work on the offload: requests, bytes in and out, milliseconds.
impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "codec {}: compress={} in={} out={} compress_ms={:.1} decompress={} decoded={} \
             decompress_ms={:.1}",
            self.algorithm,
            self.compress_requests,
            self.compress_in_bytes,
            self.compress_out_bytes,
            self.compress_nanos as f64 / 1e6,
            self.decompress_requests,
            self.decompress_out_bytes,
            self.decompress_nanos as f64 / 1e6
        )
    }
}
