//! Inodes and the namespace: attributes (setattr, with the privileges a write, truncate or
//! chown drops), create, link, unlink, rename, symlinks. A new inode inherits its directory's
//! default ACL ([`super::xattr`]) and `compression` property.
//!
//! Mirrors fs/btrfs/inode.c (btrfs_create, btrfs_link, btrfs_unlink, btrfs_rename,
//! btrfs_setattr) and props.c's inheritance of the `btrfs.compression` property by new files
//! from their directory.

use redb::{ReadableTable, WriteTransaction};

use super::acl;
use super::creds::Caller;
use super::record::{put_inode, update};
use super::setattr::SetAttr;
use super::xattr::{chmod_acl, inherit_acl, inherit_property};
use crate::error::{errno, FsError};
use crate::store::records::{Inode, Kind, Time, FLAG_NOCOMPRESS, FLAG_NOCOW};
use crate::store::space::META_OP;
use crate::store::{self, DIRENTS, INODES, PARENTS, SYMLINKS, XATTRS};
use crate::volume::delayed::{Change, NameEntry};
use crate::volume::names::dir::{check_name, dir_inode, dir_record, entry_in, has_entries};
use crate::volume::names::fsflags::{guard, Mutation};
use crate::volume::Volume;

/// The security.capability attribute, dropped when a file's privileges are killed.
const CAPS_XATTR: &[u8] = b"security.capability";

/// Kill a regular file's privileges after a write or truncate by `caller`, a process without
/// CAP_FSETID (the kernel flags such a write; a truncate is checked in [`Volume::setattr`]), as
/// the VFS does (setattr_should_drop_suidgid): set-user-ID always; set-group-ID with group
/// execute, or without it when the caller is not in the file's group (primary or
/// supplementary); and the file capabilities. The mount asks the kernel to leave this to the
/// filesystem (FUSE_HANDLE_KILLPRIV_V2), which spares a getxattr round trip on every write.
pub(crate) fn kill_privs(
    txn: &WriteTransaction,
    ino: u64,
    inode: &mut Inode,
    caller: Caller,
) -> Result<(), FsError> {
    if inode.kind != Kind::File {
        return Ok(());
    }
    inode.perm &= !libc::S_ISUID;
    if inode.perm & libc::S_IXGRP != 0 || !caller.in_group(inode.gid) {
        inode.perm &= !libc::S_ISGID;
    }
    txn.open_table(XATTRS)?.remove((ino, CAPS_XATTR))?;
    Ok(())
}

impl Volume {
    /// Kill `ino`'s privileges for a change of its contents by `caller` (see [`kill_privs`];
    /// with `check_fsetid`, only when the caller lacks CAP_FSETID, which the kernel has
    /// checked for a flagged write) and tell the kernel its cached mode is stale, so the drop
    /// is part of the call: the next stat and execve see it, as on btrfs.
    pub(crate) fn drop_privs(
        &self,
        ino: u64,
        caller: Caller,
        check_fsetid: bool,
    ) -> Result<(), FsError> {
        let cur = self.store.inode(ino)?;
        let setid = cur.perm & (libc::S_ISUID | libc::S_ISGID) != 0;
        if cur.kind != Kind::File || (!setid && self.is_bare(ino)) {
            return Ok(());
        }
        if check_fsetid && caller.has_fsetid() {
            return Ok(());
        }
        let txn = self.store.write()?;
        let mut inode = store::get_inode(&txn.open_table(INODES)?, ino)?;
        let before = inode.perm;
        kill_privs(&txn, ino, &mut inode, caller)?;
        put_inode(&txn, ino, &inode)?;
        self.store.commit(txn, false)?;
        if inode.perm != before {
            self.attrs_changed(ino);
        }
        Ok(())
    }
}

/// Kill privileges on a chown by `caller` that names a user or a group (the same ones
/// included), as chown_common does for anything but a directory: set-user-ID always, even for
/// root; set-group-ID with group execute, or without it when the caller is neither in the
/// file's group nor has CAP_FSETID (setattr_should_drop_sgid); and the file capabilities.
fn kill_privs_on_chown(
    txn: &WriteTransaction,
    ino: u64,
    inode: &mut Inode,
    caller: Caller,
) -> Result<(), FsError> {
    if inode.kind == Kind::Dir {
        return Ok(());
    }
    kill_mode_on_chown(inode, caller);
    txn.open_table(XATTRS)?.remove((ino, CAPS_XATTR))?;
    Ok(())
}

