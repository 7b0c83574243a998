//! The parts of [`super::Status`]: plain figures copied out of the engine's, the store's and
//! the object store's own statistics, with JSON names that carry their units.
//!
//! Mirrors the sources' structs (wring-engine's `ManagerStats`, `PoolStats`, `OffloadStats`,
//! the store's `SpaceReport`, wring-objstore's `Stats`, the dictionaries' `DictStatus`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use wring_engine::offload::OffloadStats;
use wring_engine::pool::PoolStats;
use wring_engine::workspace::ManagerStats;
use wring_engine::Algorithm;
use wring_objstore::Stats;

use crate::counters::figures::nanos_as_seconds;
use crate::store::space::{SpaceCounts, SpaceReport};
use crate::volume::data::dicts::DictStatus;

/// One algorithm's workspace manager.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Workspaces {
    /// The algorithm (`zstd`, `zlib`, `lzo`, `lz4`, `lz4hc`).
    pub algorithm: String,
    /// Workspaces allocated.
    pub count: u64,
    /// Of those, in use now.
    pub busy: u64,
    /// Streams (workspaces allowed at once).
    pub streams: u64,
    /// Memory the workspaces reserve (what `workspace_mem` caps), not what is resident.
    pub mem_bytes: u64,
    /// The most they reserved at once.
    pub peak_mem_bytes: u64,
    /// Requests served by an idle workspace.
    pub hits: u64,
    /// Searches that had to look at larger levels' workspaces.
    pub scans_up: u64,
    /// Workspaces allocated over time.
    pub allocations: u64,
    /// Allocations that failed.
    pub alloc_failures: u64,
    /// Requests that waited for a workspace.
    pub waits: u64,
    /// Idle workspaces reclaimed.
    pub reclaims: u64,
    /// Workspaces freed.
    pub frees: u64,
}

impl From<&(Algorithm, ManagerStats)> for Workspaces {
    fn from((alg, m): &(Algorithm, ManagerStats)) -> Workspaces {
        Workspaces {
            algorithm: alg.to_string(),
            count: m.workspaces as u64,
            busy: m.busy as u64,
            streams: m.streams as u64,
            mem_bytes: m.resident_bytes as u64,
            peak_mem_bytes: m.peak_bytes as u64,
            hits: m.hits,
            scans_up: m.scans_up,
            allocations: m.allocations,
            alloc_failures: m.alloc_failures,
            waits: m.waits,
            reclaims: m.reclaims,
            frees: m.frees,
        }
    }
}

/// The page pool: partial reads decode into pool pages (hits) or allocator pages (misses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PagePool {
    /// Pages in the pool.
    pub size_pages: u64,
    /// Of those, free.
    pub free_pages: u64,
    /// In use.
    pub in_use_pages: u64,
    /// Locked in memory.
    pub locked_pages: u64,
    /// Decodes into pool pages.
    pub hits: u64,
    /// Decodes into allocator pages.
    pub misses: u64,
    /// Extents the pool could not fill while on.
    pub fallbacks: u64,
    /// Time spent allocating the misses' pages.
    #[serde(rename = "alloc_seconds", serialize_with = "nanos_as_seconds")]
    pub alloc_nanos: u64,
}

impl From<&PoolStats> for PagePool {
    fn from(p: &PoolStats) -> PagePool {
        PagePool {
            size_pages: p.size as u64,
            free_pages: p.free as u64,
            in_use_pages: p.in_use as u64,
            locked_pages: p.locked as u64,
            hits: p.hits,
            misses: p.misses,
            fallbacks: p.fallbacks,
            alloc_nanos: p.alloc_nanos,
        }
    }
}

/// The offload API's CPU provider: its workers (one per stream) and requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Offload {
    /// Worker threads.
    pub workers: u64,
    /// Requests submitted and not completed.
    pub in_flight: u64,
    /// Requests submitted.
    pub submitted: u64,
    /// Requests completed.
    pub completed: u64,
    /// Median service time (absent before the first request).
    pub service_p50_seconds: Option<f64>,
    /// 99th percentile service time.
    pub service_p99_seconds: Option<f64>,
}

impl From<&OffloadStats> for Offload {
    fn from(o: &OffloadStats) -> Offload {
        let p = |q: f64| o.cpu.service.percentile(q).map(|d| d.as_secs_f64());
        Offload {
            workers: o.cpu.workers as u64,
            in_flight: o.in_flight as u64,
            submitted: o.cpu.submitted,
            completed: o.cpu.completed,
            service_p50_seconds: p(50.0),
            service_p99_seconds: p(99.0),
        }
    }
}

