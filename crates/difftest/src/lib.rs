//! wring-difftest: the kernel is the oracle. The same seeded sequence of file-system
//! operations runs on a wring mount and on a kernel filesystem (tmpfs, or btrfs on a loop
//! device), and the tester compares every operation's result (the same errno, or the same
//! success and value) and, every few steps, the whole tree: names, types, link counts and
//! hard-link groups, sizes, modes, owners, explicit times, symlink targets, xattrs, content
//! hashes — and the same tree again after a durable commit, an unmount, a clean `wring fsck`
//! and a new mount.
//!
//! Three passes:
//! - [`random`]: threads, each in its own directory over a small pool of names (names are
//!   reused all the time), plus one shared directory whose results are checked only for
//!   consistency; a divergence is shrunk to the shortest sequence that still diverges and
//!   printed as a shell script ([`shrink`]).
//! - [`exhaustive`]: every sequence of up to N namespace operations over two names in two
//!   directories, each from the same small tree, warm (just made) and cold (committed, the
//!   kernel's caches dropped) — after CrashMonkey's ACE generator (OSDI'18), which bounds
//!   its workloads the same way for btrfs and ext4.
//! - [`crash`]: kill -9 the daemon at a random point of a sequence; after the next mount
//!   fsck is clean and the tree equals the oracle's at some step between the last durable
//!   point and the kill, with fsync'ed data in it.
//!
//! The module layers: [`op`] (what runs, and its shell form) and [`gen`] (where operations
//! come from) at the bottom; [`exec`] (system calls on one side) and [`tree`] (a tree and its
//! differences); [`target`] (the mount and the oracle); [`pair`] (one sequence on both sides
//! in lockstep); the passes on top.

pub mod crash;
pub mod exec;
pub mod exhaustive;
pub mod gen;
pub mod op;
pub mod pair;
pub mod random;
pub mod shrink;
pub mod target;
pub mod tree;

pub use target::{Daemon, Mount, Oracle, OracleKind};

/// Why the tester itself could not run (not a divergence: those are [`Failure`]s).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Setting up a side failed.
    #[error("{0}")]
    Setup(String),
    /// A system call of the tester's own failed.
    #[error("{what}: {source}")]
    Io {
        /// What it was doing.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A closure turning an I/O error into this, saying what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// A divergence from the kernel, or damage fsck found: what happened and how to replay it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// What diverged, in words.
    pub what: String,
    /// The sequence that shows it (shrunk when it could be), as a shell script.
    pub script: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{}", self.what, self.script)
    }
}

/// What a pass found: the operations it ran and the failures (none when wring agreed with
/// the kernel throughout).
#[derive(Debug, Default)]
pub struct Report {
    /// Operations run on each side (not counting shrinking's replays).
    pub ops: u64,
    /// Tree comparisons made.
    pub trees: u64,
    /// Divergences and damage.
    pub failures: Vec<Failure>,
}

impl Report {
    /// Add `other`'s counts and failures.
    pub fn absorb(&mut self, other: Report) {
        self.ops += other.ops;
        self.trees += other.trees;
        self.failures.extend(other.failures);
    }
}
