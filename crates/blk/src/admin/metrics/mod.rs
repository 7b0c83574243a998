//! The Prometheus (OpenMetrics) text exposition of a device's [`Stat`]: what `metrics=ADDR`
//! serves on `GET /metrics` (`server`: [`bind`], [`serve`]) and `wring metrics DEVICE` prints.
//! Built on each scrape from the same figures `wring blk stat` shows, in a registry made for
//! that scrape, so a device nobody scrapes pays nothing.
//!
//! Mirrors zram's `mm_stat`, `io_stat` and `bd_stat` fields one series each (as
//! node_exporter's zram-less world would want them: `wring_blk_` prefix, `_bytes` for sizes,
//! `_total` for counters, a `device` label), and the per-stream-set figures of `stat`'s table.
//! The address rules are the filesystem's `metrics=`, from the crate both use (wring-metrics).

use std::borrow::Cow;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

mod server;

pub use server::{bind, serve, Listener};
pub use wring_metrics::{Addr as MetricsAddr, CONTENT_TYPE};

use crate::device::stats::{Stat, StreamStat};
use crate::error::BlkError;

/// `metrics=VALUE` by the mount's rules (wring-metrics'), as a blk option error.
pub fn parse_addr(value: &str) -> Result<MetricsAddr, BlkError> {
    MetricsAddr::parse(value).map_err(|e| BlkError::Option(format!("metrics={value}: {e}")))
}

type Labels = Vec<(&'static str, String)>;

/// A registry being filled for one scrape.
struct Builder(Registry);

impl Builder {
    fn counter(&mut self, name: &str, help: &str, unit: Option<Unit>, series: &[(Labels, u64)]) {
        let f = Family::<Labels, Counter<f64, AtomicU64>>::default();
        for (l, v) in series {
            f.get_or_create(l).inc_by(*v as f64);
        }
        match unit {
            Some(u) => self.0.register_with_unit(name, help, u, f),
            None => self.0.register(name, help, f),
        }
    }

    fn gauge(&mut self, name: &str, help: &str, unit: Option<Unit>, series: &[(Labels, u64)]) {
        let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (l, v) in series {
            f.get_or_create(l).set(*v as f64);
        }
        match unit {
            Some(u) => self.0.register_with_unit(name, help, u, f),
            None => self.0.register(name, help, f),
        }
    }
}

/// The exposition of `s`, every series labelled `device=NAME`.
pub fn exposition(s: &Stat, device: &str) -> String {
    let labels = [(Cow::Borrowed("device"), Cow::Owned(device.to_string()))];
    let mut b = Builder(Registry::with_prefix_and_labels(
        "wring_blk",
        labels.into_iter(),
    ));
    mm_stat(&mut b, s);
    io_stat(&mut b, s);
    streams(&mut b, s);
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &b.0);
    out
}

fn one(v: u64) -> [(Labels, u64); 1] {
    [(Vec::new(), v)]
}

/// `mm_stat`: sizes as gauges in bytes, page counts as gauges, the ever-growing ones as
/// counters.
fn mm_stat(b: &mut Builder, s: &Stat) {
    let m = &s.mm_stat;
    let bytes = Some(Unit::Bytes);
    let disk = "Device size (disksize)";
    b.gauge("disksize", disk, bytes.clone(), &one(s.disksize));
    let help = "Uncompressed size of the data stored (mm_stat orig_data_size)";
    b.gauge(
        "orig_data_size",
        help,
        bytes.clone(),
        &one(m.orig_data_size),
    );
    let help = "Compressed size of the data stored (mm_stat compr_data_size)";
    b.gauge(
        "compr_data_size",
        help,
        bytes.clone(),
        &one(m.compr_data_size),
    );
    let help = "Memory the arena holds (mm_stat mem_used_total)";
    b.gauge(
        "mem_used_total",
        help,
        bytes.clone(),
        &one(m.mem_used_total),
    );
    let help = "Memory limit, 0 for none (mm_stat mem_limit)";
    b.gauge("mem_limit", help, bytes.clone(), &one(m.mem_limit));
    let help = "The most memory the arena has held (mm_stat mem_used_max)";
    b.gauge("mem_used_max", help, bytes, &one(m.mem_used_max));
    let help = "4 KiB pages stored as one repeated word (mm_stat same_pages)";
    b.gauge("same_pages", help, None, &one(m.same_pages));
    let help = "4 KiB pages freed by compaction (mm_stat pages_compacted)";
    b.counter("pages_compacted", help, None, &one(m.pages_compacted));
    let help = "4 KiB pages stored raw, not compressible enough (mm_stat huge_pages)";
    b.gauge("huge_pages", help, None, &one(m.huge_pages));
    let help = "4 KiB pages stored huge since the device started (mm_stat huge_pages_since)";
    b.counter("huge_pages_since", help, None, &one(m.huge_pages_since));
}