/// chown(2) with -1 for both ids, which reaches a FUSE filesystem as a SETATTR of the ctime
/// alone on a regular file (the kernel sends its own ctime under the writeback cache) and
/// as a SETATTR of nothing on anything else; no other call sends either (a write's kill of
/// set-ID bits is a SETATTR of nothing on a regular file). The VFS's notify_change still
/// kills set-user-ID, and set-group-ID as [`kill_mode_on_chown`] says, of anything but a
/// directory, and that mode change is one only the owner or CAP_FOWNER may make
/// (setattr_prepare: EPERM otherwise). FUSE_HANDLE_KILLPRIV_V2 leaves both to the
/// filesystem. `None`: not such a call, or nothing to kill.
fn chown_keeping_ids(cur: &Inode, set: &SetAttr) -> Result<Option<SetAttr>, FsError> {
    let Some(caller) = set.caller else {
        return Ok(None);
    };
    let ctime_alone = SetAttr {
        ctime: set.ctime,
        caller: set.caller,
        ..SetAttr::default()
    };
    let chown = *set == ctime_alone
        && match cur.kind {
            Kind::Dir => false,
            Kind::File => set.ctime.is_some(),
            _ => set.ctime.is_none(),
        };
    if !chown {
        return Ok(None);
    }
    let mut after = cur.clone();
    kill_mode_on_chown(&mut after, caller);
    if after.perm == cur.perm {
        return Ok(None);
    }
    if !caller.owns_or_fowner(cur.uid) {
        return Err(errno(libc::EPERM));
    }
    Ok(Some(SetAttr {
        mode: Some(after.perm),
        ..ctime_alone
    }))
}

/// The mode part of [`kill_privs_on_chown`] (the caller's groups and capabilities are looked
/// up only when the file has a set-group-ID bit to lose).
fn kill_mode_on_chown(inode: &mut Inode, caller: Caller) {
    inode.perm &= !libc::S_ISUID;
    if inode.perm & libc::S_ISGID == 0 {
        return;
    }
    let sgid_stays =
        inode.perm & libc::S_IXGRP == 0 && (caller.in_group(inode.gid) || caller.has_fsetid());
    if !sgid_stays {
        inode.perm &= !libc::S_ISGID;
    }
}

/// What a setattr sets in the record itself, after the size and privileges: mode, owner and
/// times (`ctime`: the kernel's, else now).
fn set_fields(inode: &mut Inode, set: &SetAttr, now: Time) {
    if let Some(m) = set.mode {
        inode.perm = m & 0o7777;
    }
    if let Some(u) = set.uid {
        inode.uid = u;
    }
    if let Some(g) = set.gid {
        inode.gid = g;
    }
    if let Some(a) = set.atime {
        inode.atime = a.map_or(now, Time::from_system);
    }
    if let Some(m) = set.mtime {
        inode.mtime = m.map_or(now, Time::from_system);
    }
    inode.ctime = set.ctime.map_or(now, Time::from_system);
}

fn touch_dir(txn: &WriteTransaction, dir: u64, nlink_delta: i32) -> Result<(), FsError> {
    update(txn, dir, |d| touched(d, nlink_delta))?;
    Ok(())
}

/// A directory's record after an entry was added or removed: new times, and `nlink_delta` for
/// a subdirectory's `..`.
fn touched(d: &mut Inode, nlink_delta: i32) {
    let now = Time::now();
    d.mtime = now;
    d.ctime = now;
    d.nlink = d.nlink.saturating_add_signed(nlink_delta);
}

/// What a new inode is.
pub struct NewInode<'a> {
    /// Kind.
    pub kind: Kind,
    /// Permission bits.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number.
    pub rdev: u32,
    /// Symlink target.
    pub target: Option<&'a [u8]>,
    /// The creator's umask, applied when the directory has no default ACL.
    pub umask: u32,
}

impl NewInode<'_> {
    /// A regular file with permission bits `perm`, owned by root, no umask.
    pub fn file(perm: u32) -> NewInode<'static> {
        NewInode {
            kind: Kind::File,
            perm,
            uid: 0,
            gid: 0,
            rdev: 0,
            target: None,
            umask: 0,
        }
    }
}

impl Volume {
    /// Create a file, directory, symlink or node named `name` in `parent`.
    pub fn create(
        &self,
        parent: u64,
        name: &[u8],
        new: NewInode<'_>,
    ) -> Result<(u64, Inode), FsError> {
        self.create_with(parent, name, new, |_| {})
    }

    /// create(2): [`Volume::create`] with the new inode counted open before its name becomes
    /// visible, so an unlink racing the reply leaves it as an orphan for this open.
    pub fn create_open(
        &self,
        parent: u64,
        name: &[u8],
        new: NewInode<'_>,
    ) -> Result<(u64, Inode), FsError> {
        self.create_held(parent, name, new, 1)
    }

    /// [`Volume::create`] with the new inode held `refs` times (opens, and the kernel's
    /// reference a FUSE entry reply hands it, dropped by FORGET) before its name becomes
    /// visible: an unlink racing the reply leaves it as an orphan until they are all gone.
    pub fn create_held(
        &self,
        parent: u64,
        name: &[u8],
        new: NewInode<'_>,
        refs: u32,
    ) -> Result<(u64, Inode), FsError> {
        let mut counted = None;
        let r = self.create_with(parent, name, new, |ino| {
            for _ in 0..refs {
                self.opened(ino);
            }
            counted = Some(ino);
        });
        if let (Err(_), Some(ino)) = (&r, counted) {
            for _ in 0..refs {
                if let Err(e) = self.released(ino) {
                    log::warn!("undoing the open of a failed create: {e}");
                }
            }
        }
        r
    }

