//! What the counters hold at one moment, for `wring status` (its text lines and its `--json`
//! fields, both from these structs so the two cannot disagree) and for the metrics.
//!
//! Mirrors the counters' own layout (one struct per counter group); the JSON names carry their
//! units (`_seconds`), the text keeps its millisecond figures.

use std::fmt;

use serde::{Serialize, Serializer};

/// Serialize a count of nanoseconds as seconds (JSON fields named `…_seconds`).
pub(crate) fn nanos_as_seconds<S: Serializer>(nanos: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(*nanos as f64 / 1e9)
}

/// Milliseconds of `nanos`, as the text shows them.
fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// One FUSE opcode's requests and handling time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OpFigure {
    /// The opcode's name (`lookup`, `write`, `copy_file_range`, …).
    pub op: &'static str,
    /// Requests of this kind.
    pub requests: u64,
    /// Time their handlers took, replies included.
    #[serde(rename = "seconds", serialize_with = "nanos_as_seconds")]
    pub nanos: u64,
    /// Requests whose handling ended, by time taken: at most 10 µs, 100 µs, 1 ms, 10 ms,
    /// 100 ms, 1 s, 10 s, and longer ([`super::LATENCY_BOUNDS_NS`]).
    pub buckets: [u64; super::LATENCY_BUCKETS],
}

/// Every opcode's figures, in `fuse_opcode` order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct FuseFigures {
    /// One per opcode counted (all of them, zeros included).
    pub ops: Vec<OpFigure>,
}

/// `fuse: total=N name=N …` (the kinds seen) and `fuse_ms: total=X name=X …`.
impl fmt::Display for FuseFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.ops.iter().map(|o| o.requests).sum();
        write!(f, "fuse: total={total}")?;
        for o in self.ops.iter().filter(|o| o.requests > 0) {
            write!(f, " {}={}", o.op, o.requests)?;
        }
        let nanos: u64 = self.ops.iter().map(|o| o.nanos).sum();
        write!(f, "\nfuse_ms: total={:.1}", ms(nanos))?;
        for o in self.ops.iter().filter(|o| o.nanos > 0) {
            write!(f, " {}={:.1}", o.op, ms(o.nanos))?;
        }
        writeln!(f)
    }
}

/// The store's transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TxnFigures {
    /// Read transactions begun.
    pub read: u64,
    /// Write transactions begun.
    pub write: u64,
    /// Write transactions committed.
    pub commits: u64,
    /// Of those, durable ones.
    pub durable: u64,
    /// Time spent committing.
    #[serde(rename = "commit_seconds", serialize_with = "nanos_as_seconds")]
    pub commit_nanos: u64,
    /// Of that, in durable commits.
    #[serde(rename = "durable_seconds", serialize_with = "nanos_as_seconds")]
    pub durable_nanos: u64,
}

impl fmt::Display for TxnFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "transactions: read={} write={} commits={} durable={} commit_ms={:.1} \
             durable_ms={:.1}",
            self.read,
            self.write,
            self.commits,
            self.durable,
            ms(self.commit_nanos),
            ms(self.durable_nanos)
        )
    }
}

/// Requests that waited for a file's writeback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WaitFigures {
    /// Waits.
    pub count: u64,
    /// Time waited.
    #[serde(rename = "seconds", serialize_with = "nanos_as_seconds")]
    pub nanos: u64,
}

impl fmt::Display for WaitFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "writeback_waits: count={} ms={:.1}",
            self.count,
            ms(self.nanos)
        )
    }
}

/// Delayed inode items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DelayedFigures {
    /// Changes delayed.
    pub updates: u64,
    /// Creates and unlinks delayed.
    pub names: u64,
    /// Items written by a transaction.
    pub written: u64,
    /// Transactions that wrote some.
    pub flushes: u64,
    /// Items of deleted inodes dropped unwritten.
    pub discarded: u64,
    /// Records and entries in memory now.
    pub held: usize,
}

impl fmt::Display for DelayedFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "delayed_inodes: updates={} names={} written={} flushes={} discarded={} held={}",
            self.updates, self.names, self.written, self.flushes, self.discarded, self.held
        )
    }
}
