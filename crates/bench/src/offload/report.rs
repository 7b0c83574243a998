//! The offload benchmark's report: markdown table, CSV and the text forms of sizes, durations
//! and percentiles.

use super::*;

/// The `p`th percentile (nearest rank) of sorted durations, in µs; 0 without any.
pub fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    let d = sorted[rank.min(sorted.len()) - 1];
    d.as_secs_f64() * 1e6
}

/// `4 KiB`, `1 MiB`, or bytes.
pub fn size_text(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// `5 µs`, `2 ms`, `300 ns`.
pub fn duration_text(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns >= 1_000_000 && ns.is_multiple_of(1_000_000) {
        format!("{} ms", ns / 1_000_000)
    } else if ns >= 1_000 && ns.is_multiple_of(1_000) {
        format!("{} µs", ns / 1_000)
    } else {
        format!("{ns} ns")
    }
}

/// A latency such as `5us`, `50µs`, `2ms`, `300ns` or `1s`.
pub fn parse_latency(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a latency (e.g. 5us, 50us, 2ms)"))?;
    let ns_per = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(format!(
                "'{text}': give the latency's unit (ns, us, ms or s), e.g. 50us"
            ))
        }
    };
    Ok(Duration::from_nanos((value * ns_per).round() as u64))
}

impl OffloadReport {
    /// A report of `rows` measured with `cfg`.
    pub fn new(
        machine: Machine,
        corpus: CorpusInfo,
        cfg: &OffloadBenchConfig,
        rows: Vec<OffloadRow>,
    ) -> OffloadReport {
        let max_extent = max_extent(&cfg.sizes).unwrap_or(MAX_EXTENT);
        OffloadReport {
            tool: format!("wring-bench {}", env!("CARGO_PKG_VERSION")),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            machine,
            corpus,
            spec: cfg.spec.to_string(),
            streams: cfg.streams,
            window: cfg.window,
            batch: cfg.batch,
            device_queue: cfg.device_queue,
            timeout_ms: cfg.timeout.as_millis() as u64,
            max_extent,
            rows,
            notes: Vec::new(),
        }
    }

    /// Pretty-printed JSON of everything.
    pub fn json(&self) -> Result<String, BenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Markdown: a header naming machine, corpus and what "sim" is, then the table.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## wring bench offload\n");
        let _ = writeln!(s, "- machine: {}", self.machine.summary());
        let _ = writeln!(s, "- corpus: {}", self.corpus.summary());
        let _ = writeln!(s, "- **sim = a SIMULATED device (`offload::sim::SimDevice`), a test double, not an accelerator**: it runs the CPU's codecs on its own {} thread{} on this machine's cores and sleeps to its latency per submission (the row's µs) plus per byte. Its rows measure the submission path, the threshold and the fallback, not any device's speed; its outputs are the CPU's. On a shared machine its threads and the CPU workers compete for the same cores (and more threads get a larger share of a loaded machine), so a sim row faster than the cpu row says nothing about a device.", self.device_queue.div_ceil(self.batch.max(1)), if self.device_queue.div_ceil(self.batch.max(1)) == 1 { "" } else { "s" });
        let _ = writeln!(
            s,
            "- {} through `wring_engine::offload` (CompressInto, output as long as the input; a request that does not fit is stored raw): the corpus concatenated and cut into requests of the row's size (the last one shorter), at most {} in flight through a completion queue, {} CPU worker{}; device batches of {}, device queue {}, time-out {} ms; engine max_extent {}",
            self.spec,
            self.window,
            self.streams,
            if self.streams == 1 { "" } else { "s" },
            self.batch,
            self.device_queue,
            self.timeout_ms,
            size_text(self.max_extent)
        );
        let _ = writeln!(s, "- MB/s = 10^6 input bytes per second of wall clock from the first submission to the last completion; latency = each request's submit-to-completion time, exact percentiles (it includes the wait behind the other requests of the window); × cpu = over the cpu row of the same size; device share and fallbacks are from each completion (compression / decompression); mismatches = compressed requests that did not decompress, through the same providers, to their input byte for byte");
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
        s.push_str(&table(&self.rows));
        s
    }

    /// One CSV line per row, with [`CSV_HEADER`] (through [`csv_text`]: a provider label with
    /// commas is quoted).
    pub fn csv(&self) -> Result<String, BenchError> {
        let mut lines = Vec::with_capacity(self.rows.len());
        for r in &self.rows {
            let f = |x: f64| {
                if x.is_finite() {
                    format!("{x:.4}")
                } else {
                    String::new()
                }
            };
            let o = |x: Option<f64>| x.map(f).unwrap_or_default();
            let c = &r.compress;
            let d = &r.decompress;
            let cells = [
                r.size.to_string(),
                r.provider.clone(),
                r.simulated.to_string(),
                r.requests.to_string(),
                r.bytes.to_string(),
                f(c.mbps),
                f(c.requests_per_s),
                f(c.p50_us),
                f(c.p99_us),
                c.device.to_string(),
                c.cpu.to_string(),
                c.fallbacks.unsupported.to_string(),
                c.fallbacks.below_threshold.to_string(),
                c.fallbacks.busy.to_string(),
                c.fallbacks.failed.to_string(),
                c.fallbacks.timed_out.to_string(),
                f(d.mbps),
                f(d.p50_us),
                f(d.p99_us),
                d.device.to_string(),
                d.cpu.to_string(),
                d.fallbacks.total().to_string(),
                r.raw.to_string(),
                r.stored_bytes.to_string(),
                f(r.ratio),
                r.mismatches.to_string(),
                o(r.mbps_vs_cpu),
                o(r.p50_vs_cpu),
            ];
            lines.push(cells.into());
        }
        csv_text(CSV_HEADER, lines)
    }
}

/// Header of the CSV rendering.
pub const CSV_HEADER: &str = "size,provider,simulated,requests,input_bytes,compress_mbps,compress_requests_per_s,compress_p50_us,compress_p99_us,compress_device,compress_cpu,fallback_unsupported,fallback_below_threshold,fallback_busy,fallback_failed,fallback_timed_out,decompress_mbps,decompress_p50_us,decompress_p99_us,decompress_device,decompress_cpu,decompress_fallbacks,raw_requests,stored_bytes,ratio,mismatches,mbps_vs_cpu,p50_vs_cpu";

fn times(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.2}×"))
        .unwrap_or_else(|| "n/a".into())
}

fn micros(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn table(rows: &[OffloadRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| size | provider (sim = simulated) | requests | compress MB/s | × cpu | requests/s | p50 µs | p99 µs | p50 × cpu | device share (c / d) | fallbacks (compression) | fallbacks (decompression) | decompress MB/s | ratio | mismatches |");
    let _ = writeln!(
        s,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"
    );
    for r in rows {
        let c = &r.compress;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {} | {:.0} | {} | {} | {} | {:.0}% / {:.0}% | {} | {} | {:.1} | {:.3} | {} |",
            size_text(r.size),
            r.provider,
            r.requests,
            c.mbps,
            times(r.mbps_vs_cpu),
            c.requests_per_s,
            micros(c.p50_us),
            micros(c.p99_us),
            times(r.p50_vs_cpu),
            100.0 * c.device_share(),
            100.0 * r.decompress.device_share(),
            c.fallbacks.describe(),
            r.decompress.fallbacks.describe(),
            r.decompress.mbps,
            r.ratio,
            r.mismatches
        );
    }
    s
}
