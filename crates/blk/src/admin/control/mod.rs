//! The control channel of a running device: what zram's sysfs files are to `/dev/zramN`.
//!
//! The device's server (the nbdkit plugin) listens on a second Unix socket beside the NBD
//! socket, created mode 0600 inside the device's 0700 runtime directory, so only the owner can
//! reach it. The protocol is one request line, one reply line, then the connection closes:
//!
//! | request | reply `ok` value | sysfs |
//! |---|---|---|
//! | `stat` | the [`Stat`](crate::Stat) object | `mm_stat`, `io_stat`, `disksize`, … |
//! | `compact` | pages freed by this call | `compact` |
//! | `reset` | `null` | `reset` (frees every page and zeroes the statistics; size and options stay) |
//! | `mem_limit SIZE` | the new limit in bytes | `mem_limit` |
//! | `streams N` | the streams now | `max_comp_streams` |
//! | `idle all` or `idle SECONDS` | pages now idle | `idle` |
//! | `recompress [type=…] [threshold=N] [algo=NAME]` | a [`RecompressReport`](crate::RecompressReport) | `recompress` |
//! | `writeback idle\|huge\|huge_idle\|incompressible` | a [`WritebackReport`](crate::WritebackReport) | `writeback` |
//! | `writeback_limit N\|off` | the budget now | `writeback_limit` (+ `_enable`) |
//! | `train_dict [size=B] [level=L] [samples=N] [save=FILE]` | a [`TrainReport`](crate::TrainReport) | (beyond zram) |
//! | `policy every=S age=S [recompress=T] [writeback=T]` or `policy off` | the policy | (beyond zram) |
//! | `page_pool N` | the pool's counters ([`PoolStats`](wring_engine::pool::PoolStats)) | (beyond zram: resizes it live) |
//!
//! A reply is a JSON object: `{"ok": VALUE}` or `{"error": "MESSAGE"}`. A request line is at
//! most 256 bytes; one connection is served at a time, and one that sends no line within 10 s
//! is dropped.
//!
//! Here: the requests, parsed and printed ([`Request`]); `server` answers them on the device's
//! side (the nbdkit plugin), `client` sends them (`wring blk`).

// This module reads its input from a socket: a bad line is an error reply, never a panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod client;
mod server;

pub use client::{recompress, request, stat, train_dict, writeback};
pub use server::{bind, handle, serve};

use crate::actions::recompress::RecompressRequest;
use crate::actions::train::TrainRequest;
use crate::error::BlkError;
use crate::options::{parse_page_pool, parse_size, parse_streams, parse_wb_limit};
use crate::options::{Schedule, WritebackType};

/// The longest request line read.
const MAX_LINE: u64 = 256;

/// A control request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Statistics.
    Stat,
    /// Compact the arena.
    Compact,
    /// Free everything.
    Reset,
    /// Set `mem_limit` (bytes).
    MemLimit(u64),
    /// Set the number of streams.
    Streams(usize),
    /// Mark pages idle: all (`None`) or those not accessed for at least this many seconds.
    Idle(Option<u64>),
    /// Recompress with secondary algorithms.
    Recompress(RecompressRequest),
    /// Train a zstd dictionary from the pages and recompress with it.
    TrainDict(TrainRequest),
    /// Set the scheduled policy (`None`: off).
    Policy(Option<Schedule>),
    /// Write pages back to the backing file.
    Writeback(WritebackType),
    /// Set the writeback budget in pages (`None`: no limit).
    WritebackLimit(Option<u64>),
    /// Resize the page pool (pages; 0 turns it off).
    PagePool(usize),
}

/// Parse `idle`'s argument: `all` or a whole number of seconds.
pub fn parse_idle(value: &str) -> Result<Option<u64>, BlkError> {
    match value.trim() {
        "all" => Ok(None),
        v => v.parse::<u64>().map(Some).map_err(|_| {
            BlkError::Option(format!(
                "idle {v}: give 'all' or a whole number of seconds since last access"
            ))
        }),
    }
}

impl Request {
    /// Parse a request line.
    pub fn parse(line: &str) -> Result<Request, BlkError> {
        if let Some(rest) = line.trim().strip_prefix("recompress") {
            if rest.is_empty() || rest.starts_with(' ') {
                return Ok(Request::Recompress(RecompressRequest::parse(rest)?));
            }
        }
        if let Some(rest) = line.trim().strip_prefix("policy ") {
            return Ok(Request::Policy(match rest.trim() {
                "off" => None,
                spec => Some(Schedule::parse(spec)?),
            }));
        }
        if let Some(rest) = line.trim().strip_prefix("train_dict") {
            if rest.is_empty() || rest.starts_with(' ') {
                return Ok(Request::TrainDict(TrainRequest::parse(rest)?));
            }
        }
        let mut words = line.split_whitespace();
        let req = match (words.next(), words.next()) {
            (Some("stat"), None) => Request::Stat,
            (Some("compact"), None) => Request::Compact,
            (Some("reset"), None) => Request::Reset,
            (Some("mem_limit"), Some(v)) => Request::MemLimit(parse_size("mem_limit", v)?),
            (Some("streams"), Some(v)) => Request::Streams(parse_streams(v)?),
            (Some("idle"), Some(v)) => Request::Idle(parse_idle(v)?),
            (Some("writeback"), Some(v)) => Request::Writeback(WritebackType::parse(v)?),
            (Some("writeback_limit"), Some(v)) => Request::WritebackLimit(parse_wb_limit(v)?),
            (Some("page_pool"), Some(v)) => Request::PagePool(parse_page_pool(v)?),
            _ => {
                return Err(BlkError::Option(format!(
                    "unknown control request '{}'; accepted: stat, compact, reset, mem_limit SIZE, streams N, idle all|SECONDS, recompress [type=…] [threshold=N] [algo=NAME], writeback TYPE, writeback_limit N|off, train_dict [size=BYTES] [level=L], policy every=S age=S …|off, page_pool N",
                    line.trim()
                )))
            }
        };
        if words.next().is_some() {
            return Err(BlkError::Option(format!(
                "control request '{}' has extra words",
                line.trim()
            )));
        }
        Ok(req)
    }

