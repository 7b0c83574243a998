//! A run's rows with the machine and corpus they were measured on, rendered as a markdown
//! table (stdout), JSON (everything, nested) or CSV (one flat row per figure set).
//!
//! The CSV is "long": every row names its `table` (levels, streams, btrfs, zram) and its
//! `source` (wring, wring-bare, kernel), with empty cells where a column does not apply, so
//! that one file loads into any spreadsheet or data frame.

use std::fmt::Write as _;

use serde::Serialize;

use crate::corpus::CorpusInfo;
use crate::kernel::KernelRow;
use crate::levels::LevelRow;
use crate::machine::{LoadDuring, Machine};
use crate::metrics::Versus;
use crate::sizes::SizeRow;
use crate::streams::StreamsRow;
use crate::zram::{ZramFigures, ZramRow};
use crate::BenchError;

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `wring-bench VERSION`.
    pub tool: String,
    /// The subcommand (`levels`, `streams`, `kernel`).
    pub command: String,
    /// Seconds since the epoch when the run started.
    pub started_unix: u64,
    /// Where it ran.
    pub machine: Machine,
    /// Other work on the machine over the whole run, when watched.
    pub load_during: Option<LoadDuring>,
    /// On what.
    pub corpus: CorpusInfo,
    /// Largest extent in bytes.
    pub max_extent: usize,
    /// Engine streams (threads compressing and decompressing).
    pub streams: usize,
    /// seed 000/001's table on wring's engine.
    pub levels: Vec<LevelRow>,
    /// The engine's fixed cost per extent: time per extent at a few sizes, engine and bare.
    pub extent_sizes: Vec<SizeRow>,
    /// seed 002's experiment.
    pub streams_rows: Vec<StreamsRow>,
    /// The kernel's btrfs beside wring.
    pub btrfs: Vec<KernelRow>,
    /// The kernel's zram beside wring.
    pub zram: Vec<ZramRow>,
    /// zram's huge-page threshold used for wring's zram figures.
    pub zram_huge_class: Option<usize>,
    /// How each figure was obtained.
    pub notes: Vec<String>,
}

/// Header of the CSV rendering.
pub const CSV_HEADER: &str = "table,source,method,level,writers,streams,input_bytes,stored_bytes,stored_bytes_unrounded,ratio,ratio_unrounded,compress_mbps,decompress_mbps,memory_kb,compress_overhead,decompress_overhead,speedup,passes,compress_spread,decompress_spread";

impl Report {
    /// An empty report of `command` on `machine` and `corpus`.
    pub fn new(command: &str, machine: Machine, corpus: CorpusInfo, streams: usize) -> Report {
        Report {
            tool: format!("wring-bench {}", env!("CARGO_PKG_VERSION")),
            command: command.to_string(),
            started_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            machine,
            load_during: None,
            corpus,
            max_extent: wring_engine::MAX_EXTENT,
            streams,
            levels: Vec::new(),
            extent_sizes: Vec::new(),
            streams_rows: Vec::new(),
            btrfs: Vec::new(),
            zram: Vec::new(),
            zram_huge_class: None,
            notes: Vec::new(),
        }
    }

