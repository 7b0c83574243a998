//! The kernel's zram beside wring's 4 KiB-page figures.
//!
//! Kernel side: /dev/zram0 is reset, given a compression algorithm and a disk size, and the
//! corpus (concatenated, zero-padded to whole pages) is written to it with direct I/O by as many
//! writers as streams, then read back the same way and checked; mm_stat gives the ratio
//! (orig_data_size / compr_data_size), the clock the MB/s. The device is reset afterwards, also
//! on error or Ctrl-C ([`ZramDevice`]'s `Drop`).
//!
//! wring side: the same pages, on as many threads, stored by zram's rules (zram_write_page in
//! drivers/block/zram/zram_drv.c): a page filled with one repeated machine word is stored as
//! that word and takes no space; a page whose compressed size is at least zsmalloc's
//! `huge_class_size` is stored raw as a whole page; otherwise its compressed size counts.
//! lzo-rle is compared with wring-lzo's lzo-rle (`compress_rle`, the kernel's
//! lzorle1x_1_compress) and lzo with its raw LZO1X-1; lz4 and lz4hc with the engine's
//! (`compress_into`, no btrfs rule).

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig};

use crate::corpus::Corpus;
use crate::interrupt::{self, Cleanup};
use crate::levels::parallel;
use crate::metrics::{mb_per_s, ratio, Versus};
use crate::progress::Progress;
use crate::BenchError;

/// zram's page.
pub const PAGE: usize = 4096;

/// zsmalloc's smallest size class on 64-bit machines (ZS_MIN_ALLOC_SIZE).
const ZS_MIN_ALLOC_SIZE: usize = 32;
/// Bytes zsmalloc adds to every object for its handle (ZS_HANDLE_SIZE).
const ZS_HANDLE_SIZE: usize = 8;
/// zsmalloc's default CONFIG_ZSMALLOC_CHAIN_SIZE.
pub const DEFAULT_CHAIN_SIZE: usize = 8;
/// Pages handed to a thread at a time.
const CHUNK_PAGES: usize = 256;

/// The smallest compressed size zram stores as a raw page: zsmalloc's `huge_class_size`
/// (zs_create_pool in mm/zsmalloc.c) for `page`-byte pages and zspages of at most `chain`
/// pages. Size classes run from 32 bytes up in steps of page/256; scanning down from the
/// largest, the first class whose zspage holds more than one page and more than one object is
/// the first huge-free one, and an object reaches the huge classes from its size minus the
/// handle's bytes.
pub fn huge_class_size(page: usize, chain: usize) -> usize {
    let delta = (page >> 8).max(1);
    let classes = (page - ZS_MIN_ALLOC_SIZE).div_ceil(delta) + 1;
    for i in (0..classes).rev() {
        let size = (ZS_MIN_ALLOC_SIZE + i * delta).min(page);
        let pages = zspage_chain(size, page, chain);
        let objects = pages * page / size;
        if pages != 1 && objects != 1 {
            return size - (ZS_HANDLE_SIZE - 1);
        }
    }
    page
}

/// Pages per zspage for a size class (calculate_zspage_chain_size): the chain length up to
/// `chain` that wastes least, 1 for a power of two.
fn zspage_chain(size: usize, page: usize, chain: usize) -> usize {
    if size.is_power_of_two() {
        return 1;
    }
    let mut best = (usize::MAX, 1);
    for pages in 1..=chain.max(1) {
        let waste = (pages * page) % size;
        if waste < best.0 {
            best = (waste, pages);
        }
    }
    best.1
}

/// CONFIG_ZSMALLOC_CHAIN_SIZE of the running kernel, from /proc/config.gz or
/// /boot/config-RELEASE; the default (8) when neither says.
pub fn kernel_chain_size() -> usize {
    let from_gz = File::open("/proc/config.gz").ok().and_then(|f| {
        let mut text = String::new();
        flate2::read::GzDecoder::new(f)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    });
    let from_boot = || {
        let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()
    };
    from_gz
        .or_else(from_boot)
        .and_then(|text| config_value(&text, "CONFIG_ZSMALLOC_CHAIN_SIZE"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CHAIN_SIZE)
}

/// The value of `KEY=value` in a kernel config text.
pub fn config_value(config: &str, key: &str) -> Option<String> {
    config
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
}

/// Whether a page is one machine word repeated (zram's page_same_filled): blk's, the one copy.
pub use wring_blk::same_filled;

/// How wring compresses a page for comparison with a zram algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageCodec {
    /// wring-lzo's raw LZO1X-1 (for zram's lzo).
    LzoRaw,
    /// wring-lzo's lzo-rle (for zram's lzo-rle).
    LzoRle,
    /// The engine with this spec, no storage rule (`compress_into`).
    Engine(CompressSpec),
}

