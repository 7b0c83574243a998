//! zram's statistics (Documentation/admin-guide/blockdev/zram.rst): `mm_stat` and `io_stat` with
//! the same fields in the same order, printed the way the sysfs files print them.
//!
//! Units with `slot_size` above 4 KiB (beyond zram): sizes stay in bytes; every per-page
//! counter (`same_pages`, `huge_pages`, `huge_pages_since`, `idle_pages`,
//! `recompressed_pages`, `incompressible_pages`, `bd_count`, `notify_free`) counts 4 KiB
//! pages, a slot counting as `slot_size / 4096` of them, so that tools which multiply
//! zram's page counts by 4096 stay right; `pages_compacted` counts the arena's 4 KiB pages
//! as it always did. The reports of the actions (`recompress`, `writeback`, `idle`) count
//! slots, the unit they work in, and `stat` shows `slot_size`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use wring_engine::pool::PoolStats;

use crate::error::BlkError;
use crate::options::PAGE_SIZE;
use crate::report::ScheduleStat;

/// Counters the store updates (zram's `struct zram_stats`).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) pages_stored: AtomicU64,
    pub(crate) compr_data_size: AtomicU64,
    pub(crate) same_pages: AtomicU64,
    pub(crate) huge_pages: AtomicU64,
    pub(crate) huge_pages_since: AtomicU64,
    pub(crate) failed_reads: AtomicU64,
    pub(crate) failed_writes: AtomicU64,
    pub(crate) invalid_io: AtomicU64,
    pub(crate) notify_free: AtomicU64,
    pub(crate) idle_pages: AtomicU64,
    pub(crate) incompressible_pages: AtomicU64,
    pub(crate) recomp_pages: AtomicU64,
    pub(crate) bd_count: AtomicU64,
    pub(crate) bd_reads: AtomicU64,
    pub(crate) bd_writes: AtomicU64,
    pub(crate) num_reads: AtomicU64,
    pub(crate) num_writes: AtomicU64,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::AcqRel);
    }

    pub(crate) fn sub(c: &AtomicU64, n: u64) {
        c.fetch_sub(n, Ordering::AcqRel);
    }

    pub(crate) fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Acquire)
    }
}

/// `mm_stat`: memory use, in zram's order. Sizes in bytes, the rest in pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MmStat {
    /// Uncompressed size of the data stored (pages stored × 4096, same pages included).
    pub orig_data_size: u64,
    /// Compressed size of the data stored (huge pages count as a whole page).
    pub compr_data_size: u64,
    /// Memory the arena holds, zspages included.
    pub mem_used_total: u64,
    /// The limit; 0 = none.
    pub mem_limit: u64,
    /// The most memory the arena has held.
    pub mem_used_max: u64,
    /// Pages stored as one repeated 8-byte word, with no allocation.
    pub same_pages: u64,
    /// Pages freed by compaction.
    pub pages_compacted: u64,
    /// Pages stored raw because they did not compress below the huge class size.
    pub huge_pages: u64,
    /// Pages stored huge since the device was created.
    pub huge_pages_since: u64,
}

impl MmStat {
    /// The fields' names in order.
    pub const FIELDS: [&'static str; 9] = [
        "orig_data_size",
        "compr_data_size",
        "mem_used_total",
        "mem_limit",
        "mem_used_max",
        "same_pages",
        "pages_compacted",
        "huge_pages",
        "huge_pages_since",
    ];

    /// The values in order.
    pub fn values(&self) -> [u64; 9] {
        [
            self.orig_data_size,
            self.compr_data_size,
            self.mem_used_total,
            self.mem_limit,
            self.mem_used_max,
            self.same_pages,
            self.pages_compacted,
            self.huge_pages,
            self.huge_pages_since,
        ]
    }
}

/// `io_stat`: failed and invalid requests, in zram's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoStat {
    /// Reads that failed.
    pub failed_reads: u64,
    /// Writes that failed.
    pub failed_writes: u64,
    /// Requests outside the device.
    pub invalid_io: u64,
    /// Pages freed by discard.
    pub notify_free: u64,
}

