//! The namespace as fsck sees it, and its rules: every entry sits in a directory and names an
//! inode of its kind; a directory has one name (the root none) and its `..` record names the
//! directory that holds it; every inode but the root and the orphans is reached from the root;
//! an orphan has no name; link counts are what the names make them (a file: its names; a
//! directory: 2 + its subdirectories); symlinks have their targets; the store's inode counters
//! are right. [`Namespace::findings`] is the one place each rule is decided: fsck reports what
//! it finds, `fsck --repair` fixes it ([`super::repair`]).
//!
//! Mirrors e2fsck's passes 2 (directory entries), 3 (connectivity, `lost+found`) and 4 (link
//! counts), over wring's tables instead of ext4's blocks.

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use crate::error::FsError;
use crate::store::records::{Inode, Kind};
use crate::store::{DIRENTS, EXTENTS, INODES, META, ORPHANS, PARENTS, ROOT, SYMLINKS};

/// A directory entry.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub parent: u64,
    pub name: Vec<u8>,
    pub ino: u64,
    pub kind: u8,
}

impl Entry {
    /// The name for a report line.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// The namespace tables of one transaction, read whole.
#[derive(Debug, Default)]
pub(super) struct Namespace {
    /// Inode items that decode.
    pub inodes: BTreeMap<u64, Inode>,
    /// Inode items that do not.
    pub damaged: BTreeSet<u64>,
    /// Every entry, in the table's order.
    pub entries: Vec<Entry>,
    /// The `..` records: directory → parent.
    pub parents: BTreeMap<u64, u64>,
    pub orphans: BTreeSet<u64>,
    /// Inodes with a symlink target.
    pub targets: BTreeSet<u64>,
    /// The store's `next_ino` counter (0: missing).
    pub next_ino: u64,
    /// The store's `inodes` counter: inodes other than the root.
    pub counted: u64,
    /// Stored bytes of each inode's extents, of all extents, and the extents of inodes that
    /// do not exist: (inode, index).
    pub held: BTreeMap<u64, u64>,
    pub used: u64,
    pub counted_used: u64,
    pub strays: Vec<(u64, u64)>,
}

/// Read a namespace from a read or a write transaction (their tables are different types).
macro_rules! load {
    ($txn:expr, $parents:expr) => {{
        let txn = $txn;
        let (inodes, damaged) = items(&txn.open_table(INODES)?)?;
        let meta = txn.open_table(META)?;
        let mut ns = Namespace {
            inodes,
            damaged,
            entries: entries(&txn.open_table(DIRENTS)?)?,
            parents: $parents,
            orphans: keys(&txn.open_table(ORPHANS)?)?,
            targets: keys(&txn.open_table(SYMLINKS)?)?,
            next_ino: value(&meta, "next_ino")?,
            counted: value(&meta, "inodes")?,
            counted_used: value(&meta, "used")?,
            ..Namespace::default()
        };
        ns.tally_extents(&txn.open_table(EXTENTS)?)?;
        ns
    }};
}

impl Namespace {
    /// The namespace as a read transaction sees it.
    pub fn read(txn: &ReadTransaction) -> Result<Namespace, FsError> {
        // Stores made before parents were recorded have no table.
        let parents = match txn.open_table(PARENTS) {
            Ok(t) => pairs(&t)?,
            Err(redb::TableError::TableDoesNotExist(_)) => BTreeMap::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(load!(txn, parents))
    }

    /// The namespace as a write transaction sees it (the parents' table made if missing).
    pub fn write(txn: &WriteTransaction) -> Result<Namespace, FsError> {
        let parents = pairs(&txn.open_table(PARENTS)?)?;
        Ok(load!(txn, parents))
    }

    /// Add up the stored bytes of the extents, per inode and in all.
    fn tally_extents(
        &mut self,
        t: &impl ReadableTable<(u64, u64), &'static [u8]>,
    ) -> Result<(), FsError> {
        for r in t.iter()? {
            let (k, v) = r?;
            let (ino, idx) = k.value();
            let n = crate::store::records::stored_len(v.value());
            self.used = self.used.saturating_add(n);
            match self.inodes.contains_key(&ino) || self.damaged.contains(&ino) {
                true => *self.held.entry(ino).or_default() += n,
                false => self.strays.push((ino, idx)),
            }
        }
        Ok(())
    }

    /// Every rule broken, in the order a repair fixes them.
    pub fn findings(&self) -> Vec<Finding> {
        let t = Tally::new(self);
        let mut out: Vec<Finding> = self.damaged.iter().map(|&i| Finding::Damaged(i)).collect();
        if !self.inodes.get(&ROOT).is_some_and(|i| i.kind == Kind::Dir) {
            out.push(Finding::NoRoot);
        }
        out.extend(t.bad.iter().cloned());
        out.extend(self.counter_findings());
        out.extend(t.dir_names());
        out.extend(t.orphan_findings());
        out.extend(t.unreached());
        out.extend(t.link_counts());
        out.extend(t.targets());
        out.extend(t.dotdot());
        out.extend(self.stored_findings());
        out
    }

    /// The counters: the next inode number above every inode, the inode count, the stored
    /// bytes; and extents of inodes that do not exist.
    fn counter_findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        let top = self.top();
        if self.next_ino <= top {
            out.push(Finding::NextIno {
                next: self.next_ino,
                top,
            });
        }
        let items = (self.inodes.len() + self.damaged.len()) as u64;
        if self.counted + 1 != items {
            out.push(Finding::InodeCount {
                counted: self.counted,
                items,
            });
        }
        out.extend(
            self.strays
                .iter()
                .map(|&(ino, idx)| Finding::StrayExtent { ino, idx }),
        );
        out
    }

