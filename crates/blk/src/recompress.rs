//! Recompression with secondary algorithms: zram's `recompress` attribute
//! (`recompress_store` and `recompress_slot` in drivers/block/zram/zram_drv.c).
//!
//! * A request names the pages — `type=huge`, `type=idle`, `type=huge_idle`, or every stored
//!   page when no type is given — an optional `threshold=N` (only objects of at least N bytes,
//!   and only results below N), an optional algorithm (`algo=NAME` or `priority=N`; otherwise
//!   every `recomp_algorithm` from priority 1 up, in order), and an optional `max_pages=N`.
//! * Each page is decompressed and compressed again under its slot lock, so that the device
//!   stays live: a client's write to the page waits for it, every other page is free.
//! * A result is kept only if it lands in a smaller arena class than the old object (the
//!   memory it really saves), and a huge page only if it stops being huge. When every
//!   secondary algorithm has been tried on a page and none saved anything, the page is marked
//!   [`flag::INCOMPRESSIBLE`] and skipped until it is rewritten.
//! * A recompressed page keeps its priority (the algorithm to decompress it with),
//!   [`flag::RECOMP`], and — unlike zram, which clears it — its idle mark and access time, so
//!   that `writeback idle` after `recompress type=idle` still finds it.
//! * Same-filled, written-back and empty slots are skipped, and so are pages already at or
//!   above the highest priority asked for.

use serde::{Deserialize, Serialize};
use wring_engine::dict::Dictionary;
use wring_engine::{Algorithm, CompressSpec};

use crate::error::BlkError;
use crate::store::{flag, Entry, Slot, Store};
use crate::streams::{OffloadStreams, PageJob};
use crate::sync::lock;

/// Which pages a recompression looks at (zram's `type=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RecompressType {
    /// Every stored page (no `type=`).
    #[default]
    All,
    /// Huge pages only.
    Huge,
    /// Idle pages only.
    Idle,
    /// Pages both huge and idle.
    HugeIdle,
}

impl RecompressType {
    fn name(self) -> Option<&'static str> {
        match self {
            RecompressType::All => None,
            RecompressType::Huge => Some("huge"),
            RecompressType::Idle => Some("idle"),
            RecompressType::HugeIdle => Some("huge_idle"),
        }
    }

    fn wants(self, e: &Entry, slot_size: usize) -> bool {
        let huge = e.slot.is_huge(slot_size);
        let idle = e.has(flag::IDLE);
        match self {
            RecompressType::All => true,
            RecompressType::Huge => huge,
            RecompressType::Idle => idle,
            RecompressType::HugeIdle => huge && idle,
        }
    }
}

/// A recompression request: zram's `recompress` words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecompressRequest {
    /// Which pages.
    pub kind: RecompressType,
    /// Only objects of at least this many bytes, and only results below it (0 = none).
    pub threshold: usize,
    /// The algorithm by name (`zstd`, or `zstd:3`).
    pub algo: Option<String>,
    /// The algorithm by priority.
    pub priority: Option<u8>,
    /// Pages to look at, at most (0 = all).
    pub max_pages: u64,
}

impl RecompressRequest {
    /// Parse `type=huge threshold=3000 algo=zstd` (words in any order, all optional).
    pub fn parse(text: &str) -> Result<RecompressRequest, BlkError> {
        let mut r = RecompressRequest::default();
        for word in text.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                return Err(bad(word, "is not key=value"));
            };
            match k {
                "type" => {
                    r.kind = match v {
                        "huge" => RecompressType::Huge,
                        "idle" => RecompressType::Idle,
                        "huge_idle" => RecompressType::HugeIdle,
                        _ => return Err(bad(word, "needs huge, idle or huge_idle")),
                    }
                }
                "threshold" => {
                    r.threshold = number(word, v, crate::arena::MAX_OBJECT as u64)? as usize
                }
                "algo" => r.algo = Some(v.to_string()),
                "priority" => r.priority = Some(number(word, v, 3)? as u8),
                "max_pages" => r.max_pages = number(word, v, u64::MAX)?,
                _ => return Err(bad(word, "is unknown")),
            }
        }
        if r.algo.is_some() && r.priority.is_some() {
            return Err(BlkError::Option(
                "recompress: give algo= or priority=, not both".into(),
            ));
        }
        Ok(r)
    }

    /// The request as words that [`RecompressRequest::parse`] reads back.
    pub fn text(&self) -> String {
        let mut w: Vec<String> = Vec::new();
        if let Some(t) = self.kind.name() {
            w.push(format!("type={t}"));
        }
        if self.threshold != 0 {
            w.push(format!("threshold={}", self.threshold));
        }
        if let Some(a) = &self.algo {
            w.push(format!("algo={a}"));
        }
        if let Some(p) = self.priority {
            w.push(format!("priority={p}"));
        }
        if self.max_pages != 0 {
            w.push(format!("max_pages={}", self.max_pages));
        }
        w.join(" ")
    }
}

