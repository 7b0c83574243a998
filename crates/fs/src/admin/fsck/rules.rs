//! The rules over the namespace: [`Namespace::findings`], the one place each is decided, in
//! the order a repair fixes them. The counters' and the stored bytes' are read off the
//! [`Namespace`] itself; the rules over the entries — each entry's own (its directory exists
//! and is one, its inode exists, is of its kind and is not the root), a directory's one name,
//! the orphan table, what the root reaches, link counts, symlink targets and `..` records — are
//! [`Tally`]'s, which counts the entries that hold once.
//!
//! Mirrors e2fsck's pass 2 (`check_dir_block`: entries), pass 3 (`check_directory`: every
//! directory reached from the root, loops broken) and pass 4 (`check_link_count`).

use std::collections::{BTreeMap, BTreeSet};

use super::finding::Finding;
use super::names::{Entry, Namespace};
use crate::store::records::{Kind, VERSION_BYTES};
use crate::store::ROOT;

impl Namespace {
    /// Every rule broken, in the order a repair fixes them.
    pub(super) fn findings(&self) -> Vec<Finding> {
        let t = Tally::new(self);
        let mut out: Vec<Finding> = (self.damaged.iter())
            .map(|(&i, e)| Finding::Damaged(i, e.clone()))
            .collect();
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

    /// The stored and covered bytes each inode records (covered ones from format version
    /// [`VERSION_BYTES`] on: an older store's inodes have none), and the store's total.
    fn stored_findings(&self) -> Vec<Finding> {
        let mut out: Vec<Finding> = Vec::new();
        for (&ino, i) in &self.inodes {
            let held = self.held.get(&ino).copied().unwrap_or(0);
            if i.disk != held {
                out.push(Finding::Disk {
                    ino,
                    recorded: i.disk,
                    held,
                });
            }
            let covered = self.covered.get(&ino).copied().unwrap_or(0);
            if self.version >= VERSION_BYTES && i.bytes != covered {
                out.push(Finding::Bytes {
                    ino,
                    recorded: i.bytes,
                    covered,
                });
            }
        }
        if self.counted_used != self.used {
            out.push(Finding::Used {
                counted: self.counted_used,
                held: self.used,
            });
        }
        out
    }
}

/// What the entries add up to.
pub(super) struct Tally<'a> {
    ns: &'a Namespace,
    /// Entries that break a rule of their own.
    pub bad: Vec<Finding>,
    /// Indexes of the entries that hold, by the inode they name.
    names: BTreeMap<u64, Vec<usize>>,
    /// Indexes of the entries that hold, by the directory they sit in.
    children: BTreeMap<u64, Vec<usize>>,
    /// Entries whose directory or inode item is damaged (neither counted nor judged), and
    /// entries of the wrong kind: followed to reach inodes, not counted as names.
    unknown: Vec<usize>,
}

impl<'a> Tally<'a> {
    pub(super) fn new(ns: &'a Namespace) -> Tally<'a> {
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
            None if ns.damaged.contains_key(&e.parent) => return Judged::Unknown,
            None => return Judged::Breaks(Finding::NoDir(entry())),
            Some(p) if p.kind != Kind::Dir => return Judged::Breaks(Finding::NotDir(entry())),
            Some(_) => {}
        }
        match ns.inodes.get(&e.ino) {
            None if ns.damaged.contains_key(&e.ino) => Judged::Unknown,
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
    pub(super) fn dir_names(&self) -> Vec<Finding> {
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
    pub(super) fn orphan_findings(&self) -> Vec<Finding> {
        let ns = self.ns;
        let mut out = Vec::new();
        for &ino in &ns.orphans {
            if ns.damaged.contains_key(&ino) {
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
    pub(super) fn unreached(&self) -> Vec<Finding> {
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
    pub(super) fn link_counts(&self) -> Vec<Finding> {
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
    pub(super) fn targets(&self) -> Vec<Finding> {
        (self.ns.inodes.iter())
            .filter(|(ino, i)| i.kind == Kind::Symlink && !self.ns.targets.contains(ino))
            .map(|(&ino, _)| Finding::NoTarget(ino))
            .collect()
    }

    /// `..` records: a directory with one name records the directory that holds it (a store
    /// made before parents were recorded has none, which stands for the root); records of
    /// inodes that are not directories are stale.
    pub(super) fn dotdot(&self) -> Vec<Finding> {
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
            if !self.is_dir(ino) && !self.ns.damaged.contains_key(&ino) {
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