/// Data written but not yet compressed and stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delalloc {
    /// Bytes dirty.
    pub dirty_bytes: u64,
    /// Extents waiting.
    pub extents: u64,
    /// Extents being compressed now.
    pub in_flight: u64,
}

/// What the mount's extents store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreUse {
    /// Bytes the extents store (wring stat's Disk Usage of the whole mount, once written
    /// back).
    pub stored_bytes: u64,
    /// The same in whole 4 KiB blocks, as `df` counts it.
    pub used_bytes: u64,
    /// Inodes.
    pub inodes: u64,
}

impl From<(u64, u64)> for StoreUse {
    /// From the store's (stored bytes, inodes).
    fn from((stored, inodes): (u64, u64)) -> StoreUse {
        StoreUse {
            stored_bytes: stored,
            used_bytes: stored.div_ceil(4096).saturating_mul(4096),
            inodes,
        }
    }
}

/// The store's space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Space {
    /// `ok`, `full (…why…)` or `degraded (…)`.
    pub state: String,
    /// Bytes new data may still take.
    pub available_bytes: u64,
    /// Free bytes of the store's filesystem.
    pub fs_free_bytes: u64,
    /// Total bytes of the store's filesystem.
    pub fs_total_bytes: u64,
    /// Bytes the next durable commit gives back.
    pub reclaimable_bytes: u64,
    /// Bytes reserved for data not yet written back.
    pub reserved_bytes: u64,
    /// Bytes the global reserve holds.
    pub global_reserve_bytes: u64,
    /// Bytes it should hold.
    pub global_reserve_target_bytes: u64,
    /// Operations refused with ENOSPC.
    pub enospc: u64,
    /// Times the global reserve gave blocks to the database file.
    pub reserve_used: u64,
    /// Times the database was reopened after an I/O error.
    pub reopened: u64,
    /// Of those, times commits that were not durable were lost.
    pub rolled_back: u64,
    /// The last I/O error of the store (`what: error`), if any.
    pub last_error: Option<String>,
}

impl Space {
    /// From the store's report and counters.
    pub(crate) fn of(r: &SpaceReport, c: &SpaceCounts) -> Space {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Space {
            state: r.state(),
            available_bytes: r.available,
            fs_free_bytes: r.fs_free,
            fs_total_bytes: r.fs_total,
            reclaimable_bytes: r.reclaimable,
            reserved_bytes: r.reserved,
            global_reserve_bytes: r.reserve.0,
            global_reserve_target_bytes: r.reserve.1,
            enospc: n(&c.enospc),
            reserve_used: n(&c.rescues),
            reopened: n(&c.recoveries),
            rolled_back: n(&c.rollbacks),
            last_error: r
                .last_error
                .as_ref()
                .map(|(e, what)| format!("{what}: {}", std::io::Error::from_raw_os_error(*e))),
        }
    }
}

/// The bucket of a store whose extents are in one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Objects {
    /// Bytes of every segment object.
    pub bucket_bytes: u64,
    /// Segment objects.
    pub segments: u64,
    /// Live extent bytes.
    pub live_bytes: u64,
    /// Bytes no extent uses.
    pub dead_bytes: u64,
    /// Bytes of segments in the local cache.
    pub cache_bytes: u64,
    /// The cache's limit.
    pub cache_limit_bytes: u64,
    /// Bytes not in the bucket yet.
    pub pending_bytes: u64,
    /// Segments not in the bucket yet.
    pub pending_segments: u64,
    /// Uploads running now.
    pub uploads_in_flight: u64,
    /// GET requests.
    pub gets: u64,
    /// PUT requests.
    pub puts: u64,
    /// DELETE requests.
    pub deletes: u64,
    /// Reads the cache answered.
    pub cache_hits: u64,
    /// Reads it did not.
    pub cache_misses: u64,
    /// Bytes fetched.
    pub get_bytes: u64,
    /// Bytes uploaded.
    pub put_bytes: u64,
    /// The last upload error, on one line.
    pub last_error: Option<String>,
}

impl From<&Stats> for Objects {
    fn from(st: &Stats) -> Objects {
        Objects {
            bucket_bytes: st.bucket_bytes,
            segments: st.bucket_segments,
            live_bytes: st.live_bytes,
            dead_bytes: st.dead_bytes,
            cache_bytes: st.cache_bytes,
            cache_limit_bytes: st.cache_limit,
            pending_bytes: st.pending_bytes,
            pending_segments: st.pending_segments,
            uploads_in_flight: st.uploads_in_flight,
            gets: st.gets,
            puts: st.puts,
            deletes: st.deletes,
            cache_hits: st.cache_hits,
            cache_misses: st.cache_misses,
            get_bytes: st.get_bytes,
            put_bytes: st.put_bytes,
            last_error: st.last_error.as_deref().map(|e| e.replace('\n', " ")),
        }
    }
}

