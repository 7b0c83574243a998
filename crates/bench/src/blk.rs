//! `wring bench blk`: the block-device table — wring's zram in userspace (crates/blk,
//! served by nbdkit with crates/blk-nbdkit) beside nbdkit's own compressed RAM disk
//! (`nbdkit memory allocator=zstd`: 32 KiB pages, zstd's default level 3, one global lock) and
//! the kernel's zram (drivers/block/zram/, /dev/zram0).
//!
//! The input (the corpus concatenated, zero-padded to whole 4 KiB pages) is written to a file
//! under the work directory (tmpfs by default). For each NBD target a fresh nbdkit serves an
//! export exactly that large on a Unix socket; `nbdcopy FILE URI` writes it and
//! `nbdcopy URI FILE` reads it back, each timed by the wall clock, and the copy read back
//! must equal the input byte for byte. zram is configured with the algorithm and the size,
//! written and read back with O_DIRECT on `streams` threads ([`crate::zram::ZramDevice`],
//! which resets the device when dropped, also on error or Ctrl-C).
//!
//! Memory: wring's and zram's `mem_used_total` come from their `mm_stat`; nbdkit's memory
//! plugin has no statistics, so its figure is the growth of its resident set (VmRSS) over the
//! write, and its ratio is the input over that growth (its stored pages plus malloc's
//! overhead, which is what it costs). wring's resident growth is reported too.

pub mod pages;
pub use pages::PageOverhead;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::serve::Nbdkit;

use serde::Serialize;

use crate::corpus::{Corpus, CorpusInfo};
use crate::machine::Machine;
use crate::metrics::{mb_per_s, quotient, ratio};
use crate::progress::Progress;
use crate::report::csv_text;
use crate::zram::{AlignedBuf, ZramDevice, PAGE};
use crate::{interrupt, BenchError};

/// wring's devices by default: `ALG[@SLOT][+dict]`, an algorithm by zram's name, a slot size
/// beyond zram's 4 KiB (`zstd:3@16K`: `slot_size=16K`), and `+dict` for a dictionary trained
/// from the same input on a first device (`train_dict save=FILE`), then given to a fresh one
/// (`algorithm_params dict=FILE`).
pub const DEFAULT_WRING: &str =
    "lz4,lzo-rle,zstd:1,zstd:3,zstd:3+dict,zstd:3@16K,zstd:3@16K+dict,zstd:3@32K,deflate";
/// zram's algorithms by default.
pub const DEFAULT_ZRAM: &str = "lz4,lzo-rle";
/// The shared corpus's files the mixed input is made of (~120 MB).
pub const DEFAULT_FILES: [&str; 3] = ["executables.tar", "dictionary.txt", "packages.txt"];

/// What to run.
#[derive(Debug, Clone)]
pub struct BlkConfig {
    /// wring's nbdkit plugin (`libwring_blk_nbdkit.so`).
    pub plugin: PathBuf,
    /// wring's `comp_algorithm` values, one row each.
    pub wring: Vec<String>,
    /// Whether to run `nbdkit memory allocator=zstd`.
    pub nbdkit_zstd: bool,
    /// Whether to run `nbdkit memory` (the sparse allocator, no compression): what nbdcopy
    /// and the socket alone cost on this machine.
    pub nbdkit_sparse: bool,
    /// zram algorithms, one row each (none: no zram rows).
    pub zram: Vec<String>,
    /// wring's streams, and zram's writer and reader threads.
    pub streams: usize,
    /// The zram device and its sysfs directory.
    pub zram_device: PathBuf,
    /// `/sys/block/zramN`.
    pub zram_sysfs: PathBuf,
    /// Reset the zram device even if someone else initialised it.
    pub zram_force: bool,
    /// Where the input and read-back files and the sockets go (a directory made here).
    pub work_dir: PathBuf,
    /// Write and read each device this many times (over the same pages) and keep the fastest
    /// of each; memory and ratio are from the first write.
    pub repeat: usize,
    /// The multi-client scaling pair: wring with the first algorithm, one nbdcopy connection
    /// on one stream, then two connections on two streams.
    pub scaling: bool,
}