impl PageCodec {
    /// wring's counterpart of a zram algorithm, when it has one.
    pub fn for_zram(algorithm: &str) -> Option<PageCodec> {
        match algorithm {
            "lzo" => Some(PageCodec::LzoRaw),
            "lzo-rle" => Some(PageCodec::LzoRle),
            "lz4" => Some(PageCodec::Engine(CompressSpec::default_for(Algorithm::Lz4))),
            "lz4hc" => Some(PageCodec::Engine(CompressSpec::default_for(
                Algorithm::Lz4hc,
            ))),
            "zstd" => Some(PageCodec::Engine(CompressSpec::new(Algorithm::Zstd, 3))),
            _ => None,
        }
    }

    /// How the report names it.
    pub fn describe(&self) -> String {
        match self {
            PageCodec::LzoRaw => "wring-lzo LZO1X-1".into(),
            PageCodec::LzoRle => "wring-lzo lzo-rle".into(),
            PageCodec::Engine(spec) => format!("engine {spec}"),
        }
    }
}

/// What zram (or wring by zram's rules) made of the pages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZramFigures {
    /// Pages written.
    pub pages: u64,
    /// mm_stat orig_data_size: bytes of the pages stored.
    pub orig_bytes: u64,
    /// mm_stat compr_data_size: compressed bytes (a huge page counts whole, a same-filled
    /// page nothing).
    pub compr_bytes: u64,
    /// mm_stat mem_used_total (kernel only): memory zsmalloc used, overheads included.
    pub mem_used_bytes: Option<u64>,
    /// Same-filled pages.
    pub same_pages: u64,
    /// Pages stored raw.
    pub huge_pages: u64,
    /// orig_bytes / compr_bytes.
    pub ratio: f64,
    /// Seconds to write (kernel) or compress and store (wring) every page.
    pub write_secs: f64,
    /// Seconds to read back (kernel) or decompress (wring) every page.
    pub read_secs: f64,
    /// MB/s writing or compressing.
    pub write_mbps: f64,
    /// MB/s reading or decompressing.
    pub read_mbps: f64,
    /// Threads writing and reading.
    pub threads: usize,
}

/// One zram algorithm: the kernel and wring side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZramRow {
    /// The zram algorithm (comp_algorithm).
    pub algorithm: String,
    /// What wring used for it.
    pub wring_codec: Option<String>,
    /// The kernel's figures, when measured.
    pub kernel: Option<ZramFigures>,
    /// Why the kernel's figures are missing.
    pub kernel_note: Option<String>,
    /// wring's figures, when it has a counterpart.
    pub wring: Option<ZramFigures>,
    /// wring over kernel: ratio, write and read speed.
    pub wring_over_kernel: Option<Versus>,
}

/// Settings of the zram part.
#[derive(Debug, Clone)]
pub struct ZramConfig {
    /// zram algorithms to measure (empty: lzo-rle, lzo and lz4 where the device offers them).
    pub algorithms: Vec<String>,
    /// The block device.
    pub device: PathBuf,
    /// Its sysfs directory.
    pub sysfs: PathBuf,
    /// Writer and reader threads, and wring's threads.
    pub threads: usize,
    /// Reset the device even when it was already initialised (never when it is swap or mounted).
    pub force: bool,
}

impl ZramConfig {
    /// /dev/zram0 with `threads` threads.
    pub fn new(threads: usize) -> ZramConfig {
        ZramConfig {
            algorithms: Vec::new(),
            device: PathBuf::from("/dev/zram0"),
            sysfs: PathBuf::from("/sys/block/zram0"),
            threads: threads.max(1),
            force: false,
        }
    }
}

