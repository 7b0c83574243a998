//! The device's options, named as zram's sysfs attributes: `comp_algorithm`, `streams`
//! (`max_comp_streams`), `mem_limit`, given as `key=value` pairs separated by commas
//! (`comp_algorithm=zstd:3,streams=2,mem_limit=256M`).
//!
//! Algorithms take zram's names — `lzo`, `lzo-rle`, `lz4`, `lz4hc`, `zstd`, `deflate`, with a
//! level as `zstd:3` — which are the engine's names for its codecs (zcomp.c's `backends[]` is
//! the engine's codec table), whose spec also checks the level. `lzo-rle` is the kernel's own
//! stream (wring-lzo's port of `lzorle1x_1_compress`), `deflate` raw deflate as zram's
//! deflate backend writes it (level 6 unless given, as zram's; its levels are 1 to 9). Differs
//! from zram: `lzo` pages carry the engine's btrfs framing (8 bytes more per page than the
//! kernel's raw LZO1X).
//!
//! `recomp_algorithm` takes zram's spelling, `algo=zstd priority=1` (a level as `zstd:3`), up
//! to three of them at priorities 1 to 3; given again, a priority is replaced. A bare
//! algorithm (`recomp_algorithm=zstd`) takes the next free priority.
//!
//! `algorithm_params` is zram's too: `priority=N level=L` (or `algo=NAME level=L`) sets the
//! level of the primary algorithm (priority 0, the default) or of a `recomp_algorithm`; give
//! it after the algorithm it changes, as zram wants the algorithm chosen first. `dict=FILE`
//! gives a zstd algorithm a dictionary (zstd's format, e.g. one `train_dict save=FILE` wrote,
//! or raw content).
//!
//! `backing_dev=FILE` names the writeback file (the device's backing file); `writeback_limit=N` is
//! zram's budget in 4 KiB pages (giving it enables it, as `writeback_limit_enable`).
//!
//! Beyond zram, `slot_size=4K|8K|16K|32K` (bytes also accepted: `16384`) sets the bytes a slot
//! holds, each compressed alone. zram has `PAGE_SIZE` slots only; larger ones trade
//! read-modify-write of partial slots for ratio (a compressor with 16 KiB of context finds
//! more to reuse, as nbdkit's `allocator=zstd` with its 32 KiB pages does). The device size
//! rounds up to whole slots. Writeback keeps 4 KiB blocks, so `slot_size` above 4K with
//! `backing_dev` is refused ([`Options::check`]).
//!
//! Beyond zram, `page_pool=N` reserves N locked 4 KiB pages (EROFS's global page pool; as the
//! filesystem's `page_pool`) that reads decode into and writes compress into, so a request
//! takes no buffer from the allocator; 0 (the default) leaves it off.

use wring_engine::{Algorithm, CompressSpec};

use crate::error::BlkError;

mod kinds;
mod schedule;

pub(crate) use kinds::bad_recompress;
pub use kinds::{RecompressType, WritebackType};
pub use schedule::Schedule;

/// zram's page: the arena's page, the default slot, and the unit of writeback, of
/// `writeback_limit` and of the per-page counters in `stat`.
pub const PAGE_SIZE: usize = 4096;

/// Keys [`Options::set`] accepts.
pub(crate) const KEYS: [&str; 10] = [
    "comp_algorithm",
    "streams",
    "mem_limit",
    "algorithm_params",
    "recomp_algorithm",
    "backing_dev",
    "writeback_limit",
    "policy",
    "page_pool",
    "slot_size",
];

/// Slot sizes `slot_size` accepts, in bytes (4K, 8K, 16K, 32K).
pub const SLOT_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

/// Refuse a slot size other than [`SLOT_SIZES`], naming what is accepted.
pub(crate) fn check_slot_size(bytes: usize) -> Result<(), BlkError> {
    if SLOT_SIZES.contains(&bytes) {
        return Ok(());
    }
    Err(BlkError::Option(format!(
        "slot_size={bytes} bytes is not accepted; use 4K (zram's page, the default), 8K, 16K \
         or 32K"
    )))
}

