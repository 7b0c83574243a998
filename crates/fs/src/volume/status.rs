//! `wring status`: the live options the way /proc/mounts shows btrfs's, then the engine's
//! counters in `name=value` form, as zram's mm_stat and io_stat files show theirs.
//!
//! Mirrors no single kernel file: btrfs has no per-mount view of its workspaces, so the names
//! follow the kernel concepts (workspace, stream, page pool, delalloc) they count.
//!
//! A store whose extents are in a bucket adds the object store's lines: what is in the bucket
//! (segments, live and dead bytes), the local cache against its limit, what waits for upload,
//! requests made and the last upload error (as `objects raw:` the exact byte counts, like
//! compsize's raw line).

use wring_engine::offload::OffloadStats;
use wring_engine::pool::PoolStats;
use wring_engine::workspace::ManagerStats;
use wring_engine::EngineStats;
use wring_objstore::Stats;

use crate::store::space::{SpaceCounts, SpaceReport};
use crate::volume::data::dicts::DictStatus;
use crate::volume::stat::human;
use crate::volume::Volume;

/// The whole report of a live mount.
pub fn status_text(vol: &Volume) -> String {
    let mut s = format!("options: {}\n", vol.options());
    s += &engine_lines(&vol.engine().stats());
    s += &offload_line(&vol.offload.stats());
    let (dirty, jobs) = vol.delalloc_totals();
    s += &format!(
        "delalloc: dirty={} extents={jobs} in_flight={}\n",
        human(dirty as u64),
        vol.da.in_flight()
    );
    if let Ok((blocks, free, files)) = vol.statfs() {
        let used = blocks.saturating_sub(free).saturating_mul(4096);
        s += &format!("store: used={} inodes={files}\n", human(used));
    }
    s += &space_lines(&vol.store.space_report(), &vol.store.space().counts);
    if let Some(objects) = vol.store.objects() {
        s += &objects_lines(&objects.stats());
        let o = vol.options();
        let on = o.compact.then_some(o.compact_threshold);
        s += &vol.store.compaction_line(on).unwrap_or_default();
    }
    if let Ok(d) = vol.dict_status() {
        s += &dict_line(vol.options().dict, &d);
    }
    s += &vol.ops.line();
    s += &vol.ops.time_line();
    s += &vol.store.counts.line();
    s += &vol.wb_waits.line();
    s += &vol.store.delayed_counts.line(vol.store.delayed_len());
    s
}

/// The dictionaries: each one's id and size, the one new small extents use, the samples
/// collected toward the first, and what the last training of this mount measured.
fn dict_line(on: bool, d: &DictStatus) -> String {
    let list: Vec<String> = d
        .dicts
        .iter()
        .map(|(id, n)| format!("{id}:{}", human(*n as u64)))
        .collect();
    let mut s = format!(
        "dicts: {} count={} newest={} samples={} busy={} rewritten={}",
        if on { "auto" } else { "off" },
        d.dicts.len(),
        d.newest,
        human(d.sample_bytes as u64),
        u8::from(d.busy),
        d.rewritten
    );
    if !list.is_empty() {
        s += &format!(" sizes={}", list.join(","));
    }
    if let Some(t) = d.last {
        let saved = t.alone.saturating_sub(t.with);
        s += &format!(
            " trained={}: {} samples of {} compress to {} alone, {} with it (saves {}, zstd:3)",
            t.id,
            t.samples,
            human(t.raw),
            human(t.alone),
            human(t.with),
            human(saved)
        );
    }
    s + "\n"
}

/// The store's space: whether it is full or degraded and why, the figures behind it (free
/// space of the store's filesystem, what the next commit gives back, reservations, the
/// global reserve), what was refused, and the last I/O error of the store.
fn space_lines(r: &SpaceReport, c: &SpaceCounts) -> String {
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let last = match &r.last_error {
        Some((e, what)) => format!("{what}: {}", std::io::Error::from_raw_os_error(*e)),
        None => "none".into(),
    };
    format!(
        "space: {}\n\
         space raw: available={} fs_free={} fs_total={} reclaimable={} reserved={} \
         global_reserve={}/{} enospc={} reserve_used={} reopened={} rolled_back={}\n\
         space last_error: {last}\n",
        r.state(),
        r.available,
        r.fs_free,
        r.fs_total,
        r.reclaimable,
        r.reserved,
        r.reserve.0,
        r.reserve.1,
        n(&c.enospc),
        n(&c.rescues),
        n(&c.recoveries),
        n(&c.rollbacks),
    )
}

/// The object store's state: bucket, cache, uploads, requests, the last upload error.
fn objects_lines(st: &Stats) -> String {
    format!(
        "objects: bucket={} segments={} live={} dead={} cache={}/{} pending={} \
         pending_segments={} uploads_in_flight={} gets={} puts={} deletes={} cache_hits={} \
         cache_misses={}\n\
         objects raw: bucket_bytes={} live_bytes={} dead_bytes={} pending_bytes={} \
         cache_bytes={} get_bytes={} put_bytes={}\n\
         objects last_error: {}\n",
        human(st.bucket_bytes),
        st.bucket_segments,
        human(st.live_bytes),
        human(st.dead_bytes),
        human(st.cache_bytes),
        human(st.cache_limit),
        human(st.pending_bytes),
        st.pending_segments,
        st.uploads_in_flight,
        st.gets,
        st.puts,
        st.deletes,
        st.cache_hits,
        st.cache_misses,
        st.bucket_bytes,
        st.live_bytes,
        st.dead_bytes,
        st.pending_bytes,
        st.cache_bytes,
        st.get_bytes,
        st.put_bytes,
        st.last_error
            .as_deref()
            .map_or_else(|| "none".to_string(), |e| e.replace('\n', " ")),
    )
}

