//! `wring fsck --repair DIR`: fix what fsck finds, where a fix needs no guess at data.
//!
//! Mirrors e2fsck's passes 2–4: entries whose inode or directory is missing go (pass 2);
//! what the root does not reach is reconnected under `/lost+found` as `#INODE`, the
//! directory made if missing (pass 3, `e2fsck_reconnect_file`); link counts are set to what
//! the names make them (pass 4). Then what e2fsck's superblock checks would do for wring's
//! counters: `..` records, the orphan table, the next inode number, the inode count and the
//! stored bytes. Damaged inode items, extents that do not decode and symlinks without a
//! target are left as they are, and the check that follows reports them.
//!
//! It works as e2fsck does on an unmounted filesystem: the store must not be mounted, and its
//! lock is held for the whole repair (a mount that starts meanwhile waits for it). Every fix
//! goes into one write transaction, committed durably at the end, so a crash leaves the
//! store as it was or repaired. Each fix comes from a finding of [`Namespace::findings`], the
//! rules fsck reports: passes of check-then-fix run in the transaction until nothing is left
//! to fix, each pass fixing the earliest kind of finding only (entries, then the orphan
//! table, then reconnection, then counts), so a count is set once, from the final names.

use std::path::Path;

use redb::ReadableTable;

use super::finding::{At, Finding};
use super::names::Namespace;
use super::{check, holder, not_mounted, FsckReport};
use crate::error::FsError;
use crate::store::records::{Inode, Kind};
use crate::store::{self, Access, Txn, DIRENTS, EXTENTS, INODES, META, ORPHANS, PARENTS, ROOT};
use crate::volume::Volume;

/// The directory unreachable inodes are reconnected to, in the root (e2fsck's).
const LOST_FOUND: &[u8] = b"lost+found";

/// Passes of check-then-fix before giving up (each loop of directories takes one).
const PASSES: usize = 64;

/// What a repair did, and what the check after it found.
#[derive(Debug, Default)]
pub struct RepairReport {
    /// Each change made, one line each, in plain words.
    pub changes: Vec<String>,
    /// The check of the repaired store (problems left: those no repair can fix).
    pub after: FsckReport,
}

/// Repair the store in `dir`, which must not be mounted; `waiting` is told (once) when another
/// process holds the store and the repair waits for it (up to 30 s).
pub fn repair(
    dir: &Path,
    access: &Access,
    waiting: &mut dyn FnMut(&str),
) -> Result<RepairReport, FsError> {
    not_mounted(dir, "fsck --repair changes a store no mount is using")?;
    let mut vol = holder::open_waiting(dir, holder::WAIT, waiting, || {
        Volume::open_for_repair_with(dir, access)
    })?;
    if !vol.check_integrity()? {
        return Err(FsError::Refused {
            why: format!(
                "{}: database pages failed redb's integrity check; not repairing on top of them",
                dir.display()
            ),
            errno: libc::EUCLEAN,
        });
    }
    let changes = repair_volume(&vol)?;
    let mut after = FsckReport::default();
    check(&vol, &mut after)?;
    Ok(RepairReport { changes, after })
}

/// Fix what the rules find in `vol`'s store, in one durable transaction; the changes made.
pub(crate) fn repair_volume(vol: &Volume) -> Result<Vec<String>, FsError> {
    let txn = vol.store().write()?;
    let mut fixer = Fixer {
        txn: &txn,
        lost_found: None,
        changes: store::shared::rebuild(&txn)?,
    };
    for _ in 0..PASSES {
        let ns = Namespace::write(&txn)?;
        let findings = ns.findings();
        if findings.iter().any(|f| matches!(f, Finding::NoRoot)) {
            return Err(FsError::Refused {
                why: "the root directory is missing or damaged: fsck --repair cannot rebuild it"
                    .into(),
                errno: libc::EUCLEAN,
            });
        }
        let Some(first) = findings.iter().filter_map(phase).min() else {
            break;
        };
        for f in findings.iter().filter(|f| phase(f) == Some(first)) {
            fixer.fix(&ns, f)?;
        }
    }
    let changes = std::mem::take(&mut fixer.changes);
    vol.store().commit(txn, true)?;
    Ok(changes)
}