    /// The stored bytes each inode records, and the store's total.
    fn stored_findings(&self) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .inodes
            .iter()
            .filter_map(|(&ino, i)| {
                let held = self.held.get(&ino).copied().unwrap_or(0);
                (i.disk != held).then_some(Finding::Disk {
                    ino,
                    recorded: i.disk,
                    held,
                })
            })
            .collect();
        if self.counted_used != self.used {
            out.push(Finding::Used {
                counted: self.counted_used,
                held: self.used,
            });
        }
        out
    }

    /// The largest inode number in use (the root's in an empty store).
    pub fn top(&self) -> u64 {
        let a = self.inodes.keys().next_back().copied().unwrap_or(ROOT);
        let b = self.damaged.iter().next_back().copied().unwrap_or(ROOT);
        a.max(b)
    }

    /// A path for `ino` in report lines: `/a/b` through the first names, else `inode N`.
    pub fn path(&self, ino: u64) -> String {
        let mut parts = Vec::new();
        let mut cur = ino;
        while cur != ROOT {
            let Some(e) = self.entries.iter().find(|e| e.ino == cur) else {
                return format!("inode {ino}");
            };
            if parts.len() > 64 {
                return format!("inode {ino}");
            }
            parts.push(e.name());
            cur = e.parent;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }
}

/// What the entries add up to.
struct Tally<'a> {
    ns: &'a Namespace,
    /// Entries that break a rule of their own.
    bad: Vec<Finding>,
    /// Indexes of the entries that hold, by the inode they name.
    names: BTreeMap<u64, Vec<usize>>,
    /// Indexes of the entries that hold, by the directory they sit in.
    children: BTreeMap<u64, Vec<usize>>,
    /// Entries whose directory or inode item is damaged (neither counted nor judged), and
    /// entries of the wrong kind: followed to reach inodes, not counted as names.
    unknown: Vec<usize>,
}

impl<'a> Tally<'a> {
    fn new(ns: &'a Namespace) -> Tally<'a> {
        let mut t = Tally {
            ns,
            bad: Vec::new(),
            names: BTreeMap::new(),
            children: BTreeMap::new(),
            unknown: Vec::new(),
        };
        for (n, e) in ns.entries.iter().enumerate() {
            match t.judge(e) {
                Judged::Holds => {
                    t.names.entry(e.ino).or_default().push(n);
                    t.children.entry(e.parent).or_default().push(n);
                }
                Judged::Unknown => t.unknown.push(n),
                Judged::Breaks(f) => {
                    // An entry of the wrong kind still leads to its inode.
                    if matches!(f, Finding::WrongKind(..)) {
                        t.unknown.push(n);
                    }
                    t.bad.push(f)
                }
            }
        }
        t
    }

    /// An entry's own rules: its directory exists and is one; its inode exists, is of the
    /// entry's kind, and is not the root.
    fn judge(&self, e: &Entry) -> Judged {
        let ns = self.ns;
        let entry = || (e.parent, e.name.clone(), e.ino);
        match ns.inodes.get(&e.parent) {
            None if ns.damaged.contains(&e.parent) => return Judged::Unknown,
            None => return Judged::Breaks(Finding::NoDir(entry())),
            Some(p) if p.kind != Kind::Dir => return Judged::Breaks(Finding::NotDir(entry())),
            Some(_) => {}
        }
        match ns.inodes.get(&e.ino) {
            None if ns.damaged.contains(&e.ino) => Judged::Unknown,
            None => Judged::Breaks(Finding::NoInode(entry())),
            Some(i) if i.kind as u8 != e.kind => {
                Judged::Breaks(Finding::WrongKind(entry(), i.kind))
            }
            Some(_) if e.ino == ROOT => Judged::Breaks(Finding::NamesRoot(entry())),
            Some(_) => Judged::Holds,
        }
    }

    fn count(&self, ino: u64) -> usize {
        self.names.get(&ino).map_or(0, Vec::len)
    }

    fn is_dir(&self, ino: u64) -> bool {
        self.ns
            .inodes
            .get(&ino)
            .is_some_and(|i| i.kind == Kind::Dir)
    }

    /// The directory's subdirectories (entries that hold and name a directory).
    fn subdirs(&self, dir: u64) -> u32 {
        let kids = self.children.get(&dir).map_or(&[][..], Vec::as_slice);
        kids.iter()
            .filter(|&&n| self.is_dir(self.ns.entries[n].ino))
            .count() as u32
    }

    /// An orphan a mount deletes: in the orphan table, without a name, and (a directory)
    /// empty.
    fn legit_orphan(&self, ino: u64) -> bool {
        self.ns.orphans.contains(&ino) && self.count(ino) == 0 && !self.children.contains_key(&ino)
    }

    /// Directories with more than one name: all but one entry go (the one its `..` record
    /// names, else the first).
    fn dir_names(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        for (&ino, names) in &self.names {
            if !self.is_dir(ino) || names.len() < 2 {
                continue;
            }
            let keep = names
                .iter()
                .position(|&n| self.ns.parents.get(&ino) == Some(&self.ns.entries[n].parent))
                .unwrap_or(0);
            let extra = names
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != keep)
                .map(|(_, &n)| self.ns.entries[n].clone())
                .collect();
            out.push(Finding::DirNames { dir: ino, extra });
        }
        out
    }