    /// The request as a line.
    pub fn line(&self) -> String {
        match self {
            Request::Stat => "stat".into(),
            Request::Compact => "compact".into(),
            Request::Reset => "reset".into(),
            Request::MemLimit(b) => format!("mem_limit {b}"),
            Request::Streams(n) => format!("streams {n}"),
            Request::Idle(None) => "idle all".into(),
            Request::Idle(Some(s)) => format!("idle {s}"),
            Request::Recompress(r) => format!("recompress {}", r.text()).trim_end().to_string(),
            Request::Writeback(t) => format!("writeback {}", t.name()),
            Request::TrainDict(t) => format!("train_dict {}", t.text()),
            Request::Policy(None) => "policy off".into(),
            Request::Policy(Some(p)) => format!("policy {}", p.text()),
            Request::WritebackLimit(Some(n)) => format!("writeback_limit {n}"),
            Request::WritebackLimit(None) => "writeback_limit off".into(),
            Request::PagePool(n) => format!("page_pool {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_refused() {
        for r in [
            Request::Stat,
            Request::Compact,
            Request::Reset,
            Request::MemLimit(1 << 20),
            Request::Streams(3),
            Request::Idle(None),
            Request::Idle(Some(60)),
            Request::Recompress(RecompressRequest::default()),
            Request::Writeback(WritebackType::HugeIdle),
            Request::WritebackLimit(Some(10)),
            Request::WritebackLimit(None),
            Request::PagePool(0),
            Request::PagePool(256),
            Request::TrainDict(TrainRequest::default()),
            Request::Policy(None),
            Request::Policy(Some(
                Schedule::parse("every=9 age=99 writeback=huge").unwrap(),
            )),
            Request::TrainDict(TrainRequest::parse("size=16K level=9 save=/tmp/d").unwrap()),
            Request::Recompress(
                RecompressRequest::parse("type=huge_idle threshold=3000 algo=zstd max_pages=9")
                    .unwrap(),
            ),
        ] {
            assert_eq!(Request::parse(&r.line()).unwrap(), r);
        }
        assert_eq!(
            Request::parse("mem_limit 1M\n").unwrap(),
            Request::MemLimit(1 << 20)
        );
        for bad in [
            "",
            "stats",
            "streams",
            "streams 0",
            "mem_limit x",
            "compact now",
            "idle",
            "idle -1",
            "idle soon",
            "recompress type=big",
            "recompress threshold=0",
            "recompress algo=zstd priority=1",
            "recompress priority=4",
            "recompressx",
            "writeback all",
            "writeback_limit",
            "train_dict size=1",
            "train_dict level=0",
            "train_dicts",
            "policy every=1",
            "policy",
            "page_pool",
            "page_pool many",
            "page_pool 1048577",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// Request lines: a command and key=value words from its own keys (mostly well formed,
    /// so that many are accepted), or arbitrary text.
    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value = prop_oneof![
            "[0-9]{1,4}",
            "[1-9][0-9]{0,2}[KM]",
            "huge|idle|huge_idle|all|off|incompressible",
            "zstd(:[0-9])?|lz4hc|/tmp/[a-z]{1,4}",
        ];
        let kvs = |keys: &'static str| {
            prop::collection::vec((keys, value.clone()), 0..4).prop_map(|kv| {
                kv.into_iter()
                    .map(|(k, v)| format!(" {k}={v}"))
                    .collect::<String>()
            })
        };
        prop_oneof![
            kvs("type|threshold|algo|priority|max_pages").prop_map(|w| format!("recompress{w}")),
            kvs("size|level|samples|save").prop_map(|w| format!("train_dict{w}")),
            kvs("every|age|recompress|writeback").prop_map(|w| format!("policy{w}")),
            value.clone().prop_map(|v| format!("idle {v}")),
            value.clone().prop_map(|v| format!("writeback {v}")),
            value.clone().prop_map(|v| format!("writeback_limit {v}")),
            value.clone().prop_map(|v| format!("mem_limit {v}")),
            value.clone().prop_map(|v| format!("page_pool {v}")),
            value.prop_map(|v| format!("streams {v}")),
            "\\PC{0,40}",
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The control parser on any line: never panics, and whatever it accepts prints back
        /// as a line that parses to the same request (the fuzz target's property, run in CI).
        #[test]
        fn any_line_parses_or_is_refused_and_accepted_ones_round_trip(l in line()) {
            if let Ok(r) = Request::parse(&l) {
                let again = Request::parse(&r.line());
                proptest::prop_assert_eq!(again.ok(), Some(r));
            }
        }
    }
}
