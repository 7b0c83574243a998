//! mount(8)'s flags on a live mount: `ro`/`rw` (at mount and by remount), `suid`, `dev`,
//! `exec`, and the access time options (`relatime`, btrfs's default, `strictatime`,
//! `noatime`, `nodiratime`/`diratime`, `lazytime`). [`vfs_flags`] spells the options as mount(2) flags and
//! [`check_dev_suid`] says who may have `suid` and `dev`, for the mount the daemon makes
//! (`admin/`) and for a remount here.
//!
//! Mirrors the VFS's side of btrfs's mount and remount (fs/namespace.c do_remount,
//! fs/super.c reconfigure_super, btrfs_remount's ro/rw transitions) and of its reads
//! (fs/inode.c atime_needs_update, relatime_need_update). Differs where FUSE puts the work:
//! the kernel enforces the flags on the mount (this process makes the mount when it may, and
//! remounts it the same way), while the daemon keeps the store from being written once it is
//! read-only, and updates access times itself when a read reaches it — FUSE sends the server
//! no access time, so a read the kernel serves from its page cache updates the access time in
//! the kernel's memory only.

use std::path::Path;

use rustix::mount::MountFlags;

use crate::error::FsError;
use crate::options::{Atime, Options};
use crate::store::records::{Inode, Time};
use crate::volume::Volume;

/// relatime's bound: an access time older than this is updated by a read.
const RELATIME_DAY: u64 = 24 * 60 * 60;

/// Whether a read at `now` updates `inode`'s access time under `atime` (the kernel's
/// atime_needs_update and relatime_need_update, without the mount and inode flags the
/// kernel checks first).
pub(crate) fn atime_due(atime: Atime, inode: &Inode, now: Time) -> bool {
    match atime {
        Atime::No => false,
        Atime::Strict => true,
        Atime::Relatime => {
            inode.atime <= inode.mtime
                || inode.atime <= inode.ctime
                || now.secs.saturating_sub(inode.atime.secs) >= RELATIME_DAY as i64
        }
    }
}

/// The VFS flags of `o` (ro, nosuid, nodev, noexec, the atime options), as mount(8) turns
/// the same words into mount(2) flags.
pub(crate) fn vfs_flags(o: &Options) -> MountFlags {
    let mut f = MountFlags::empty();
    let set = [
        (o.read_only, MountFlags::RDONLY),
        (!o.suid, MountFlags::NOSUID),
        (!o.dev, MountFlags::NODEV),
        (!o.exec, MountFlags::NOEXEC),
        (o.atime == Atime::No, MountFlags::NOATIME),
        (!o.diratime, MountFlags::NODIRATIME),
        (o.atime == Atime::Strict, MountFlags::STRICTATIME),
        (o.lazytime, MountFlags::LAZYTIME),
    ];
    for (on, flag) in set {
        if on {
            f |= flag;
        }
    }
    f
}

/// `suid` and `dev` only for root mounting a store root owns: a store another user can
/// write (or a mount another user makes) is a way to plant a set-user-ID root binary or a
/// device node of the disk. Refused otherwise, saying why.
pub(crate) fn check_dev_suid(o: &Options, dir: &Path) -> Result<(), FsError> {
    let asked: Vec<&str> = [(o.suid, "suid"), (o.dev, "dev")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
    if asked.is_empty() {
        return Ok(());
    }
    let what = asked.join(" and ");
    let refuse = |why: String| {
        Err(FsError::Refused {
            why: format!("{what} refused: {why}; mount with nosuid,nodev (the default)"),
            errno: libc::EPERM,
        })
    };
    if !rustix::process::geteuid().is_root() {
        return refuse("only root may mount with them, as for any FUSE filesystem".into());
    }
    use std::os::unix::fs::MetadataExt;
    for path in [
        dir.to_path_buf(),
        dir.join(crate::store::DB_FILE),
        dir.join(crate::store::DATA_FILE),
    ] {
        match std::fs::metadata(&path) {
            Ok(m) if m.uid() != 0 => {
                return refuse(format!(
                    "{} belongs to uid {}, and a store another user can write is a way to \
                     plant a set-user-ID root binary or a device node",
                    path.display(),
                    m.uid()
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

impl Volume {
    /// The daemon's part of a remount that changes VFS flags (the kernel's flags are the
    /// remounting process's to change, see `admin::daemon::remount`): going read-only,
    /// every writeback and a durable commit, then the store refuses commits; going back to
    /// rw, the store takes them again (refused for a store mounted read-only, which was opened
    /// without writing to its files). `suid` and `dev` are checked as at mount. Nothing
    /// changes on error.
    pub(crate) fn change_vfs(&self, old: &Options, new: &Options) -> Result<(), FsError> {
        if vfs_flags(old) == vfs_flags(new) {
            return Ok(());
        }
        check_dev_suid(new, self.store.dir())?;
        if old.read_only && !new.read_only {
            self.store.set_read_only(false)?;
        }
        if new.read_only && !old.read_only {
            self.sync()?;
            self.store.set_read_only(true)?;
        }
        Ok(())
    }

    /// EROFS when the store takes no commits (a read-only mount or remount).
    pub(crate) fn writable(&self) -> Result<(), FsError> {
        match self.store.read_only() {
            true => Err(crate::error::errno(libc::EROFS)),
            false => Ok(()),
        }
    }

    /// A read of `ino` (its record `inode`) reached the daemon: update its access time as the
    /// mount's atime option says, as a delayed inode item (no transaction of its own, as
    /// btrfs's atime update dirties the in-core inode). Errors are only logged: a read does
    /// not fail for its access time.
    pub(crate) fn accessed(&self, ino: u64, inode: &Inode) {
        let (atime, diratime) = {
            let o = self.options();
            (o.atime, o.diratime)
        };
        let now = Time::now();
        // atime_needs_update: MNT_NODIRATIME spares directories, S_NOATIME (the `A` flag) all.
        let noatime = inode.flags & crate::store::records::FLAG_NOATIME != 0
            || (!diratime && inode.kind == crate::store::records::Kind::Dir);
        if self.store.read_only() || noatime || !atime_due(atime, inode, now) {
            return;
        }
        // Judged again on the newest record: a delayed one may hold a newer access time.
        let r = self
            .store
            .update(ino, |mut i, _| match atime_due(atime, &i, now) {
                true => {
                    i.atime = now;
                    Ok(crate::volume::delayed::Change::Put(i))
                }
                false => Ok(crate::volume::delayed::Change::Unchanged),
            });
        if let Err(e) = r {
            log::debug!("access time of inode {ino}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::Kind;

    fn at(secs: i64) -> Time {
        Time { secs, nsecs: 0 }
    }

    #[test]
    fn relatime_updates_after_a_change_or_a_day() {
        let mut i = Inode::new(Kind::File, 0o644, 0, 0);
        (i.atime, i.mtime, i.ctime) = (at(100), at(50), at(50));
        assert!(
            !atime_due(Atime::Relatime, &i, at(200)),
            "read since the change"
        );
        assert!(atime_due(Atime::Strict, &i, at(200)));
        assert!(!atime_due(Atime::No, &i, at(200)));
        i.mtime = at(150);
        assert!(
            atime_due(Atime::Relatime, &i, at(200)),
            "changed since the read"
        );
        i.mtime = at(50);
        i.ctime = at(100);
        assert!(
            atime_due(Atime::Relatime, &i, at(200)),
            "atime equal to ctime"
        );
        i.ctime = at(50);
        assert!(
            atime_due(Atime::Relatime, &i, at(100 + 86_400)),
            "a day old"
        );
    }
}
