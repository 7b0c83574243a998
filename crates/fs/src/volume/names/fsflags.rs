//! `chattr` and `lsattr`: the inode flags btrfs implements, through FUSE_IOCTL
//! (FS_IOC_GETFLAGS/SETFLAGS, and FS_IOC_FSGETXATTR/FSSETXATTR for the same flags in xfs's
//! spelling), and the rules for immutable and append-only inodes.
//!
//! Mirrors fs/btrfs/ioctl.c (btrfs_fileattr_get/set, check_fsflags) and inode.c
//! (btrfs_inherit_iflags): `c` (FS_COMPR_FL) sets the `compression` property to the mount's
//! algorithm (zlib when it has none) and clears NOCOMPRESS; `m` (FS_NOCOMP_FL) is the
//! NOCOMPRESS mark — the one btrfs's heuristic sets — and removes the property; setting
//! neither clears both; `i`, `a`, `d`, `A`, `S`, `D` are kept, and `C` (nodatacow) only on
//! an empty file or a directory, where it means no compression. New inodes inherit `m` and
//! `C` from their directory. The kernel's VFS checks who may change the flags (the owner,
//! CAP_LINUX_IMMUTABLE for `i` and `a`) before the request arrives.
//!
//! Differs in where immutable and append-only are enforced: a kernel filesystem sets
//! S_IMMUTABLE and S_APPEND on its in-core inode and the VFS refuses what they forbid; FUSE
//! has no way to set them, so every request that would change such an inode is refused here
//! with the VFS's EPERM, and so is an open for writing, at OPEN, as may_open refuses it
//! ([`guard_open`]). `stx_attributes` report the flags as btrfs_getattr does
//! ([`statx_attributes`]). An append-only file takes writes at or past its end, and writes
//! below it only of the bytes already there (the kernel's writeback sends whole pages);
//! explicit times are refused as btrfs refuses them, but for an explicit mtime alone of a
//! file, because the kernel flushes an append's mtime as an explicit value, which the server
//! cannot tell from such a utimensat's.

use redb::ReadableTable;

use crate::error::{errno, FsError};
use crate::store::records::{
    Inode, Kind, FLAG_APPEND, FLAG_DIRSYNC, FLAG_IMMUTABLE, FLAG_NOATIME, FLAG_NOCOMPRESS,
    FLAG_NOCOW, FLAG_NODUMP, FLAG_SYNC,
};
use crate::store::{self, INODES, XATTRS};
use crate::volume::names::setattr::SetAttr;
use crate::volume::Volume;
use crate::PROP_XATTR;

/// linux/fs.h's flags (FS_IOC_GETFLAGS).
pub(crate) const FS_COMPR_FL: u32 = 0x0000_0004;
/// Synchronous updates.
pub(crate) const FS_SYNC_FL: u32 = 0x0000_0008;
/// Immutable.
pub(crate) const FS_IMMUTABLE_FL: u32 = 0x0000_0010;
/// Append-only.
pub(crate) const FS_APPEND_FL: u32 = 0x0000_0020;
/// Not to be dumped.
pub(crate) const FS_NODUMP_FL: u32 = 0x0000_0040;
/// No access time updates.
pub(crate) const FS_NOATIME_FL: u32 = 0x0000_0080;
/// Do not compress.
pub(crate) const FS_NOCOMP_FL: u32 = 0x0000_0400;
/// Synchronous directory updates.
pub(crate) const FS_DIRSYNC_FL: u32 = 0x0001_0000;
/// No copy-on-write.
pub(crate) const FS_NOCOW_FL: u32 = 0x0080_0000;

/// The flags btrfs implements; others are EOPNOTSUPP.
const SUPPORTED: u32 = FS_COMPR_FL
    | FS_SYNC_FL
    | FS_IMMUTABLE_FL
    | FS_APPEND_FL
    | FS_NODUMP_FL
    | FS_NOATIME_FL
    | FS_NOCOMP_FL
    | FS_DIRSYNC_FL
    | FS_NOCOW_FL;

/// The record's bits and the flags they are.
const KEPT: [(u8, u32); 7] = [
    (FLAG_IMMUTABLE, FS_IMMUTABLE_FL),
    (FLAG_APPEND, FS_APPEND_FL),
    (FLAG_NODUMP, FS_NODUMP_FL),
    (FLAG_NOATIME, FS_NOATIME_FL),
    (FLAG_SYNC, FS_SYNC_FL),
    (FLAG_DIRSYNC, FS_DIRSYNC_FL),
    (FLAG_NOCOW, FS_NOCOW_FL),
];