/// `io_stat` and the request counts, then `bd_stat`.
fn io_stat(b: &mut Builder, s: &Stat) {
    let io = &s.io_stat;
    let help = "Reads that failed (io_stat failed_reads)";
    b.counter("failed_reads", help, None, &one(io.failed_reads));
    let help = "Writes that failed (io_stat failed_writes)";
    b.counter("failed_writes", help, None, &one(io.failed_writes));
    let help = "Requests outside the device (io_stat invalid_io)";
    b.counter("invalid_io", help, None, &one(io.invalid_io));
    let help = "4 KiB pages freed by discard (io_stat notify_free)";
    b.counter("notify_free", help, None, &one(io.notify_free));
    b.counter("reads", "Read requests served", None, &one(s.num_reads));
    b.counter("writes", "Write requests served", None, &one(s.num_writes));
    let bd = &s.bd_stat;
    let help = "4 KiB pages on the backing file now (bd_stat bd_count)";
    b.gauge("bd_count", help, None, &one(bd.bd_count));
    let help = "4 KiB pages read from the backing file (bd_stat bd_reads)";
    b.counter("bd_reads", help, None, &one(bd.bd_reads));
    let help = "4 KiB pages written to the backing file (bd_stat bd_writes)";
    b.counter("bd_writes", help, None, &one(bd.bd_writes));
}

/// Per stream set (the primary algorithm's, each `recomp_algorithm`'s): labelled with
/// `algorithm` and `priority`.
fn streams(b: &mut Builder, s: &Stat) {
    let by = |f: &dyn Fn(&StreamStat) -> u64| -> Vec<(Labels, u64)> {
        s.stream_stats
            .iter()
            .map(|t| {
                let l = vec![
                    ("algorithm", t.algorithm.clone()),
                    ("priority", t.priority.to_string()),
                ];
                (l, f(t))
            })
            .collect()
    };
    let bytes = Some(Unit::Bytes);
    let help = "Bytes compressed (read by the compressor), by algorithm";
    b.counter("compressed_in", help, bytes.clone(), &by(&|t| t.bytes_in));
    let help = "Bytes those compressed to (pages that did not fit count nothing)";
    b.counter("compressed_out", help, bytes, &by(&|t| t.bytes_out));
    let help = "Slots compressed, by algorithm";
    b.counter("compressed_slots", help, None, &by(&|t| t.compressed));
    let help = "Slots decompressed, by algorithm";
    b.counter("decompressed_slots", help, None, &by(&|t| t.decompressed));
    let help = "Slots that did not compress below the huge class size, by algorithm";
    b.counter("did_not_fit_slots", help, None, &by(&|t| t.did_not_fit));
    let help = "Compressions or decompressions that failed, by algorithm";
    b.counter("stream_failures", help, None, &by(&|t| t.failures));
    let help = "Times a slot waited for a free stream, by algorithm";
    b.counter("stream_waits", help, None, &by(&|t| t.waits));
    let help = "Streams configured (max_comp_streams), by algorithm";
    b.gauge("streams", help, None, &by(&|t| t.streams as u64));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_follow_the_mounts_rules() {
        assert!(parse_addr("127.0.0.1:9101").is_ok());
        let e = parse_addr("10.1.2.3:9101").unwrap_err().to_string();
        assert!(e.contains("metrics=10.1.2.3:9101: "), "{e}");
        assert!(e.contains("metrics=public:10.1.2.3:9101"), "{e}");
    }
}