impl BlkConfig {
    /// The defaults with `plugin` and `streams`.
    pub fn new(plugin: PathBuf, streams: usize) -> BlkConfig {
        BlkConfig {
            plugin,
            wring: split(DEFAULT_WRING),
            nbdkit_zstd: true,
            nbdkit_sparse: true,
            zram: split(DEFAULT_ZRAM),
            streams: streams.max(1),
            zram_device: PathBuf::from("/dev/zram0"),
            zram_sysfs: PathBuf::from("/sys/block/zram0"),
            zram_force: false,
            work_dir: std::env::temp_dir(),
            repeat: 1,
            scaling: true,
        }
    }
}

fn split(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Which device a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// wring's plugin in nbdkit.
    Wring,
    /// `nbdkit memory allocator=zstd`.
    NbdkitZstd,
    /// `nbdkit memory` with its sparse allocator: no compression, the transport alone.
    NbdkitSparse,
    /// The kernel's zram.
    Zram,
    /// wring driven by N nbdcopy connections (multi-conn) on N streams: the scaling pair.
    WringClients,
}

impl Target {
    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Target::Wring => "wring",
            Target::NbdkitZstd => "nbdkit memory",
            Target::NbdkitSparse => "nbdkit memory (no compression)",
            Target::Zram => "kernel zram",
            Target::WringClients => "wring (clients × streams)",
        }
    }
}

/// One row's figures over another's (1.0 = the same; above 1 = more).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Over {
    /// Which row it is compared with (its method).
    pub method: &'static str,
    /// Write MB/s over the other's.
    pub write: Option<f64>,
    /// Read MB/s over the other's.
    pub read: Option<f64>,
    /// Ratio over the other's.
    pub ratio: Option<f64>,
    /// mem_used_total over the other's (below 1 = less memory).
    pub mem: Option<f64>,
}

/// One device's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlkRow {
    /// Which device.
    pub target: Target,
    /// Its algorithm (`zstd:3`, `lz4`, `zstd` for nbdkit).
    pub method: String,
    /// Bytes written and read back.
    pub bytes: u64,
    /// Write MB/s (10^6 bytes per second, wall clock).
    pub write_mbps: f64,
    /// Read MB/s.
    pub read_mbps: f64,
    /// `compr_data_size` (none for nbdkit).
    pub compr_data_size: Option<u64>,
    /// `mem_used_total` (nbdkit: its resident growth over the write).
    pub mem_used_total: u64,
    /// Input bytes over `mem_used_total`.
    pub ratio: f64,
    /// The server's resident growth over the write (NBD targets).
    pub rss_growth: Option<u64>,
    /// Against the kernel's zram (the same algorithm when it has it, else its first row).
    pub vs_zram: Option<Over>,
    /// Against nbdkit's zstd allocator.
    pub vs_nbdkit: Option<Over>,
    /// Write and read MB/s over the transport's ceiling (the nbdkit memory row without
    /// compression), NBD rows only.
    pub of_ceiling: Option<(f64, f64)>,
    /// CPU seconds per GB of input, server (nbdkit and wring's plugin) then client (nbdcopy),
    /// on write and on read (NBD rows: the first write and read of the run).
    pub cpu: Option<CpuPerGb>,
}

/// CPU seconds per GB (10^9 bytes) of input, by phase and process. The server's are counted in
/// the kernel's clock ticks (10 ms), nbdcopy's in microseconds (getrusage of waited children).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuPerGb {
    /// The server during the write.
    pub server_write: f64,
    /// The server during the read.
    pub server_read: f64,
    /// nbdcopy during the write.
    pub client_write: f64,
    /// nbdcopy during the read.
    pub client_read: f64,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BlkReport {
    /// `wring-bench VERSION`.
    pub tool: String,
    /// Where it ran.
    pub machine: Machine,
    /// On what.
    pub corpus: CorpusInfo,
    /// wring's streams, zram's threads.
    pub streams: usize,
    /// The rows, wring's first.
    pub rows: Vec<BlkRow>,
    /// The page path against the bare library, per algorithm (one thread, no NBD).
    pub pages: Vec<PageOverhead>,
    /// How each figure was obtained.
    pub notes: Vec<String>,
}

/// Header of the CSV rendering.
pub const CSV_HEADER: &str = "target,method,bytes,write_mbps,read_mbps,compr_data_size,mem_used_total,ratio,rss_growth,zram_method,write_vs_zram,read_vs_zram,ratio_vs_zram,mem_vs_zram,write_vs_nbdkit,read_vs_nbdkit,ratio_vs_nbdkit,mem_vs_nbdkit,write_of_ceiling,read_of_ceiling,server_cpu_s_per_gb_write,server_cpu_s_per_gb_read,client_cpu_s_per_gb_write,client_cpu_s_per_gb_read";