/// The offload API's CPU provider: its workers (one per stream) and requests.
fn offload_line(o: &OffloadStats) -> String {
    let ms = |p: f64| {
        o.cpu
            .service
            .percentile(p)
            .map_or_else(|| "-".into(), |d| format!("{:.3}ms", d.as_secs_f64() * 1e3))
    };
    format!(
        "offload cpu: workers={} in_flight={} submitted={} completed={} service_p50={} \
         service_p99={}\n",
        o.cpu.workers,
        o.in_flight,
        o.cpu.submitted,
        o.cpu.completed,
        ms(50.0),
        ms(99.0)
    )
}

/// One line per algorithm's workspace manager, then the page pool's: reads of part of an
/// extent decode it into pool pages (hits) or allocator pages (misses; a fallback per extent
/// the pool could not fill while on), `alloc_ms` the time spent allocating those.
fn engine_lines(stats: &EngineStats) -> String {
    let mut s = String::new();
    for (alg, m) in &stats.managers {
        s += &format!("workspaces {alg}: {}\n", manager_fields(m));
    }
    s += &format!("page_pool: {}\n", pool_fields(&stats.pool));
    s
}

/// `mem` is what the workspaces reserve (what `workspace_mem` caps), not what is resident:
/// an extent buffer sized for max_extent is only touched as far as extents need.
fn manager_fields(m: &ManagerStats) -> String {
    format!(
        "count={} busy={} streams={} mem={} peak_mem={} hits={} scans_up={} allocations={} \
         alloc_failures={} waits={} reclaims={} frees={}",
        m.workspaces,
        m.busy,
        m.streams,
        human(m.resident_bytes as u64),
        human(m.peak_bytes as u64),
        m.hits,
        m.scans_up,
        m.allocations,
        m.alloc_failures,
        m.waits,
        m.reclaims,
        m.frees
    )
}

fn pool_fields(p: &PoolStats) -> String {
    format!(
        "size={} free={} in_use={} locked={} hits={} misses={} fallbacks={} alloc_ms={:.1}",
        p.size,
        p.free,
        p.in_use,
        p.locked,
        p.hits,
        p.misses,
        p.fallbacks,
        p.alloc_nanos as f64 / 1e6
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wring_engine::Algorithm;

    #[test]
    fn objects_lines_name_every_counter() {
        let st = Stats {
            bucket_bytes: 3 << 20,
            bucket_segments: 2,
            live_bytes: 2 << 20,
            dead_bytes: 1 << 20,
            pending_bytes: 4096,
            pending_segments: 1,
            uploads_in_flight: 1,
            cache_bytes: 1 << 20,
            cache_limit: 256 << 20,
            gets: 7,
            get_bytes: 70,
            puts: 3,
            put_bytes: 30,
            last_error: Some("uploading s3://b/p/seg/1:\nrefused".into()),
            ..Stats::default()
        };
        assert_eq!(
            objects_lines(&st),
            "objects: bucket=3.0M segments=2 live=2.0M dead=1.0M cache=1.0M/256.0M \
             pending=4.0K pending_segments=1 uploads_in_flight=1 gets=7 puts=3 deletes=0 \
             cache_hits=0 cache_misses=0\n\
             objects raw: bucket_bytes=3145728 live_bytes=2097152 dead_bytes=1048576 \
             pending_bytes=4096 cache_bytes=1048576 get_bytes=70 put_bytes=30\n\
             objects last_error: uploading s3://b/p/seg/1: refused\n"
        );
    }

    #[test]
    fn engine_lines_name_every_counter() {
        let m = ManagerStats {
            hits: 11,
            scans_up: 2,
            allocations: 3,
            waits: 1,
            resident_bytes: 3 << 20,
            peak_bytes: 6 << 20,
            workspaces: 2,
            busy: 1,
            streams: 2,
            ..ManagerStats::default()
        };
        let pool = PoolStats {
            size: 64,
            free: 60,
            in_use: 4,
            locked: 64,
            hits: 9,
            misses: 1,
            fallbacks: 1,
            alloc_nanos: 2_500_000,
        };
        let text = engine_lines(&EngineStats {
            managers: vec![(Algorithm::Zstd, m)],
            pool,
        });
        assert_eq!(
            text,
            "workspaces zstd: count=2 busy=1 streams=2 mem=3.0M peak_mem=6.0M hits=11 scans_up=2 \
             allocations=3 alloc_failures=0 waits=1 reclaims=0 frees=0\n\
             page_pool: size=64 free=60 in_use=4 locked=64 hits=9 misses=1 fallbacks=1 \
             alloc_ms=2.5\n"
        );
    }
}
