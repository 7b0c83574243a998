//! What `wring top` shows: rates from two samples of a mount's `wring status --json` or a
//! blk device's `wring blk stat --json`, as plain lines (no cursor tricks, so a pipe, a log
//! or an ssh session without a terminal reads the same text).
//!
//! Mirrors `juicefs stats` (one line per subsystem, rates per second) and zramctl's columns
//! for a blk device (DATA, COMPR, ratio). Sizes are in MB (10^6 bytes) as those tools show.

use anyhow::{Context, Result};
use serde_json::Value;
use wring_blk::Stat;

/// How many opcodes the requests line names, busiest first.
const TOP_OPS: usize = 6;

/// One FUSE opcode's cumulative figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub name: String,
    pub requests: u64,
    pub seconds: f64,
}

/// One algorithm's cumulative codec work (the status's `codecs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Codec {
    pub algorithm: String,
    pub compress_in_bytes: u64,
    pub compress_seconds: f64,
    pub decompress_out_bytes: u64,
    pub decompress_seconds: f64,
}

impl Codec {
    fn parse(c: &Value) -> Result<Codec> {
        Ok(Codec {
            algorithm: c
                .get("algorithm")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .into(),
            compress_in_bytes: num(c, "/compress_in_bytes")?,
            compress_seconds: secs(c, "/compress_seconds")?,
            decompress_out_bytes: num(c, "/decompress_out_bytes")?,
            decompress_seconds: secs(c, "/decompress_seconds")?,
        })
    }
}

/// The cumulative figures of one `wring status --json` that `top` uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MountSample {
    pub written_bytes: u64,
    pub stored_bytes: Option<u64>,
    pub dirty_bytes: u64,
    pub ops: Vec<Op>,
    pub commits: u64,
    pub commit_seconds: f64,
    pub durable: u64,
    pub durable_seconds: f64,
    pub wb_waits: u64,
    pub wb_seconds: f64,
    pub offload_submitted: u64,
    pub offload_in_flight: u64,
    pub offload_p50: Option<f64>,
    pub offload_p99: Option<f64>,
    pub codecs: Vec<Codec>,
}

fn num(v: &Value, ptr: &str) -> Result<u64> {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .with_context(|| format!("the mount's status JSON has no count at {ptr}"))
}

fn secs(v: &Value, ptr: &str) -> Result<f64> {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .with_context(|| format!("the mount's status JSON has no seconds at {ptr}"))
}