    /// The orphan table: each orphan exists, has no name and (a directory) no entries.
    fn orphan_findings(&self) -> Vec<Finding> {
        let ns = self.ns;
        let mut out = Vec::new();
        for &ino in &ns.orphans {
            if ns.damaged.contains(&ino) {
                continue;
            }
            if !ns.inodes.contains_key(&ino) {
                out.push(Finding::OrphanGone(ino));
            } else if self.count(ino) > 0 {
                out.push(Finding::OrphanNamed(ino, self.count(ino)));
            } else if self.children.contains_key(&ino) {
                out.push(Finding::OrphanFull(ino));
            }
        }
        out
    }

    /// Inodes the root does not reach (orphans a mount deletes aside): only the top of each
    /// part that hangs loose is reported (an inode without a name; or, for a loop of
    /// directories, its lowest-numbered one), as e2fsck's pass 3 reconnects only those.
    fn unreached(&self) -> Vec<Finding> {
        let reached = self.reached();
        let loose: BTreeSet<u64> = (self.ns.inodes.keys())
            .copied()
            .filter(|&i| !reached.contains(&i) && !self.legit_orphan(i))
            .collect();
        let mut tops = BTreeSet::new();
        for &ino in &loose {
            tops.insert(self.top_of(ino, &loose));
        }
        tops.into_iter()
            .map(|ino| match self.count(ino) {
                0 => Finding::Unnamed(ino),
                _ => Finding::Loop(ino),
            })
            .collect()
    }

    /// Every inode the root reaches through entries that hold or are not judged.
    fn reached(&self) -> BTreeSet<u64> {
        let mut by_dir: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (&dir, kids) in &self.children {
            by_dir
                .entry(dir)
                .or_default()
                .extend(kids.iter().map(|&n| self.ns.entries[n].ino));
        }
        for &n in &self.unknown {
            let e = &self.ns.entries[n];
            by_dir.entry(e.parent).or_default().push(e.ino);
        }
        let mut reached = BTreeSet::from([ROOT]);
        let mut todo = vec![ROOT];
        while let Some(dir) = todo.pop() {
            for &kid in by_dir.get(&dir).map_or(&[][..], Vec::as_slice) {
                if reached.insert(kid) {
                    todo.push(kid);
                }
            }
        }
        reached
    }

    /// The top of the loose part `ino` hangs in: up through first names to an inode without
    /// one (or whose directory is not loose), or the lowest directory of a loop.
    fn top_of(&self, ino: u64, loose: &BTreeSet<u64>) -> u64 {
        let mut path = vec![ino];
        let mut cur = ino;
        loop {
            let up = self.names.get(&cur).and_then(|n| n.first());
            let Some(parent) = up.map(|&n| self.ns.entries[n].parent) else {
                return cur;
            };
            if !loose.contains(&parent) {
                return cur;
            }
            if let Some(at) = path.iter().position(|&p| p == parent) {
                let ring = &path[at..];
                return ring.iter().copied().min().unwrap_or(parent);
            }
            path.push(parent);
            cur = parent;
        }
    }

