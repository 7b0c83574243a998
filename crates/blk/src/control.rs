//! The control channel of a running device: what zram's sysfs files are to `/dev/zramN`.
//!
//! The device's server (the nbdkit plugin) listens on a second Unix socket beside the NBD
//! socket, created mode 0600 inside the device's 0700 runtime directory, so only the owner can
//! reach it. The protocol is one request line, one reply line, then the connection closes:
//!
//! | request | reply `ok` value | sysfs |
//! |---|---|---|
//! | `stat` | the [`Stat`] object | `mm_stat`, `io_stat`, `disksize`, … |
//! | `compact` | pages freed by this call | `compact` |
//! | `reset` | `null` | `reset` (frees every page and zeroes the statistics; size and options stay) |
//! | `mem_limit SIZE` | the new limit in bytes | `mem_limit` |
//! | `streams N` | the streams now | `max_comp_streams` |
//! | `idle all` or `idle SECONDS` | pages now idle | `idle` |
//! | `recompress [type=…] [threshold=N] [algo=NAME]` | a [`RecompressReport`] | `recompress` |
//! | `writeback idle\|huge\|huge_idle\|incompressible` | a [`WritebackReport`] | `writeback` |
//! | `writeback_limit N\|off` | the budget now | `writeback_limit` (+ `_enable`) |
//! | `train_dict [size=B] [level=L] [samples=N] [save=FILE]` | a [`TrainReport`] | (beyond zram) |
//! | `policy every=S age=S [recompress=T] [writeback=T]` or `policy off` | the policy | (beyond zram) |
//! | `page_pool N` | the pool's counters ([`PoolStats`](wring_engine::pool::PoolStats)) | (beyond zram: resizes it live) |
//!
//! A reply is a JSON object: `{"ok": VALUE}` or `{"error": "MESSAGE"}`. A request line is at
//! most 256 bytes; one connection is served at a time, and one that sends no line within 10 s
//! is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::backing::{WritebackReport, WritebackType};
use crate::error::BlkError;
use crate::options::parse_wb_limit;
use crate::options::{parse_page_pool, parse_size, parse_streams};
use crate::recompress::{RecompressReport, RecompressRequest, TrainReport, TrainRequest};
use crate::schedule::Schedule;
use crate::stats::Stat;
use crate::store::Store;

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

/// Carry out a request on a store.
pub fn handle(store: &Store, req: Request) -> Result<Value, BlkError> {
    Ok(match req {
        Request::Stat => {
            serde_json::to_value(store.stat()).map_err(|e| BlkError::Option(e.to_string()))?
        }
        Request::Compact => json!(store.compact()),
        Request::Reset => {
            store.reset();
            Value::Null
        }
        Request::MemLimit(b) => {
            store.set_mem_limit(b);
            json!(b)
        }
        Request::Streams(n) => {
            store.set_streams(n)?;
            json!(store.stat().streams)
        }
        Request::Idle(older_than) => json!(store.mark_idle(older_than)),
        Request::Recompress(r) => serde_json::to_value(store.recompress(&r)?)
            .map_err(|e| BlkError::Option(e.to_string()))?,
        Request::Policy(p) => {
            let text = p.as_ref().map(Schedule::text);
            store.set_policy(p);
            json!(text)
        }
        Request::TrainDict(t) => serde_json::to_value(store.train_dict(&t)?)
            .map_err(|e| BlkError::Option(e.to_string()))?,
        Request::Writeback(t) => serde_json::to_value(store.writeback(t)?)
            .map_err(|e| BlkError::Option(e.to_string()))?,
        Request::WritebackLimit(n) => {
            store.set_writeback_limit(n);
            json!(store.writeback_limit())
        }
        Request::PagePool(n) => {
            store.set_page_pool(n);
            serde_json::to_value(store.stat().page_pool)
                .map_err(|e| BlkError::Option(e.to_string()))?
        }
    })
}

/// Bind the control socket at `path` (mode 0600), replacing a stale socket file.
pub fn bind(path: &Path) -> Result<UnixListener, BlkError> {
    let io = |what: &str, source| BlkError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("could not remove the stale socket", e)),
    }
    let l = UnixListener::bind(path).map_err(|e| io("could not bind the control socket", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io("could not make the control socket 0600:", e))?;
    Ok(l)
}