impl MountSample {
    /// From the text of `wring status --json` (the `wring.status_json` attribute).
    pub fn parse(json: &[u8]) -> Result<MountSample> {
        let v: Value = serde_json::from_slice(json).context("the mount's status JSON")?;
        let ops = v.get("fuse").and_then(Value::as_array);
        let ops = ops.context("the mount's status JSON has no fuse array")?;
        let ops = ops
            .iter()
            .map(|o| {
                Ok(Op {
                    name: o.get("op").and_then(Value::as_str).unwrap_or("?").into(),
                    requests: num(o, "/requests")?,
                    seconds: secs(o, "/seconds")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MountSample {
            written_bytes: num(&v, "/written_bytes")?,
            stored_bytes: v.pointer("/store/stored_bytes").and_then(Value::as_u64),
            dirty_bytes: num(&v, "/delalloc/dirty_bytes")?,
            ops,
            commits: num(&v, "/transactions/commits")?,
            commit_seconds: secs(&v, "/transactions/commit_seconds")?,
            durable: num(&v, "/transactions/durable")?,
            durable_seconds: secs(&v, "/transactions/durable_seconds")?,
            wb_waits: num(&v, "/writeback_waits/count")?,
            wb_seconds: secs(&v, "/writeback_waits/seconds")?,
            offload_submitted: num(&v, "/offload_cpu/submitted")?,
            offload_in_flight: num(&v, "/offload_cpu/in_flight")?,
            offload_p50: v
                .pointer("/offload_cpu/service_p50_seconds")
                .and_then(Value::as_f64),
            offload_p99: v
                .pointer("/offload_cpu/service_p99_seconds")
                .and_then(Value::as_f64),
            // Absent from the status of a daemon older than this binary.
            codecs: match v.get("codecs").and_then(Value::as_array) {
                Some(c) => c.iter().map(Codec::parse).collect::<Result<_>>()?,
                None => Vec::new(),
            },
        })
    }
}

/// `n` bytes as MB (10^6).
fn mb(n: f64) -> f64 {
    n / 1e6
}

/// Growth of a counter per second (a counter that went back, after a reset: 0).
fn rate(now: u64, before: u64, dt: f64) -> f64 {
    now.saturating_sub(before) as f64 / dt
}

/// Average milliseconds per event over the interval, or "-" with no events.
fn avg_ms(seconds: f64, events: u64) -> String {
    if events == 0 {
        "-".into()
    } else {
        format!("{:.2} ms", seconds * 1e3 / events as f64)
    }
}

fn opt_ms(s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{:.2} ms", s * 1e3))
}

/// A mount's lines for the interval from `a` to `b`, `dt` seconds long.
pub fn mount_lines(a: &MountSample, b: &MountSample, dt: f64) -> Vec<String> {
    let written = b.written_bytes.saturating_sub(a.written_bytes) as f64;
    // Bytes that left delalloc for the store: written, less what still waits.
    let flushed = written - (b.dirty_bytes as f64 - a.dirty_bytes as f64);
    let stored = match (a.stored_bytes, b.stored_bytes) {
        (Some(x), Some(y)) => Some(y as f64 - x as f64),
        _ => None,
    };
    let ratio = match stored {
        Some(s) if s > 0.0 && flushed > 0.0 => format!("{:.2}", flushed / s),
        _ => "-".into(),
    };
    let stored_rate = stored.map_or("-".into(), |s| format!("{:.2} MB/s", mb(s) / dt));
    let mut lines = vec![format!(
        "throughput: in {:.2} MB/s  stored {stored_rate}  ratio {ratio}  dirty {:.1} MB",
        mb(written) / dt,
        mb(b.dirty_bytes as f64)
    )];
    let mut by: Vec<(&str, u64, f64)> = b
        .ops
        .iter()
        .map(|o| {
            let before = a.ops.iter().find(|p| p.name == o.name);
            let (r, s) = before.map_or((0, 0.0), |p| (p.requests, p.seconds));
            (o.name.as_str(), o.requests.saturating_sub(r), o.seconds - s)
        })
        .collect();
    let total: u64 = by.iter().map(|o| o.1).sum();
    let fuse_seconds: f64 = by.iter().map(|o| o.2.max(0.0)).sum();
    by.sort_by_key(|o| std::cmp::Reverse(o.1));
    let mut req = format!("requests/s: total {:.1}", total as f64 / dt);
    for (name, n, _) in by.iter().filter(|o| o.1 > 0).take(TOP_OPS) {
        req += &format!("  {name} {:.1}", *n as f64 / dt);
    }
    lines.push(req);
    let commits = b.commits.saturating_sub(a.commits);
    let durable = b.durable.saturating_sub(a.durable);
    let commit_s = b.commit_seconds - a.commit_seconds;
    let durable_s = b.durable_seconds - a.durable_seconds;
    lines.push(format!(
        "commits: {:.1}/s  latency {}  durable {:.1}/s  latency {}",
        commits as f64 / dt,
        avg_ms(commit_s, commits),
        durable as f64 / dt,
        avg_ms(durable_s, durable)
    ));
    let wb_s = b.wb_seconds - a.wb_seconds;
    let pct = |s: f64| 100.0 * s.max(0.0) / dt;
    let codecs = codec_deltas(a, b);
    let codec_s: f64 = codecs
        .iter()
        .map(|c| c.compress_seconds + c.decompress_seconds)
        .sum();
    lines.push(format!(
        "time (% of one thread): fuse handlers {:.1}%  compression {:.1}%  commits {:.1}%  \
         writeback waits {:.1}%",
        pct(fuse_seconds),
        pct(codec_s),
        pct(commit_s),
        pct(wb_s)
    ));
    for c in codecs
        .iter()
        .filter(|c| c.compress_seconds + c.decompress_seconds > 0.0)
    {
        lines.push(format!(
            "codec {}: compress {:.2} MB/s in ({:.1}%)  decompress {:.2} MB/s out ({:.1}%)",
            c.algorithm,
            mb(c.compress_in_bytes as f64) / dt,
            pct(c.compress_seconds),
            mb(c.decompress_out_bytes as f64) / dt,
            pct(c.decompress_seconds)
        ));
    }
    lines.push(format!(
        "compression (offload): {:.1} req/s  in flight {}  service p50 {}  p99 {}",
        rate(b.offload_submitted, a.offload_submitted, dt),
        b.offload_in_flight,
        opt_ms(b.offload_p50),
        opt_ms(b.offload_p99)
    ));
    lines
}

/// Each algorithm's work between the samples `a` and `b`.
fn codec_deltas(a: &MountSample, b: &MountSample) -> Vec<Codec> {
    b.codecs
        .iter()
        .map(|c| {
            let was = a.codecs.iter().find(|p| p.algorithm == c.algorithm);
            let was = was.cloned().unwrap_or_default();
            Codec {
                algorithm: c.algorithm.clone(),
                compress_in_bytes: c.compress_in_bytes.saturating_sub(was.compress_in_bytes),
                compress_seconds: c.compress_seconds - was.compress_seconds,
                decompress_out_bytes: c
                    .decompress_out_bytes
                    .saturating_sub(was.decompress_out_bytes),
                decompress_seconds: c.decompress_seconds - was.decompress_seconds,
            }
        })
        .collect()
}

/// A blk device's lines for the interval from `a` to `b`, `dt` seconds long.
pub fn blk_lines(a: &Stat, b: &Stat, dt: f64) -> Vec<String> {
    let sum = |s: &Stat, f: fn(&wring_blk::StreamStat) -> u64| -> u64 {
        s.stream_stats.iter().map(f).sum()
    };
    let bytes_in = sum(b, |t| t.bytes_in).saturating_sub(sum(a, |t| t.bytes_in));
    let bytes_out = sum(b, |t| t.bytes_out).saturating_sub(sum(a, |t| t.bytes_out));
    let decompressed = sum(b, |t| t.decompressed).saturating_sub(sum(a, |t| t.decompressed));
    let ratio = b.ratio().map_or("-".into(), |r| format!("{r:.2}"));
    let m = &b.mm_stat;
    let mut lines = vec![
        format!(
            "throughput: in {:.2} MB/s (compressed to {:.2} MB/s)  out {:.2} MB/s (decompressed)",
            mb(bytes_in as f64) / dt,
            mb(bytes_out as f64) / dt,
            mb((decompressed * b.slot_size as u64) as f64) / dt
        ),
        format!(
            "data: orig {:.1} MB  compr {:.1} MB  ratio {ratio}  mem used {:.1} MB  \
             same pages {}  huge pages {}",
            mb(m.orig_data_size as f64),
            mb(m.compr_data_size as f64),
            mb(m.mem_used_total as f64),
            m.same_pages,
            m.huge_pages
        ),
        format!(
            "requests/s: reads {:.1}  writes {:.1}  failed {:.1}  discarded pages {:.1}",
            rate(b.num_reads, a.num_reads, dt),
            rate(b.num_writes, a.num_writes, dt),
            rate(
                b.io_stat.failed_reads + b.io_stat.failed_writes,
                a.io_stat.failed_reads + a.io_stat.failed_writes,
                dt
            ),
            rate(b.io_stat.notify_free, a.io_stat.notify_free, dt)
        ),
    ];
    for t in &b.stream_stats {
        let before = a.stream_stats.iter().find(|p| p.priority == t.priority);
        let prev = |f: fn(&wring_blk::StreamStat) -> u64| before.map_or(0, f);
        lines.push(format!(
            "streams {} ({}): {} busy of {}  compressed {:.1} pages/s  decompressed {:.1} \
             pages/s  waits {:.1}/s",
            t.priority,
            t.algorithm,
            t.busy,
            t.streams,
            rate(t.compressed, prev(|p| p.compressed), dt),
            rate(t.decompressed, prev(|p| p.decompressed), dt),
            rate(t.waits, prev(|p| p.waits), dt)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = r#"{"written_bytes":1000000,"store":{"stored_bytes":100000},
        "delalloc":{"dirty_bytes":0},
        "fuse":[{"op":"write","requests":10,"seconds":0.5},{"op":"lookup","requests":2,"seconds":0.0}],
        "transactions":{"commits":4,"commit_seconds":0.04,"durable":0,"durable_seconds":0.0},
        "writeback_waits":{"count":0,"seconds":0.0},
        "offload_cpu":{"submitted":3,"in_flight":0,"service_p50_seconds":null},
        "codecs":[{"algorithm":"zstd","compress_in_bytes":0,"compress_seconds":0.0,
            "decompress_out_bytes":0,"decompress_seconds":0.0}]}"#;

    #[test]
    fn rates_come_from_the_difference_of_two_samples() {
        let a = MountSample::parse(STATUS.as_bytes()).unwrap();
        let mut b = a.clone();
        b.written_bytes += 4_000_000;
        b.stored_bytes = Some(1_100_000);
        b.ops[0].requests += 20;
        b.commits += 2;
        b.commit_seconds += 0.01;
        b.codecs[0].compress_in_bytes += 4_000_000;
        b.codecs[0].compress_seconds += 0.5;
        let l = mount_lines(&a, &b, 2.0);
        assert!(l[0].starts_with("throughput: in 2.00 MB/s  stored 0.50 MB/s  ratio 4.00"));
        assert!(l[1].contains("total 10.0  write 10.0"), "{}", l[1]);
        assert!(!l[1].contains("lookup"), "{}", l[1]);
        assert!(l[2].contains("commits: 1.0/s  latency 5.00 ms"), "{}", l[2]);
        assert!(l[3].contains("compression 25.0%"), "{}", l[3]);
        let codec = "codec zstd: compress 2.00 MB/s in (25.0%)  decompress 0.00 MB/s out (0.0%)";
        assert_eq!(l[4], codec);
    }

    #[test]
    fn a_status_without_a_field_is_an_error() {
        assert!(MountSample::parse(b"{\"fuse\":[]}").is_err());
        assert!(MountSample::parse(b"not json").is_err());
    }
}
