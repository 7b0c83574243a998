//! `wring fsck DIR`: check a store that is not mounted and report what is wrong; with
//! `--repair`, fix what can be fixed without guessing at data, in one transaction.
//!
//! Mirrors `btrfs check` and e2fsck. Checking is `btrfs check` in read-only mode: the
//! database's own integrity (redb's checksummed pages), then every cross-reference, each rule
//! decided in one place — the namespace (read whole in [`names`]) and the store's counters in
//! [`rules`] (entries point at inodes of the right kind in directories that exist, every inode
//! is reached from the root, link counts match the names, `..` records, the orphan table, the
//! counters), the data in
//! [`extents`] (every extent belongs to a file, lies within its size, passes its checksum and
//! decodes, no two extents share bytes, a bucket's segment objects verify). Like `btrfs check`
//! it writes nothing: the store is opened with [`Store::open_for_check`].
//!
//! Repairing is e2fsck's passes 2–4 over the same findings ([`repair`]): it removes entries
//! whose inode or directory is missing, reconnects what the root does not reach under
//! `lost+found` as `#INODE`, and sets link counts, `..` records, the orphan table and the
//! counters to what the tables say, reporting each change.
//!
//! A store still held by another process (a daemon writing its final commit after a plain
//! umount) is waited for, up to 30 s, as a mount waits (see [`super::holder`]).
//!
//! [`Store::open_for_check`]: crate::store::Store::open_for_check

mod extents;
mod finding;
mod names;
mod repair;
mod rules;

use std::path::Path;

use super::holder;
use crate::error::FsError;
use crate::store::Access;
use crate::volume::Volume;

pub use repair::{repair, RepairReport};

/// What fsck found.
#[derive(Debug, Default)]
pub struct FsckReport {
    /// Inodes checked.
    pub inodes: u64,
    /// Extents checked.
    pub extents: u64,
    /// Dictionaries checked.
    pub dicts: u64,
    /// Stored extents that several extent items share (their reference records checked).
    pub shared: u64,
    /// Problems, one line each.
    pub problems: Vec<String>,
    /// Things worth knowing that are not problems, one line each.
    pub notes: Vec<String>,
}

/// Check the store in `dir` (which must not be mounted) without changing it.
pub fn fsck(dir: &Path) -> Result<FsckReport, FsError> {
    fsck_with(dir, &Access::default())
}

/// [`fsck`] with the credentials a store whose extents are in a bucket needs; a wait for a
/// process still holding the store is logged.
pub fn fsck_with(dir: &Path, access: &Access) -> Result<FsckReport, FsError> {
    fsck_waiting(dir, access, &mut |m| log::warn!("{m}"))
}

/// [`fsck_with`], telling `waiting` (once) when it waits for another process to let go of
/// the store.
pub fn fsck_waiting(
    dir: &Path,
    access: &Access,
    waiting: &mut dyn FnMut(&str),
) -> Result<FsckReport, FsError> {
    not_mounted(dir, "fsck checks a store that is not mounted")?;
    let mut report = FsckReport::default();
    let mut vol = holder::open_waiting(dir, holder::WAIT, waiting, || {
        Volume::open_for_check_with(dir, access)
    })?;
    if vol.store().repaired() {
        report
            .notes
            .push("the store was not closed cleanly: checked what the next mount recovers".into());
    }
    if !vol.check_integrity()? {
        report
            .problems
            .push("database pages failed redb's integrity check".into());
    }
    check(&vol, &mut report)?;
    Ok(report)
}

/// Refuse a store mounted in this mount namespace, naming the mount (a mount elsewhere holds
/// the store's lock, which is waited for and then named).
fn not_mounted(dir: &Path, why: &str) -> Result<(), FsError> {
    match holder::mounted_on(dir) {
        Some(at) => Err(FsError::Refused {
            why: format!(
                "{} is mounted on {at}: unmount it first ({why})",
                dir.display()
            ),
            errno: libc::EBUSY,
        }),
        None => Ok(()),
    }
}

/// Check the cross-references of an open volume, adding to `report`.
pub(crate) fn check(vol: &Volume, report: &mut FsckReport) -> Result<(), FsError> {
    let txn = vol.store().read()?;
    let ns = names::Namespace::read(&txn)?;
    report.inodes = (ns.inodes.len() + ns.damaged.len()) as u64;
    report
        .problems
        .extend(ns.findings().iter().map(ToString::to_string));
    extents::check(vol, &txn, &ns, report)
}

#[cfg(test)]
mod tests;