/// Run every configured target on `corpus`'s pages.
pub fn run(
    corpus: &Corpus,
    cfg: &BlkConfig,
    progress: &Progress,
) -> Result<Vec<BlkRow>, BenchError> {
    let data = corpus.concatenated(PAGE);
    let work = WorkDir::make(&cfg.work_dir)?;
    let input = work.path.join("input.raw");
    fs::write(&input, &data)
        .map_err(|e| BenchError::io(format!("writing {}", input.display()), e))?;
    let bytes = data.len() as u64;
    let mut rows = Vec::new();
    for method in &cfg.wring {
        interrupt::check()?;
        progress.step(format!("blk: wring {method}"));
        let m = Method::parse(method)?;
        let mut args = m.args(cfg, bytes, cfg.streams);
        if m.dict {
            let dict = train_dict(&work.path, cfg, &m, &input, bytes)?;
            args.push(format!("algorithm_params=dict={}", dict.display()));
        }
        let server = start_nbdkit(&work.path, args)?;
        rows.push(nbd_row(
            &server,
            cfg,
            &work.path,
            &input,
            &data,
            Target::Wring,
            method,
            None,
        )?);
    }
    if let Some(method) = cfg.wring.first().filter(|_| cfg.scaling) {
        let m = Method {
            dict: false,
            ..Method::parse(method)?
        };
        for n in [1, 2] {
            interrupt::check()?;
            progress.step(format!("blk: wring {method}, {n} clients on {n} streams"));
            let server = start_nbdkit(&work.path, m.args(cfg, bytes, n))?;
            rows.push(nbd_row(
                &server,
                cfg,
                &work.path,
                &input,
                &data,
                Target::WringClients,
                &format!("{} {n}×{n}", m.text()),
                Some(n),
            )?);
        }
    }
    if cfg.nbdkit_zstd {
        interrupt::check()?;
        progress.step("blk: nbdkit memory allocator=zstd");
        let args = vec![
            "memory".to_string(),
            format!("size={bytes}"),
            "allocator=zstd".to_string(),
        ];
        let server = start_nbdkit(&work.path, args)?;
        rows.push(nbd_row(
            &server,
            cfg,
            &work.path,
            &input,
            &data,
            Target::NbdkitZstd,
            "zstd",
            None,
        )?);
    }
    if cfg.nbdkit_sparse {
        interrupt::check()?;
        progress.step("blk: nbdkit memory (sparse)");
        let args = vec!["memory".to_string(), format!("size={bytes}")];
        let server = start_nbdkit(&work.path, args)?;
        rows.push(nbd_row(
            &server,
            cfg,
            &work.path,
            &input,
            &data,
            Target::NbdkitSparse,
            "none",
            None,
        )?);
    }
    drop(fs::remove_file(&input));
    if !cfg.zram.is_empty() {
        rows.extend(zram_rows(cfg, &data, progress)?);
    }
    compare(&mut rows);
    Ok(rows)
}

/// The page path against the bare library ([`pages`]) for each of wring's devices with zram's
/// 4 KiB slots and no dictionary, `passes` passes each.
pub fn page_overheads(
    corpus: &Corpus,
    cfg: &BlkConfig,
    passes: usize,
    progress: &Progress,
) -> Result<Vec<PageOverhead>, BenchError> {
    let data = corpus.concatenated(PAGE);
    let mut out = Vec::new();
    for method in &cfg.wring {
        let m = Method::parse(method)?;
        if m.slot.is_some() || m.dict {
            continue;
        }
        progress.step(format!("blk: {method} pages, engine and bare library"));
        out.push(pages::measure(&m.algorithm, &data, passes)?);
    }
    Ok(out)
}

/// One of wring's devices: `ALG[@SLOT][+dict]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Method {
    /// `comp_algorithm` (zram's name and level).
    algorithm: String,
    /// `slot_size`, as given (`16K`), when not zram's 4 KiB.
    slot: Option<String>,
    /// Whether a dictionary trained on the input is given to the device.
    dict: bool,
}