fn bad(word: &str, why: &str) -> BlkError {
    BlkError::Option(format!(
        "recompress: '{word}' {why}; accepted: type=huge|idle|huge_idle threshold=BYTES \
         algo=NAME priority=1..3 max_pages=N"
    ))
}

fn number(word: &str, v: &str, max: u64) -> Result<u64, BlkError> {
    match v.parse::<u64>() {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        _ => Err(bad(word, &format!("needs a whole number from 1 to {max}"))),
    }
}

/// What a recompression did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecompressReport {
    /// Pages looked at (those the type, threshold and priority let through).
    pub scanned: u64,
    /// Pages now held by a secondary algorithm.
    pub recompressed: u64,
    /// Pages newly marked incompressible.
    pub incompressible: u64,
    /// Compressed bytes of the recompressed pages before.
    pub bytes_before: u64,
    /// And after.
    pub bytes_after: u64,
}

/// What recompressing one page came to.
enum Outcome {
    Kept,
    Incompressible,
    Recompressed { before: usize, after: usize },
}

impl Store {
    /// The priorities `[start, end)` a request tries.
    fn recomp_range(&self, req: &RecompressRequest) -> Result<(u8, u8), BlkError> {
        let configured: Vec<(u8, String)> =
            self.recomps().map(|(p, s)| (p, s.algorithm())).collect();
        let Some(&(top, _)) = configured.last() else {
            return Err(BlkError::Option(
                "recompress: the device has no recomp_algorithm; start it with \
                 -o 'recomp_algorithm=algo=zstd priority=1'"
                    .into(),
            ));
        };
        let names = || {
            configured
                .iter()
                .map(|(p, n)| format!("{n} (priority {p})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let chosen = if let Some(a) = &req.algo {
            let base = |n: &str| n.split(':').next().unwrap_or("").to_string();
            let hit = configured
                .iter()
                .find(|(_, n)| n == a)
                .or_else(|| configured.iter().find(|(_, n)| base(n) == *a));
            match hit {
                Some(&(p, _)) => Some(p),
                None => {
                    return Err(BlkError::Option(format!(
                        "recompress algo={a}: not a recomp_algorithm of this device; it has {}",
                        names()
                    )))
                }
            }
        } else if let Some(p) = req.priority {
            if !configured.iter().any(|(q, _)| *q == p) {
                return Err(BlkError::Option(format!(
                    "recompress priority={p}: no recomp_algorithm has it; the device has {}",
                    names()
                )));
            }
            Some(p)
        } else {
            None
        };
        Ok(match chosen {
            Some(p) => (p, p + 1),
            None => (1, top + 1),
        })
    }

    /// zram's `recompress`: live, page by page under each slot's lock.
    pub fn recompress(&self, req: &RecompressRequest) -> Result<RecompressReport, BlkError> {
        let (start, end) = self.recomp_range(req)?;
        let secondaries = self.recomps().count();
        let mut report = RecompressReport::default();
        for (page, slot) in self.slots.iter().enumerate() {
            if req.max_pages != 0 && report.scanned >= req.max_pages {
                break;
            }
            let mut e = lock(slot);
            let Slot::Stored { len, .. } = e.slot else {
                continue;
            };
            if e.has(flag::INCOMPRESSIBLE)
                || e.prio + 1 >= end
                || !req.kind.wants(&e, self.slot_size())
                || (req.threshold != 0 && (len as usize) < req.threshold)
            {
                continue;
            }
            report.scanned += 1;
            match self.recompress_slot(&mut e, page, start, end, req.threshold, secondaries)? {
                Outcome::Kept => {}
                Outcome::Incompressible => report.incompressible += 1,
                Outcome::Recompressed { before, after } => {
                    report.recompressed += 1;
                    report.bytes_before += before as u64;
                    report.bytes_after += after as u64;
                }
            }
        }
        Ok(report)
    }

    /// Recompress one locked slot with priorities `start..end` (`recompress_slot`).
    fn recompress_slot(
        &self,
        e: &mut Entry,
        page_index: usize,
        start: u8,
        end: u8,
        threshold: usize,
        secondaries: usize,
    ) -> Result<Outcome, BlkError> {
        let Slot::Stored { len: old_len, .. } = e.slot else {
            return Ok(Outcome::Kept);
        };
        let mut page = vec![0u8; self.slot_size()];
        self.load(e, page_index, &mut page)?;
        let old_class = self.arena.class_size(old_len as usize);
        let limit = self.arena.huge_class_size() - 1;
        let mut out = vec![0u8; self.slot_size()];
        let mut tried = 0;
        let mut found: Option<(u8, usize)> = None;
        for prio in start.max(e.prio + 1)..end {
            if self.recomp_at(prio).is_none() {
                continue;
            }
            tried += 1;
            let mut jobs = [PageJob::new(&page, &mut out[..limit])];
            self.algo(prio).compress(&mut jobs);
            let n = match jobs[0].result.take() {
                Some(Ok(Some(n))) => n,
                Some(Ok(None)) => continue, // did not fit below the huge class size
                Some(Err(err)) => return Err(err),
                None => continue,
            };
            let saves = self.arena.class_size(n) < old_class;
            if saves && (threshold == 0 || n < threshold) {
                found = Some((prio, n));
                break;
            }
        }
        let Some((prio, n)) = found else {
            // Every secondary algorithm above the primary failed: do not try again.
            if tried == secondaries {
                self.set_flag(e, flag::INCOMPRESSIBLE, true);
                return Ok(Outcome::Incompressible);
            }
            return Ok(Outcome::Kept);
        };
        let handle = match self.arena.store(&out[..n], self.limit_pages()) {
            Ok(h) => h,
            // No room for the new object now: the page keeps its old one.
            Err(_) => return Ok(Outcome::Kept),
        };
        let (flags, ac_time) = (e.flags & flag::IDLE, e.ac_time);
        self.release(e);
        e.slot = Slot::Stored {
            handle,
            len: n as u16,
        };
        self.account(&e.slot);
        e.prio = prio;
        e.ac_time = ac_time;
        self.set_flag(e, flag::IDLE, flags != 0);
        self.set_flag(e, flag::RECOMP, true);
        Ok(Outcome::Recompressed {
            before: old_len as usize,
            after: n,
        })
    }
}

/// A `train_dict` request: `size=BYTES level=L samples=PAGES save=FILE`, all optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainRequest {
    /// Dictionary capacity in bytes.
    pub size: usize,
    /// zstd level to compress with.
    pub level: i32,
    /// Pages to train on, at most (taken evenly over the device).
    pub samples: usize,
    /// Where to save the dictionary (for `algorithm_params=priority=N dict=FILE` later).
    pub save: Option<std::path::PathBuf>,
}

impl Default for TrainRequest {
    fn default() -> Self {
        TrainRequest {
            size: 64 << 10,
            level: 3,
            samples: 4096,
            save: None,
        }
    }
}

impl TrainRequest {
    /// Parse the words.
    pub fn parse(text: &str) -> Result<TrainRequest, BlkError> {
        let mut r = TrainRequest::default();
        let bad = |word: &str| {
            BlkError::Option(format!(
                "train_dict: '{word}' is not understood; accepted: size=BYTES (1K to 1M) \
                 level=1..22 samples=PAGES save=FILE"
            ))
        };
        for word in text.split_whitespace() {
            match word.split_once('=') {
                Some(("size", v)) => {
                    r.size = crate::options::parse_size("train_dict size", v)? as usize;
                    if !(1024..=1 << 20).contains(&r.size) {
                        return Err(bad(word));
                    }
                }
                Some(("level", v)) => match v.parse::<i32>() {
                    Ok(l) if (1..=22).contains(&l) => r.level = l,
                    _ => return Err(bad(word)),
                },
                Some(("samples", v)) => match v.parse::<usize>() {
                    Ok(n) if n >= 8 => r.samples = n,
                    _ => return Err(bad(word)),
                },
                Some(("save", v)) if !v.is_empty() => r.save = Some(v.into()),
                _ => return Err(bad(word)),
            }
        }
        Ok(r)
    }

