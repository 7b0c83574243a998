//! The findings of fsck's rules, and their words: one line each, as `wring fsck` prints them
//! (`problem: …`). The texts of the rules fsck had before the repair are kept as they were.
//!
//! Mirrors e2fsck's problem table (problem.c), one code and one message per kind of damage.

use super::names::Entry;
use crate::store::records::{Kind, RecordError};

/// An entry a finding is about: (directory, name, inode).
pub(super) type At = (u64, Vec<u8>, u64);

pub(super) fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// A broken rule of the namespace or of the store's counters.
#[derive(Debug, Clone)]
pub(super) enum Finding {
    /// An inode item that does not decode, and why.
    Damaged(u64, RecordError),
    /// No root directory.
    NoRoot,
    /// An entry in a directory that does not exist.
    NoDir(At),
    /// An entry in an inode that is not a directory.
    NotDir(At),
    /// An entry naming an inode that does not exist.
    NoInode(At),
    /// An entry whose kind is not its inode's (the inode's kind).
    WrongKind(At, Kind),
    /// An entry naming the root directory.
    NamesRoot(At),
    /// A directory with several names: the entries to remove.
    DirNames { dir: u64, extra: Vec<Entry> },
    /// An orphan record of an inode that does not exist.
    OrphanGone(u64),
    /// An orphan record of an inode with names (a mount would delete it under them).
    OrphanNamed(u64, usize),
    /// An orphan record of a directory that holds entries.
    OrphanFull(u64),
    /// An inode no name refers to.
    Unnamed(u64),
    /// A loop of directories the root does not reach (its lowest directory).
    Loop(u64),
    /// A link count that is not what the names make it.
    LinkCount { ino: u64, has: u32, expected: u32 },
    /// A symlink without a target.
    NoTarget(u64),
    /// A `..` record (or its absence) that is not the directory holding the name.
    DotDot {
        dir: u64,
        recorded: Option<u64>,
        actual: u64,
    },
    /// A `..` record of an inode that is not a directory.
    StaleDotDot(u64),
    /// A next inode number not above every inode.
    NextIno { next: u64, top: u64 },
    /// An inode count that is not the number of inode items less the root.
    InodeCount { counted: u64, items: u64 },
    /// An extent of an inode that does not exist.
    StrayExtent { ino: u64, idx: u64 },
    /// An inode recording other stored bytes than its extents hold.
    Disk { ino: u64, recorded: u64, held: u64 },
    /// An inode recording other bytes covered by extents than its extents cover.
    Bytes {
        ino: u64,
        recorded: u64,
        covered: u64,
    },
    /// The store counting other stored bytes than its extents hold.
    Used { counted: u64, held: u64 },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Damaged(i, e) => write!(f, "inode {i}: damaged inode item: {e}"),
            Finding::NoRoot => write!(f, "root directory is missing"),
            Finding::NoDir((p, n, _)) => {
                write!(f, "entry '{}' in missing directory {p}", shown(n))
            }
            Finding::NotDir((p, n, _)) => {
                write!(f, "entry '{}' in non-directory {p}", shown(n))
            }
            Finding::NoInode((p, n, i)) => {
                write!(f, "entry '{}' in {p} points at missing inode {i}", shown(n))
            }
            Finding::WrongKind((p, n, _), _) => {
                write!(f, "entry '{}' in {p}: kind mismatch", shown(n))
            }
            Finding::NamesRoot((p, n, _)) => {
                write!(f, "entry '{}' in {p} names the root directory", shown(n))
            }
            Finding::DirNames { dir, extra } => {
                write!(f, "directory {dir} has {} names", extra.len() + 1)
            }
            Finding::OrphanGone(i) => write!(f, "orphan record of missing inode {i}"),
            Finding::OrphanNamed(i, n) => write!(
                f,
                "inode {i} is in the orphan table but has {n} name(s): a mount would delete it"
            ),
            Finding::OrphanFull(i) => write!(
                f,
                "directory {i} is in the orphan table but holds entries: a mount would delete it"
            ),
            Finding::Unnamed(i) => write!(f, "inode {i}: no name refers to it"),
            Finding::Loop(i) => write!(
                f,
                "directory {i} is not reachable from the root: its name is in a loop of \
                 directories"
            ),
            Finding::LinkCount { ino, has, expected } => {
                write!(f, "inode {ino}: link count {has} but {expected} expected")
            }
            Finding::NoTarget(i) => write!(f, "symlink {i}: target missing"),
            Finding::DotDot {
                dir,
                recorded: Some(r),
                actual,
            } => write!(
                f,
                "directory {dir}: `..` records {r}, its name is in {actual}"
            ),
            Finding::DotDot { dir, actual, .. } => write!(
                f,
                "directory {dir}: no `..` record (it would show the root), its name is in \
                 {actual}"
            ),
            Finding::StaleDotDot(i) => {
                write!(f, "`..` record of inode {i}, which is not a directory")
            }
            Finding::NextIno { next, top } => write!(
                f,
                "the next inode number {next} is not above the largest inode {top}"
            ),
            Finding::InodeCount { counted, items } => write!(
                f,
                "store counts {} inodes, holds {items}",
                counted.saturating_add(1)
            ),
            Finding::StrayExtent { ino, idx } => write!(f, "extent {idx} of missing inode {ino}"),
            Finding::Disk {
                ino,
                recorded,
                held,
            } => write!(
                f,
                "inode {ino}: records {recorded} stored bytes, extents hold {held}"
            ),
            Finding::Bytes {
                ino,
                recorded,
                covered,
            } => write!(
                f,
                "inode {ino}: records {recorded} bytes in extents, extents cover {covered}"
            ),
            Finding::Used { counted, held } => write!(
                f,
                "store counts {counted} stored bytes, extents hold {held}"
            ),
        }
    }
}