/// Parse `slot_size`: `4K`, `8K`, `16K`, `32K` or the same in bytes.
pub fn parse_slot_size(value: &str) -> Result<usize, BlkError> {
    let bytes = wring_engine::size::parse_size(value).map_err(|_| {
        BlkError::Option(format!(
            "slot_size={value} is not a size; use 4K (zram's page, the default), 8K, 16K or 32K"
        ))
    })?;
    let bytes = usize::try_from(bytes).unwrap_or(0);
    check_slot_size(bytes)?;
    Ok(bytes)
}

/// Algorithm names [`CompAlgorithm::parse`] accepts (zram's).
pub(crate) const ALGORITHMS: [&str; 6] = ["lzo", "lzo-rle", "lz4", "lz4hc", "zstd", "deflate"];

/// A compression algorithm by zram's name, with the engine spec that implements it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompAlgorithm {
    /// zram's name.
    pub name: &'static str,
    /// The engine's algorithm and level.
    pub spec: CompressSpec,
}

impl CompAlgorithm {
    /// Parse `lz4`, `zstd:3`, `deflate:9`, …
    pub fn parse(text: &str) -> Result<CompAlgorithm, BlkError> {
        let text = text.trim();
        let (name, level) = match text.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (text, None),
        };
        // zram's algorithms: the engine's zlib (btrfs's, with its header) is not one.
        let algorithm = match name.parse::<Algorithm>() {
            Ok(a) if ALGORITHMS.contains(&a.name()) => a,
            _ => {
                return Err(BlkError::Option(format!(
                    "comp_algorithm={name} is unknown; accepted: {}, with a level as zstd:3",
                    ALGORITHMS.join(", ")
                )))
            }
        };
        // zram's deflate takes zlib's levels 1 to 9 (a 0 would be the engine's default).
        if algorithm == Algorithm::Deflate
            && level
                .is_some_and(|l| !matches!(l, "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9"))
        {
            return Err(BlkError::Option(format!(
                "comp_algorithm={text}: deflate's levels are 1 to 9 (default 6)"
            )));
        }
        let (spec, _) = CompressSpec::parse(text).map_err(|source| BlkError::Spec {
            option: format!("comp_algorithm={text}"),
            source,
        })?;
        Ok(CompAlgorithm {
            name: algorithm.name(),
            spec,
        })
    }

    /// The text that parses back to this algorithm (`zstd:3`; no level for level-less ones).
    pub fn text(&self) -> String {
        match self.spec.algorithm {
            Some(a) if a.has_levels() => format!("{}:{}", self.name, self.spec.level),
            _ => self.name.to_string(),
        }
    }
}

impl std::fmt::Display for CompAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// A device's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `comp_algorithm`.
    pub comp_algorithm: CompAlgorithm,
    /// `streams`: compression streams (the offload's CPU workers).
    pub streams: usize,
    /// `mem_limit` in bytes; 0 = none.
    pub mem_limit: u64,
    /// `recomp_algorithm`: (priority 1 to 3, algorithm), sorted by priority.
    pub recomp_algorithm: Vec<(u8, CompAlgorithm)>,
    /// `backing_dev`: the writeback file.
    pub backing_dev: Option<std::path::PathBuf>,
    /// `writeback_limit` in 4 KiB pages; `None`: no limit.
    pub writeback_limit: Option<u64>,
    /// `algorithm_params dict=FILE`: (priority, zstd dictionary file).
    pub dicts: Vec<(u8, std::path::PathBuf)>,
    /// Beyond zram: the scheduled policy (`policy=every=60 age=300 …`).
    pub policy: Option<Schedule>,
    /// Beyond zram: reserved 4 KiB pages for staging (`page_pool`); 0 = off.
    pub page_pool: usize,
    /// Beyond zram: bytes per slot (`slot_size`), one of [`SLOT_SIZES`]; zram's is 4096.
    pub slot_size: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            comp_algorithm: CompAlgorithm {
                name: "lz4",
                spec: CompressSpec {
                    algorithm: Some(Algorithm::Lz4),
                    level: 0,
                },
            },
            streams: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_limit: 0,
            recomp_algorithm: Vec::new(),
            backing_dev: None,
            writeback_limit: None,
            dicts: Vec::new(),
            policy: None,
            page_pool: 0,
            slot_size: PAGE_SIZE,
        }
    }
}