    /// [`Volume::create`], calling `allocated` with the new inode number before the commit.
    fn create_with(
        &self,
        parent: u64,
        name: &[u8],
        new: NewInode<'_>,
        allocated: impl FnOnce(u64),
    ) -> Result<(u64, Inode), FsError> {
        check_name(name)?;
        self.store.check_room(META_OP)?;
        let mut allocated = Some(allocated);
        if let Some(made) = self.create_delayed(parent, name, &new, &mut allocated)? {
            return Ok(made);
        }
        let Some(allocated) = allocated else {
            return Err(errno(libc::EIO));
        };
        let txn = self.store.write()?;
        // The directory and inode tables are opened once for the parent, the entry and the
        // new inode (see `remove`).
        let (ino, inode) = {
            let mut dirents = txn.open_table(DIRENTS)?;
            let mut inodes = txn.open_table(INODES)?;
            let mut pinode = dir_record(&inodes, parent)?;
            guard(&pinode, Mutation::AddEntry)?;
            if dirents.get((parent, name))?.is_some() {
                return Err(errno(libc::EEXIST));
            }
            let ino = txn.next_counter("next_ino")?;
            allocated(ino);
            let mut inode = Inode::new(new.kind, new.perm, new.uid, new.gid);
            inode.rdev = new.rdev;
            // btrfs_inherit_iflags: a directory's `m` and `C` go to what is made in it.
            inode.flags |= pinode.flags & (FLAG_NOCOMPRESS | FLAG_NOCOW);
            if pinode.perm & libc::S_ISGID != 0 {
                inode.gid = pinode.gid;
                if new.kind == Kind::Dir {
                    inode.perm |= libc::S_ISGID;
                }
            }
            if let Some(t) = new.target {
                inode.size = t.len() as u64;
                txn.open_table(SYMLINKS)?.insert(ino, t)?;
            } else {
                inherit_acl(&txn, parent, ino, &mut inode, new.umask)?;
            }
            inodes.insert(ino, inode.to_bytes().as_slice())?;
            dirents.insert((parent, name), (ino, new.kind as u8))?;
            if new.kind == Kind::Dir {
                txn.open_table(PARENTS)?.insert(ino, parent)?;
            }
            touched(&mut pinode, if new.kind == Kind::Dir { 1 } else { 0 });
            inodes.insert(parent, pinode.to_bytes().as_slice())?;
            (ino, inode)
        };
        if matches!(new.kind, Kind::File | Kind::Dir) {
            inherit_property(&txn, parent, ino)?;
        }
        store::add_counter(&txn, "inodes", 1)?;
        // Before the commit: nobody can set an xattr on the inode before its name is there.
        let xattrs = txn.open_table(XATTRS)?;
        if xattrs
            .range((ino, &[][..])..(ino + 1, &[][..]))?
            .next()
            .is_none()
        {
            self.set_bare(ino);
        }
        drop(xattrs);
        self.store.commit(txn, false)?;
        Ok((ino, inode))
    }

    /// [`Volume::create`] as a delayed change (see [`crate::volume::delayed`]): no
    /// transaction, the next one writes the entry and both records (and a directory's
    /// parent). For what touches only them — a file, directory, node, fifo or socket in a
    /// directory without xattrs (nothing to inherit); `None` leaves anything else (a
    /// symlink's target) to a transaction. `allocated` is taken when it is called.
    fn create_delayed(
        &self,
        parent: u64,
        name: &[u8],
        new: &NewInode<'_>,
        allocated: &mut Option<impl FnOnce(u64)>,
    ) -> Result<Option<(u64, Inode)>, FsError> {
        if new.kind == Kind::Symlink || new.target.is_some() {
            return Ok(None);
        }
        let dir = new.kind == Kind::Dir;
        self.store.change(|n| {
            let mut pinode = n.inode(parent)?;
            if pinode.kind != Kind::Dir {
                return Err(errno(libc::ENOTDIR));
            }
            guard(&pinode, Mutation::AddEntry)?;
            if n.name(parent, name)?.is_some() {
                return Err(errno(libc::EEXIST));
            }
            if !self.is_bare(parent) {
                let xattrs = n.snap()?.open_table(XATTRS)?;
                let mut any = xattrs.range((parent, &[][..])..(parent + 1, &[][..]))?;
                if any.next().is_some() {
                    return Ok(None);
                }
            }
            let ino = n.next_ino()?;
            let mut inode = Inode::new(new.kind, new.perm, new.uid, new.gid);
            inode.rdev = new.rdev;
            inode.flags |= pinode.flags & (FLAG_NOCOMPRESS | FLAG_NOCOW);
            if pinode.perm & libc::S_ISGID != 0 {
                inode.gid = pinode.gid;
                if dir {
                    inode.perm |= libc::S_ISGID;
                }
            }
            inode.perm &= !(new.umask & 0o777);
            if let Some(f) = allocated.take() {
                f(ino);
            }
            // Before its name is visible: nobody can set an xattr on it before.
            self.set_bare(ino);
            touched(&mut pinode, if dir { 1 } else { 0 });
            n.new_inode(ino, inode.clone(), parent);
            n.put_inode(parent, pinode);
            n.put_name(parent, name, NameEntry::Is(ino, new.kind));
            Ok(Some((ino, inode)))
        })
    }

