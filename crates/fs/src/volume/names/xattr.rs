//! Extended attributes: get, set, list and remove, the `btrfs.compression` property (checked
//! and normalised as btrfs's props.c does, its change clearing NOCOMPRESS), and the POSIX ACL
//! attributes with the rules that tie them to the mode (set, inherited at create, following a
//! chmod).
//!
//! Mirrors fs/btrfs/xattr.c, props.c and acl.c (btrfs_set_acl, posix_acl_create,
//! posix_acl_chmod, posix_acl_update_mode); the ACLs' format and rules are in [`super::acl`].
//! Differs in honouring the property's level, and in answering an inode this mount made with
//! no xattr without a snapshot ([`Volume::is_bare`]).

use redb::{ReadableTable, WriteTransaction};

use super::acl::{self, Acl};
use super::creds::Caller;
use super::record::{put_inode, update};
use crate::error::{errno, FsError};
use crate::options::parse_spec;
use crate::store::records::{Inode, Kind, Time, FLAG_NOCOMPRESS};
use crate::store::space::META_OP;
use crate::store::{self, INODES, XATTRS};
use crate::volume::delayed::Change;
use crate::volume::names::fsflags::{guard, Mutation};
use crate::volume::Volume;
use crate::{DICT_XATTR, PROP_XATTR};

/// A new inode's ACLs from its directory's default ACL (posix_acl_create): the access ACL is
/// the default one narrowed by the mode (kept only if the mode cannot say it alone), and a
/// directory inherits the default ACL itself. Without one, the umask applies.
pub(super) fn inherit_acl(
    txn: &WriteTransaction,
    parent: u64,
    ino: u64,
    inode: &mut Inode,
    umask: u32,
) -> Result<(), FsError> {
    let mut xattrs = txn.open_table(XATTRS)?;
    let default = xattrs
        .get((parent, acl::DEFAULT))?
        .map(|v| v.value().to_vec());
    let Some(default) = default else {
        inode.perm &= !(umask & 0o777);
        return Ok(());
    };
    let mut access = Acl::parse(&default).map_err(|_| damaged_acl(parent))?;
    if access.create_masq(&mut inode.perm) {
        xattrs.insert((ino, acl::ACCESS), access.to_bytes().as_slice())?;
    }
    if inode.kind == Kind::Dir {
        xattrs.insert((ino, acl::DEFAULT), default.as_slice())?;
    }
    Ok(())
}

/// A new inode's `compression` property and dictionary switch from its directory (props.c's
/// inheritance).
pub(super) fn inherit_property(
    txn: &WriteTransaction,
    parent: u64,
    ino: u64,
) -> Result<(), FsError> {
    let mut xattrs = txn.open_table(XATTRS)?;
    for name in [PROP_XATTR.as_bytes(), DICT_XATTR.as_bytes()] {
        let prop = xattrs.get((parent, name))?.map(|v| v.value().to_vec());
        if let Some(p) = prop {
            xattrs.insert((ino, name), p.as_slice())?;
        }
    }
    Ok(())
}