impl IoStat {
    /// The fields' names in order.
    pub const FIELDS: [&'static str; 4] =
        ["failed_reads", "failed_writes", "invalid_io", "notify_free"];

    /// The values in order.
    pub fn values(&self) -> [u64; 4] {
        [
            self.failed_reads,
            self.failed_writes,
            self.invalid_io,
            self.notify_free,
        ]
    }
}

/// One compression stream set's figures (zram's `zcomp`: the primary algorithm's streams, or
/// a `recomp_algorithm`'s): the engine's workspaces are the streams a page borrows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamStat {
    /// 0 for `comp_algorithm`, 1 to 3 for a `recomp_algorithm`.
    pub priority: u8,
    /// The algorithm.
    pub algorithm: String,
    /// Streams configured (`max_comp_streams`).
    pub streams: usize,
    /// Stream workspaces that exist now.
    pub workspaces: usize,
    /// Stream workspaces lent out now.
    pub busy: usize,
    /// Times a page waited for a free stream.
    pub waits: u64,
    /// Pages compressed.
    pub compressed: u64,
    /// Bytes those pages held.
    pub bytes_in: u64,
    /// Bytes they compressed to (pages that did not fit count nothing).
    pub bytes_out: u64,
    /// Pages that did not compress below the huge class size.
    pub did_not_fit: u64,
    /// Pages decompressed.
    pub decompressed: u64,
    /// Compressions or decompressions that failed.
    pub failures: u64,
}

/// `bd_stat`: the backing file, in zram's units (4 KiB pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BdStat {
    /// Pages on the backing file now.
    pub bd_count: u64,
    /// Pages read from it.
    pub bd_reads: u64,
    /// Pages written to it.
    pub bd_writes: u64,
}

impl BdStat {
    /// The fields' names in order.
    pub const FIELDS: [&'static str; 3] = ["bd_count", "bd_reads", "bd_writes"];

    /// The values in order.
    pub fn values(&self) -> [u64; 3] {
        [self.bd_count, self.bd_reads, self.bd_writes]
    }
}

/// Everything `wring blk stat` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    /// Device size in bytes (`disksize`).
    pub disksize: u64,
    /// Bytes per slot (4096 unless `slot_size` says otherwise).
    #[serde(default = "default_slot_size")]
    pub slot_size: usize,
    /// `comp_algorithm`.
    pub comp_algorithm: String,
    /// Streams now (`max_comp_streams`).
    pub streams: usize,
    /// `mm_stat`.
    pub mm_stat: MmStat,
    /// `io_stat`.
    pub io_stat: IoStat,
    /// Pages marked idle and not accessed since (zram shows them only per page, in debugfs).
    #[serde(default)]
    pub idle_pages: u64,
    /// The secondary algorithms, as `zstd:3 priority=1` (`recomp_algorithm`).
    #[serde(default)]
    pub recomp_algorithms: Vec<String>,
    /// Pages now held compressed by a secondary algorithm (`ZRAM_RECOMP`).
    #[serde(default)]
    pub recompressed_pages: u64,
    /// Pages every secondary algorithm failed to shrink (`ZRAM_INCOMPRESSIBLE`).
    #[serde(default)]
    pub incompressible_pages: u64,
    /// `bd_stat`.
    #[serde(default)]
    pub bd_stat: BdStat,
    /// The backing file (`backing_dev`), if any.
    #[serde(default)]
    pub backing_dev: Option<String>,
    /// Pages writeback may still write (`writeback_limit`); `None`: no limit.
    #[serde(default)]
    pub writeback_limit: Option<u64>,
    /// The scheduled policy, if one is set.
    #[serde(default)]
    pub policy: Option<ScheduleStat>,
    /// Per stream set: the primary algorithm's, then each `recomp_algorithm`'s.
    #[serde(default)]
    pub stream_stats: Vec<StreamStat>,
    /// Read requests served (`stat`'s reads).
    pub num_reads: u64,
    /// Write requests served (`stat`'s writes).
    pub num_writes: u64,
    /// The page pool's counters.
    #[serde(default)]
    pub page_pool: PoolStats,
}

fn default_slot_size() -> usize {
    PAGE_SIZE
}