    /// An unlink or rmdir (`dir`) as a delayed change (see [`crate::volume::delayed`]): the
    /// entry's removal, the inode's link count and both times, with no transaction. An inode
    /// left without links while held becomes an orphan as in [`Volume::drop_link_of`]; one
    /// nobody holds is deleted, which `None` leaves to a transaction.
    fn remove_delayed(&self, parent: u64, name: &[u8], dir: bool) -> Result<Option<()>, FsError> {
        self.store.change(|n| {
            let mut pinode = n.inode(parent)?;
            if pinode.kind != Kind::Dir {
                return Err(errno(libc::ENOTDIR));
            }
            guard(&pinode, Mutation::RemoveEntry)?;
            let Some((ino, kind)) = n.name(parent, name)? else {
                return Err(errno(libc::ENOENT));
            };
            let mut inode = n.inode(ino)?;
            guard(&inode, Mutation::Name)?;
            match (dir, kind == Kind::Dir) {
                (true, false) => return Err(errno(libc::ENOTDIR)),
                (false, true) => return Err(errno(libc::EISDIR)),
                (true, true) if n.has_entries(ino)? => return Err(errno(libc::ENOTEMPTY)),
                _ => {}
            }
            inode.nlink = match dir {
                true => 0,
                false => inode.nlink.saturating_sub(1),
            };
            inode.ctime = Time::now();
            touched(&mut pinode, if dir { -1 } else { 0 });
            match inode.nlink {
                0 => {
                    // Looked at and marked together, as drop_link_of does.
                    let mut open = crate::volume::lock(&self.open);
                    if !open.counts.contains_key(&ino) {
                        return Ok(None);
                    }
                    open.orphans.insert(ino);
                    n.orphan(ino, inode);
                }
                _ => n.put_inode(ino, inode),
            }
            n.put_inode(parent, pinode);
            n.put_name(parent, name, NameEntry::Removed);
            Ok(Some(()))
        })
    }

    /// A new hard link to `ino` named `name` in `parent`.
    pub fn link(&self, ino: u64, parent: u64, name: &[u8]) -> Result<Inode, FsError> {
        check_name(name)?;
        self.store.check_room(META_OP)?;
        let txn = self.store.write()?;
        guard(&dir_inode(&txn, parent)?, Mutation::AddEntry)?;
        if entry_in(&txn, parent, name)?.is_some() {
            return Err(errno(libc::EEXIST));
        }
        guard(
            &store::get_inode(&txn.open_table(INODES)?, ino)?,
            Mutation::Name,
        )?;
        let inode = update(&txn, ino, |i| {
            i.nlink += 1;
            i.ctime = Time::now();
        })?;
        if inode.kind == Kind::Dir {
            return Err(errno(libc::EPERM));
        }
        txn.open_table(DIRENTS)?
            .insert((parent, name), (ino, inode.kind as u8))?;
        txn.open_table(store::ORPHANS)?.remove(ino)?;
        touch_dir(&txn, parent, 0)?;
        self.store.commit(txn, false)?;
        self.named(ino);
        Ok(inode)
    }

    /// FUSE LINK: [`Volume::link`] with the inode held for the kernel's new reference (see
    /// [`Volume::lookup_held`]).
    pub fn link_held(&self, ino: u64, parent: u64, name: &[u8]) -> Result<Inode, FsError> {
        self.open_existing(ino)?;
        let r = self.link(ino, parent, name);
        if r.is_err() {
            if let Err(e) = self.released(ino) {
                log::warn!("undoing the hold of a failed link: {e}");
            }
        }
        r
    }

    /// Remove a name (`dir`: rmdir, else unlink). The directory and inode tables are opened
    /// once for the checks, the entry and the parent's times (each open and close of a redb
    /// table is a lookup and an update of the table tree: rm -rf spent as much on them as on
    /// the changes).
    pub fn remove(&self, parent: u64, name: &[u8], dir: bool) -> Result<(), FsError> {
        if self.remove_delayed(parent, name, dir)?.is_some() {
            return Ok(());
        }
        let txn = self.store.write()?;
        let (ino, inode) = {
            let mut dirents = txn.open_table(DIRENTS)?;
            let mut inodes = txn.open_table(INODES)?;
            let mut pinode = dir_record(&inodes, parent)?;
            guard(&pinode, Mutation::RemoveEntry)?;
            let found = dirents.get((parent, name))?.map(|v| v.value());
            let Some((ino, kind)) = found.and_then(|(i, k)| Kind::of_entry(k).ok().map(|k| (i, k)))
            else {
                return Err(errno(libc::ENOENT));
            };
            let inode = store::get_inode(&inodes, ino)?;
            guard(&inode, Mutation::Name)?;
            let has_entries = |d: u64| -> Result<bool, FsError> {
                Ok(dirents
                    .range((d, &[][..])..(d + 1, &[][..]))?
                    .next()
                    .is_some())
            };
            match (dir, kind == Kind::Dir) {
                (true, false) => return Err(errno(libc::ENOTDIR)),
                (false, true) => return Err(errno(libc::EISDIR)),
                (true, true) if has_entries(ino)? => return Err(errno(libc::ENOTEMPTY)),
                _ => {}
            }
            dirents.remove((parent, name))?;
            touched(&mut pinode, if dir { -1 } else { 0 });
            inodes.insert(parent, pinode.to_bytes().as_slice())?;
            (ino, inode)
        };
        // Dropped after the commit (or the abort): opens fail while the deletion is pending.
        let _doom = self.drop_link_of(&txn, ino, inode)?;
        self.store.commit(txn, false)
    }