impl Method {
    fn parse(text: &str) -> Result<Method, BenchError> {
        let (rest, dict) = match text.strip_suffix("+dict") {
            Some(r) => (r, true),
            None => (text, false),
        };
        let (algorithm, slot) = match rest.split_once('@') {
            Some((a, s)) => (a, Some(s.to_string())),
            None => (rest, None),
        };
        let bad = |why: String| {
            failed(format!(
                "--wring {text}: {why}; write ALG[@SLOT][+dict], e.g. zstd:3@16K"
            ))
        };
        wring_blk::CompAlgorithm::parse(algorithm).map_err(|e| bad(e.to_string()))?;
        if let Some(s) = &slot {
            wring_blk::parse_slot_size(s).map_err(|e| bad(e.to_string()))?;
        }
        if dict && !algorithm.starts_with("zstd") {
            return Err(bad("a dictionary needs zstd".into()));
        }
        Ok(Method {
            algorithm: algorithm.to_string(),
            slot,
            dict,
        })
    }

    /// The text it was parsed from (without `+dict` when that is off).
    fn text(&self) -> String {
        let mut t = self.algorithm.clone();
        if let Some(s) = &self.slot {
            t = format!("{t}@{s}");
        }
        if self.dict {
            t.push_str("+dict");
        }
        t
    }

    /// nbdkit's arguments for this device (no dictionary) on `streams` streams.
    fn args(&self, cfg: &BlkConfig, bytes: u64, streams: usize) -> Vec<String> {
        let mut v = vec![
            cfg.plugin.display().to_string(),
            format!("size={bytes}"),
            format!("comp_algorithm={}", self.algorithm),
            format!("streams={streams}"),
        ];
        if let Some(s) = &self.slot {
            v.push(format!("slot_size={s}"));
        }
        v
    }
}

/// Write the input to a device with `method` (a zstd level), train a dictionary from its
/// pages and save it; the file's path.
fn train_dict(
    dir: &Path,
    cfg: &BlkConfig,
    method: &Method,
    input: &Path,
    bytes: u64,
) -> Result<PathBuf, BenchError> {
    let level = method
        .algorithm
        .strip_prefix("zstd")
        .map(|l| l.trim_start_matches(':'))
        .map(|l| if l.is_empty() { "3" } else { l })
        .ok_or_else(|| failed(format!("{}: a dictionary needs zstd", method.text())))?;
    let server = start_nbdkit(dir, method.args(cfg, bytes, cfg.streams))?;
    nbdcopy(input.as_os_str(), server.uri().as_ref(), None)?;
    let path = dir.join("train.dict");
    let req =
        wring_blk::TrainRequest::parse(&format!("size=64K level={level} save={}", path.display()))
            .map_err(|e| failed(format!("train_dict: {e}")))?;
    wring_blk::control::train_dict(&server.control(), req)
        .map_err(|e| failed(format!("training a dictionary on wring's device: {e}")))?;
    Ok(path)
}