fn line(values: &[u64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:>8}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Stat {
    /// `mm_stat` as the sysfs file prints it.
    pub fn mm_stat_line(&self) -> String {
        line(&self.mm_stat.values())
    }

    /// `io_stat` as the sysfs file prints it.
    pub fn io_stat_line(&self) -> String {
        line(&self.io_stat.values())
    }

    /// `bd_stat` as the sysfs file prints it.
    pub fn bd_stat_line(&self) -> String {
        line(&self.bd_stat.values())
    }

    /// The compression ratio of the data stored (orig / compr), if anything is stored.
    pub fn ratio(&self) -> Option<f64> {
        let m = &self.mm_stat;
        (m.compr_data_size > 0).then(|| m.orig_data_size as f64 / m.compr_data_size as f64)
    }

    /// A readable table: one field a line.
    pub fn table(&self) -> String {
        let mut s = format!(
            "disksize          {}\nslot_size         {}\ncomp_algorithm    {}\nstreams           {}\n",
            self.disksize, self.slot_size, self.comp_algorithm, self.streams
        );
        for (k, v) in MmStat::FIELDS.iter().zip(self.mm_stat.values()) {
            s += &format!("{k:<17} {v}\n");
        }
        for (k, v) in IoStat::FIELDS.iter().zip(self.io_stat.values()) {
            s += &format!("{k:<17} {v}\n");
        }
        s += &format!(
            "reads             {}\nwrites            {}\nidle_pages        {}\n",
            self.num_reads, self.num_writes, self.idle_pages
        );
        for a in &self.recomp_algorithms {
            s += &format!("recomp_algorithm  {a}\n");
        }
        s += &format!(
            "recompressed      {}\nincompressible    {}\n",
            self.recompressed_pages, self.incompressible_pages
        );
        if let Some(b) = &self.backing_dev {
            s += &format!("backing_dev       {b}\n");
        }
        for (k, v) in BdStat::FIELDS.iter().zip(self.bd_stat.values()) {
            s += &format!("{k:<17} {v}\n");
        }
        if let Some(l) = self.writeback_limit {
            s += &format!("writeback_limit   {l}\n");
        }
        if let Some(p) = &self.policy {
            s += &format!("policy            {} ({} rounds)\n", p.policy, p.rounds);
            if let Some(l) = &p.last {
                s += &format!(
                    "policy_last       at {} s: {} idle, {} recompressed, {} written back{}\n",
                    l.at,
                    l.idle,
                    l.recompress.map_or(0, |r| r.recompressed),
                    l.writeback.map_or(0, |w| w.written),
                    l.error
                        .as_ref()
                        .map_or(String::new(), |e| format!(" ({e})"))
                );
            }
        }
        if !self.stream_stats.is_empty() {
            s += &format!(
                "\n{:<4} {:<10} {:>7} {:>5} {:>5} {:>7} {:>10} {:>12} {:>12} {:>8} {:>10} {:>6}\n",
                "prio",
                "algorithm",
                "streams",
                "ws",
                "busy",
                "waits",
                "compressed",
                "bytes_in",
                "bytes_out",
                "no_fit",
                "decompr",
                "failed"
            );
        }
        for t in &self.stream_stats {
            s += &format!(
                "{:<4} {:<10} {:>7} {:>5} {:>5} {:>7} {:>10} {:>12} {:>12} {:>8} {:>10} {:>6}\n",
                t.priority,
                t.algorithm,
                t.streams,
                t.workspaces,
                t.busy,
                t.waits,
                t.compressed,
                t.bytes_in,
                t.bytes_out,
                t.did_not_fit,
                t.decompressed,
                t.failures
            );
        }
        let p = &self.page_pool;
        if p.size > 0 || p.hits > 0 {
            s += &format!(
                "page_pool         {} pages ({} locked, {} in use): {} hits, {} misses, {} fallbacks\n",
                p.size, p.locked, p.in_use, p.hits, p.misses, p.fallbacks
            );
        }
        if let Some(r) = self.ratio() {
            s += &format!("ratio             {r:.2}\n");
        }
        s
    }
}

/// The statistics as indented JSON (`wring blk stat --json`).
pub fn to_json(s: &Stat) -> Result<String, BlkError> {
    serde_json::to_string_pretty(s).map_err(|e| BlkError::Option(e.to_string()))
}