    /// Rename, replacing an existing target (RENAME_NOREPLACE and RENAME_EXCHANGE honoured).
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<(), FsError> {
        check_name(newname)?;
        let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE;
        if flags & !known != 0 || flags == known {
            // RENAME_WHITEOUT (overlayfs) is not supported; doing a plain rename would lose
            // the whiteout.
            return Err(errno(libc::EINVAL));
        }
        let txn = self.store.write()?;
        guard(&dir_inode(&txn, parent)?, Mutation::RemoveEntry)?;
        let to = dir_inode(&txn, newparent)?;
        guard(&to, Mutation::AddEntry)?;
        // A replaced target's deletion guard, dropped after the commit.
        let mut _doom = None;
        let Some((src, skind)) = entry_in(&txn, parent, name)? else {
            return Err(errno(libc::ENOENT));
        };
        let dst = entry_in(&txn, newparent, newname)?;
        {
            let inodes = txn.open_table(INODES)?;
            guard(&store::get_inode(&inodes, src)?, Mutation::Name)?;
            if let Some((d, _)) = dst {
                guard(&to, Mutation::RemoveEntry)?;
                guard(&store::get_inode(&inodes, d)?, Mutation::Name)?;
            }
        }
        let sdir = skind == Kind::Dir;
        if flags & libc::RENAME_EXCHANGE != 0 {
            let Some((dino, dkind)) = dst else {
                return Err(errno(libc::ENOENT));
            };
            {
                let mut dirents = txn.open_table(DIRENTS)?;
                dirents.insert((parent, name), (dino, dkind as u8))?;
                dirents.insert((newparent, newname), (src, skind as u8))?;
            }
            let ddir = dkind == Kind::Dir;
            let mut parents = txn.open_table(PARENTS)?;
            if sdir {
                parents.insert(src, newparent)?;
            }
            if ddir {
                parents.insert(dino, parent)?;
            }
            drop(parents);
            if parent != newparent && sdir != ddir {
                let d = if sdir { 1 } else { -1 };
                touch_dir(&txn, parent, -d)?;
                touch_dir(&txn, newparent, d)?;
            } else {
                touch_dir(&txn, parent, 0)?;
                touch_dir(&txn, newparent, 0)?;
            }
            let now = Time::now();
            update(&txn, src, |i| i.ctime = now)?;
            update(&txn, dino, |i| i.ctime = now)?;
            return self.store.commit(txn, false);
        }
        if let Some((dino, dkind)) = dst {
            if flags & libc::RENAME_NOREPLACE != 0 {
                return Err(errno(libc::EEXIST));
            }
            if dino == src {
                return self.store.commit(txn, false);
            }
            let ddir = dkind == Kind::Dir;
            match (sdir, ddir) {
                (true, false) => return Err(errno(libc::ENOTDIR)),
                (false, true) => return Err(errno(libc::EISDIR)),
                (true, true) if has_entries(&txn, dino)? => return Err(errno(libc::ENOTEMPTY)),
                _ => {}
            }
            txn.open_table(DIRENTS)?.remove((newparent, newname))?;
            if ddir {
                touch_dir(&txn, newparent, -1)?;
            }
            _doom = self.drop_link(&txn, dino)?;
        }
        {
            let mut dirents = txn.open_table(DIRENTS)?;
            dirents.remove((parent, name))?;
            dirents.insert((newparent, newname), (src, skind as u8))?;
        }
        if sdir {
            txn.open_table(PARENTS)?.insert(src, newparent)?;
        }
        let d = if sdir && parent != newparent { 1 } else { 0 };
        touch_dir(&txn, parent, -d)?;
        touch_dir(&txn, newparent, d)?;
        update(&txn, src, |i| i.ctime = Time::now())?;
        self.store.commit(txn, false)
    }

    /// The target of a symlink.
    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>, FsError> {
        let txn = self.store.read()?;
        let links = txn.open_table(SYMLINKS)?;
        let target = links.get(ino)?.map(|v| v.value().to_vec());
        target.ok_or(errno(libc::EINVAL))
    }

    /// Change attributes; a size change truncates or extends. Only a size change waits for
    /// the file's writeback: times, mode and owner go in beside it (a close, which flushes the
    /// kernel's times, and `cp -a`'s chmod/chown/utimens no longer wait for compression).
    /// Without a size it is a delayed inode item — also the kernel's flush of the ctime an
    /// unlink gave a file, as it drops the inode (once per file of `rm -rf`).
    pub fn setattr(&self, ino: u64, set: &SetAttr) -> Result<Inode, FsError> {
        self.writable()?;
        let cur = self.store.inode(ino)?;
        guard(&cur, Mutation::Attr(set))?;
        let set = match chown_keeping_ids(&cur, set)? {
            Some(killing) => std::borrow::Cow::Owned(killing),
            None => std::borrow::Cow::Borrowed(set),
        };
        let set = set.as_ref();
        let _g = match set.size {
            Some(_) => self.quiesce(ino),
            None => self.inode_lock(ino),
        };
        if set.mtime.is_some() {
            self.da.times_set(ino);
        }
        if set.size.is_none() {
            if let Some(inode) = self.delayed_setattr(ino, set)? {
                return Ok(crate::volume::with_pending(self.da.pending(ino), inode));
            }
        }
        let txn = self.store.write()?;
        let mut inode = store::get_inode(&txn.open_table(INODES)?, ino)?;
        let now = Time::now();
        if let Some(size) = set.size {
            if size != inode.size {
                self.truncate_in(&txn, ino, &mut inode, size)?;
            } else {
                inode.mtime = now;
            }
            // The kernel leaves it to the filesystem (FATTR_KILL_SUIDGID, which `wire` does
            // not decode): a truncate by a process without CAP_FSETID, root or not.
            if let Some(c) = set.caller.filter(|c| !c.has_fsetid()) {
                kill_privs(&txn, ino, &mut inode, c)?;
            }
        }
        // Any chown that names an id (chown(f, -1, -1) is `chown_keeping_ids`).
        if set.uid.is_some() || set.gid.is_some() {
            kill_privs_on_chown(&txn, ino, &mut inode, set.caller.unwrap_or_default())?;
        }
        set_fields(&mut inode, set, now);
        if set.mode.is_some() {
            chmod_acl(&txn, ino, inode.perm)?;
        }
        put_inode(&txn, ino, &inode)?;
        self.store.commit(txn, false)?;
        // The size (and, for writes after a chmod, mtime) its dirty extents add.
        Ok(crate::volume::with_pending(self.da.pending(ino), inode))
    }