/// Write and read back through nbdcopy (on `clients` connections and threads, or nbdcopy's
/// defaults); the row's figures.
#[allow(clippy::too_many_arguments)]
fn nbd_row(
    server: &Nbdkit,
    cfg: &BlkConfig,
    dir: &Path,
    input: &Path,
    data: &[u8],
    target: Target,
    method: &str,
    clients: Option<usize>,
) -> Result<BlkRow, BenchError> {
    let uri = server.uri();
    let before = server.rss().map_err(|e| failed(e.to_string()))?;
    let cpu = || -> Result<(f64, f64), BenchError> {
        let s = server.cpu_secs().map_err(|e| failed(e.to_string()))?;
        Ok((s, crate::serve::children_cpu_secs()))
    };
    let c0 = cpu()?;
    let mut write = nbdcopy(input.as_os_str(), uri.as_ref(), clients)?;
    let c1 = cpu()?;
    let after = server.rss().map_err(|e| failed(e.to_string()))?;
    let stat = match target {
        Target::Wring | Target::WringClients => Some(
            wring_blk::control::stat(&server.control())
                .map_err(|e| failed(format!("asking wring's device for its stat: {e}")))?,
        ),
        _ => None,
    };
    interrupt::check()?;
    let output = dir.join("output.raw");
    let mut read = f64::INFINITY;
    let mut read_cpu = None;
    for i in 0..cfg.repeat.max(1) {
        if i > 0 {
            interrupt::check()?;
            write = write.min(nbdcopy(input.as_os_str(), uri.as_ref(), clients)?);
        }
        let r0 = cpu()?;
        read = read.min(nbdcopy(uri.as_ref(), output.as_os_str(), clients)?);
        let r1 = cpu()?;
        read_cpu.get_or_insert((r1.0 - r0.0, r1.1 - r0.1));
        let same = same_content(&output, data);
        drop(fs::remove_file(&output));
        if !same? {
            return Err(failed(format!(
                "{} {method}: the data read back differs from what was written",
                target.label()
            )));
        }
    }
    let bytes = data.len() as u64;
    let gb = bytes as f64 / 1e9;
    let (read_server, read_client) = read_cpu.unwrap_or_default();
    let cpu = CpuPerGb {
        server_write: (c1.0 - c0.0) / gb,
        server_read: read_server / gb,
        client_write: (c1.1 - c0.1) / gb,
        client_read: read_client / gb,
    };
    let growth = after.saturating_sub(before);
    let (compr, mem) = match &stat {
        Some(s) => (Some(s.mm_stat.compr_data_size), s.mm_stat.mem_used_total),
        None => (None, growth),
    };
    Ok(BlkRow {
        target,
        method: method.to_string(),
        bytes,
        write_mbps: mb_per_s(bytes, write),
        read_mbps: mb_per_s(bytes, read),
        compr_data_size: compr,
        mem_used_total: mem,
        ratio: ratio(bytes, mem),
        rss_growth: Some(growth),
        vs_zram: None,
        vs_nbdkit: None,
        of_ceiling: None,
        cpu: Some(cpu),
    })
}

/// zram's rows: configure, write and read back with O_DIRECT, mm_stat; reset when done.
fn zram_rows(cfg: &BlkConfig, data: &[u8], progress: &Progress) -> Result<Vec<BlkRow>, BenchError> {
    let device = ZramDevice::take(&cfg.zram_device, &cfg.zram_sysfs, cfg.zram_force)?;
    let offered = device.algorithms();
    let aligned = AlignedBuf::from_slice(data);
    let bytes = data.len() as u64;
    let mut rows = Vec::new();
    for alg in &cfg.zram {
        interrupt::check()?;
        if !offered.iter().any(|a| a == alg) {
            return Err(BenchError::Zram(format!(
                "{} offers {} but not {alg}; choose from those with --zram-algorithms",
                cfg.zram_device.display(),
                offered.join(" ")
            )));
        }
        progress.step(format!("blk: kernel zram {alg}"));
        device.configure(alg, bytes)?;
        let (mut write, mut read) = device.write_read(&aligned, cfg.streams)?;
        let mm = device.mm_stat()?;
        for _ in 1..cfg.repeat.max(1) {
            interrupt::check()?;
            device.configure(alg, bytes)?;
            let (w, r) = device.write_read(&aligned, cfg.streams)?;
            (write, read) = (write.min(w), read.min(r));
        }
        rows.push(BlkRow {
            target: Target::Zram,
            method: alg.clone(),
            bytes,
            write_mbps: mb_per_s(bytes, write),
            read_mbps: mb_per_s(bytes, read),
            compr_data_size: Some(mm.compr),
            mem_used_total: mm.mem_used,
            ratio: ratio(bytes, mm.mem_used),
            rss_growth: None,
            vs_zram: None,
            vs_nbdkit: None,
            of_ceiling: None,
            cpu: None,
        });
        device.reset()?;
    }
    Ok(rows)
}

/// The zram algorithm a wring algorithm is compared with.
fn zram_counterpart(method: &str) -> &'static [&'static str] {
    match method.split([':', '@', '+']).next().unwrap_or(method) {
        "lz4" => &["lz4"],
        "lzo" | "lzo-rle" => &["lzo-rle", "lzo"],
        "lz4hc" => &["lz4hc"],
        "zstd" => &["zstd"],
        _ => &[],
    }
}