/// When a finding is fixed: entries and the inode counter first (a new `lost+found` takes a
/// number), then the orphan table, then reconnection, then counts. `None`: not repairable.
fn phase(f: &Finding) -> Option<u8> {
    use Finding::*;
    match f {
        NoDir(_)
        | NotDir(_)
        | NoInode(_)
        | WrongKind(..)
        | NamesRoot(_)
        | DirNames { .. }
        | StrayExtent { .. }
        | NextIno { .. } => Some(1),
        OrphanGone(_) | OrphanNamed(..) | OrphanFull(_) => Some(2),
        Unnamed(_) | Loop(_) => Some(3),
        LinkCount { .. }
        | DotDot { .. }
        | StaleDotDot(_)
        | InodeCount { .. }
        | Disk { .. }
        | Bytes { .. }
        | Used { .. } => Some(4),
        Damaged(..) | NoRoot | NoTarget(_) => None,
    }
}

/// Applies fixes to one transaction, noting each change.
struct Fixer<'t, 's> {
    txn: &'t Txn<'s>,
    /// `/lost+found`, once found or made.
    lost_found: Option<u64>,
    changes: Vec<String>,
}

impl Fixer<'_, '_> {
    fn fix(&mut self, ns: &Namespace, f: &Finding) -> Result<(), FsError> {
        use Finding::*;
        match f {
            NoDir(at) => self.remove_entry(ns, at, format!("directory {} does not exist", at.0)),
            NotDir(at) => self.remove_entry(ns, at, format!("{} is not a directory", at.0)),
            NoInode(at) => self.remove_entry(ns, at, format!("inode {} does not exist", at.2)),
            NamesRoot(at) => self.remove_entry(ns, at, "it named the root directory".into()),
            WrongKind(at, kind) => self.set_kind(ns, at, *kind),
            DirNames { dir, extra } => {
                for e in extra {
                    let why = format!("directory {dir} has another name, a directory has one");
                    self.remove_entry(ns, &(e.parent, e.name.clone(), e.ino), why)?;
                }
                Ok(())
            }
            StrayExtent { ino, idx } => self.remove_extent(*ino, *idx),
            NextIno { next, top } => self.next_ino(*next, *top),
            OrphanGone(i) => self.drop_orphan(*i, "it does not exist"),
            OrphanNamed(i, _) => self.drop_orphan(*i, "it has a name"),
            OrphanFull(i) => self.drop_orphan(*i, "the directory holds entries"),
            Unnamed(i) => self.reconnect(ns, *i, "no name referred to it"),
            Loop(i) => self.reconnect(ns, *i, "it was in a loop of directories"),
            LinkCount { ino, has, expected } => self.link_count(ns, *ino, *has, *expected),
            DotDot {
                dir,
                recorded,
                actual,
            } => self.dotdot(ns, *dir, *recorded, *actual),
            StaleDotDot(i) => {
                self.txn.open_table(PARENTS)?.remove(*i)?;
                self.note(format!(
                    "removed the `..` record of inode {i}, which is not a directory"
                ));
                Ok(())
            }
            InodeCount { counted, items } => self.counter(
                "inodes",
                items.saturating_sub(1),
                format!(
                    "set the store's inode count to {items} (was {})",
                    counted + 1
                ),
            ),
            Disk { ino, held, .. } => self.disk(ns, *ino, *held),
            Bytes { ino, covered, .. } => self.bytes(ns, *ino, *covered),
            Used { counted, held } => self.counter(
                "used",
                *held,
                format!(
                    "set the store's stored bytes to {held}, what its extents hold (was {counted})"
                ),
            ),
            Damaged(..) | NoRoot | NoTarget(_) => Ok(()),
        }
    }

    fn note(&mut self, line: String) {
        self.changes.push(line);
    }