    /// A setattr without a size as a delayed inode item (see [`crate::volume::delayed`]): no
    /// transaction, the next one writes it. Not when it must change an xattr too — a chmod of
    /// a file with an access ACL (the ACL follows the mode), a chown of a file with
    /// capabilities (they are dropped) — which `None` leaves to a transaction.
    fn delayed_setattr(&self, ino: u64, set: &SetAttr) -> Result<Option<Inode>, FsError> {
        let chown = set.uid.is_some() || set.gid.is_some();
        self.store.update(ino, |mut inode, snap| {
            // An inode known to have no xattrs has no ACL or capabilities to adjust (asked
            // under the update's lock: a setter marks the inode before its transaction,
            // which cannot run meanwhile).
            let bare = self.is_bare(ino);
            let caps = chown && inode.kind != Kind::Dir;
            let (acl, caps) = match (bare, set.mode.is_some() || caps) {
                (false, true) => {
                    let xattrs = snap.get()?.open_table(XATTRS)?;
                    let acl = set.mode.is_some() && xattrs.get((ino, acl::ACCESS))?.is_some();
                    (acl, caps && xattrs.get((ino, CAPS_XATTR))?.is_some())
                }
                _ => (false, false),
            };
            if acl || caps {
                return Ok(Change::NeedsTxn);
            }
            if chown && inode.kind != Kind::Dir {
                kill_mode_on_chown(&mut inode, set.caller.unwrap_or_default());
            }
            set_fields(&mut inode, set, Time::now());
            Ok(Change::Put(inode))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Caller, NewInode};
    use crate::store::records::Kind;
    use crate::store::{Store, ROOT};
    use crate::{Options, Volume};

    /// A fresh store in the temp dir named `name`, and the volume on it.
    fn scratch(name: &str, opts: Options) -> (std::path::PathBuf, Volume) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, opts).unwrap();
        (dir, vol)
    }

    fn done(dir: std::path::PathBuf, vol: Volume) {
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `name=N` from the store's transaction counts (`wring status`).
    fn txns(vol: &Volume, name: &str) -> u64 {
        let line = vol.store.counts.line();
        let w = line.split_whitespace().find_map(|w| w.strip_prefix(name));
        w.and_then(|n| n.strip_prefix('=')?.parse().ok()).unwrap()
    }

    /// An ACL in the xattr's form (version 2, then tag, perm, id per entry).
    fn acl_bytes(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            v.extend(tag.to_le_bytes());
            v.extend(perm.to_le_bytes());
            v.extend(id.to_le_bytes());
        }
        v
    }