/// Algorithms measured by default, in this order, when the device offers them.
pub const DEFAULT_ALGORITHMS: [&str; 3] = ["lzo-rle", "lzo", "lz4"];

/// Pages stored by wring following zram's rules; compressed data kept per chunk.
#[derive(Default)]
struct Chunk {
    data: Vec<u8>,
    pages: Vec<PageStore>,
}

#[derive(Clone, Copy)]
enum PageStore {
    Same(u64),
    Huge,
    Compressed(u32),
}

/// wring's figures for `data` (whole pages) compressed page by page on `threads` threads.
pub fn wring_pages(
    codec: PageCodec,
    data: &[u8],
    threads: usize,
    huge_class: usize,
) -> Result<ZramFigures, BenchError> {
    let pages: Vec<&[u8]> = data.chunks(PAGE).collect();
    let chunks: Vec<&[&[u8]]> = pages.chunks(CHUNK_PAGES).collect();
    let engine = Engine::new(EngineConfig {
        streams: threads.max(1),
        ..Default::default()
    });
    let slots: Vec<Mutex<Chunk>> = chunks
        .iter()
        .map(|c| {
            Mutex::new(Chunk {
                data: Vec::with_capacity(c.len() * PAGE),
                pages: Vec::with_capacity(c.len()),
            })
        })
        .collect();
    let name = codec.describe();
    let err = |index: usize, e: String| BenchError::Zram(format!("{name}: page {index}: {e}"));
    if let PageCodec::Engine(spec) = codec {
        // Let the manager allocate its workspaces before the clock runs.
        let mut dst = vec![0u8; 2 * PAGE];
        for p in pages.iter().take(threads.max(1)) {
            engine
                .compress_into(spec, p, &mut dst)
                .map_err(|e| err(0, e.to_string()))?;
        }
    }
    let write_secs = parallel(
        threads,
        chunks.len(),
        || Ok((wring_lzo::CompressState::new(), vec![0u8; 2 * PAGE])),
        |(state, dst), i| {
            let mut slot = wring_sync::lock(&slots[i]);
            let Chunk { data, pages } = &mut *slot;
            data.clear();
            pages.clear();
            for page in chunks[i] {
                if let Some(word) = same_filled(page) {
                    pages.push(PageStore::Same(word));
                    continue;
                }
                let n = match codec {
                    PageCodec::LzoRaw => Some(
                        wring_lzo::compress(page, dst, state)
                            .map_err(|e| err(i * CHUNK_PAGES, e.to_string()))?,
                    ),
                    PageCodec::LzoRle => Some(
                        wring_lzo::compress_rle(page, dst, state)
                            .map_err(|e| err(i * CHUNK_PAGES, e.to_string()))?,
                    ),
                    PageCodec::Engine(spec) => engine
                        .compress_into(spec, page, dst)
                        .map_err(|e| err(i * CHUNK_PAGES, e.to_string()))?,
                };
                match n {
                    Some(n) if n < huge_class => {
                        data.extend_from_slice(&dst[..n]);
                        pages.push(PageStore::Compressed(n as u32));
                    }
                    _ => {
                        data.extend_from_slice(page);
                        pages.push(PageStore::Huge);
                    }
                }
            }
            Ok(())
        },
    )?;
    let mut out = vec![0u8; data.len()];
    let read_secs = {
        let outs = crate::levels::split_slots(&mut out, chunks.iter().map(|c| c.len() * PAGE));
        parallel(
            threads,
            chunks.len(),
            || Ok(()),
            |_, i| {
                let slot = wring_sync::lock(&slots[i]);
                let mut dst = wring_sync::lock(&outs[i]);
                let mut pos = 0;
                for (k, (stored, page)) in slot.pages.iter().zip(dst.chunks_mut(PAGE)).enumerate() {
                    match *stored {
                        PageStore::Same(word) => {
                            for w in page.chunks_exact_mut(8) {
                                w.copy_from_slice(&word.to_ne_bytes());
                            }
                        }
                        PageStore::Huge => {
                            page.copy_from_slice(&slot.data[pos..pos + PAGE]);
                            pos += PAGE;
                        }
                        PageStore::Compressed(n) => {
                            let src = &slot.data[pos..pos + n as usize];
                            pos += n as usize;
                            let index = i * CHUNK_PAGES + k;
                            match codec {
                                // One decoder reads both (the stream says which).
                                PageCodec::LzoRaw | PageCodec::LzoRle => {
                                    wring_lzo::decompress(src, page)
                                        .map_err(|e| err(index, e.to_string()))?;
                                }
                                PageCodec::Engine(spec) => {
                                    let alg = spec.algorithm.unwrap_or(Algorithm::Lz4);
                                    engine
                                        .decompress(alg, src, page)
                                        .map_err(|e| err(index, e.to_string()))?;
                                }
                            }
                        }
                    }
                }
                Ok(())
            },
        )?
    };
    if out != data {
        return Err(BenchError::Mismatch {
            spec: name,
            index: 0,
        });
    }
    let mut figures = ZramFigures {
        pages: pages.len() as u64,
        orig_bytes: data.len() as u64,
        compr_bytes: 0,
        mem_used_bytes: None,
        same_pages: 0,
        huge_pages: 0,
        ratio: 0.0,
        write_secs,
        read_secs,
        write_mbps: mb_per_s(data.len() as u64, write_secs),
        read_mbps: mb_per_s(data.len() as u64, read_secs),
        threads,
    };
    for slot in &slots {
        let slot = wring_sync::lock(&slot);
        for s in &slot.pages {
            match s {
                PageStore::Same(_) => figures.same_pages += 1,
                PageStore::Huge => {
                    figures.huge_pages += 1;
                    figures.compr_bytes += PAGE as u64;
                }
                PageStore::Compressed(n) => figures.compr_bytes += u64::from(*n),
            }
        }
    }
    figures.ratio = ratio(figures.orig_bytes, figures.compr_bytes);
    Ok(figures)
}

