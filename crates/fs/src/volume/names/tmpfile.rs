//! O_TMPFILE: a regular file made with no name in a directory, which `linkat` (from
//! `/proc/self/fd`, or with AT_EMPTY_PATH) may name later; unnamed, it goes when the last
//! reference to it does.
//!
//! Mirrors btrfs_tmpfile (fs/btrfs/inode.c): the inode is made as create makes one — owner,
//! mode, set-group-ID directory, default ACL, the directory's `m`/`C` flags and compression
//! property — with no link, as an orphan (btrfs's orphan item), so a crash before it is named
//! leaves nothing behind: the next mount deletes it. Differs in the transport: FUSE_TMPFILE
//! (protocol 7.37), which both transports decode with the same `transport/wire`.

use crate::error::FsError;
use crate::store::records::{Inode, Kind, FLAG_NOCOMPRESS, FLAG_NOCOW};
use crate::store::space::META_OP;
use crate::store::{self, ORPHANS};
use crate::volume::names::dir::dir_inode;
use crate::volume::names::fsflags::{guard, Mutation};
use crate::volume::names::inode::NewInode;
use crate::volume::names::record::put_inode;
use crate::volume::names::xattr::{inherit_acl, inherit_property};
use crate::volume::Volume;

impl Volume {
    /// FUSE_TMPFILE: a regular file with no name in `parent`, held once for the reference
    /// the kernel's entry reply gives it (dropped by FORGET, which deletes it while unnamed).
    pub fn tmpfile(&self, parent: u64, new: NewInode<'_>) -> Result<(u64, Inode), FsError> {
        self.writable()?;
        self.store.check_room(META_OP)?;
        let txn = self.store.write()?;
        let pinode = dir_inode(&txn, parent)?;
        guard(&pinode, Mutation::AddEntry)?;
        let ino = txn.next_counter("next_ino")?;
        let mut inode = Inode::new(Kind::File, new.perm, new.uid, new.gid);
        inode.nlink = 0;
        inode.flags |= pinode.flags & (FLAG_NOCOMPRESS | FLAG_NOCOW);
        if pinode.perm & libc::S_ISGID != 0 {
            inode.gid = pinode.gid;
        }
        inherit_acl(&txn, parent, ino, &mut inode, new.umask)?;
        put_inode(&txn, ino, &inode)?;
        txn.open_table(ORPHANS)?.insert(ino, ())?;
        inherit_property(&txn, parent, ino)?;
        store::add_counter(&txn, "inodes", 1)?;
        // Held and an orphan before the commit: its FORGET may come right after the reply.
        self.opened(ino);
        self.unnamed(ino);
        if let Err(e) = self.store.commit(txn, false) {
            let _ = self.released(ino);
            return Err(e);
        }
        Ok((ino, inode))
    }
}