    /// A file this mount made without xattrs answers getxattr and listxattr without a
    /// snapshot; once one is set, it is read back (and listed); a file made with an inherited
    /// ACL is looked up as before.
    #[test]
    fn an_inode_made_without_xattrs_is_answered_without_the_store_until_one_is_set() {
        let (dir, vol) = scratch("wring-bare", Options::default());
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let reads = txns(&vol, "read");
        let caps = b"security.capability".as_slice();
        assert_eq!(
            vol.getxattr(a, caps).map_err(|e| e.errno()),
            Err(libc::ENODATA)
        );
        assert_eq!(vol.listxattr(a).unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(
            txns(&vol, "read"),
            reads,
            "a bare inode's xattrs took a snapshot"
        );
        vol.setxattr(a, b"user.x", b"1", 0).unwrap();
        assert_eq!(vol.getxattr(a, b"user.x").unwrap(), b"1");
        assert_eq!(vol.listxattr(a).unwrap(), vec![b"user.x".to_vec()]);
        // A directory with a default ACL: what is made in it has an access ACL.
        let (d, _) = vol
            .create(
                ROOT,
                b"d",
                NewInode {
                    kind: Kind::Dir,
                    ..NewInode::file(0o755)
                },
            )
            .unwrap();
        let default = acl_bytes(&[
            (1, 7, u32::MAX),
            (2, 4, 65534),
            (4, 5, u32::MAX),
            (0x10, 5, u32::MAX),
            (0x20, 5, u32::MAX),
        ]);
        vol.set_acl(d, super::acl::DEFAULT, &default, 0, Caller::default())
            .unwrap();
        let (f, _) = vol.create(d, b"f", NewInode::file(0o644)).unwrap();
        assert!(
            vol.getxattr(f, super::acl::ACCESS).is_ok(),
            "the inherited ACL"
        );
        done(dir, vol);
    }

    /// An access ACL that only says the mode, set on a file without one (`cp -a`'s copy of
    /// a mode), is a delayed mode change: no write transaction, the mode reads back, and a
    /// reopen after sync has it with no ACL stored. One that says more is stored.
    #[test]
    fn an_acl_the_mode_says_alone_is_a_delayed_chmod() {
        let (dir, vol) = scratch("wring-acl-delayed", Options::default());
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let writes = txns(&vol, "write");
        let plain = acl_bytes(&[(1, 6, u32::MAX), (4, 0, u32::MAX), (0x20, 0, u32::MAX)]);
        vol.set_acl(a, super::acl::ACCESS, &plain, 0, Caller::default())
            .unwrap();
        assert_eq!(
            txns(&vol, "write"),
            writes,
            "an equivalent ACL began a transaction"
        );
        assert_eq!(vol.inode(a).unwrap().perm, 0o600);
        let named = acl_bytes(&[
            (1, 6, u32::MAX),
            (2, 4, 65534),
            (4, 0, u32::MAX),
            (0x10, 4, u32::MAX),
            (0x20, 0, u32::MAX),
        ]);
        let (b, _) = vol.create(ROOT, b"b", NewInode::file(0o644)).unwrap();
        vol.set_acl(b, super::acl::ACCESS, &named, 0, Caller::default())
            .unwrap();
        vol.sync().unwrap();
        drop(vol);
        let vol = Volume::open(&dir, Options::default()).unwrap();
        assert_eq!(vol.inode(a).unwrap().perm, 0o600);
        assert_eq!(
            vol.getxattr(a, super::acl::ACCESS).map_err(|e| e.errno()),
            Err(libc::ENODATA)
        );
        assert!(
            vol.getxattr(b, super::acl::ACCESS).is_ok(),
            "the named user's ACL"
        );
        assert_eq!(vol.inode(b).unwrap().perm, 0o640);
        done(dir, vol);
    }

    /// statfs's free space is the store directory's filesystem's (statvfs), so `df` on the mount
    /// shows what the store can still grow into: some, and no more than that filesystem holds.
    #[test]
    fn statfs_free_space_is_the_store_filesystems() {
        let (dir, vol) = scratch("wring-statfs", Options::default());
        let (blocks, free, inodes) = vol.statfs().unwrap();
        let fs = rustix::fs::statvfs(&dir).unwrap();
        let size_blocks = fs.f_blocks * fs.f_frsize / 4096;
        assert!(
            free > 0 && free <= size_blocks && blocks >= free,
            "statfs says {free} free of {blocks} blocks on a filesystem of {size_blocks}"
        );
        assert_eq!(inodes, 1, "a fresh store holds its root directory only");
        done(dir, vol);
    }

    /// A file made by create(2) is open from before its name is visible: an unlink right after
    /// leaves it as an orphan that still reads and writes until the open is released.
    #[test]
    fn a_created_file_unlinked_at_once_lives_until_released() {
        let (dir, vol) = scratch("wring-create-open", Options::default());
        let (ino, _) = vol.create_open(ROOT, b"f", NewInode::file(0o644)).unwrap();
        vol.remove(ROOT, b"f", false).unwrap();
        vol.write(ino, 0, b"still here", None).unwrap();
        assert_eq!(vol.read(ino, 0, 100).unwrap(), b"still here");
        vol.released(ino).unwrap();
        assert!(
            vol.inode(ino).is_err(),
            "the orphan is deleted with its last open"
        );
        done(dir, vol);
    }

    /// A directory removed while a listing of it is open stays until the listing ends
    /// (fstat on the descriptor works, with no links) and lists nothing, as on Linux.
    #[test]
    fn a_directory_removed_while_open_lives_until_released() {
        let (dir, vol) = scratch("wring-dir-orphan", Options::default());
        let (d, _) = vol.create(ROOT, b"d", new_dir()).unwrap();
        let fh = vol.opendir(d).unwrap();
        vol.remove(ROOT, b"d", true).unwrap();
        assert_eq!(vol.inode(d).unwrap().nlink, 0);
        assert_eq!(vol.readdir(d, fh, 0).unwrap_err().errno(), libc::ENOENT);
        vol.releasedir(d, fh).unwrap();
        assert!(vol.inode(d).is_err(), "deleted with its last listing");
        let fh = vol.opendir(ROOT).unwrap();
        vol.releasedir(ROOT, fh).unwrap();
        assert!(vol.inode(ROOT).is_ok());
        // Left open at a crash: an orphan directory is what fsck expects to find.
        let (e, _) = vol.create(ROOT, b"e", new_dir()).unwrap();
        vol.opendir(e).unwrap();
        vol.remove(ROOT, b"e", true).unwrap();
        vol.sync().unwrap();
        drop(vol);
        let r = crate::admin::fsck::fsck(&dir).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn new_dir() -> NewInode<'static> {
        NewInode {
            kind: crate::store::records::Kind::Dir,
            ..NewInode::file(0o755)
        }
    }

    /// A setattr carrying the kernel's ctime (its writeback-cache time flush) stores that
    /// time, not the time the flush arrived.
    #[test]
    fn a_setattr_keeps_the_ctime_the_kernel_sends() {
        let (dir, vol) = scratch("wring-ctime", Options::default());
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_789);
        let set = super::SetAttr {
            mtime: Some(Some(t)),
            ctime: Some(t),
            ..super::SetAttr::default()
        };
        let i = vol.setattr(a, &set).unwrap();
        assert_eq!(
            (i.ctime, i.mtime),
            (i.mtime, crate::store::records::Time::from_system(t))
        );
        done(dir, vol);
    }

