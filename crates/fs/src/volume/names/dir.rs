//! Directories: lookup, listing and the entry helpers the namespace operations use.
//!
//! Mirrors fs/btrfs/dir-item.c (DIR_ITEM/DIR_INDEX) and btrfs_real_readdir(): entries are kept
//! sorted by name per directory; a listing is a snapshot taken when it starts, so entries
//! removed while it is read (rm -r) are neither skipped nor repeated.

use std::sync::Arc;

use redb::{ReadableTable, WriteTransaction};

use crate::error::{errno, FsError};
use crate::store::records::{Inode, Kind};
use crate::store::{self, DIRENTS, INODES};
use crate::volume::{delayed, lock, Volume};

/// Longest name (btrfs: BTRFS_NAME_LEN).
pub(crate) const NAME_MAX: usize = 255;

/// One entry of a listing.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Inode.
    pub ino: u64,
    /// Kind.
    pub kind: Kind,
    /// Name.
    pub name: Vec<u8>,
}

pub(crate) fn check_name(name: &[u8]) -> Result<(), FsError> {
    if name.len() > NAME_MAX {
        return Err(errno(libc::ENAMETOOLONG));
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(errno(libc::EINVAL));
    }
    Ok(())
}

/// Look a name up within a write transaction.
pub(crate) fn entry_in(
    txn: &WriteTransaction,
    parent: u64,
    name: &[u8],
) -> Result<Option<(u64, Kind)>, FsError> {
    delayed::entry_of(&txn.open_table(DIRENTS)?, parent, name)
}

/// Whether a directory has entries.
pub(crate) fn has_entries(txn: &WriteTransaction, dir: u64) -> Result<bool, FsError> {
    let dirents = txn.open_table(DIRENTS)?;
    let found = dirents
        .range((dir, &[][..])..(dir + 1, &[][..]))?
        .next()
        .is_some();
    Ok(found)
}

/// Read a directory inode for modification, failing unless it is one.
pub(crate) fn dir_inode(txn: &WriteTransaction, dir: u64) -> Result<Inode, FsError> {
    dir_record(&txn.open_table(INODES)?, dir)
}

/// [`dir_inode`] from an inode table the caller has open.
pub(crate) fn dir_record<T: redb::ReadableTable<u64, &'static [u8]>>(
    inodes: &T,
    dir: u64,
) -> Result<Inode, FsError> {
    let inode = store::get_inode(inodes, dir)?;
    if inode.kind != Kind::Dir {
        return Err(errno(libc::ENOTDIR));
    }
    Ok(inode)
}