/// The xfs spelling (FS_IOC_FSGETXATTR's fsx_xflags) of the flags that have one.
const XFLAGS: [(u32, u32); 5] = [
    (FS_IMMUTABLE_FL, 0x08),
    (FS_APPEND_FL, 0x10),
    (FS_SYNC_FL, 0x20),
    (FS_NOATIME_FL, 0x40),
    (FS_NODUMP_FL, 0x80),
];

/// `struct fsxattr`'s size.
pub(crate) const FSXATTR_LEN: usize = 28;

/// What `inode` shows to `lsattr`, `prop` being its `compression` property.
pub(crate) fn fs_flags(inode: &Inode, prop: Option<&[u8]>) -> u32 {
    let mut f = KEPT
        .iter()
        .filter(|(bit, _)| inode.flags & bit != 0)
        .fold(0, |f, (_, fl)| f | fl);
    match prop {
        Some(b"none" | b"no") => f |= FS_NOCOMP_FL,
        Some(_) => f |= FS_COMPR_FL,
        None => {}
    }
    if inode.flags & FLAG_NOCOMPRESS != 0 {
        f |= FS_NOCOMP_FL;
    }
    f
}

/// btrfs's check_fsflags: `c` with `m`, `c` with `C`, and `C` beside either (old or new)
/// are EINVAL.
fn check(old: u32, new: u32) -> Result<(), FsError> {
    if new & !SUPPORTED != 0 {
        return Err(errno(libc::EOPNOTSUPP));
    }
    let comp = FS_COMPR_FL | FS_NOCOMP_FL;
    let bad = (new & FS_COMPR_FL != 0 && new & (FS_NOCOMP_FL | FS_NOCOW_FL) != 0)
        || (old & FS_NOCOW_FL != 0 && new & comp != 0)
        || (new & FS_NOCOW_FL != 0 && old & comp != 0);
    match bad {
        true => Err(errno(libc::EINVAL)),
        false => Ok(()),
    }
}

/// `struct fsxattr` of flags `f` (xflags only; the other fields are 0).
pub(crate) fn fsxattr(f: u32) -> [u8; FSXATTR_LEN] {
    let x = XFLAGS
        .iter()
        .filter(|(fl, _)| f & fl != 0)
        .fold(0u32, |x, (_, xf)| x | xf);
    let mut b = [0u8; FSXATTR_LEN];
    b[..4].copy_from_slice(&x.to_le_bytes());
    b
}

/// The flags `struct fsxattr` sets, over `old` (whose flags without an xfs spelling stay).
pub(crate) fn from_fsxattr(b: &[u8], old: u32) -> Result<u32, FsError> {
    let x = b
        .get(..4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| errno(libc::EINVAL))?;
    let spelled = XFLAGS.iter().fold(0, |m, (fl, _)| m | fl);
    let set = XFLAGS
        .iter()
        .filter(|(_, xf)| x & xf != 0)
        .fold(0, |f, (fl, _)| f | fl);
    Ok(old & !spelled | set)
}

/// EPERM where the VFS's may_open (fs/namei.c) refuses to open `inode` with open(2)'s
/// `flags` for its immutable or append-only flag: an immutable inode opened for writing or
/// with O_TRUNC (inode_permission's MAY_WRITE check), an append-only one opened for writing
/// without O_APPEND, or with O_TRUNC.
pub(crate) fn guard_open(inode: &Inode, flags: u32) -> Result<(), FsError> {
    let flags = flags as i32;
    let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
    let trunc = flags & libc::O_TRUNC != 0;
    let appending = flags & libc::O_APPEND != 0;
    let refused = match (
        inode.flags & FLAG_IMMUTABLE != 0,
        inode.flags & FLAG_APPEND != 0,
    ) {
        (true, _) => writing || trunc,
        (false, true) => (writing && !appending) || trunc,
        (false, false) => false,
    };
    match refused {
        true => Err(errno(libc::EPERM)),
        false => Ok(()),
    }
}