/// The counters of /sys/block/zramN/mm_stat that the report uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MmStat {
    /// orig_data_size.
    pub orig: u64,
    /// compr_data_size.
    pub compr: u64,
    /// mem_used_total.
    pub mem_used: u64,
    /// same_pages.
    pub same_pages: u64,
    /// huge_pages (kernels that have it).
    pub huge_pages: u64,
}

/// Parse mm_stat's columns.
pub fn parse_mm_stat(text: &str) -> Option<MmStat> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    Some(MmStat {
        orig: *v.first()?,
        compr: *v.get(1)?,
        mem_used: *v.get(2)?,
        same_pages: *v.get(5)?,
        huge_pages: v.get(7).copied().unwrap_or(0),
    })
}

/// A zram device this process configured; reset when dropped.
#[derive(Debug)]
pub struct ZramDevice {
    device: PathBuf,
    sysfs: PathBuf,
    _cleanup: Cleanup,
}

impl ZramDevice {
    /// Take the device: refused when it is swap or mounted, or (unless `force`) already
    /// initialised by someone else. Resets it.
    pub fn take(device: &Path, sysfs: &Path, force: bool) -> Result<ZramDevice, BenchError> {
        if !sysfs.join("comp_algorithm").exists() {
            return Err(BenchError::Zram(format!(
                "{} does not exist (modprobe zram)",
                sysfs.display()
            )));
        }
        let dev = device.display().to_string();
        let swaps = fs::read_to_string("/proc/swaps").unwrap_or_default();
        let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
        if swaps
            .lines()
            .chain(mounts.lines())
            .any(|l| l.split_whitespace().next() == Some(&dev))
        {
            return Err(BenchError::Zram(format!(
                "{dev} is in use as swap or mounted; not touching it"
            )));
        }
        let initstate = fs::read_to_string(sysfs.join("initstate")).unwrap_or_default();
        if initstate.trim() == "1" && !force {
            return Err(BenchError::Zram(format!(
                "{dev} is already initialised; reset it (echo 1 > {}/reset) or pass --zram-force",
                sysfs.display()
            )));
        }
        let taken = ZramDevice {
            device: device.to_path_buf(),
            sysfs: sysfs.to_path_buf(),
            _cleanup: Cleanup::enter(),
        };
        taken.reset()?;
        Ok(taken)
    }