impl Volume {
    /// Find `name` in `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<(u64, Inode), FsError> {
        let ino = self.find(parent, name)?;
        // Its own snapshot, taken after its dirty state (see `Volume::inode`).
        Ok((ino, self.inode(ino)?))
    }

    /// FUSE LOOKUP: [`Volume::lookup`], the inode held for the kernel (as an open holds it)
    /// until its FORGET, so an unlink meanwhile leaves it as an orphan that the kernel can
    /// still write back to and set times on, as Linux keeps an unlinked inode until its last
    /// reference goes.
    pub fn lookup_held(&self, parent: u64, name: &[u8]) -> Result<(u64, Inode), FsError> {
        let ino = self.find(parent, name)?;
        Ok((ino, self.open_existing(ino)?))
    }

    /// The inode `name` in `parent` names. `.` and `..` are what the kernel asks for to turn
    /// a file handle into an inode it has forgotten (exportfs: LOOKUP of `.` by node id, of
    /// any kind, and of `..` to connect a directory to the root): the inode itself while it
    /// exists (ENOENT once deleted, which the kernel answers ESTALE), and a directory's parent.
    /// A delayed entry (see [`crate::volume::delayed`]) is looked at before the store.
    fn find(&self, parent: u64, name: &[u8]) -> Result<u64, FsError> {
        if name.len() > NAME_MAX {
            return Err(errno(libc::ENAMETOOLONG));
        }
        if name != b"." && name != b".." {
            if self.store.inode(parent)?.kind != Kind::Dir {
                return Err(errno(libc::ENOTDIR));
            }
            let found = self.store.name(parent, name)?;
            return found.map(|(ino, _)| ino).ok_or(errno(libc::ENOENT));
        }
        let pinode = self.store.inode(parent)?;
        if name == b"." {
            return match pinode.nlink {
                0 => Err(errno(libc::ENOENT)),
                _ => Ok(parent),
            };
        }
        if pinode.kind != Kind::Dir {
            return Err(errno(libc::ENOTDIR));
        }
        self.store.parent(parent)
    }

    /// Start a listing of `dir`; returns its handle. The directory counts as open until
    /// [`Volume::releasedir`], so an rmdir meanwhile leaves it as an orphan (`fstat` on the
    /// descriptor still works, with no links), as for files.
    pub fn opendir(&self, dir: u64) -> Result<u64, FsError> {
        if self.open_existing(dir)?.kind == Kind::Dir {
            return Ok(self.new_fh());
        }
        if let Err(u) = self.released(dir) {
            log::warn!("undoing a failed opendir of inode {dir}: {u}");
        }
        Err(errno(libc::ENOTDIR))
    }

    /// The listing of `dir` held by `fh`, taken now when `offset` is 0 (or none is held);
    /// the caller replies from position `offset`. Positions 0 and 1 are `.` and `..`; the
    /// entry at index i has position i + 1 as its `next` offset.
    pub fn readdir(&self, dir: u64, fh: u64, offset: u64) -> Result<Arc<Vec<DirEntry>>, FsError> {
        if offset != 0 {
            if let Some(list) = lock(&self.dirs).get(&fh) {
                return Ok(list.clone());
            }
        }
        // Read outside the lock: other listings go on meanwhile.
        let list = Arc::new(self.list(dir)?);
        if let Ok(inode) = self.store.inode(dir) {
            self.accessed(dir, &inode);
        }
        lock(&self.dirs).insert(fh, list.clone());
        Ok(list)
    }

    /// `.`, `..` and the entries of `dir`, from one snapshot and the delayed entries as they
    /// were when it was taken.
    fn list(&self, dir: u64) -> Result<Vec<DirEntry>, FsError> {
        let view = self.store.names_in(dir)?;
        let (txn, delayed) = (&view.snap, &view.names);
        let record = match &view.record {
            Some(r) => r.clone(),
            None => self.record_in(txn, dir)?,
        };
        if record.nlink == 0 {
            // Removed while open: Linux lists nothing of a dead directory.
            return Err(errno(libc::ENOENT));
        }
        let dirents = txn.open_table(DIRENTS)?;
        let mut list = vec![
            DirEntry {
                ino: dir,
                kind: Kind::Dir,
                name: b".".to_vec(),
            },
            DirEntry {
                ino: match view.parent {
                    Some(p) => p,
                    None => store::parent_of(txn, dir)?,
                },
                kind: Kind::Dir,
                name: b"..".to_vec(),
            },
        ];
        let mut stored: delayed::Listing = Vec::new();
        for r in dirents.range((dir, &[][..])..(dir + 1, &[][..]))? {
            let (k, v) = r?;
            let (ino, kind) = v.value();
            let kind = Kind::of_entry(kind).unwrap_or(Kind::File);
            stored.push((k.value().1.to_vec(), ino, kind));
        }
        if !delayed.is_empty() {
            let seq = store::counter(txn, delayed::SEQ_KEY)?;
            delayed::merge(&mut stored, delayed, seq);
        }
        let entries = stored.into_iter();
        list.extend(entries.map(|(name, ino, kind)| DirEntry { ino, kind, name }));
        Ok(list)
    }

    /// End the listing `fh` of `dir`; the last one of a removed directory deletes it.
    pub fn releasedir(&self, dir: u64, fh: u64) -> Result<(), FsError> {
        lock(&self.dirs).remove(&fh);
        self.released(dir)
    }
}
