//! Per-mount request and transaction counters for `wring status`: FUSE requests by opcode,
//! the store's read and write transactions and commits (with the time spent committing), and
//! the time requests spent waiting for a file's writeback, and the delayed inode items.
//! Cheap: relaxed atomic adds.
//!
//! Mirrors the kernel's per-superblock statistics the way /proc/fs/fuse and btrfs's
//! `commit_stats` in sysfs expose them (commits, total commit time); the names follow the
//! FUSE opcodes (include/uapi/linux/fuse.h).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The FUSE requests counted, as in `fuse_opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
#[allow(missing_docs)]
pub enum Op {
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

/// FUSE requests by opcode, and the time the daemon spent on each kind.
pub struct OpCounts {
    counts: [AtomicU64; NAMES.len()],
    nanos: [AtomicU64; NAMES.len()],
}

impl Default for OpCounts {
    fn default() -> Self {
        OpCounts {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            nanos: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Adds the time from its making to its drop to its request's kind.
pub struct Timed<'a> {
    counts: &'a OpCounts,
    op: Op,
    start: Instant,
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        self.counts.nanos[self.op as usize].fetch_add(ns, Ordering::Relaxed);
    }
}

impl OpCounts {
    /// Count one request; the time until the returned guard drops is its handling time.
    pub fn count(&self, op: Op) -> Timed<'_> {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        Timed {
            counts: self,
            op,
            start: Instant::now(),
        }
    }

    /// Count `n` of one request (a batch of forgets).
    #[cfg(test)]
    pub fn add(&self, op: Op, n: u64) {
        self.counts[op as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// `fuse: total=N name=N …` with the opcodes seen so far.
    pub fn line(&self) -> String {
        let mut total = 0;
        let mut s = String::new();
        for (name, c) in NAMES.iter().zip(&self.counts) {
            let n = c.load(Ordering::Relaxed);
            total += n;
            if n > 0 {
                let _ = write!(s, " {name}={n}");
            }
        }
        format!("fuse: total={total}{s}\n")
    }

    /// `fuse_ms: total=X name=X …`: milliseconds the handlers of each kind took (replies
    /// included), for the kinds seen so far.
    pub fn time_line(&self) -> String {
        let mut total = 0;
        let mut s = String::new();
        for (name, c) in NAMES.iter().zip(&self.nanos) {
            let n = c.load(Ordering::Relaxed);
            total += n;
            if n > 0 {
                let _ = write!(s, " {name}={:.1}", n as f64 / 1e6);
            }
        }
        format!("fuse_ms: total={:.1}{s}\n", total as f64 / 1e6)
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

    /// `transactions: read=N write=N commits=N durable=N commit_ms=X durable_ms=X`.
    pub fn line(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "transactions: read={} write={} commits={} durable={} commit_ms={:.1} \
             durable_ms={:.1}\n",
            get(&self.reads),
            get(&self.writes),
            get(&self.commits),
            get(&self.durable),
            get(&self.commit_nanos) as f64 / 1e6,
            get(&self.durable_nanos) as f64 / 1e6
        )
    }
}

/// Requests that waited for a file's writeback (setattr, fsync, truncate), and for how long.
#[derive(Default)]
pub struct WaitCounts {
    /// Waits.
    pub waits: AtomicU64,
    /// Nanoseconds waited.
    pub nanos: AtomicU64,
}

impl WaitCounts {
    /// Count a wait that started at `t`.
    pub fn waited(&self, t: Instant) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.nanos
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// `writeback_waits: count=N ms=X`.
    pub fn line(&self) -> String {
        format!(
            "writeback_waits: count={} ms={:.1}\n",
            self.waits.load(Ordering::Relaxed),
            self.nanos.load(Ordering::Relaxed) as f64 / 1e6
        )
    }
}

/// Delayed inode items (see `volume/delayed.rs`): attribute changes kept in memory instead of a
/// write transaction each, and how many of them later transactions wrote.
#[derive(Default)]
pub struct DelayedCounts {
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
    pub fn flushed(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    /// `delayed_inodes: updates=N names=N written=N flushes=N discarded=N held=N`, `held`
    /// being the records and entries in memory now.
    pub fn line(&self, held: usize) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "delayed_inodes: updates={} names={} written={} flushes={} discarded={} held={held}\n",
            get(&self.updates),
            get(&self.names),
            get(&self.written),
            get(&self.flushes),
            get(&self.discarded)
        )
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
        assert_eq!(
            c.line(),
            "fuse: total=6 lookup=1 forget=3 create=1 readdirplus=1\n"
        );
    }
}