    /// Algorithms the device offers.
    pub fn algorithms(&self) -> Vec<String> {
        fs::read_to_string(self.sysfs.join("comp_algorithm"))
            .unwrap_or_default()
            .split_whitespace()
            .map(|a| a.trim_matches(|c| c == '[' || c == ']').to_string())
            .collect()
    }

    /// Reset, then set the algorithm and the disk size.
    pub fn configure(&self, algorithm: &str, disksize: u64) -> Result<(), BenchError> {
        self.reset()?;
        self.write_attr("comp_algorithm", algorithm)?;
        self.write_attr("disksize", &disksize.to_string())
    }

    /// The device's mm_stat.
    pub fn mm_stat(&self) -> Result<MmStat, BenchError> {
        let text = fs::read_to_string(self.sysfs.join("mm_stat"))
            .map_err(|e| BenchError::io("reading mm_stat", e))?;
        parse_mm_stat(&text).ok_or_else(|| BenchError::Zram(format!("unreadable mm_stat: {text}")))
    }

    /// Reset the device (frees everything stored), retrying while it is busy.
    pub fn reset(&self) -> Result<(), BenchError> {
        let mut last = None;
        for attempt in 0..10u64 {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(50 * attempt));
            }
            match fs::write(self.sysfs.join("reset"), "1") {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(e),
            }
        }
        Err(BenchError::io(
            format!("resetting {}", self.device.display()),
            last.unwrap_or_else(|| std::io::Error::other("gave up")),
        ))
    }

    fn write_attr(&self, name: &str, value: &str) -> Result<(), BenchError> {
        fs::write(self.sysfs.join(name), value).map_err(|e| {
            BenchError::io(
                format!("writing {value} to {}/{name}", self.sysfs.display()),
                e,
            )
        })
    }

    /// Write `data` (whole pages, page-aligned) at offset 0 with direct I/O on `threads`
    /// threads; then read it back the same way and check it. Seconds for each.
    pub fn write_read(&self, data: &AlignedBuf, threads: usize) -> Result<(f64, f64), BenchError> {
        let len = data.len();
        let per = len.div_ceil(threads.max(1)).next_multiple_of(IO_SIZE);
        let ranges: Vec<(usize, usize)> = (0..len)
            .step_by(per.max(IO_SIZE))
            .map(|s| (s, (s + per).min(len)))
            .collect();
        let write_secs = parallel(
            ranges.len(),
            ranges.len(),
            || self.open(true),
            |file, i| {
                let (start, end) = ranges[i];
                for off in (start..end).step_by(IO_SIZE) {
                    let chunk = &data.as_slice()[off..(off + IO_SIZE).min(end)];
                    file.write_all_at(chunk, off as u64).map_err(|e| {
                        BenchError::io(format!("writing {}", self.device.display()), e)
                    })?;
                }
                Ok(())
            },
        )?;
        interrupt::check()?;
        let mut back = AlignedBuf::zeroed(len);
        let slots =
            crate::levels::split_slots(back.as_mut_slice(), ranges.iter().map(|(s, e)| e - s));
        let read_secs = parallel(
            ranges.len(),
            ranges.len(),
            || self.open(false),
            |file, i| {
                let (start, _) = ranges[i];
                let mut slot = wring_sync::lock(&slots[i]);
                for (k, chunk) in slot.chunks_mut(IO_SIZE).enumerate() {
                    file.read_exact_at(chunk, (start + k * IO_SIZE) as u64)
                        .map_err(|e| {
                            BenchError::io(format!("reading {}", self.device.display()), e)
                        })?;
                }
                Ok(())
            },
        )?;
        drop(slots);
        if back.as_slice() != data.as_slice() {
            return Err(BenchError::Zram(
                "data read back differs from what was written".into(),
            ));
        }
        Ok((write_secs, read_secs))
    }

    fn open(&self, write: bool) -> Result<File, BenchError> {
        OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(libc::O_DIRECT)
            .open(&self.device)
            .map_err(|e| {
                BenchError::io(
                    format!("opening {} with O_DIRECT", self.device.display()),
                    e,
                )
            })
    }
}

impl Drop for ZramDevice {
    fn drop(&mut self) {
        if let Err(e) = self.reset() {
            eprintln!(
                "wring bench: could not reset {}: {e}",
                self.device.display()
            );
        }
    }
}