fn serve_one(store: &Store, stream: UnixStream) -> std::io::Result<()> {
    // A client that connects and says nothing must not hold the channel (one at a time).
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut line = String::new();
    BufReader::new(stream.try_clone()?.take(MAX_LINE)).read_line(&mut line)?;
    let reply = match Request::parse(&line).and_then(|r| handle(store, r)) {
        Ok(v) => json!({ "ok": v }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    let mut w = stream;
    writeln!(w, "{reply}")?;
    w.flush()
}

/// Serve requests on `listener` from a thread of its own, for as long as the process lives.
pub fn serve(listener: UnixListener, store: Arc<Store>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // A failed accept or a client that goes away mid-request costs nothing but its reply.
        for conn in listener.incoming().flatten() {
            let _ = serve_one(&store, conn);
        }
    })
}

/// Send one request to the control socket at `path` and return the reply's value.
pub fn request(path: &Path, req: Request) -> Result<Value, BlkError> {
    let io = |what: &str, source| BlkError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    let mut s = UnixStream::connect(path)
        .map_err(|e| io("could not reach the device's control socket", e))?;
    writeln!(s, "{}", req.line()).map_err(|e| io("could not send to", e))?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| io("could not read the reply from", e))?;
    let v: Value = serde_json::from_str(&line)
        .map_err(|e| BlkError::Option(format!("bad reply from the device: {e}: {line}")))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(BlkError::Option(e.to_string()));
    }
    Ok(v.get("ok").cloned().unwrap_or(Value::Null))
}

/// The device's statistics over the control socket at `path`.
pub fn stat(path: &Path) -> Result<Stat, BlkError> {
    let v = request(path, Request::Stat)?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad stat reply: {e}")))
}

/// Write back over the control socket at `path`.
pub fn writeback(path: &Path, kind: WritebackType) -> Result<WritebackReport, BlkError> {
    let v = request(path, Request::Writeback(kind))?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad writeback reply: {e}")))
}

/// Train a dictionary over the control socket at `path`.
pub fn train_dict(path: &Path, req: TrainRequest) -> Result<TrainReport, BlkError> {
    let v = request(path, Request::TrainDict(req))?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad train_dict reply: {e}")))
}

/// Recompress over the control socket at `path`.
pub fn recompress(path: &Path, req: RecompressRequest) -> Result<RecompressReport, BlkError> {
    let v = request(path, Request::Recompress(req))?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad recompress reply: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::ToyStreams;

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

    #[test]
    fn a_served_socket_answers_and_is_private() {
        /// Removes the directory also when an assertion fails.
        struct TempDir(std::path::PathBuf);
        impl Drop for TempDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let dir =
            TempDir(std::env::temp_dir().join(format!("wring-blk-control-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).unwrap();
        let path = dir.0.join("control.sock");
        let store = Arc::new(Store::new(1 << 20, 0, Box::new(ToyStreams)).unwrap());
        let l = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        serve(l, Arc::clone(&store));
        store.write(0, &[1u8; 4096]).unwrap();
        assert_eq!(stat(&path).unwrap().mm_stat.orig_data_size, 4096);
        assert_eq!(
            request(&path, Request::MemLimit(8192)).unwrap(),
            json!(8192)
        );
        assert_eq!(store.stat().mm_stat.mem_limit, 8192);
        let pool = request(&path, Request::PagePool(4)).unwrap();
        assert_eq!(
            (pool["size"].clone(), pool["free"].clone()),
            (json!(4), json!(4))
        );
        assert_eq!(store.stat().page_pool.size, 4);
        request(&path, Request::Reset).unwrap();
        assert_eq!(store.stat().mm_stat.orig_data_size, 0);
        // A raw bad line gets an error reply naming what is accepted.
        let mut s = UnixStream::connect(&path).unwrap();
        writeln!(s, "defrag").unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        assert!(
            reply.contains("error") && reply.contains("compact"),
            "{reply}"
        );
    }
}