/// Fill in each wring row's comparisons (and nbdkit's against zram).
fn compare(rows: &mut [BlkRow]) {
    let zram: Vec<BlkRow> = rows
        .iter()
        .filter(|r| r.target == Target::Zram)
        .cloned()
        .collect();
    let nbdkit = rows
        .iter()
        .find(|r| r.target == Target::NbdkitZstd)
        .cloned();
    let ceiling = rows
        .iter()
        .find(|r| r.target == Target::NbdkitSparse)
        .map(|r| (r.write_mbps, r.read_mbps));
    if let Some((w, r)) = ceiling {
        for row in rows.iter_mut().filter(|r| r.target != Target::Zram) {
            if let (Some(fw), Some(fr)) = (quotient(row.write_mbps, w), quotient(row.read_mbps, r))
            {
                row.of_ceiling = Some((fw, fr));
            }
        }
    }
    let compressing = |r: &&mut BlkRow| {
        !matches!(
            r.target,
            Target::Zram | Target::NbdkitSparse | Target::WringClients
        )
    };
    for row in rows.iter_mut().filter(compressing) {
        let base = zram_counterpart(&row.method)
            .iter()
            .find_map(|m| zram.iter().find(|z| z.method == *m))
            .or_else(|| zram.first());
        row.vs_zram = base.map(|b| over(row, b));
        if row.target == Target::Wring {
            row.vs_nbdkit = nbdkit.as_ref().map(|b| over(row, b));
        }
    }
}

fn over(row: &BlkRow, base: &BlkRow) -> Over {
    let method: &'static str = match base.target {
        Target::NbdkitZstd => "nbdkit zstd",
        Target::NbdkitSparse => "nbdkit sparse",
        Target::Zram => match base.method.as_str() {
            "lz4" => "zram lz4",
            "lzo-rle" => "zram lzo-rle",
            "lzo" => "zram lzo",
            _ => "zram",
        },
        Target::Wring | Target::WringClients => "wring",
    };
    Over {
        method,
        write: quotient(row.write_mbps, base.write_mbps),
        read: quotient(row.read_mbps, base.read_mbps),
        ratio: quotient(row.ratio, base.ratio),
        mem: quotient(row.mem_used_total as f64, base.mem_used_total as f64),
    }
}

fn failed(message: String) -> BenchError {
    BenchError::io("bench blk", std::io::Error::other(message))
}

/// Run nbdcopy from `src` to `dst` (with `clients` connections and as many threads, or
/// nbdcopy's defaults); its wall-clock seconds.
fn nbdcopy(
    src: &std::ffi::OsStr,
    dst: &std::ffi::OsStr,
    clients: Option<usize>,
) -> Result<f64, BenchError> {
    let extra: Vec<String> = match clients {
        Some(n) => vec![format!("--connections={n}"), format!("--threads={n}")],
        None => Vec::new(),
    };
    crate::serve::nbdcopy(&src.to_string_lossy(), &dst.to_string_lossy(), &extra)
        .map(|d| d.as_secs_f64())
        .map_err(|e| failed(e.to_string()))
}

/// Whether the file holds exactly `data`, then nothing but zeros (a device with slots larger
/// than 4 KiB rounds its size up to whole slots).
fn same_content(path: &Path, data: &[u8]) -> Result<bool, BenchError> {
    let mut file =
        File::open(path).map_err(|e| BenchError::io(format!("opening {}", path.display()), e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0usize;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| BenchError::io(format!("reading {}", path.display()), e))?;
        if n == 0 {
            return Ok(at >= data.len());
        }
        let want = data.get(at..).unwrap_or_default();
        let (head, tail) = buf[..n].split_at(n.min(want.len()));
        if head != &want[..head.len()] || tail.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n;
    }
}

/// A directory of this run's files, removed when dropped.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn make(parent: &Path) -> Result<WorkDir, BenchError> {
        let path = parent.join(format!("wring-bench-blk-{}", std::process::id()));
        drop(fs::remove_dir_all(&path));
        fs::create_dir_all(&path)
            .map_err(|e| BenchError::io(format!("making {}", path.display()), e))?;
        Ok(WorkDir { path })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        drop(fs::remove_dir_all(&self.path));
    }
}

/// Start nbdkit in `dir` with `args`: wring's plugin (its path first, with a control socket)
/// or one of nbdkit's own (`memory`).
fn start_nbdkit(dir: &Path, args: Vec<String>) -> Result<Nbdkit, BenchError> {
    let wring = args.first().is_some_and(|a| a != "memory");
    Nbdkit::start(dir, &args, wring, Duration::from_secs(60)).map_err(|e| failed(e.to_string()))
}