    /// Pretty-printed JSON of everything.
    pub fn json(&self) -> Result<String, BenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Markdown: a header naming machine and corpus, then one table per part measured.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## wring bench {}\n", self.command);
        let _ = writeln!(s, "- machine: {}", self.machine.summary());
        if let Some(l) = &self.load_during {
            let _ = writeln!(s, "- load during the run: {}", l.summary());
        }
        let _ = writeln!(s, "- corpus: {}", self.corpus.summary());
        let _ = writeln!(
            s,
            "- extents of at most {} KiB compressed independently on {} stream{}; ratio = input / stored, every extent rounded up to 4 KiB (incompressible ones counted raw); MB/s = 10^6 bytes of input per second of wall clock",
            self.max_extent / 1024,
            self.streams,
            if self.streams == 1 { "" } else { "s" }
        );
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        if !self.levels.is_empty() {
            s.push('\n');
            s.push_str(&levels_table(&self.levels));
        }
        if !self.extent_sizes.is_empty() {
            s.push('\n');
            s.push_str(&sizes_table(&self.extent_sizes));
        }
        if !self.streams_rows.is_empty() {
            s.push('\n');
            s.push_str(&streams_table(&self.streams_rows));
        }
        if !self.btrfs.is_empty() {
            s.push('\n');
            s.push_str(&btrfs_table(&self.btrfs));
        }
        if !self.zram.is_empty() {
            s.push('\n');
            s.push_str(&zram_table(&self.zram));
        }
        s
    }

    /// The long CSV: [`CSV_HEADER`], then one line per figure set.
    pub fn csv(&self) -> Result<String, BenchError> {
        let mut lines: Vec<Vec<String>> = Vec::new();
        for r in &self.levels {
            lines.extend(level_csv("levels", r));
        }
        for r in &self.streams_rows {
            let mut c = CsvRow::new("streams", "wring", &r.spec);
            c.writers = Some(r.writers);
            c.streams = Some(r.streams);
            c.input = Some(r.bytes);
            c.ratio = Some(r.ratio);
            c.compress = Some(r.mbps);
            c.speedup = Some(r.speedup);
            lines.push(c.line());
        }
        for r in &self.btrfs {
            lines.extend(level_csv("btrfs", &r.wring));
            if let Some(k) = &r.kernel {
                let mut c = CsvRow::new("btrfs", "kernel", &r.spec);
                c.level = Some(r.wring.level);
                c.input = Some(k.stored.input);
                c.stored = Some(k.stored.stored);
                c.unrounded = Some(k.stored.stored_unrounded);
                c.ratio = Some(k.ratio);
                c.ratio_unrounded = Some(k.ratio_unrounded);
                c.compress = Some(k.compress_mbps);
                c.decompress = Some(k.decompress_mbps);
                lines.push(c.line());
            }
        }
        for r in &self.zram {
            for (source, f) in [("kernel", &r.kernel), ("wring", &r.wring)] {
                if let Some(f) = f {
                    lines.push(zram_csv(&r.algorithm, source, f).line());
                }
            }
        }
        csv_text(CSV_HEADER, lines)
    }
}

/// `header` (comma-separated names) and `rows` as CSV through the `csv` crate: a cell holding a
/// comma, a quote or a line break is quoted (quotes doubled, RFC 4180), others are written as
/// they are; one `\n`-ended line per row.
pub fn csv_text(
    header: &str,
    rows: impl IntoIterator<Item = Vec<String>>,
) -> Result<String, BenchError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header.split(','))?;
    for row in rows {
        w.write_record(&row)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| BenchError::io("writing CSV", e.into_error()))?;
    String::from_utf8(bytes).map_err(|e| BenchError::io("writing CSV", std::io::Error::other(e)))
}

/// Cells of one CSV line; `None` is an empty cell.
#[derive(Default)]
struct CsvRow {
    table: String,
    source: String,
    method: String,
    level: Option<i32>,
    writers: Option<usize>,
    streams: Option<usize>,
    input: Option<u64>,
    stored: Option<u64>,
    unrounded: Option<u64>,
    ratio: Option<f64>,
    ratio_unrounded: Option<f64>,
    compress: Option<f64>,
    decompress: Option<f64>,
    memory_kb: Option<u64>,
    compress_overhead: Option<f64>,
    decompress_overhead: Option<f64>,
    speedup: Option<f64>,
    passes: Option<usize>,
    compress_spread: Option<f64>,
    decompress_spread: Option<f64>,
}

impl CsvRow {
    fn new(table: &str, source: &str, method: &str) -> CsvRow {
        CsvRow {
            table: table.into(),
            source: source.into(),
            method: method.into(),
            ..Default::default()
        }
    }

    fn line(&self) -> Vec<String> {
        fn o<T: ToString>(v: Option<T>) -> String {
            v.map(|v| v.to_string()).unwrap_or_default()
        }
        fn f(v: Option<f64>) -> String {
            v.filter(|x| x.is_finite())
                .map(|x| format!("{x:.4}"))
                .unwrap_or_default()
        }
        [
            self.table.clone(),
            self.source.clone(),
            self.method.clone(),
            o(self.level),
            o(self.writers),
            o(self.streams),
            o(self.input),
            o(self.stored),
            o(self.unrounded),
            f(self.ratio),
            f(self.ratio_unrounded),
            f(self.compress),
            f(self.decompress),
            o(self.memory_kb),
            f(self.compress_overhead),
            f(self.decompress_overhead),
            f(self.speedup),
            o(self.passes),
            f(self.compress_spread),
            f(self.decompress_spread),
        ]
        .into()
    }
}