    /// Link counts: a file's names, a directory's 2 + subdirectories, 0 for an orphan.
    /// Inodes without a name (reported as such) and directories with several names (their
    /// extra names go first) are left to those rules.
    fn link_counts(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        for (&ino, i) in &self.ns.inodes {
            let names = self.count(ino);
            let orphan = names == 0 && self.ns.orphans.contains(&ino);
            let expected = match i.kind {
                _ if orphan => 0,
                _ if names == 0 && ino != ROOT => continue,
                Kind::Dir if names > 1 => continue,
                Kind::Dir => 2 + self.subdirs(ino),
                _ => names as u32,
            };
            if i.nlink != expected {
                out.push(Finding::LinkCount {
                    ino,
                    has: i.nlink,
                    expected,
                });
            }
        }
        out
    }

    /// Every symlink has its target.
    fn targets(&self) -> Vec<Finding> {
        (self.ns.inodes.iter())
            .filter(|(ino, i)| i.kind == Kind::Symlink && !self.ns.targets.contains(ino))
            .map(|(&ino, _)| Finding::NoTarget(ino))
            .collect()
    }

    /// `..` records: a directory with one name records the directory that holds it (a store
    /// made before parents were recorded has none, which stands for the root); records of
    /// inodes that are not directories are stale.
    fn dotdot(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        for (&dir, names) in &self.names {
            if !self.is_dir(dir) || names.len() != 1 {
                continue;
            }
            let actual = self.ns.entries[names[0]].parent;
            match self.ns.parents.get(&dir) {
                Some(&recorded) if recorded != actual => out.push(Finding::DotDot {
                    dir,
                    recorded: Some(recorded),
                    actual,
                }),
                None if actual != ROOT => out.push(Finding::DotDot {
                    dir,
                    recorded: None,
                    actual,
                }),
                _ => {}
            }
        }
        for &ino in self.ns.parents.keys() {
            if !self.is_dir(ino) && !self.ns.damaged.contains(&ino) {
                out.push(Finding::StaleDotDot(ino));
            }
        }
        out
    }
}

/// What an entry's own rules say.
enum Judged {
    Holds,
    Unknown,
    Breaks(Finding),
}

/// An entry a finding is about: (directory, name, inode).
pub(super) type At = (u64, Vec<u8>, u64);

fn shown(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// A broken rule of the namespace or of the store's counters.
#[derive(Debug, Clone)]
pub(super) enum Finding {
    /// An inode item that does not decode.
    Damaged(u64),
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
    /// The store counting other stored bytes than its extents hold.
    Used { counted: u64, held: u64 },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Damaged(i) => write!(f, "inode {i}: damaged inode item"),
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
            Finding::Used { counted, held } => write!(
                f,
                "store counts {counted} stored bytes, extents hold {held}"
            ),
        }
    }
}

fn items(
    t: &impl ReadableTable<u64, &'static [u8]>,
) -> Result<(BTreeMap<u64, Inode>, BTreeSet<u64>), FsError> {
    let (mut good, mut bad) = (BTreeMap::new(), BTreeSet::new());
    for r in t.iter()? {
        let (k, v) = r?;
        match Inode::from_bytes(v.value()) {
            Some(i) => {
                good.insert(k.value(), i);
            }
            None => {
                bad.insert(k.value());
            }
        }
    }
    Ok((good, bad))
}

fn entries(t: &impl ReadableTable<(u64, &'static [u8]), (u64, u8)>) -> Result<Vec<Entry>, FsError> {
    let mut out = Vec::new();
    for r in t.iter()? {
        let (k, v) = r?;
        let ((parent, name), (ino, kind)) = (k.value(), v.value());
        out.push(Entry {
            parent,
            name: name.to_vec(),
            ino,
            kind,
        });
    }
    Ok(out)
}

fn keys<V: redb::Value + 'static>(
    t: &impl ReadableTable<u64, V>,
) -> Result<BTreeSet<u64>, FsError> {
    let mut out = BTreeSet::new();
    for r in t.iter()? {
        out.insert(r?.0.value());
    }
    Ok(out)
}

fn pairs(t: &impl ReadableTable<u64, u64>) -> Result<BTreeMap<u64, u64>, FsError> {
    let mut out = BTreeMap::new();
    for r in t.iter()? {
        let (k, v) = r?;
        out.insert(k.value(), v.value());
    }
    Ok(out)
}

fn value(t: &impl ReadableTable<&'static str, u64>, key: &str) -> Result<u64, FsError> {
    Ok(t.get(key)?.map_or(0, |g| g.value()))
}