/// `statx(2)`'s `STATX_ATTR_*` bits (include/uapi/linux/stat.h): the same values as the
/// `FS_*_FL` flags they report.
const STATX_ATTRIBUTES: [(u32, u64); 4] = [
    (FS_COMPR_FL, 0x04),
    (FS_IMMUTABLE_FL, 0x10),
    (FS_APPEND_FL, 0x20),
    (FS_NODUMP_FL, 0x40),
];

/// `stx_attributes` and `stx_attributes_mask` of an inode with flags `f` (FS_IOC_GETFLAGS's),
/// as btrfs_getattr reports them: compressed (BTRFS_INODE_COMPRESS: the `c` flag or the
/// `compression` property), immutable, append-only and nodump, and all four in the mask.
pub(crate) fn statx_attributes(f: u32) -> (u64, u64) {
    STATX_ATTRIBUTES
        .iter()
        .fold((0, 0), |(attrs, mask), &(fl, bit)| {
            let on = if f & fl != 0 { bit } else { 0 };
            (attrs | on, mask | bit)
        })
}

/// What a request would do to an inode, for the immutable and append-only rules.
pub(crate) enum Mutation<'a> {
    /// Write `len` bytes at `offset` (append-only: only at or past the end, see
    /// [`Volume::check_append`]).
    Write,
    /// fallocate with `mode` (append-only: only 0 or KEEP_SIZE).
    Fallocate(i32),
    /// setattr.
    Attr(&'a SetAttr),
    /// Unlink, rename away or replace it, or link to it.
    Name,
    /// Add an entry to it (a directory).
    AddEntry,
    /// Remove an entry from it (a directory).
    RemoveEntry,
    /// Set or remove an extended attribute or ACL.
    Xattr,
}

/// EPERM when the VFS would refuse `change` to `inode` for its immutable or append-only
/// flag (notify_change, may_delete, may_linkat, xattr_permission, vfs_fallocate).
pub(crate) fn guard(inode: &Inode, change: Mutation<'_>) -> Result<(), FsError> {
    let immutable = inode.flags & FLAG_IMMUTABLE != 0;
    let append = inode.flags & FLAG_APPEND != 0;
    if !immutable && !append {
        return Ok(());
    }
    let refused = match change {
        Mutation::Write | Mutation::AddEntry => immutable,
        Mutation::Fallocate(mode) => immutable || mode & !libc::FALLOC_FL_KEEP_SIZE != 0,
        Mutation::Attr(set) => {
            // notify_change refuses explicit times (ATTR_TIMES_SET) of an append-only inode.
            // The kernel's writeback cache flushes a file's mtime after an append as an
            // explicit value too, but never its atime, and never a directory's times: an
            // explicit atime, or an explicit time of a directory, is a utimensat's; an
            // explicit mtime alone of a file stays allowed.
            let times_only =
                set.mode.is_none() && set.uid.is_none() && set.gid.is_none() && set.size.is_none();
            let explicit = |t: Option<Option<std::time::SystemTime>>| matches!(t, Some(Some(_)));
            let utimes = explicit(set.atime) || (inode.kind == Kind::Dir && explicit(set.mtime));
            immutable || !times_only || utimes
        }
        Mutation::Name | Mutation::RemoveEntry | Mutation::Xattr => true,
    };
    match refused {
        true => Err(errno(libc::EPERM)),
        false => Ok(()),
    }
}

impl Volume {
    /// FS_IOC_GETFLAGS of `ino`.
    pub fn fs_flags(&self, ino: u64) -> Result<u32, FsError> {
        let inode = self.store.inode(ino)?;
        let txn = self.store.read()?;
        let xattrs = txn.open_table(XATTRS)?;
        let prop = xattrs.get((ino, PROP_XATTR.as_bytes()))?;
        Ok(fs_flags(&inode, prop.as_ref().map(|v| v.value())))
    }

    /// OPEN of `ino` with open(2)'s `flags`: see [`guard_open`]. An open for reading alone
    /// is never refused, so it reads no inode (every file `cp` or `git status` reads is
    /// opened so: the store's lookup was about 10 µs of each such OPEN).
    pub fn may_open(&self, ino: u64, flags: u32) -> Result<(), FsError> {
        let f = flags as i32;
        if f & libc::O_ACCMODE == libc::O_RDONLY && f & libc::O_TRUNC == 0 {
            return Ok(());
        }
        guard_open(&self.store.inode(ino)?, flags)
    }