fn level_csv(table: &str, r: &LevelRow) -> Vec<Vec<String>> {
    let mut c = CsvRow::new(table, "wring", &r.spec);
    c.level = Some(r.level);
    c.streams = Some(r.streams);
    c.input = Some(r.stored.input);
    c.stored = Some(r.stored.stored);
    c.unrounded = Some(r.stored.stored_unrounded);
    c.ratio = Some(r.ratio);
    c.ratio_unrounded = Some(r.ratio_unrounded);
    c.compress = Some(r.compress_mbps);
    c.decompress = Some(r.decompress_mbps);
    c.memory_kb = Some(r.workspace_kb);
    c.passes = Some(r.passes);
    c.compress_spread = Some(r.compress_spread);
    c.decompress_spread = Some(r.decompress_spread);
    let mut out = Vec::new();
    if let Some(b) = &r.bare {
        c.compress_overhead = Some(b.compress_overhead);
        c.decompress_overhead = Some(b.decompress_overhead);
        let mut bare = CsvRow::new(table, "wring-bare", &r.spec);
        bare.level = Some(r.level);
        bare.streams = Some(r.streams);
        bare.input = Some(r.stored.input);
        bare.compress = Some(b.compress_mbps);
        bare.decompress = Some(b.decompress_mbps);
        bare.passes = Some(r.passes);
        out.push(c.line());
        out.push(bare.line());
    } else {
        out.push(c.line());
    }
    out
}

fn zram_csv(algorithm: &str, source: &str, f: &ZramFigures) -> CsvRow {
    let mut c = CsvRow::new("zram", source, algorithm);
    c.streams = Some(f.threads);
    c.input = Some(f.orig_bytes);
    c.stored = Some(f.compr_bytes);
    c.unrounded = Some(f.compr_bytes);
    c.ratio = Some(f.ratio);
    c.ratio_unrounded = Some(f.ratio);
    c.compress = Some(f.write_mbps);
    c.decompress = Some(f.read_mbps);
    c
}

fn ratio3(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "∞".into()
    }
}

fn mbps(x: f64) -> String {
    format!("{x:.1}")
}

fn times(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.2}")).unwrap_or_else(|| "n/a".into())
}

/// `±2%` after a median of several passes; nothing after a single pass.
fn plus_minus(passes: usize, spread: f64) -> String {
    if passes > 1 {
        format!(" ±{:.0}%", spread * 100.0)
    } else {
        String::new()
    }
}