/// `ino`'s dictionary switch: `Some(true)` for `auto`, `Some(false)` for `off`, `None` when
/// unset (the mount's `dict=` decides).
pub(crate) fn dict_switch<T: ReadableTable<(u64, &'static [u8]), &'static [u8]>>(
    xattrs: &T,
    ino: u64,
) -> Result<Option<bool>, FsError> {
    Ok(xattrs
        .get((ino, DICT_XATTR.as_bytes()))?
        .map(|v| v.value() != b"off"))
}

/// The stored value of the `compression` property `text` (normalised as btrfs does).
fn compression_value(text: &str) -> Result<Vec<u8>, FsError> {
    let spec = parse_spec("compression", text)?;
    Ok(match spec.algorithm {
        None => b"none".to_vec(),
        Some(_) => spec.to_string().into_bytes(),
    })
}

/// The stored value of the dictionary switch `text`: `auto` or `off`, else EINVAL (logged).
fn dict_value(text: &str) -> Result<Vec<u8>, FsError> {
    match text {
        "auto" | "off" => Ok(text.as_bytes().to_vec()),
        _ => {
            log::warn!("{DICT_XATTR}: '{text}' is not understood; accepted: auto, off");
            Err(errno(libc::EINVAL))
        }
    }
}

/// The setxattr flags against what is there: XATTR_CREATE of an attribute that exists is
/// EEXIST, XATTR_REPLACE of one that does not ENODATA.
fn check_set_flags(
    xattrs: &impl ReadableTable<(u64, &'static [u8]), &'static [u8]>,
    ino: u64,
    name: &[u8],
    flags: i32,
) -> Result<(), FsError> {
    let exists = xattrs.get((ino, name))?.is_some();
    if flags & libc::XATTR_CREATE != 0 && exists {
        return Err(errno(libc::EEXIST));
    }
    if flags & libc::XATTR_REPLACE != 0 && !exists {
        return Err(errno(libc::ENODATA));
    }
    Ok(())
}

/// The access ACL follows a chmod (posix_acl_chmod).
pub(super) fn chmod_acl(txn: &WriteTransaction, ino: u64, mode: u32) -> Result<(), FsError> {
    let mut xattrs = txn.open_table(XATTRS)?;
    let access = xattrs.get((ino, acl::ACCESS))?.map(|v| v.value().to_vec());
    if let Some(access) = access {
        let mut a = Acl::parse(&access).map_err(|_| damaged_acl(ino))?;
        a.chmod(mode);
        xattrs.insert((ino, acl::ACCESS), a.to_bytes().as_slice())?;
    }
    Ok(())
}

/// A stored ACL that does not parse.
fn damaged_acl(ino: u64) -> FsError {
    log::error!("inode {ino}: stored ACL is damaged");
    FsError::Errno(libc::EIO)
}

impl Volume {
    /// An extended attribute's value. An inode known to have none (see [`Volume::is_bare`])
    /// is answered without a snapshot: the kernel asks for `security.capability` before
    /// every write(2) to a file, and `cp -a` for each ACL of every file it copies.
    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>, FsError> {
        if self.is_bare(ino) {
            return Err(errno(libc::ENODATA));
        }
        let txn = self.store.read()?;
        self.record_in(&txn, ino)?;
        let xattrs = txn.open_table(XATTRS)?;
        let v = xattrs.get((ino, name))?.map(|v| v.value().to_vec());
        v.ok_or(errno(libc::ENODATA))
    }

    /// Set a POSIX ACL attribute for `caller` (setfacl): an access ACL the mode can say alone
    /// is not kept, and the mode follows the ACL, losing set-group-ID when the caller is
    /// neither root nor in the file's group (posix_acl_update_mode).
    pub fn set_acl(
        &self,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
        caller: Caller,
    ) -> Result<(), FsError> {
        let acl = Acl::parse(value)?;
        self.writable()?;
        guard(&self.store.inode(ino)?, Mutation::Xattr)?;
        if name == acl::ACCESS && self.delayed_acl(ino, &acl, flags, caller)? {
            return Ok(());
        }
        self.not_bare(ino);
        let txn = self.store.write()?;
        let mut inode = store::get_inode(&txn.open_table(INODES)?, ino)?;
        {
            let mut xattrs = txn.open_table(XATTRS)?;
            check_set_flags(&xattrs, ino, name, flags)?;
            if name == acl::DEFAULT {
                if inode.kind != Kind::Dir {
                    return Err(errno(libc::EACCES));
                }
                xattrs.insert((ino, name), value)?;
            } else {
                let (mode, more) = acl.equiv_mode(inode.perm);
                inode.perm = mode;
                if caller.uid != 0 && !caller.in_group(inode.gid) {
                    inode.perm &= !libc::S_ISGID;
                }
                match more {
                    true => xattrs.insert((ino, name), value)?,
                    false => xattrs.remove((ino, name))?,
                };
            }
        }
        inode.ctime = Time::now();
        put_inode(&txn, ino, &inode)?;
        self.store.commit(txn, false)
    }

    /// An access ACL the mode says alone, on a file that has none (what `cp -a` sets on
    /// every file it copies, from the source's mode), changes nothing but the mode: a
    /// delayed inode item, as a chmod (see [`crate::volume::delayed`]). False when it needs a
    /// transaction (the file has an access ACL, or this one says more than the mode).
    fn delayed_acl(
        &self,
        ino: u64,
        acl: &Acl,
        flags: i32,
        caller: Caller,
    ) -> Result<bool, FsError> {
        let kept = self.store.update(ino, |mut inode, snap| {
            if snap
                .get()?
                .open_table(XATTRS)?
                .get((ino, acl::ACCESS))?
                .is_some()
            {
                return Ok(Change::NeedsTxn);
            }
            if flags & libc::XATTR_REPLACE != 0 {
                return Err(errno(libc::ENODATA));
            }
            let (mode, more) = acl.equiv_mode(inode.perm);
            if more {
                return Ok(Change::NeedsTxn);
            }
            inode.perm = mode;
            if caller.uid != 0 && !caller.in_group(inode.gid) {
                inode.perm &= !libc::S_ISGID;
            }
            inode.ctime = Time::now();
            Ok(Change::Put(inode))
        })?;
        Ok(kept.is_some())
    }

    /// Set an extended attribute; `btrfs.compression` must be a valid spec ("" removes it).
    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], flags: i32) -> Result<(), FsError> {
        if name.is_empty() || name.len() > 255 {
            return Err(errno(libc::ERANGE));
        }
        if value.len() > 64 * 1024 {
            return Err(errno(libc::E2BIG));
        }
        let mut value = value.to_vec();
        if name == DICT_XATTR.as_bytes() || name == PROP_XATTR.as_bytes() {
            let text = String::from_utf8_lossy(&value)
                .trim()
                .trim_end_matches('\0')
                .to_string();
            if text.is_empty() {
                // btrfs: an empty value removes the property; XATTR_REPLACE still wants one.
                return match self.removexattr(ino, name) {
                    Err(FsError::Errno(libc::ENODATA)) if flags & libc::XATTR_REPLACE == 0 => {
                        Ok(())
                    }
                    r => r,
                };
            }
            value = match name == DICT_XATTR.as_bytes() {
                true => dict_value(&text)?,
                false => compression_value(&text)?,
            };
        }
        self.store.check_room(META_OP + value.len() as u64)?;
        guard(&self.store.inode(ino)?, Mutation::Xattr)?;
        self.not_bare(ino);
        let txn = self.store.write()?;
        update(&txn, ino, |i| touch_for_xattr(i, name))?;
        {
            let mut xattrs = txn.open_table(XATTRS)?;
            check_set_flags(&xattrs, ino, name, flags)?;
            xattrs.insert((ino, name), value.as_slice())?;
        }
        self.store.commit(txn, false)
    }

    /// Names of the extended attributes (none, without a snapshot, for an inode known to
    /// have none: `cp -a` lists them on the source and on the copy of every file).
    pub fn listxattr(&self, ino: u64) -> Result<Vec<Vec<u8>>, FsError> {
        if self.is_bare(ino) {
            return Ok(Vec::new());
        }
        let txn = self.store.read()?;
        self.record_in(&txn, ino)?;
        let xattrs = txn.open_table(XATTRS)?;
        let mut names = Vec::new();
        for r in xattrs.range((ino, &[][..])..(ino + 1, &[][..]))? {
            names.push(r?.0.value().1.to_vec());
        }
        Ok(names)
    }

    /// Remove an extended attribute.
    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<(), FsError> {
        if self.is_bare(ino) {
            // Nothing to remove, and no transaction to find that out (`cp -a` removes the
            // default ACL of every directory it copies).
            guard(&self.store.inode(ino)?, Mutation::Xattr)?;
            return Err(errno(libc::ENODATA));
        }
        let txn = self.store.write()?;
        guard(
            &store::get_inode(&txn.open_table(INODES)?, ino)?,
            Mutation::Xattr,
        )?;
        let existed = txn.open_table(XATTRS)?.remove((ino, name))?.is_some();
        if !existed {
            return Err(errno(libc::ENODATA));
        }
        update(&txn, ino, |i| touch_for_xattr(i, name))?;
        self.store.commit(txn, false)
    }
}

/// An xattr changed: a new ctime, and a change of the `compression` property clears the
/// NOCOMPRESS mark, as btrfs's prop_compression_apply does (the property now decides).
fn touch_for_xattr(inode: &mut Inode, name: &[u8]) {
    inode.ctime = Time::now();
    if name == PROP_XATTR.as_bytes() {
        inode.flags &= !FLAG_NOCOMPRESS;
    }
}