    /// FS_IOC_SETFLAGS of `ino` (see the module's header).
    pub fn set_fs_flags(&self, ino: u64, flags: u32) -> Result<(), FsError> {
        self.writable()?;
        let _g = self.inode_lock(ino);
        let old = self.fs_flags(ino)?;
        check(old, flags)?;
        self.not_bare(ino);
        let txn = self.store.write()?;
        let mut inode = store::get_inode(&txn.open_table(INODES)?, ino)?;
        let mut keep = inode.flags & FLAG_NOCOMPRESS;
        for (bit, fl) in KEPT {
            if flags & fl != 0 {
                keep |= bit;
            }
        }
        // nodatacow only where no data would have to change: an empty file or a directory.
        let empty = inode.kind != Kind::File || inode.size == 0;
        if flags & FS_NOCOW_FL != 0 && old & FS_NOCOW_FL == 0 && !empty {
            keep &= !FLAG_NOCOW;
        }
        let prop: Option<String> = if flags & FS_NOCOMP_FL != 0 {
            keep |= FLAG_NOCOMPRESS;
            None
        } else if flags & FS_COMPR_FL != 0 {
            keep &= !FLAG_NOCOMPRESS;
            let alg = self.options().spec().and_then(|s| s.algorithm);
            Some(alg.map_or("zlib".into(), |a| a.to_string()))
        } else {
            keep &= !FLAG_NOCOMPRESS;
            None
        };
        {
            let mut xattrs = txn.open_table(XATTRS)?;
            let name = (ino, PROP_XATTR.as_bytes());
            match &prop {
                // A property already there (its level included) stays as it is.
                Some(p) if xattrs.get(name)?.is_none() => {
                    xattrs.insert(name, p.as_bytes())?;
                }
                Some(_) => {}
                None => {
                    xattrs.remove(name)?;
                }
            }
        }
        inode.flags = keep;
        inode.ctime = crate::store::records::Time::now();
        txn.open_table(INODES)?
            .insert(ino, inode.to_bytes().as_slice())?;
        self.store.commit(txn, false)?;
        drop(_g);
        self.attrs_changed(ino);
        Ok(())
    }

    /// An append-only file takes a write at `offset` only at or past its end, or of the
    /// bytes already there below it (the kernel's writeback sends whole pages).
    pub(crate) fn check_append(&self, ino: u64, offset: u64, data: &[u8]) -> Result<(), FsError> {
        let inode = self.inode(ino)?;
        if guard(&inode, Mutation::Write).is_err() {
            return Err(self.refused_write(ino));
        }
        if inode.flags & FLAG_APPEND == 0 || offset >= inode.size {
            return Ok(());
        }
        let below = (inode.size - offset).min(data.len() as u64) as u32;
        match self.read(ino, offset, below)? == data[..below as usize] {
            true => Ok(()),
            false => Err(self.refused_write(ino)),
        }
    }