fn levels_table(rows: &[LevelRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| method | ratio | ratio (unrounded) | compress MB/s | decompress MB/s | memory KB | raw extents | bare compress MB/s | bare decompress MB/s | manager overhead (compress / decompress) |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let pm = |spread| plus_minus(r.passes, spread);
        let (bc, bd, ov) = match &r.bare {
            Some(b) => (
                mbps(b.compress_mbps),
                mbps(b.decompress_mbps),
                format!(
                    "{:.3}{} / {:.3}{}",
                    b.compress_overhead,
                    pm(b.compress_overhead_spread),
                    b.decompress_overhead,
                    pm(b.decompress_overhead_spread)
                ),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        let spec = match r.noisy {
            true => format!("{} (noisy)", r.spec),
            false => r.spec.clone(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |",
            spec,
            ratio3(r.ratio),
            ratio3(r.ratio_unrounded),
            mbps(r.compress_mbps) + &pm(r.compress_spread),
            mbps(r.decompress_mbps) + &pm(r.decompress_spread),
            r.workspace_kb,
            r.stored.incompressible,
            r.stored.extents,
            bc,
            bd,
            ov
        );
    }
    s
}

fn sizes_table(rows: &[SizeRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| method | extent | extents | compress µs: engine | bare | added | overhead | decompress µs: engine | bare | added | overhead |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let spec = match r.noisy {
            true => format!("{} (noisy)", r.spec),
            false => r.spec.clone(),
        };
        let _ = writeln!(
            s,
            "| {spec} | {} KiB | {} | {:.1} | {:.1} | {:+.1} | {:.3} | {:.1} | {:.1} | {:+.1} | {:.3} |",
            r.size / 1024,
            r.extents,
            r.compress_us,
            r.bare_compress_us,
            r.compress_fixed_us(),
            r.compress_overhead,
            r.decompress_us,
            r.bare_decompress_us,
            r.decompress_fixed_us(),
            r.decompress_overhead,
        );
    }
    s
}

fn streams_table(rows: &[StreamsRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| method | writers | stream limit | MB/s | speed-up over the first limit | waits for a stream |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2}× | {} |",
            r.spec,
            r.writers,
            r.streams,
            mbps(r.mbps),
            r.speedup,
            r.waits
        );
    }
    s
}

fn versus(v: &Option<Versus>) -> [String; 3] {
    match v {
        Some(v) => [times(v.ratio), times(v.compress), times(v.decompress)],
        None => ["n/a".into(), "n/a".into(), "n/a".into()],
    }
}

fn btrfs_table(rows: &[KernelRow]) -> String {
    let mut s = String::new();
    let read = rows
        .iter()
        .find_map(|r| r.kernel.as_ref())
        .map(|k| k.read_method.describe())
        .unwrap_or("");
    let copies = rows
        .iter()
        .find_map(|r| r.kernel.as_ref())
        .map(|k| k.copies)
        .unwrap_or(0);
    let _ = writeln!(s, "btrfs: kernel = compress-force=METHOD on a loop-mounted image, {copies} cop{} written and synced (timed together), ratio from encoded reads of every extent (they return compressed extents padded to whole sectors, so the 4 KiB-rounded ratio is the one to compare), read back after a remount by {read}.\n", if copies == 1 { "y" } else { "ies" });
    let _ = writeln!(s, "| method | wring ratio | kernel ratio | wring/kernel | wring compress MB/s | kernel write+sync MB/s | wring/kernel | wring decompress MB/s | kernel read MB/s | wring/kernel |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let v = versus(&r.wring_over_kernel);
        let (kr, kc, kd) = match &r.kernel {
            Some(k) => (
                ratio3(k.ratio),
                mbps(k.compress_mbps),
                mbps(k.decompress_mbps),
            ),
            None => {
                let why = r.kernel_note.clone().unwrap_or_default();
                (format!("n/a ({why})"), "n/a".into(), "n/a".into())
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.spec,
            ratio3(r.wring.ratio),
            kr,
            v[0],
            mbps(r.wring.compress_mbps),
            kc,
            v[1],
            mbps(r.wring.decompress_mbps),
            kd,
            v[2]
        );
    }
    s
}

fn zram_table(rows: &[ZramRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "zram: kernel = /dev/zram0 written and read back with O_DIRECT, ratio from mm_stat (orig_data_size / compr_data_size); wring = the same 4 KiB pages by zram's rules (same-filled pages free, pages at or above the huge class stored whole).\n");
    let _ = writeln!(s, "| zram algorithm | wring codec | kernel ratio | wring ratio | wring/kernel | kernel write MB/s | wring compress MB/s | wring/kernel | kernel read MB/s | wring decompress MB/s | wring/kernel | huge pages kernel / wring | same pages kernel / wring |");
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let v = versus(&r.wring_over_kernel);
        let k = |f: fn(&ZramFigures) -> String| {
            r.kernel
                .as_ref()
                .map(f)
                .unwrap_or_else(|| format!("n/a {}", r.kernel_note.clone().unwrap_or_default()))
        };
        let w =
            |f: fn(&ZramFigures) -> String| r.wring.as_ref().map(f).unwrap_or_else(|| "n/a".into());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} |",
            r.algorithm,
            r.wring_codec.clone().unwrap_or_else(|| "none".into()),
            k(|f| ratio3(f.ratio)),
            w(|f| ratio3(f.ratio)),
            v[0],
            k(|f| mbps(f.write_mbps)),
            w(|f| mbps(f.write_mbps)),
            v[1],
            k(|f| mbps(f.read_mbps)),
            w(|f| mbps(f.read_mbps)),
            v[2],
            k(|f| f.huge_pages.to_string()),
            w(|f| f.huge_pages.to_string()),
            k(|f| f.same_pages.to_string()),
            w(|f| f.same_pages.to_string()),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_with_commas_quotes_and_line_breaks_are_quoted() {
        let rows = vec![
            vec!["lz4".to_string(), "1.5".to_string(), String::new()],
            vec![
                "sim 5 µs, failing".to_string(),
                "say \"hi\"".to_string(),
                "two\nlines".to_string(),
            ],
        ];
        let text = csv_text("name,ratio,note", rows.clone()).unwrap();
        assert_eq!(
            text,
            "name,ratio,note\nlz4,1.5,\n\"sim 5 µs, failing\",\"say \"\"hi\"\"\",\"two\nlines\"\n"
        );
        // A CSV reader gets every cell back as it was.
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let back: Vec<Vec<String>> = r
            .records()
            .map(|rec| rec.unwrap().iter().map(String::from).collect())
            .collect();
        assert_eq!(back, rows);
    }
}