    /// Where directory `dir` is, for a change line.
    fn place(ns: &Namespace, dir: u64) -> String {
        match ns.inodes.contains_key(&dir) {
            true => format!("{} (directory {dir})", ns.path(dir)),
            false => format!("directory {dir}"),
        }
    }

    fn remove_entry(&mut self, ns: &Namespace, at: &At, why: String) -> Result<(), FsError> {
        let (parent, name, _) = at;
        self.txn
            .open_table(DIRENTS)?
            .remove((*parent, name.as_slice()))?;
        self.note(format!(
            "removed entry '{}' in {}: {why}",
            String::from_utf8_lossy(name),
            Self::place(ns, *parent)
        ));
        Ok(())
    }

    fn set_kind(&mut self, ns: &Namespace, at: &At, kind: Kind) -> Result<(), FsError> {
        let (parent, name, ino) = at;
        self.txn
            .open_table(DIRENTS)?
            .insert((*parent, name.as_slice()), (*ino, kind as u8))?;
        self.note(format!(
            "entry '{}' in {}: its kind set to its inode's ({})",
            String::from_utf8_lossy(name),
            Self::place(ns, *parent),
            kind_word(kind)
        ));
        Ok(())
    }

    fn remove_extent(&mut self, ino: u64, idx: u64) -> Result<(), FsError> {
        let freed = {
            let mut extents = self.txn.open_table(EXTENTS)?;
            -self.txn.remove_item(&mut extents, (ino, idx))?.used
        };
        self.note(format!(
            "removed extent {idx} of missing inode {ino} ({freed} stored bytes freed)"
        ));
        Ok(())
    }

    fn next_ino(&mut self, next: u64, top: u64) -> Result<(), FsError> {
        let to = top.saturating_add(1);
        self.txn.set_counter("next_ino", to)?;
        self.note(format!(
            "set the next inode number to {to}, above the largest inode {top} (was {next})"
        ));
        Ok(())
    }

    fn drop_orphan(&mut self, ino: u64, why: &str) -> Result<(), FsError> {
        self.txn.open_table(ORPHANS)?.remove(ino)?;
        self.note(format!(
            "removed inode {ino} from the orphan table (which a mount deletes): {why}"
        ));
        Ok(())
    }

    fn counter(&mut self, key: &str, to: u64, line: String) -> Result<(), FsError> {
        self.txn.open_table(META)?.insert(key, to)?;
        self.note(line);
        Ok(())
    }

    fn link_count(&mut self, ns: &Namespace, ino: u64, has: u32, to: u32) -> Result<(), FsError> {
        update(self.txn, ino, |i| i.nlink = to)?;
        self.note(format!(
            "set the link count of {} (inode {ino}) from {has} to {to}",
            ns.path(ino)
        ));
        Ok(())
    }

    fn dotdot(
        &mut self,
        ns: &Namespace,
        dir: u64,
        recorded: Option<u64>,
        actual: u64,
    ) -> Result<(), FsError> {
        self.txn.open_table(PARENTS)?.insert(dir, actual)?;
        let was = recorded.map_or("none".to_string(), |r| format!("directory {r}"));
        self.note(format!(
            "set the `..` of {} (directory {dir}) to directory {actual}, which holds its name \
             (was {was})",
            ns.path(dir)
        ));
        Ok(())
    }

    fn disk(&mut self, ns: &Namespace, ino: u64, held: u64) -> Result<(), FsError> {
        let was = update(self.txn, ino, |i| std::mem::replace(&mut i.disk, held))?;
        self.note(format!(
            "set the stored bytes of {} (inode {ino}) to {held}, what its extents hold (was \
             {was})",
            ns.path(ino)
        ));
        Ok(())
    }

    fn bytes(&mut self, ns: &Namespace, ino: u64, covered: u64) -> Result<(), FsError> {
        let was = update(self.txn, ino, |i| std::mem::replace(&mut i.bytes, covered))?;
        self.note(format!(
            "set the bytes that the extents of {} (inode {ino}) cover to {covered}, what they \
             cover (was {was})",
            ns.path(ino)
        ));
        Ok(())
    }

