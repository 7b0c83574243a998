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
//!   `INCOMPRESSIBLE` and skipped until it is rewritten.
//! * A recompressed page keeps its priority (the algorithm to decompress it with),
//!   `RECOMP`, and — unlike zram, which clears it — its idle mark and access time, so
//!   that `writeback idle` after `recompress type=idle` still finds it.
//! * Same-filled, written-back and empty slots are skipped, and so are pages already at or
//!   above the highest priority asked for.

use crate::device::arena::MAX_OBJECT;
use crate::device::slot::{flag, Entry, Slot};
use crate::device::streams::PageJob;
use crate::device::Store;
use crate::error::BlkError;
use crate::options::{bad_recompress, RecompressType};
use crate::report::RecompressReport;
use crate::sync::lock;

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
                return Err(bad_recompress(word, "is not key=value"));
            };
            match k {
                "type" => r.kind = RecompressType::parse(v)?,
                "threshold" => r.threshold = number(word, v, MAX_OBJECT as u64)? as usize,
                "algo" => r.algo = Some(v.to_string()),
                "priority" => r.priority = Some(number(word, v, 3)? as u8),
                "max_pages" => r.max_pages = number(word, v, u64::MAX)?,
                _ => return Err(bad_recompress(word, "is unknown")),
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

fn number(word: &str, v: &str, max: u64) -> Result<u64, BlkError> {
    match v.parse::<u64>() {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        _ => Err(bad_recompress(
            word,
            &format!("needs a whole number from 1 to {max}"),
        )),
    }
}

/// What recompressing one page came to.
enum Outcome {
    Kept,
    Incompressible,
    Recompressed { before: usize, after: usize },
}

/// The priorities `[start, end)` a request tries.
fn recomp_range(store: &Store, req: &RecompressRequest) -> Result<(u8, u8), BlkError> {
    let configured: Vec<(u8, String)> = store
        .algorithms()
        .secondaries()
        .map(|(p, s)| (p, s.algorithm()))
        .collect();
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
pub fn recompress(store: &Store, req: &RecompressRequest) -> Result<RecompressReport, BlkError> {
    let (start, end) = recomp_range(store, req)?;
    let secondaries = store.algorithms().secondaries().count();
    let mut report = RecompressReport::default();
    for (page, slot) in store.entries().iter().enumerate() {
        if req.max_pages != 0 && report.scanned >= req.max_pages {
            break;
        }
        let mut e = lock(slot);
        let Slot::Stored { len, .. } = e.slot else {
            continue;
        };
        if e.has(flag::INCOMPRESSIBLE)
            || e.prio + 1 >= end
            || !wants(req.kind, &e, store.slot_size())
            || (req.threshold != 0 && (len as usize) < req.threshold)
        {
            continue;
        }
        report.scanned += 1;
        match recompress_slot(store, &mut e, page, start, end, req.threshold, secondaries)? {
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
    store: &Store,
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
    let mut page = vec![0u8; store.slot_size()];
    store.load(e, page_index, &mut page)?;
    let old_class = store.arena().class_size(old_len as usize);
    let limit = store.arena().huge_class_size() - 1;
    let mut out = vec![0u8; store.slot_size()];
    let mut tried = 0;
    let mut found: Option<(u8, usize)> = None;
    for prio in start.max(e.prio + 1)..end {
        if store.algorithms().at(prio).is_none() {
            continue;
        }
        tried += 1;
        let mut jobs = [PageJob::new(&page, &mut out[..limit])];
        store.algorithms().of(prio).compress(&mut jobs);
        let n = match jobs[0].result.take() {
            Some(Ok(Some(n))) => n,
            Some(Ok(None)) => continue, // did not fit below the huge class size
            Some(Err(err)) => return Err(err),
            None => continue,
        };
        let saves = store.arena().class_size(n) < old_class;
        if saves && (threshold == 0 || n < threshold) {
            found = Some((prio, n));
            break;
        }
    }
    let Some((prio, n)) = found else {
        // Every secondary algorithm above the primary failed: do not try again.
        if tried == secondaries {
            store.set_flag(e, flag::INCOMPRESSIBLE, true);
            return Ok(Outcome::Incompressible);
        }
        return Ok(Outcome::Kept);
    };
    let handle = match store.arena().store(&out[..n], store.limit_pages()) {
        Ok(h) => h,
        // No room for the new object now: the page keeps its old one.
        Err(_) => return Ok(Outcome::Kept),
    };
    let (flags, ac_time) = (e.flags & flag::IDLE, e.ac_time);
    store.release(e);
    e.slot = Slot::Stored {
        handle,
        len: n as u16,
    };
    store.account(&e.slot);
    e.prio = prio;
    e.ac_time = ac_time;
    store.set_flag(e, flag::IDLE, flags != 0);
    store.set_flag(e, flag::RECOMP, true);
    Ok(Outcome::Recompressed {
        before: old_len as usize,
        after: n,
    })
}

/// Whether a recompression of `kind` looks at the slot `e` (zram's `type=` filter).
fn wants(kind: RecompressType, e: &Entry, slot_size: usize) -> bool {
    let huge = e.slot.is_huge(slot_size);
    let idle = e.has(flag::IDLE);
    match kind {
        RecompressType::All => true,
        RecompressType::Huge => huge,
        RecompressType::Idle => idle,
        RecompressType::HugeIdle => huge && idle,
    }
}
