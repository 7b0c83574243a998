//! Per-mount request and transaction counters for `wring status`: FUSE requests by opcode,
//! the store's read and write transactions and commits (with the time spent committing), and
//! the time requests spent waiting for a file's writeback, and the delayed inode items.
//! Cheap: relaxed atomic adds.
//!
//! Mirrors the kernel's per-superblock statistics the way /proc/fs/fuse and btrfs's
//! `commit_stats` in sysfs expose them (commits, total commit time); the names follow the
//! FUSE opcodes (include/uapi/linux/fuse.h).

mod encodings;
pub(crate) mod figures;

pub(crate) use encodings::{EncodingCounts, EncodingFigure};
pub(crate) use figures::{DelayedFigures, FuseFigures, OpFigure, TxnFigures, WaitFigures};

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The FUSE requests counted, as in `fuse_opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
#[allow(missing_docs)]
pub(crate) enum Op {
    Lookup,
    Forget,
    Getattr,
    Setattr,
    Readlink,
    Symlink,
    Mknod,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
    Link,
    Open,
    Read,
    Write,
    Statfs,
    Release,
    Fsync,
    Setxattr,
    Getxattr,
    Listxattr,
    Removexattr,
    Flush,
    Opendir,
    Readdir,
    Releasedir,
    Fsyncdir,
    Access,
    Create,
    Fallocate,
    Readdirplus,
    Ioctl,
    Tmpfile,
    Statx,
    CopyFileRange,
}

/// Names of [`Op`]s, in order.
const NAMES: [&str; 35] = [
    "lookup",
    "forget",
    "getattr",
    "setattr",
    "readlink",
    "symlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "rename",
    "link",
    "open",
    "read",
    "write",
    "statfs",
    "release",
    "fsync",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
    "flush",
    "opendir",
    "readdir",
    "releasedir",
    "fsyncdir",
    "access",
    "create",
    "fallocate",
    "readdirplus",
    "ioctl",
    "tmpfile",
    "statx",
    "copy_file_range",
];

/// Upper bounds, in nanoseconds, of the buckets FUSE request times are counted in (10 µs to
/// 10 s, ten times apart); a last bucket takes the rest.
pub(crate) const LATENCY_BOUNDS_NS: [u64; 7] = [
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// Buckets per opcode: one per bound, and one past the last.
pub(crate) const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

/// FUSE requests by opcode, and the time the daemon spent on each kind.
pub(crate) struct OpCounts {
    counts: [AtomicU64; NAMES.len()],
    nanos: [AtomicU64; NAMES.len()],
    /// Requests whose handling ended, by how long it took.
    buckets: [[AtomicU64; LATENCY_BUCKETS]; NAMES.len()],
    /// Bytes WRITE requests wrote.
    written: AtomicU64,
}

impl Default for OpCounts {
    fn default() -> Self {
        OpCounts {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            nanos: std::array::from_fn(|_| AtomicU64::new(0)),
            buckets: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            written: AtomicU64::new(0),
        }
    }
}

/// Adds the time from its making to its drop to its request's kind.
pub(crate) struct Timed<'a> {
    counts: &'a OpCounts,
    op: Op,
    start: Instant,
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        let op = self.op as usize;
        self.counts.nanos[op].fetch_add(ns, Ordering::Relaxed);
        let b = LATENCY_BOUNDS_NS.iter().take_while(|&&u| ns > u).count();
        self.counts.buckets[op][b].fetch_add(1, Ordering::Relaxed);
    }
}

impl OpCounts {
    /// Count one request; the time until the returned guard drops is its handling time.
    pub(crate) fn count(&self, op: Op) -> Timed<'_> {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        Timed {
            counts: self,
            op,
            start: Instant::now(),
        }
    }

    /// Count `n` of one request (a batch of forgets).
    #[cfg(test)]
    pub(crate) fn add(&self, op: Op, n: u64) {
        self.counts[op as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Count `n` bytes a WRITE request wrote.
    pub(crate) fn wrote(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes WRITE requests wrote.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Every kind's requests and nanoseconds, in `fuse_opcode` order.
    pub(crate) fn figures(&self) -> FuseFigures {
        let ops = NAMES
            .iter()
            .zip(self.counts.iter().zip(&self.nanos).zip(&self.buckets))
            .map(|(name, ((c, n), b))| OpFigure {
                op: name,
                requests: c.load(Ordering::Relaxed),
                nanos: n.load(Ordering::Relaxed),
                buckets: std::array::from_fn(|i| b[i].load(Ordering::Relaxed)),
            })
            .collect();
        FuseFigures { ops }
    }
}

/// The store's transactions.
#[derive(Default)]
pub struct TxnCounts {
    /// Read transactions begun.
    pub reads: AtomicU64,
    /// Write transactions begun.
    pub writes: AtomicU64,
    /// Write transactions committed.
    pub commits: AtomicU64,
    /// Of those, durable ones.
    pub durable: AtomicU64,
    /// Nanoseconds in commits.
    pub commit_nanos: AtomicU64,
    /// Nanoseconds in durable commits.
    pub durable_nanos: AtomicU64,
}

impl TxnCounts {
    /// Count a commit that started at `t`.
    pub fn committed(&self, t: Instant, durable: bool) {
        let ns = t.elapsed().as_nanos() as u64;
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.commit_nanos.fetch_add(ns, Ordering::Relaxed);
        if durable {
            self.durable.fetch_add(1, Ordering::Relaxed);
            self.durable_nanos.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// What was counted so far.
    pub fn figures(&self) -> TxnFigures {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TxnFigures {
            read: get(&self.reads),
            write: get(&self.writes),
            commits: get(&self.commits),
            durable: get(&self.durable),
            commit_nanos: get(&self.commit_nanos),
            durable_nanos: get(&self.durable_nanos),
        }
    }

    /// `transactions: read=N write=N commits=N durable=N commit_ms=X durable_ms=X`.
    pub fn line(&self) -> String {
        self.figures().to_string()
    }
}

/// Requests that waited for a file's writeback (setattr, fsync, truncate), and for how long.
#[derive(Default)]
pub(crate) struct WaitCounts {
    /// Waits.
    pub waits: AtomicU64,
    /// Nanoseconds waited.
    pub nanos: AtomicU64,
}

impl WaitCounts {
    /// Count a wait that started at `t`.
    pub(crate) fn waited(&self, t: Instant) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// What was counted so far.
    pub(crate) fn figures(&self) -> WaitFigures {
        WaitFigures {
            count: self.waits.load(Ordering::Relaxed),
            nanos: self.nanos.load(Ordering::Relaxed),
        }
    }
}

/// Delayed inode items (see `volume/delayed.rs`): attribute changes kept in memory instead of a
/// write transaction each, and how many of them later transactions wrote.
#[derive(Default)]
pub(crate) struct DelayedCounts {
    /// Changes delayed.
    pub updates: AtomicU64,
    /// Items written by a transaction (one per inode, however many changes it had).
    pub written: AtomicU64,
    /// Transactions that wrote some.
    pub flushes: AtomicU64,
    /// Items of deleted inodes dropped unwritten.
    pub discarded: AtomicU64,
    /// Creates and unlinks delayed (with their directory entries).
    pub names: AtomicU64,
}

impl DelayedCounts {
    /// A transaction wrote `n` delayed items.
    pub(crate) fn flushed(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    /// What was counted so far; `held` the records and entries in memory now.
    pub(crate) fn figures(&self, held: usize) -> DelayedFigures {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DelayedFigures {
            updates: get(&self.updates),
            names: get(&self.names),
            written: get(&self.written),
            flushes: get(&self.flushes),
            discarded: get(&self.discarded),
            held,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuse_line_names_what_was_counted() {
        let c = OpCounts::default();
        drop(c.count(Op::Lookup));
        drop(c.count(Op::Create));
        c.add(Op::Forget, 3);
        drop(c.count(Op::Readdirplus));
        let text = c.figures().to_string();
        assert!(
            text.starts_with("fuse: total=6 lookup=1 forget=3 create=1 readdirplus=1\n"),
            "{text}"
        );
    }
}