    /// The words [`TrainRequest::parse`] reads back.
    pub fn text(&self) -> String {
        let mut s = format!(
            "size={} level={} samples={}",
            self.size, self.level, self.samples
        );
        if let Some(p) = &self.save {
            s += &format!(" save={}", p.display());
        }
        s
    }
}

/// What `train_dict` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Pages trained on.
    pub samples: u64,
    /// The dictionary's size.
    pub dict_bytes: u64,
    /// The priority the dictionary's algorithm was installed at.
    pub priority: u8,
    /// The recompression with it that followed.
    pub recompress: RecompressReport,
}

impl Store {
    /// Beyond zram: train a zstd dictionary from the device's own pages, install zstd with it
    /// as a recompression algorithm at the lowest free priority, and recompress every page
    /// with it (each kept only if it saves memory).
    pub fn train_dict(&self, req: &TrainRequest) -> Result<TrainReport, BlkError> {
        let samples = self.sample_pages(req.samples)?;
        if samples.len() < 8 {
            return Err(BlkError::Option(format!(
                "train_dict: {} pages are too few samples; write more data first (at least 8 \
                 pages that are neither empty nor one repeated word)",
                samples.len()
            )));
        }
        let views: Vec<&[u8]> = samples.iter().map(|p| &p[..]).collect();
        let dict = Dictionary::train(&views, req.size).map_err(|source| BlkError::Dictionary {
            what: "train_dict".into(),
            source,
        })?;
        if let Some(path) = &req.save {
            std::fs::write(path, dict.bytes()).map_err(|source| BlkError::Io {
                what: format!("train_dict: saving the dictionary to {}", path.display()),
                source,
            })?;
        }
        let name = format!("zstd:{}+dict", req.level);
        let dict_bytes = dict.bytes().len() as u64;
        let spec = CompressSpec::new(Algorithm::Zstd, req.level);
        let streams =
            OffloadStreams::for_slots(spec, &name, 1, self.slot_size())?.with_dictionary(dict)?;
        let priority = self.install_recomp(Box::new(streams))?;
        let recompress = self.recompress(&RecompressRequest {
            priority: Some(priority),
            ..RecompressRequest::default()
        })?;
        Ok(TrainReport {
            samples: samples.len() as u64,
            dict_bytes,
            priority,
            recompress,
        })
    }

    /// Up to `max` stored pages, decompressed, taken evenly over the device.
    fn sample_pages(&self, max: usize) -> Result<Vec<Vec<u8>>, BlkError> {
        let stored = self
            .slots
            .iter()
            .filter(|s| matches!(lock(s).slot, Slot::Stored { .. }))
            .count();
        let stride = stored.div_ceil(max.max(1)).max(1);
        let mut out = Vec::new();
        let mut seen = 0usize;
        for (page, slot) in self.slots.iter().enumerate() {
            let e = lock(slot);
            // Huge pages are noise to a dictionary; compressed ones are what it is for.
            if !matches!(e.slot, Slot::Stored { .. }) || e.slot.is_huge(self.slot_size()) {
                continue;
            }
            seen += 1;
            if !seen.is_multiple_of(stride) || out.len() >= max {
                continue;
            }
            let mut buf = vec![0u8; self.slot_size()];
            self.load(&e, page, &mut buf)?;
            out.push(buf);
        }
        Ok(out)
    }
}