    /// Give `ino` a name in `/lost+found`: `#INODE` (e2fsck's), with a suffix if taken.
    fn reconnect(&mut self, ns: &Namespace, ino: u64, why: &str) -> Result<(), FsError> {
        let Some(inode) = ns.inodes.get(&ino) else {
            return Ok(());
        };
        let lf = self.lost_found(ns)?;
        let name = {
            let dirents = self.txn.open_table(DIRENTS)?;
            let mut name = format!("#{ino}");
            let mut n = 0;
            while dirents.get((lf, name.as_bytes()))?.is_some() {
                n += 1;
                name = format!("#{ino}.{n}");
            }
            name
        };
        self.txn
            .open_table(DIRENTS)?
            .insert((lf, name.as_bytes()), (ino, inode.kind as u8))?;
        self.txn.open_table(ORPHANS)?.remove(ino)?;
        if inode.kind == Kind::Dir {
            self.txn.open_table(PARENTS)?.insert(ino, lf)?;
            update(self.txn, lf, |d| d.nlink = d.nlink.saturating_add(1))?;
        }
        self.note(format!(
            "moved inode {ino} ({}, {} bytes) to /lost+found/{name}: {why}",
            kind_word(inode.kind),
            inode.size
        ));
        Ok(())
    }

    /// `/lost+found`, made (owned as the root is, mode 0700) if the root has none. A root
    /// entry of that name that is not a directory is left alone and the repair refused.
    fn lost_found(&mut self, ns: &Namespace) -> Result<u64, FsError> {
        if let Some(lf) = self.lost_found {
            return Ok(lf);
        }
        let found = (self.txn.open_table(DIRENTS)?)
            .get((ROOT, LOST_FOUND))?
            .map(|v| v.value());
        if let Some((ino, _)) = found {
            if !ns.inodes.get(&ino).is_some_and(|i| i.kind == Kind::Dir) {
                return Err(FsError::Refused {
                    why: "/lost+found is not a directory: rename it (mount the store, mv \
                          lost+found elsewhere), then run fsck --repair again"
                        .into(),
                    errno: libc::EEXIST,
                });
            }
            self.lost_found = Some(ino);
            return Ok(ino);
        }
        let (uid, gid) = ns.inodes.get(&ROOT).map_or((0, 0), |r| (r.uid, r.gid));
        let ino = self.txn.next_counter("next_ino")?;
        let dir = Inode::new(Kind::Dir, 0o700, uid, gid);
        self.txn
            .open_table(INODES)?
            .insert(ino, dir.to_bytes().as_slice())?;
        self.txn
            .open_table(DIRENTS)?
            .insert((ROOT, LOST_FOUND), (ino, Kind::Dir as u8))?;
        self.txn.open_table(PARENTS)?.insert(ino, ROOT)?;
        store::add_counter(self.txn, "inodes", 1)?;
        update(self.txn, ROOT, |r| r.nlink = r.nlink.saturating_add(1))?;
        self.note(format!("made /lost+found (directory {ino})"));
        self.lost_found = Some(ino);
        Ok(ino)
    }
}

/// Change inode `ino`'s record in `txn` with `f`, returning what `f` returns.
fn update<T>(txn: &Txn<'_>, ino: u64, f: impl FnOnce(&mut Inode) -> T) -> Result<T, FsError> {
    let mut inodes = txn.open_table(INODES)?;
    let mut inode = store::get_inode(&inodes, ino)?;
    let out = f(&mut inode);
    inodes.insert(ino, inode.to_bytes().as_slice())?;
    Ok(out)
}

/// A kind in words.
fn kind_word(k: Kind) -> &'static str {
    match k {
        Kind::File => "a file",
        Kind::Dir => "a directory",
        Kind::Symlink => "a symlink",
        Kind::Fifo => "a fifo",
        Kind::Socket => "a socket",
        Kind::Char => "a character device",
        Kind::Block => "a block device",
    }
}