/// Size of one direct I/O request.
const IO_SIZE: usize = 1 << 20;

/// A page-aligned byte buffer, as O_DIRECT wants.
pub struct AlignedBuf {
    raw: Vec<u8>,
    offset: usize,
    len: usize,
}

impl AlignedBuf {
    /// `data` copied into page-aligned memory.
    pub fn from_slice(data: &[u8]) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(data.len());
        buf.as_mut_slice().copy_from_slice(data);
        buf
    }

    /// `len` zero bytes in page-aligned memory.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + PAGE];
        let offset = raw.as_ptr().align_offset(PAGE).min(PAGE);
        AlignedBuf { raw, offset, len }
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.raw[self.offset..self.offset + self.len]
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.offset..self.offset + self.len]
    }
}

/// Measure every configured zram algorithm on the corpus, the kernel's and wring's figures
/// side by side. Needs root; resets the device afterwards whatever happens.
pub fn run(
    corpus: &Corpus,
    cfg: &ZramConfig,
    progress: &Progress,
) -> Result<(Vec<ZramRow>, usize), BenchError> {
    let data = corpus.concatenated(PAGE);
    let huge = huge_class_size(PAGE, kernel_chain_size());
    let device = ZramDevice::take(&cfg.device, &cfg.sysfs, cfg.force)?;
    let offered = device.algorithms();
    let algorithms: Vec<String> = if cfg.algorithms.is_empty() {
        DEFAULT_ALGORITHMS
            .iter()
            .filter(|a| offered.iter().any(|o| o == *a))
            .map(|a| a.to_string())
            .collect()
    } else {
        cfg.algorithms.clone()
    };
    progress.add_steps(2 * algorithms.len() as u64);
    let aligned = AlignedBuf::from_slice(&data);
    let disksize = (data.len() as u64).next_multiple_of(1 << 20);
    let mut rows = Vec::new();
    for algorithm in algorithms {
        interrupt::check()?;
        progress.step(format!("zram {algorithm}: kernel"));
        let (kernel, kernel_note) = if offered.contains(&algorithm) {
            (
                Some(kernel_figures(
                    &device,
                    &algorithm,
                    &aligned,
                    disksize,
                    cfg.threads,
                )?),
                None,
            )
        } else {
            (
                None,
                Some(format!(
                    "{} does not offer {algorithm}",
                    cfg.device.display()
                )),
            )
        };
        progress.done();
        interrupt::check()?;
        progress.step(format!("zram {algorithm}: wring"));
        let codec = PageCodec::for_zram(&algorithm);
        let wring = codec
            .map(|c| wring_pages(c, &data, cfg.threads, huge))
            .transpose()?;
        progress.done();
        let wring_over_kernel = match (&wring, &kernel) {
            (Some(w), Some(k)) => Some(Versus::of(
                [w.ratio, w.write_mbps, w.read_mbps],
                [k.ratio, k.write_mbps, k.read_mbps],
            )),
            _ => None,
        };
        rows.push(ZramRow {
            algorithm,
            wring_codec: codec.map(|c| c.describe()),
            kernel,
            kernel_note,
            wring,
            wring_over_kernel,
        });
    }
    drop(device);
    Ok((rows, huge))
}

fn kernel_figures(
    device: &ZramDevice,
    algorithm: &str,
    data: &AlignedBuf,
    disksize: u64,
    threads: usize,
) -> Result<ZramFigures, BenchError> {
    device.configure(algorithm, disksize)?;
    let (write_secs, read_secs) = device.write_read(data, threads)?;
    let st = device.mm_stat()?;
    device.reset()?;
    let bytes = data.len() as u64;
    Ok(ZramFigures {
        pages: st.orig / PAGE as u64,
        orig_bytes: st.orig,
        compr_bytes: st.compr,
        mem_used_bytes: Some(st.mem_used),
        same_pages: st.same_pages,
        huge_pages: st.huge_pages,
        ratio: ratio(st.orig, st.compr),
        write_secs,
        read_secs,
        write_mbps: mb_per_s(bytes, write_secs),
        read_mbps: mb_per_s(bytes, read_secs),
        threads,
    })
}