    /// EPERM for a write the flags refuse; the kernel's pages of it, which hold the refused
    /// bytes, are dropped soon after.
    fn refused_write(&self, ino: u64) -> FsError {
        crate::volume::lock(&self.stale_pages).push(ino);
        errno(libc::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_through_the_record_and_fsxattr() {
        let mut i = Inode::new(Kind::File, 0o644, 0, 0);
        i.flags = FLAG_IMMUTABLE | FLAG_NODUMP | FLAG_NOCOMPRESS;
        let f = fs_flags(&i, None);
        assert_eq!(f, FS_IMMUTABLE_FL | FS_NODUMP_FL | FS_NOCOMP_FL);
        assert_eq!(fs_flags(&i, Some(b"zstd:3")) & FS_COMPR_FL, FS_COMPR_FL);
        let x = fsxattr(f);
        assert_eq!(u32::from_le_bytes([x[0], x[1], x[2], x[3]]), 0x08 | 0x80);
        assert_eq!(from_fsxattr(&x, FS_NOCOMP_FL).unwrap(), f);
    }

    #[test]
    fn opens_refused_as_may_open_refuses_them() {
        let mut i = Inode::new(Kind::File, 0o644, 0, 0);
        let (r, w, rw) = (libc::O_RDONLY, libc::O_WRONLY, libc::O_RDWR);
        let (app, trunc) = (libc::O_APPEND, libc::O_TRUNC);
        let refused = |i: &Inode, f: i32| guard_open(i, f as u32).is_err();
        for f in [r, w, rw, w | app, r | trunc] {
            assert!(!refused(&i, f), "{f:o} on a plain file");
        }
        i.flags = FLAG_IMMUTABLE;
        assert!(!refused(&i, r) && !refused(&i, r | libc::O_NOATIME));
        for f in [w, rw, w | app, rw | app, r | trunc] {
            assert!(refused(&i, f), "{f:o} on an immutable file");
        }
        i.flags = FLAG_APPEND;
        for f in [r, w | app, rw | app] {
            assert!(!refused(&i, f), "{f:o} on an append-only file");
        }
        for f in [w, rw, r | trunc, w | app | trunc] {
            assert!(refused(&i, f), "{f:o} on an append-only file");
        }
    }

    #[test]
    fn statx_attributes_as_btrfs_getattr() {
        assert_eq!(statx_attributes(0), (0, 0x74));
        let all = FS_COMPR_FL | FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL;
        assert_eq!(statx_attributes(all), (0x74, 0x74));
        assert_eq!(statx_attributes(FS_NODUMP_FL), (0x40, 0x74));
    }

    #[test]
    fn btrfs_refuses_the_same_combinations() {
        assert!(check(0, FS_COMPR_FL | FS_NOCOMP_FL).is_err());
        assert!(check(0, FS_COMPR_FL | FS_NOCOW_FL).is_err());
        assert!(check(FS_NOCOW_FL, FS_NOCOW_FL | FS_NOCOMP_FL).is_err());
        assert!(check(FS_COMPR_FL, FS_NOCOW_FL).is_err());
        assert_eq!(
            check(0, 0x0000_4000).map_err(|e| e.errno()),
            Err(libc::EOPNOTSUPP)
        );
        assert!(check(0, FS_IMMUTABLE_FL | FS_APPEND_FL | FS_COMPR_FL).is_ok());
    }

    #[test]
    fn immutable_refuses_all_and_append_only_what_rewrites() {
        let mut i = Inode::new(Kind::File, 0o644, 0, 0);
        let touch = SetAttr {
            atime: Some(None),
            mtime: Some(None),
            ..SetAttr::default()
        };
        let chmod = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        i.flags = FLAG_APPEND;
        assert!(guard(&i, Mutation::Write).is_ok());
        assert!(guard(&i, Mutation::Fallocate(libc::FALLOC_FL_KEEP_SIZE)).is_ok());
        assert!(guard(&i, Mutation::Fallocate(libc::FALLOC_FL_PUNCH_HOLE)).is_err());
        assert!(guard(&i, Mutation::Attr(&touch)).is_ok());
        assert!(guard(&i, Mutation::Attr(&chmod)).is_err());
        let epoch = Some(Some(std::time::SystemTime::UNIX_EPOCH));
        let utime = SetAttr {
            atime: epoch,
            mtime: epoch,
            ..SetAttr::default()
        };
        let flushed = SetAttr {
            mtime: epoch,
            ctime: Some(std::time::SystemTime::UNIX_EPOCH),
            ..SetAttr::default()
        };
        assert!(guard(&i, Mutation::Attr(&utime)).is_err(), "utime(2)");
        assert!(
            guard(&i, Mutation::Attr(&flushed)).is_ok(),
            "a writeback's mtime"
        );
        let mut d = Inode::new(Kind::Dir, 0o755, 0, 0);
        d.flags = FLAG_APPEND;
        assert!(
            guard(&d, Mutation::Attr(&flushed)).is_err(),
            "a directory's"
        );
        assert!(guard(&d, Mutation::Attr(&touch)).is_ok());
        let cut = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        assert!(guard(&i, Mutation::Attr(&cut)).is_err());
        assert!(guard(&i, Mutation::Name).is_err());
        assert!(guard(&i, Mutation::AddEntry).is_ok());
        i.flags = FLAG_IMMUTABLE;
        for c in [
            Mutation::Write,
            Mutation::Fallocate(0),
            Mutation::Attr(&touch),
            Mutation::AddEntry,
            Mutation::Xattr,
        ] {
            assert!(guard(&i, c).is_err());
        }
    }
}
