//! The namespace as fsck sees it, and its rules: every entry sits in a directory and names an
//! inode of its kind; a directory has one name (the root none) and its `..` record names the
//! directory that holds it; every inode but the root and the orphans is reached from the root;
//! an orphan has no name; link counts are what the names make them (a file: its names; a
//! directory: 2 + its subdirectories); symlinks have their targets; the store's inode counters
//! are right. This module reads the tables whole ([`Namespace`]); [`Namespace::findings`], in
//! [`super::rules`] with the entries' own and the connectivity rules, is the one place each
//! rule is decided (the findings' words in [`super::finding`]): fsck reports what it finds,
//! `fsck --repair` fixes it ([`super::repair`]).
//!
//! Mirrors e2fsck's passes 2 (directory entries), 3 (connectivity, `lost+found`) and 4 (link
//! counts), over wring's tables instead of ext4's blocks.

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use crate::error::FsError;
use crate::store::records::{covered_within, Inode, RecordError};
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
    pub(super) fn name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// The namespace tables of one transaction, read whole.
#[derive(Debug, Default)]
pub(super) struct Namespace {
    /// Inode items that decode.
    pub inodes: BTreeMap<u64, Inode>,
    /// Inode items that do not, and why.
    pub damaged: BTreeMap<u64, RecordError>,
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
    /// Bytes of its file each inode's extents cover (its `bytes`, `st_blocks`).
    pub covered: BTreeMap<u64, u64>,
    /// The store's format version: from [`VERSION_BYTES`](crate::store::records::VERSION_BYTES)
    /// on, inodes record `bytes`.
    pub version: u64,
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
            version: value(&meta, "version")?,
            ..Namespace::default()
        };
        ns.tally_extents(&txn.open_table(EXTENTS)?)?;
        ns
    }};
}

impl Namespace {
    /// The namespace as a read transaction sees it.
    pub(super) fn read(txn: &ReadTransaction) -> Result<Namespace, FsError> {
        // Stores made before parents were recorded have no table.
        let parents = match crate::store::table_if_made(txn, PARENTS)? {
            Some(t) => pairs(&t)?,
            None => BTreeMap::new(),
        };
        Ok(load!(txn, parents))
    }

    /// The namespace as a write transaction sees it (the parents' table made if missing).
    pub(super) fn write(txn: &WriteTransaction) -> Result<Namespace, FsError> {
        let parents = pairs(&txn.open_table(PARENTS)?)?;
        Ok(load!(txn, parents))
    }

    /// Add up the stored bytes of the extents, per inode and in all.
    fn tally_extents(
        &mut self,
        t: &impl ReadableTable<(u64, u64), &'static [u8]>,
    ) -> Result<(), FsError> {
        // A shared extent's bytes count once in the store's total, once per item in its file's.
        let mut seen = std::collections::HashSet::new();
        for r in t.iter()? {
            let (k, v) = r?;
            let (ino, idx) = k.value();
            let n = crate::store::records::stored_len(v.value());
            let once = match crate::store::records::stored(v.value()) {
                Ok(crate::store::records::Stored::External(at, len)) => seen.insert((at, len)),
                _ => true,
            };
            if once {
                self.used = self.used.saturating_add(n);
            }
            match self.inodes.contains_key(&ino) || self.damaged.contains_key(&ino) {
                true => {
                    *self.held.entry(ino).or_default() += n;
                    let c = self.covers(ino, v.value());
                    *self.covered.entry(ino).or_default() += c;
                }
                false => self.strays.push((ino, idx)),
            }
        }
        Ok(())
    }

    /// The bytes of its file the item `item` of `ino` covers: its decoded length, up to its
    /// file's extent size (a longer one is a damaged header, which the extents' rules report:
    /// it does not also make the file's count wrong).
    fn covers(&self, ino: u64, item: &[u8]) -> u64 {
        let Ok(h) = crate::store::records::ExtentHeader::decode(item) else {
            return 0;
        };
        let window = self.inodes.get(&ino).map_or(0, |i| i.extent_size);
        covered_within(h.ram_len, window)
    }

    /// The largest inode number in use (the root's in an empty store).
    pub(super) fn top(&self) -> u64 {
        let a = self.inodes.keys().next_back().copied().unwrap_or(ROOT);
        let b = self.damaged.keys().next_back().copied().unwrap_or(ROOT);
        a.max(b)
    }

    /// A path for `ino` in report lines: `/a/b` through the first names, else `inode N`.
    pub(super) fn path(&self, ino: u64) -> String {
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

/// The inode items: those that decode, and those that do not with why.
type Items = (BTreeMap<u64, Inode>, BTreeMap<u64, RecordError>);

fn items(t: &impl ReadableTable<u64, &'static [u8]>) -> Result<Items, FsError> {
    let (mut good, mut bad) = (BTreeMap::new(), BTreeMap::new());
    for r in t.iter()? {
        let (k, v) = r?;
        match Inode::decode(v.value()) {
            Ok(i) => good.insert(k.value(), i).map(drop),
            Err(e) => bad.insert(k.value(), e).map(drop),
        };
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