impl BlkReport {
    /// A report of `rows`.
    pub fn new(
        machine: Machine,
        corpus: CorpusInfo,
        streams: usize,
        rows: Vec<BlkRow>,
    ) -> BlkReport {
        BlkReport {
            tool: format!("wring-bench {}", env!("CARGO_PKG_VERSION")),
            machine,
            corpus,
            streams,
            rows,
            pages: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Write and read MB/s of the two-clients-on-two-streams row over the one-on-one row.
    pub fn scaling(&self) -> Option<(Option<f64>, Option<f64>)> {
        let pair: Vec<&BlkRow> = self
            .rows
            .iter()
            .filter(|r| r.target == Target::WringClients)
            .collect();
        let [one, two] = pair.as_slice() else {
            return None;
        };
        Some((
            quotient(two.write_mbps, one.write_mbps),
            quotient(two.read_mbps, one.read_mbps),
        ))
    }

    /// Pretty-printed JSON of everything.
    pub fn json(&self) -> Result<String, BenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Markdown: what was measured, then the table.
    pub fn markdown(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "## wring bench blk\n");
        let _ = writeln!(s, "- machine: {}", self.machine.summary());
        let _ = writeln!(s, "- corpus: {}", self.corpus.summary());
        let _ = writeln!(s, "- wring and nbdkit memory: `nbdcopy FILE nbd+unix://…` then `nbdcopy nbd+unix://… FILE` (tmpfs files, nbdcopy's defaults); kernel zram: O_DIRECT 1 MiB writes and reads on {} threads; every copy read back equals the input", self.streams);
        let _ = writeln!(s, "- wring: {} streams; ratio = input / mem_used_total (mm_stat); nbdkit memory allocator=zstd (zstd level 3, 32 KiB pages, one lock): it has no mm_stat, so its mem_used_total is its VmRSS growth over the write", self.streams);
        let _ = writeln!(s, "- nbdkit memory (no compression): its sparse allocator through the same nbdcopy commands — what the socket hop and nbdcopy cost on this machine, the ceiling of any NBD row");
        let _ = writeln!(s, "- × zram / × nbdkit: the row's figure over that row's (for mem, below 1 is less memory); wring lzo is compared with zram lzo-rle");
        if let Some(x) = self.scaling() {
            let _ = writeln!(s, "- two clients on two streams over one client on one stream (nbdcopy --connections=N --threads=N, multi-conn): write {}, read {}", times(x.0), times(x.1));
        }
        if self.rows.iter().any(|r| r.method.contains('@')) {
            let _ = writeln!(s, "- ALG@16K: a device with slot_size=16K (beyond zram): each 16 KiB is compressed alone as one object, as nbdkit memory compresses its 32 KiB pages; 4 KiB is wring's default and zram's slot");
        }
        if self.rows.iter().any(|r| r.method.ends_with("+dict")) {
            let _ = writeln!(s, "- +dict: zstd with a 64 KiB dictionary that train_dict learned from this same input on a first device, given to a fresh one with algorithm_params dict=FILE (the best case for a dictionary: it has seen the data)");
        }
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
        s.push_str("| device | method | write MB/s | read MB/s | ratio | mem_used_total | vs | write × | read × | ratio × | mem × |\n");
        s.push_str("|---|---|--:|--:|--:|--:|---|--:|--:|--:|--:|\n");
        for r in &self.rows {
            let speed = |v: f64| format!("{v:.0}");
            let head = format!(
                "| {} | {} | {} | {} | {:.2} | {} ",
                r.target.label(),
                r.method,
                speed(r.write_mbps),
                speed(r.read_mbps),
                r.ratio,
                r.mem_used_total
            );
            let overs: Vec<&Over> = r.vs_zram.iter().chain(r.vs_nbdkit.iter()).collect();
            if overs.is_empty() {
                let _ = writeln!(s, "{head}| | | | | |");
            }
            for (i, o) in overs.iter().enumerate() {
                let lead = if i == 0 {
                    head.clone()
                } else {
                    "| | | | | | ".to_string()
                };
                let _ = writeln!(
                    s,
                    "{lead}| {} | {} | {} | {} | {} |",
                    o.method,
                    times(o.write),
                    times(o.read),
                    times(o.ratio),
                    times(o.mem)
                );
            }
        }
        self.cost_table(&mut s);
        self.pages_table(&mut s);
        s
    }

    /// The page path over the bare library, per algorithm.
    fn pages_table(&self, s: &mut String) {
        use std::fmt::Write as _;
        if self.pages.is_empty() {
            return;
        }
        s.push_str("\nThe page path (one thread, every 4 KiB page of the input, no NBD): the device's streams over the bare library call\n\n");
        s.push_str("| method | pages | compress × | decompress × | bare compress MB/s | bare decompress MB/s |\n");
        s.push_str("|---|--:|--:|--:|--:|--:|\n");
        for p in &self.pages {
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.3} | {:.0} | {:.0} |",
                p.method,
                p.pages,
                p.compress,
                p.decompress,
                p.bare_compress_mbps,
                p.bare_decompress_mbps
            );
        }
    }

    /// Each NBD row against the transport's ceiling, and where its CPU went: seconds per GB
    /// of input in the server (nbdkit with the plugin) and the client (nbdcopy), per phase.
    fn cost_table(&self, s: &mut String) {
        use std::fmt::Write as _;
        let rows: Vec<&BlkRow> = self.rows.iter().filter(|r| r.cpu.is_some()).collect();
        if rows.is_empty() {
            return;
        }
        s.push_str("\n| device | method | write / ceiling | read / ceiling | write / zram | read / zram | server CPU s/GB write | read | nbdcopy CPU s/GB write | read |\n");
        s.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for r in rows {
            let (Some(c), ceiling) = (r.cpu, r.of_ceiling) else {
                continue;
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r.target.label(),
                r.method,
                times(ceiling.map(|c| c.0)),
                times(ceiling.map(|c| c.1)),
                times(r.vs_zram.and_then(|o| o.write)),
                times(r.vs_zram.and_then(|o| o.read)),
                c.server_write,
                c.server_read,
                c.client_write,
                c.client_read
            );
        }
    }

    /// One CSV line per row, with [`CSV_HEADER`].
    pub fn csv(&self) -> Result<String, BenchError> {
        let f = |x: Option<f64>| x.map(|v| format!("{v:.4}")).unwrap_or_default();
        let n = |x: Option<u64>| x.map(|v| v.to_string()).unwrap_or_default();
        let lines = self.rows.iter().map(|r| {
            let z = r.vs_zram;
            let k = r.vs_nbdkit;
            vec![
                r.target.label().to_string(),
                r.method.clone(),
                r.bytes.to_string(),
                format!("{:.1}", r.write_mbps),
                format!("{:.1}", r.read_mbps),
                n(r.compr_data_size),
                r.mem_used_total.to_string(),
                format!("{:.4}", r.ratio),
                n(r.rss_growth),
                z.map(|o| o.method.to_string()).unwrap_or_default(),
                f(z.and_then(|o| o.write)),
                f(z.and_then(|o| o.read)),
                f(z.and_then(|o| o.ratio)),
                f(z.and_then(|o| o.mem)),
                f(k.and_then(|o| o.write)),
                f(k.and_then(|o| o.read)),
                f(k.and_then(|o| o.ratio)),
                f(k.and_then(|o| o.mem)),
                f(r.of_ceiling.map(|c| c.0)),
                f(r.of_ceiling.map(|c| c.1)),
                f(r.cpu.map(|c| c.server_write)),
                f(r.cpu.map(|c| c.server_read)),
                f(r.cpu.map(|c| c.client_write)),
                f(r.cpu.map(|c| c.client_read)),
            ]
        });
        csv_text(CSV_HEADER, lines)
    }
}

fn times(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "n/a".into())
}

/// The mixed input: `files` (names under `dir`) in that order, or every file when empty.
pub fn load_corpus(dir: &Path, files: &[String]) -> Result<Corpus, BenchError> {
    if files.is_empty() {
        return Corpus::load(dir);
    }
    let mut out = Vec::with_capacity(files.len());
    for name in files {
        let path = dir.join(name);
        let data = fs::read(&path).map_err(|e| {
            BenchError::io(
                format!(
                    "reading {} (build the shared corpus with ../shared/corpus/build.sh, or name other files with --files)",
                    path.display()
                ),
                e,
            )
        })?;
        out.push(crate::corpus::CorpusFile {
            name: name.clone(),
            data,
        });
    }
    Ok(Corpus::from_files(dir.display().to_string(), out))
}