    /// An empty `btrfs.compression` removes the property; with XATTR_REPLACE and none set it
    /// is ENODATA, as for any xattr.
    #[test]
    fn an_empty_property_removes_it_and_replace_wants_one() {
        let (dir, vol) = scratch("wring-prop-empty", Options::default());
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let p = crate::PROP_XATTR.as_bytes();
        let e = vol.setxattr(a, p, b"", libc::XATTR_REPLACE).unwrap_err();
        assert_eq!(e.errno(), libc::ENODATA);
        vol.setxattr(a, p, b"", 0).unwrap();
        vol.setxattr(a, p, b"zstd:9", 0).unwrap();
        vol.setxattr(a, p, b"", libc::XATTR_REPLACE).unwrap();
        assert_eq!(vol.getxattr(a, p).unwrap_err().errno(), libc::ENODATA);
        done(dir, vol);
    }

    /// RENAME_WHITEOUT is refused (a plain rename would lose the whiteout); RENAME_EXCHANGE
    /// moves both inodes' ctime on, as Linux does; a remount cannot change allow_other.
    #[test]
    fn rename_flags_and_exchange_times_and_mount_only_options() {
        let (dir, vol) = scratch("wring-rename-flags", Options::default());
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        let (b, _) = vol.create(ROOT, b"b", NewInode::file(0o644)).unwrap();
        let e = vol.rename(ROOT, b"a", ROOT, b"c", libc::RENAME_WHITEOUT);
        assert_eq!(e.unwrap_err().errno(), libc::EINVAL);
        let before = (vol.inode(a).unwrap().ctime, vol.inode(b).unwrap().ctime);
        std::thread::sleep(std::time::Duration::from_millis(5));
        vol.rename(ROOT, b"a", ROOT, b"b", libc::RENAME_EXCHANGE)
            .unwrap();
        assert!(vol.inode(a).unwrap().ctime > before.0);
        assert!(vol.inode(b).unwrap().ctime > before.1);
        let e = vol.remount("allow_other").unwrap_err().to_string();
        assert!(e.contains("allow_other") && e.contains("mounting"), "{e}");
        assert!(vol.remount("compress=zstd:1").is_ok());
        done(dir, vol);
    }

    /// An open racing an unlink either fails or keeps the file (an orphan that reads until its
    /// release); it never succeeds on a file the unlink then deletes. The same for a re-open
    /// racing the last release of an orphan.
    #[test]
    fn an_open_racing_an_unlink_or_a_last_release_keeps_the_file_or_fails() {
        // Many small extents: deleting them keeps the unlink between its look at the open
        // counts and its commit for a while.
        let opts = Options {
            max_extent: 4096,
            ..Options::default()
        };
        let (dir, vol) = scratch("wring-open-race", opts);
        let (mut kept, mut failed) = (0, 0);
        let mut body = b"data".to_vec();
        body.resize(1 << 20, 7);
        for i in 0..200u64 {
            let (ino, _) = vol.create(ROOT, b"f", NewInode::file(0o644)).unwrap();
            vol.write(ino, 0, &body, None).unwrap();
            vol.fsync(ino).unwrap();
            // Even rounds race an unlink of a file nobody has open; odd rounds race the last
            // release of an orphan (a re-open as through /proc/PID/fd).
            let orphan = i % 2 == 1;
            if orphan {
                vol.open_existing(ino).unwrap();
                vol.remove(ROOT, b"f", false).unwrap();
            }
            std::thread::scope(|s| {
                let vol = &vol;
                let other = s.spawn(move || match orphan {
                    true => vol.released(ino).unwrap(),
                    false => vol.remove(ROOT, b"f", false).unwrap(),
                });
                // Land the open at different points of the other's deletion.
                std::thread::sleep(std::time::Duration::from_micros(i / 2 % 25 * 80));
                let opened = vol.open_existing(ino);
                // Whatever the open said stays true once the other has committed.
                other.join().unwrap();
                match opened {
                    Ok(_) => {
                        kept += 1;
                        assert_eq!(vol.read(ino, 0, 4).unwrap(), b"data");
                        vol.released(ino).unwrap();
                    }
                    Err(e) => {
                        assert_eq!(e.errno(), libc::ENOENT);
                        failed += 1;
                    }
                }
            });
            assert!(vol.inode(ino).is_err(), "deleted once nothing holds it");
        }
        // Which way each race went, for the log (both happen here; neither is required).
        eprintln!("opens that kept the file: {kept}, that failed: {failed}");
        done(dir, vol);
    }
}