/// Parse a size (`256M`) with the engine's parser, naming the option on failure.
pub fn parse_size(key: &str, value: &str) -> Result<u64, BlkError> {
    wring_engine::size::parse_size(value).map_err(|source| BlkError::Size {
        option: key.to_string(),
        source,
    })
}

impl Options {
    /// Parse `key=value,key=value` over the defaults.
    pub fn parse(text: &str) -> Result<Options, BlkError> {
        let mut o = Options::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(BlkError::Option(format!(
                    "option '{pair}' has no value; write it as key=value (keys: {})",
                    KEYS.join(", ")
                )));
            };
            o.set(k.trim(), v.trim())?;
        }
        o.check()?;
        Ok(o)
    }

    /// Refuse combinations that do not work together: `slot_size` above 4K with
    /// `backing_dev` (the backing file's blocks, and `writeback_limit`, are 4 KiB pages).
    pub fn check(&self) -> Result<(), BlkError> {
        check_slot_size(self.slot_size)?;
        if self.slot_size != PAGE_SIZE && self.backing_dev.is_some() {
            return Err(BlkError::Option(format!(
                "slot_size={}K cannot be used with backing_dev: writeback writes 4 KiB blocks; \
                 drop backing_dev, or use slot_size=4K",
                self.slot_size / 1024
            )));
        }
        Ok(())
    }

    /// Set one option.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), BlkError> {
        match key {
            "comp_algorithm" => self.comp_algorithm = CompAlgorithm::parse(value)?,
            "streams" | "max_comp_streams" => self.streams = parse_streams(value)?,
            "mem_limit" => self.mem_limit = parse_size(key, value)?,
            "recomp_algorithm" => self.set_recomp(value)?,
            "algorithm_params" => self.set_params(value)?,
            "backing_dev" if value.is_empty() => {
                return Err(BlkError::Option(
                    "backing_dev needs a file: backing_dev=/var/tmp/zram-backing".into(),
                ))
            }
            "backing_dev" => self.backing_dev = Some(value.into()),
            "writeback_limit" => self.writeback_limit = parse_wb_limit(value)?,
            "policy" if value.trim() == "off" => self.policy = None,
            "policy" => self.policy = Some(Schedule::parse(value)?),
            "page_pool" => self.page_pool = parse_page_pool(value)?,
            "slot_size" => self.slot_size = parse_slot_size(value)?,
            other => {
                return Err(BlkError::Option(format!(
                    "unknown option '{other}'; accepted: {}",
                    KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// Add or replace a `recomp_algorithm` (`algo=zstd priority=1`, or a bare `zstd:3`).
    fn set_recomp(&mut self, value: &str) -> Result<(), BlkError> {
        let (mut algo, mut prio) = (None, None);
        for word in value.split_whitespace() {
            match word.split_once('=') {
                Some(("algo", a)) => algo = Some(CompAlgorithm::parse(a)?),
                Some(("priority", p)) => match p.parse::<u8>() {
                    Ok(n) if (1..=3).contains(&n) => prio = Some(n),
                    _ => {
                        return Err(BlkError::Option(format!(
                            "recomp_algorithm: priority={p} must be 1, 2 or 3"
                        )))
                    }
                },
                None if algo.is_none() => algo = Some(CompAlgorithm::parse(word)?),
                _ => {
                    return Err(BlkError::Option(format!(
                        "recomp_algorithm: '{word}' is not understood; write it as zram does, \
                         'algo=zstd priority=1'"
                    )))
                }
            }
        }
        let Some(algo) = algo else {
            return Err(BlkError::Option(
                "recomp_algorithm needs an algorithm: 'algo=zstd priority=1'".into(),
            ));
        };
        let prio = match prio {
            Some(p) => p,
            None => (1..=3)
                .find(|p| !self.recomp_algorithm.iter().any(|(q, _)| q == p))
                .ok_or_else(|| {
                    BlkError::Option(
                        "recomp_algorithm: all three priorities are taken; name one with \
                         priority=N to replace it"
                            .into(),
                    )
                })?,
        };
        self.recomp_algorithm.retain(|(q, _)| *q != prio);
        self.recomp_algorithm.push((prio, algo));
        self.recomp_algorithm.sort_by_key(|(q, _)| *q);
        Ok(())
    }

    /// Apply `algorithm_params` (`priority=1 level=9`, `algo=zstd level=9`).
    fn set_params(&mut self, value: &str) -> Result<(), BlkError> {
        let (mut prio, mut algo, mut level, mut dict) = (None, None, None, None);
        let bad = |word: &str, why: &str| {
            BlkError::Option(format!(
                "algorithm_params: '{word}' {why}; write it as zram does, \
                 'priority=1 level=9' or 'algo=zstd level=9'"
            ))
        };
        for word in value.split_whitespace() {
            match word.split_once('=') {
                Some(("priority", p)) => match p.parse::<u8>() {
                    Ok(n) if n <= 3 => prio = Some(n),
                    _ => return Err(bad(word, "needs 0 (the primary) to 3")),
                },
                Some(("algo", a)) => algo = Some(a.to_string()),
                Some(("level", l)) => match l.parse::<i32>() {
                    Ok(n) => level = Some(n),
                    Err(_) => return Err(bad(word, "needs a whole number")),
                },
                Some(("dict", f)) if !f.is_empty() => dict = Some(std::path::PathBuf::from(f)),
                _ => return Err(bad(word, "is not understood")),
            }
        }
        if level.is_none() && dict.is_none() {
            return Err(bad(value, "sets nothing"));
        }
        let target: u8 = match (prio, &algo) {
            (Some(_), Some(_)) => return Err(bad(value, "names both algo= and priority=")),
            (None, None) => 0,
            (Some(p), None) => p,
            (None, Some(a)) if self.comp_algorithm.name == a => 0,
            (None, Some(a)) => match self.recomp_algorithm.iter().find(|(_, r)| r.name == a) {
                Some((p, _)) => *p,
                None => return Err(bad(value, "names an algorithm the device does not use")),
            },
        };
        let alg: &mut CompAlgorithm = if target == 0 {
            &mut self.comp_algorithm
        } else {
            match self.recomp_algorithm.iter_mut().find(|(q, _)| *q == target) {
                Some((_, a)) => a,
                None => return Err(bad(value, "names a priority with no recomp_algorithm yet")),
            }
        };
        if let Some(level) = level {
            *alg = CompAlgorithm::parse(&format!("{}:{level}", alg.name))
                .map_err(|e| BlkError::Option(format!("algorithm_params: {e}")))?;
        }
        if let Some(dict) = dict {
            if alg.name != "zstd" {
                return Err(bad(
                    value,
                    "gives a dictionary to an algorithm other than zstd",
                ));
            }
            self.dicts.retain(|(q, _)| *q != target);
            self.dicts.push((target, dict));
            self.dicts.sort_by_key(|(q, _)| *q);
        }
        Ok(())
    }

    /// The options as `(key, value)` pairs, each a valid [`Options::set`] (keys may repeat).
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = vec![
            ("comp_algorithm".to_string(), self.comp_algorithm.text()),
            ("streams".to_string(), self.streams.to_string()),
            ("mem_limit".to_string(), self.mem_limit.to_string()),
        ];
        for (p, a) in &self.recomp_algorithm {
            v.push((
                "recomp_algorithm".to_string(),
                format!("algo={a} priority={p}"),
            ));
        }
        for (p, d) in &self.dicts {
            v.push((
                "algorithm_params".to_string(),
                format!("priority={p} dict={}", d.display()),
            ));
        }
        if let Some(b) = &self.backing_dev {
            v.push(("backing_dev".to_string(), b.display().to_string()));
        }
        if let Some(l) = self.writeback_limit {
            v.push(("writeback_limit".to_string(), l.to_string()));
        }
        if let Some(p) = &self.policy {
            v.push(("policy".to_string(), p.text()));
        }
        if self.page_pool > 0 {
            v.push(("page_pool".to_string(), self.page_pool.to_string()));
        }
        if self.slot_size != PAGE_SIZE {
            v.push(("slot_size".to_string(), self.slot_size.to_string()));
        }
        v
    }

    /// The options as `key=value,…` text that [`Options::parse`] reads back.
    pub fn text(&self) -> String {
        self.pairs()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Parse `writeback_limit`: pages of 4 KiB, or `off` for none.
pub fn parse_wb_limit(value: &str) -> Result<Option<u64>, BlkError> {
    match value.trim() {
        "off" | "none" => Ok(None),
        v => v.parse::<u64>().map(Some).map_err(|_| {
            BlkError::Option(format!(
                "writeback_limit={v} is not a page count; give a number of 4 KiB pages, or off"
            ))
        }),
    }
}

/// Parse `page_pool`: a number of 4 KiB pages, at most 4 GiB of them (they are allocated and
/// locked when set).
pub(crate) fn parse_page_pool(value: &str) -> Result<usize, BlkError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n <= 1 << 20 => Ok(n),
        _ => Err(BlkError::Option(format!(
            "page_pool={value} is not a page count; give a number of 4 KiB pages from 0 to \
             1048576 (0 turns the pool off)"
        ))),
    }
}

/// Parse a stream count: a whole number from 1 to 256.
pub(crate) fn parse_streams(value: &str) -> Result<usize, BlkError> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(BlkError::Option(format!(
            "streams={value} is not a stream count; give a whole number from 1 to 256"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_pool_is_a_page_count_and_round_trips() {
        assert_eq!(Options::default().page_pool, 0);
        assert!(!Options::default().text().contains("page_pool"));
        let o = Options::parse("comp_algorithm=lz4,page_pool=64").unwrap();
        assert_eq!(o.page_pool, 64);
        assert_eq!(Options::parse(&o.text()).unwrap(), o);
        for bad in ["page_pool=lots", "page_pool=-1", "page_pool=1048577"] {
            let e = Options::parse(bad).unwrap_err().to_string();
            assert!(e.contains("page_pool") && e.contains("1048576"), "{e}");
        }
    }

    #[test]
    fn slot_size_takes_4k_to_32k_and_refuses_backing_dev() {
        assert_eq!(Options::default().slot_size, 4096);
        for (text, bytes) in [("4K", 4096), ("8K", 8192), ("16K", 16384), ("32k", 32768)] {
            let o = Options::parse(&format!("slot_size={text}")).unwrap();
            assert_eq!(o.slot_size, bytes, "{text}");
            assert_eq!(Options::parse(&o.text()).unwrap(), o);
        }
        assert_eq!(Options::parse("slot_size=16384").unwrap().slot_size, 16384);
        for bad in [
            "slot_size=12K",
            "slot_size=64K",
            "slot_size=0",
            "slot_size=big",
        ] {
            let e = Options::parse(bad).unwrap_err().to_string();
            assert!(e.contains("slot_size") && e.contains("16K"), "{bad}: {e}");
        }
        for text in [
            "slot_size=16K,backing_dev=/tmp/x",
            "backing_dev=/tmp/x,slot_size=8K",
        ] {
            let e = Options::parse(text).unwrap_err().to_string();
            assert!(e.contains("slot_size") && e.contains("backing_dev"), "{e}");
        }
        assert!(Options::parse("slot_size=4K,backing_dev=/tmp/x").is_ok());
    }

    #[test]
    fn zram_names_and_levels() {
        let o = Options::parse("comp_algorithm=zstd:3,streams=2,mem_limit=1M").unwrap();
        assert_eq!(o.comp_algorithm.text(), "zstd:3");
        assert_eq!((o.streams, o.mem_limit), (2, 1 << 20));
        assert_eq!(Options::parse(&o.text()).unwrap(), o);
        let d = CompAlgorithm::parse("deflate:9").unwrap();
        assert_eq!(d.spec.algorithm, Some(Algorithm::Deflate));
        assert_eq!(d.text(), "deflate:9");
        assert_eq!(CompAlgorithm::parse("deflate").unwrap().text(), "deflate:6");
        for bad in ["deflate:0", "deflate:10", "deflate:x"] {
            let e = CompAlgorithm::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
        assert_eq!(CompAlgorithm::parse("lz4").unwrap().text(), "lz4");
    }

    #[test]
    fn unknown_options_name_the_option_and_what_is_accepted() {
        let e = Options::parse("compression=lz4").unwrap_err().to_string();
        assert!(
            e.contains("compression") && e.contains("comp_algorithm"),
            "{e}"
        );
        let e = Options::parse("comp_algorithm=brotli")
            .unwrap_err()
            .to_string();
        assert!(e.contains("brotli") && e.contains("zstd"), "{e}");
        // btrfs's zlib is not one of zram's algorithms.
        assert!(Options::parse("comp_algorithm=zlib").is_err());
        let e = Options::parse("streams=0").unwrap_err().to_string();
        assert!(e.contains("streams=0"), "{e}");
        let e = Options::parse("mem_limit=lots").unwrap_err().to_string();
        assert!(e.contains("mem_limit"), "{e}");
        assert_eq!(
            Options::parse("comp_algorithm=lzo-rle")
                .map(|o| o.comp_algorithm.text())
                .ok(),
            Some("lzo-rle".to_string())
        );
        assert!(Options::parse("comp_algorithm=lzo-rle:1").is_err());
        for bad in [
            "recomp_algorithm=algo=zstd priority=4",
            "recomp_algorithm=priority=1",
            "recomp_algorithm=algo=brotli",
            "recomp_algorithm=zstd lz4",
            "backing_dev=",
            "writeback_limit=1G",
        ] {
            assert!(Options::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn recomp_algorithms_take_zram_spelling_and_priorities() {
        let o = Options::parse(
            "recomp_algorithm=algo=zstd:9 priority=2,recomp_algorithm=lz4hc,\
             recomp_algorithm=zstd,recomp_algorithm=algo=deflate priority=2",
        )
        .unwrap();
        let got: Vec<(u8, String)> = o
            .recomp_algorithm
            .iter()
            .map(|(p, a)| (*p, a.text()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "lz4hc:9".into()),
                (2, "deflate:6".into()),
                (3, "zstd:3".into())
            ]
        );
        assert_eq!(Options::parse(&o.text()).unwrap(), o);
        let p = Options::parse(
            "comp_algorithm=zstd,algorithm_params=level=7,recomp_algorithm=zstd,\
             algorithm_params=priority=1 level=12,recomp_algorithm=lz4hc,\
             algorithm_params=algo=lz4hc level=4",
        )
        .unwrap();
        assert_eq!(p.comp_algorithm.text(), "zstd:7");
        let got: Vec<String> = p.recomp_algorithm.iter().map(|(_, a)| a.text()).collect();
        assert_eq!(got, ["zstd:12", "lz4hc:4"]);
        assert_eq!(Options::parse(&p.text()).unwrap(), p);
        let d = Options::parse(&(p.text() + ",algorithm_params=priority=1 dict=/tmp/d")).unwrap();
        assert_eq!(d.dicts, [(1, std::path::PathBuf::from("/tmp/d"))]);
        assert_eq!(Options::parse(&d.text()).unwrap(), d);
        for bad in [
            "algorithm_params=level=3",            // lz4 has no levels
            "algorithm_params=priority=2 level=3", // no such recomp_algorithm
            "comp_algorithm=zstd,algorithm_params=level=x",
            "comp_algorithm=zstd,algorithm_params=priority=1",
            "comp_algorithm=zstd,algorithm_params=algo=lz4 level=1",
            "algorithm_params=dict=/tmp/d", // lz4 takes no dictionary here
            "comp_algorithm=zstd,algorithm_params=dict=",
        ] {
            assert!(Options::parse(bad).is_err(), "{bad}");
        }
        let w = Options::parse(
            "backing_dev=/tmp/b,writeback_limit=100,policy=every=60 age=600 writeback=huge_idle",
        )
        .unwrap();
        assert_eq!(
            w.policy.as_ref().map(|p| p.text()).as_deref(),
            Some("every=60 age=600 recompress=idle writeback=huge_idle")
        );
        assert_eq!(w.writeback_limit, Some(100));
        assert_eq!(Options::parse(&w.text()).unwrap(), w);
        let e = Options::parse(&(o.text() + ",recomp_algorithm=lz4"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("priorities are taken"), "{e}");
    }
}