/// One dictionary and its size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DictSize {
    /// Its id.
    pub id: u8,
    /// Its size.
    pub bytes: u64,
}

/// What the last training of this mount measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TrainingFigures {
    /// The dictionary it made.
    pub id: u8,
    /// Samples it trained on.
    pub samples: u64,
    /// Their bytes.
    pub raw_bytes: u64,
    /// Their bytes compressed alone (zstd:3).
    pub alone_bytes: u64,
    /// Their bytes compressed with the dictionary.
    pub with_bytes: u64,
}

/// The trained dictionaries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Dicts {
    /// `auto` or `off` (the mount's `dict=`).
    pub mode: String,
    /// Each dictionary.
    pub dicts: Vec<DictSize>,
    /// The one new small extents use.
    pub newest: u8,
    /// Samples collected toward the next.
    pub sample_bytes: u64,
    /// A training runs now.
    pub busy: bool,
    /// Extents rewritten with a dictionary.
    pub rewritten: u64,
    /// Trainings this mount ran to the end.
    pub trainings: u64,
    /// Of those, the ones whose dictionary was stored.
    pub trainings_kept: u64,
    /// The last training of this mount.
    pub last_training: Option<TrainingFigures>,
}

impl Dicts {
    pub(crate) fn of(on: bool, d: &DictStatus) -> Dicts {
        Dicts {
            mode: if on { "auto" } else { "off" }.into(),
            dicts: d
                .dicts
                .iter()
                .map(|&(id, n)| DictSize {
                    id,
                    bytes: n as u64,
                })
                .collect(),
            newest: d.newest,
            sample_bytes: d.sample_bytes as u64,
            busy: d.busy,
            rewritten: d.rewritten,
            trainings: d.trainings,
            trainings_kept: d.kept,
            last_training: d.last.map(|t| TrainingFigures {
                id: t.id,
                samples: t.samples as u64,
                raw_bytes: t.raw,
                alone_bytes: t.alone,
                with_bytes: t.with,
            }),
        }
    }
}

/// The FUSE transport: `/dev/fuse` or io_uring, and the ring's figures when it serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Transport {
    /// Which transport the mount chose and why (`io_uring (uring=auto)`).
    pub name: Option<String>,
    /// The ring, when it serves.
    pub uring: Option<Uring>,
}

/// The io_uring transport's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Uring {
    /// Queues registered (one per possible CPU).
    pub queues: u64,
    /// Entries (one per thread).
    pub entries: u64,
    /// Entries the kernel refused.
    pub refused: u64,
    /// Requests answered through the ring.
    pub requests: u64,
}

/// One algorithm's codec work on the offload's providers since the mount: writeback,
/// defragment, the dictionary passes and reads all go through them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Codec {
    /// The algorithm.
    pub algorithm: String,
    /// Compression requests.
    pub compress_requests: u64,
    /// Their bytes in.
    pub compress_in_bytes: u64,
    /// The bytes their results take (the input for an extent left raw).
    pub compress_out_bytes: u64,
    /// Time compressing.
    #[serde(rename = "compress_seconds", serialize_with = "nanos_as_seconds")]
    pub compress_nanos: u64,
    /// Decompression requests.
    pub decompress_requests: u64,
    /// Bytes they produced.
    pub decompress_out_bytes: u64,
    /// Time decompressing.
    #[serde(rename = "decompress_seconds", serialize_with = "nanos_as_seconds")]
    pub decompress_nanos: u64,
}

impl Codec {
    /// Every algorithm that did work on the CPU workers or the device, summed over both.
    pub(crate) fn all(s: &OffloadStats) -> Vec<Codec> {
        let providers: Vec<_> = std::iter::once(&s.cpu).chain(s.device.as_ref()).collect();
        Algorithm::ALL
            .iter()
            .map(|&a| {
                let mut c = Codec {
                    algorithm: a.to_string(),
                    ..Codec::default()
                };
                for w in providers.iter().map(|p| p.codec(a)) {
                    c.compress_requests += w.compress_requests;
                    c.compress_in_bytes += w.compress_in_bytes;
                    c.compress_out_bytes += w.compress_out_bytes;
                    c.compress_nanos += w.compress_nanos;
                    c.decompress_requests += w.decompress_requests;
                    c.decompress_out_bytes += w.decompress_out_bytes;
                    c.decompress_nanos += w.decompress_nanos;
                }
                c
            })
            .filter(|c| c.compress_requests + c.decompress_requests > 0)
            .collect()
    }
}
