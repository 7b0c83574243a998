//! The Prometheus (OpenMetrics) text exposition of a mount's [`Status`]: what `metrics=ADDR`
//! serves on `GET /metrics` and `wring metrics` prints or writes for node_exporter's textfile
//! collector. Built on each scrape from the same figures `wring status` shows (the daemon's
//! relaxed atomic counters), in a registry made for that scrape: nothing is kept or locked
//! between scrapes, so a mount nobody scrapes pays nothing.
//!
//! Mirrors Prometheus's naming conventions (`wring_` prefix, base units `_bytes` and
//! `_seconds`, counters ending `_total`), encoded by the `prometheus-client` crate.

use std::borrow::Cow;
use std::sync::atomic::AtomicU64;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::Status;
use crate::counters::{OpFigure, LATENCY_BOUNDS_NS};

/// One series' labels beyond the mount point.
type Labels = Vec<(&'static str, String)>;

/// A metric's kind.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// A registry being filled for one scrape.
struct Builder(Registry);

impl Builder {
    /// Register `name` (without prefix, unit or `_total`) with its series.
    fn add(
        &mut self,
        kind: Kind,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        series: &[(Labels, f64)],
    ) {
        match kind {
            Kind::Counter => {
                let f = Family::<Labels, Counter<f64, AtomicU64>>::default();
                for (l, v) in series {
                    f.get_or_create(l).inc_by(*v);
                }
                self.register(name, help, unit, f);
            }
            Kind::Gauge => {
                let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
                for (l, v) in series {
                    f.get_or_create(l).set(*v);
                }
                self.register(name, help, unit, f);
            }
        }
    }

    fn register(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        m: impl prometheus_client::registry::Metric,
    ) {
        match unit {
            Some(u) => self.0.register_with_unit(name, help, u, m),
            None => self.0.register(name, help, m),
        }
    }

    /// One unlabelled series.
    fn one(&mut self, kind: Kind, name: &str, help: &str, unit: Option<Unit>, v: f64) {
        self.add(kind, name, help, unit, &[(Vec::new(), v)]);
    }
}

/// The FUSE request time histograms, from the buckets the daemon counts.
#[derive(Debug)]
struct Latency(Vec<OpFigure>);

impl Collector for Latency {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let help = "Time FUSE requests took, replies included, by opcode";
        let unit = Unit::Seconds;
        let mut m = encoder.encode_descriptor(
            "fuse_request_duration",
            help,
            Some(&unit),
            MetricType::Histogram,
        )?;
        for o in &self.0 {
            let bounds = LATENCY_BOUNDS_NS
                .iter()
                .map(|&u| secs(u))
                .chain([f64::INFINITY]);
            let buckets: Vec<(f64, u64)> = bounds.zip(o.buckets).collect();
            let count = o.buckets.iter().sum();
            let labels = [("op", o.op)];
            m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                secs(o.nanos),
                count,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
}

/// Seconds of `nanos`.
fn secs(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// The exposition of `st`, every series labelled with `mountpoint`.
pub(crate) fn exposition(st: &Status, mountpoint: &str) -> String {
    let labels = [(
        Cow::Borrowed("mountpoint"),
        Cow::Owned(mountpoint.to_string()),
    )];
    let mut b = Builder(Registry::with_prefix_and_labels(
        "wring",
        labels.into_iter(),
    ));
    fuse(&mut b, st);
    store(&mut b, st);
    engine(&mut b, st);
    objects(&mut b, st);
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &b.0);
    out
}

/// FUSE requests by opcode, and the bytes written through them.
fn fuse(b: &mut Builder, st: &Status) {
    use Kind::Counter as C;
    let by_op = |f: &dyn Fn(&OpFigure) -> f64| -> Vec<(Labels, f64)> {
        st.fuse
            .ops
            .iter()
            .filter(|o| o.requests > 0)
            .map(|o| (vec![("op", o.op.to_string())], f(o)))
            .collect()
    };
    b.add(
        C,
        "fuse_requests",
        "FUSE requests answered, by opcode",
        None,
        &by_op(&|o| o.requests as f64),
    );
    let help = "Time the daemon spent on FUSE requests, replies included, by opcode";
    b.add(
        C,
        "fuse_request",
        help,
        Some(Unit::Seconds),
        &by_op(&|o| secs(o.nanos)),
    );
    b.0.register_collector(Box::new(Latency(
        st.fuse
            .ops
            .iter()
            .filter(|o| o.requests > 0)
            .copied()
            .collect(),
    )));
    let help = "Bytes written to files through FUSE WRITE requests (bytes in, before compression)";
    b.one(
        C,
        "written",
        help,
        Some(Unit::Bytes),
        st.written_bytes as f64,
    );
}

/// The store: bytes stored, commits, delayed items, space and reservations.
fn store(b: &mut Builder, st: &Status) {
    use Kind::{Counter as C, Gauge as G};
    if let Some(s) = &st.store {
        let help = "Bytes the extents store after compression (wring stat's Disk Usage of the whole mount)";
        b.one(G, "stored", help, Some(Unit::Bytes), s.stored_bytes as f64);
        b.one(
            G,
            "inodes",
            "Inodes in the filesystem",
            None,
            s.inodes as f64,
        );
    }
    let t = &st.transactions;
    b.one(
        C,
        "commits",
        "Write transactions committed",
        None,
        t.commits as f64,
    );
    b.one(
        C,
        "commit",
        "Time spent committing",
        Some(Unit::Seconds),
        secs(t.commit_nanos),
    );
    b.one(
        C,
        "durable_commits",
        "Commits made durable (fsync of the store)",
        None,
        t.durable as f64,
    );
    let help = "Time spent in durable commits";
    b.one(
        C,
        "durable_commit",
        help,
        Some(Unit::Seconds),
        secs(t.durable_nanos),
    );
    let d = &st.delayed_inodes;
    let help = "Delayed inode items and entries held in memory, not yet written by a commit";
    b.one(G, "delayed_items_held", help, None, d.held as f64);
    b.one(
        C,
        "delayed_updates",
        "Attribute changes delayed",
        None,
        d.updates as f64,
    );
    b.one(
        C,
        "delayed_written",
        "Delayed items written by a commit",
        None,
        d.written as f64,
    );
    let w = &st.writeback_waits;
    b.one(
        C,
        "writeback_waits",
        "Requests that waited for a file's writeback",
        None,
        w.count as f64,
    );
    b.one(
        C,
        "writeback_wait",
        "Time requests waited for writeback",
        Some(Unit::Seconds),
        secs(w.nanos),
    );
    b.one(
        G,
        "delalloc_dirty",
        "Bytes written but not yet compressed and stored",
        Some(Unit::Bytes),
        st.delalloc.dirty_bytes as f64,
    );
    let s = &st.space;
    b.one(
        G,
        "space_available",
        "Bytes new data may still take",
        Some(Unit::Bytes),
        s.available_bytes as f64,
    );
    b.one(
        G,
        "space_reserved",
        "Bytes reserved for data not yet written back",
        Some(Unit::Bytes),
        s.reserved_bytes as f64,
    );
    b.one(
        G,
        "space_fs_free",
        "Free bytes of the store's filesystem",
        Some(Unit::Bytes),
        s.fs_free_bytes as f64,
    );
    b.one(
        G,
        "space_global_reserve",
        "Bytes the global reserve holds",
        Some(Unit::Bytes),
        s.global_reserve_bytes as f64,
    );
    b.one(
        C,
        "enospc",
        "Operations refused with ENOSPC for lack of room",
        None,
        s.enospc as f64,
    );
}

/// The engine: workspaces per algorithm, the page pool, dictionaries.
fn engine(b: &mut Builder, st: &Status) {
    use Kind::{Counter as C, Gauge as G};
    let by_alg = |f: &dyn Fn(&super::Workspaces) -> f64| -> Vec<(Labels, f64)> {
        st.workspaces
            .iter()
            .map(|w| (vec![("algorithm", w.algorithm.clone())], f(w)))
            .collect()
    };
    b.add(
        G,
        "workspaces",
        "Compression workspaces allocated, by algorithm",
        None,
        &by_alg(&|w| w.count as f64),
    );
    b.add(
        G,
        "workspace_mem",
        "Memory the workspaces reserve, by algorithm",
        Some(Unit::Bytes),
        &by_alg(&|w| w.mem_bytes as f64),
    );
    b.add(
        C,
        "workspace_waits",
        "Requests that waited for a workspace, by algorithm",
        None,
        &by_alg(&|w| w.waits as f64),
    );
    let p = &st.page_pool;
    b.one(
        C,
        "page_pool_hits",
        "Partial reads decoded into page pool pages",
        None,
        p.hits as f64,
    );
    b.one(
        C,
        "page_pool_misses",
        "Partial reads decoded into allocator pages",
        None,
        p.misses as f64,
    );
    b.one(
        G,
        "page_pool_free_pages",
        "Free pages of the page pool",
        None,
        p.free_pages as f64,
    );
    if let Some(d) = &st.dicts {
        b.one(
            G,
            "dicts",
            "Trained dictionaries in the store",
            None,
            d.dicts.len() as f64,
        );
        b.one(
            C,
            "dict_rewritten_extents",
            "Small extents rewritten with a dictionary",
            None,
            d.rewritten as f64,
        );
        let help = "Dictionary trainings run to the end, by whether the dictionary was kept";
        let kept = |k: bool, n: u64| (vec![("kept", k.to_string())], n as f64);
        let series = [
            kept(true, d.trainings_kept),
            kept(false, d.trainings - d.trainings_kept.min(d.trainings)),
        ];
        b.add(C, "dict_trainings", help, None, &series);
    }
    codecs(b, st);
    writeback(b, st);
}

/// A codec series: its name, help, unit and figure.
type CodecSeries<'a> = (
    &'a str,
    &'a str,
    Option<Unit>,
    &'a dyn Fn(&super::Codec) -> f64,
);

/// Each algorithm's compression and decompression: bytes in and out, time.
fn codecs(b: &mut Builder, st: &Status) {
    use Kind::Counter as C;
    let by_alg = |f: &dyn Fn(&super::Codec) -> f64| -> Vec<(Labels, f64)> {
        st.codecs
            .iter()
            .map(|c| (vec![("algorithm", c.algorithm.clone())], f(c)))
            .collect()
    };
    let bytes = Some(Unit::Bytes);
    let seconds = Some(Unit::Seconds);
    let series: [CodecSeries; 6] = [
        ("compress_input", "Bytes given to the compressor, by algorithm", bytes.clone(), &|c| c.compress_in_bytes as f64),
        ("compress_output", "Bytes the compressor's results take (an extent left raw counts its input), by algorithm", bytes.clone(), &|c| c.compress_out_bytes as f64),
        ("compress", "Time compressing, by algorithm", seconds.clone(), &|c| secs(c.compress_nanos)),
        ("decompress_output", "Bytes decompressed, by algorithm", bytes, &|c| c.decompress_out_bytes as f64),
        ("decompress", "Time decompressing, by algorithm", seconds, &|c| secs(c.decompress_nanos)),
        ("compress_requests", "Extents compressed, by algorithm", None, &|c| c.compress_requests as f64),
    ];
    for (name, help, unit, f) in series {
        b.add(C, name, help, unit, &by_alg(f));
    }
}

/// The extents writeback stored, by algorithm and level: bytes in and bytes stored.
fn writeback(b: &mut Builder, st: &Status) {
    use Kind::Counter as C;
    let by_level = |f: &dyn Fn(&crate::counters::EncodingFigure) -> u64| -> Vec<(Labels, f64)> {
        st.writeback
            .iter()
            .map(|w| {
                let level = w.level.map_or(String::new(), |l| l.to_string());
                let labels = vec![("algorithm", w.algorithm.clone()), ("level", level)];
                (labels, f(w) as f64)
            })
            .collect()
    };
    let help = "Bytes writeback stored in extents, before compression, by algorithm and level";
    b.add(
        C,
        "writeback",
        help,
        Some(Unit::Bytes),
        &by_level(&|w| w.bytes),
    );
    let help = "Bytes those extents take in the store, by algorithm and level";
    let stored = by_level(&|w| w.stored_bytes);
    b.add(C, "writeback_stored", help, Some(Unit::Bytes), &stored);
    let help = "Extents writeback stored, by algorithm and level";
    b.add(
        C,
        "writeback_extents",
        help,
        None,
        &by_level(&|w| w.extents),
    );
}

/// The bucket of a store whose extents are in one.
fn objects(b: &mut Builder, st: &Status) {
    use Kind::{Counter as C, Gauge as G};
    let Some(o) = &st.objects else {
        return;
    };
    b.one(
        G,
        "bucket",
        "Bytes of every segment object in the bucket",
        Some(Unit::Bytes),
        o.bucket_bytes as f64,
    );
    b.one(
        G,
        "bucket_dead",
        "Bytes in the bucket no extent uses",
        Some(Unit::Bytes),
        o.dead_bytes as f64,
    );
    b.one(
        G,
        "upload_pending",
        "Bytes not in the bucket yet",
        Some(Unit::Bytes),
        o.pending_bytes as f64,
    );
    b.one(C, "object_puts", "PUT requests", None, o.puts as f64);
    b.one(C, "object_gets", "GET requests", None, o.gets as f64);
}
