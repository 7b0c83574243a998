//! An inode's record inside a write transaction: [`put_inode`] writes it, [`update`] reads,
//! changes and writes it. The namespace's operations share them ([`super::inode`],
//! [`super::xattr`], [`super::tmpfile`]), so they sit below all of them.
//!
//! Mirrors fs/btrfs/inode.c's btrfs_update_inode() (the inode item written into the running
//! transaction).

use redb::WriteTransaction;

use crate::error::FsError;
use crate::store::records::Inode;
use crate::store::{self, INODES};

/// Write `inode` as `ino`'s record.
pub(crate) fn put_inode(txn: &WriteTransaction, ino: u64, inode: &Inode) -> Result<(), FsError> {
    txn.open_table(INODES)?
        .insert(ino, inode.to_bytes().as_slice())?;
    Ok(())
}

/// Read `ino`'s record, change it with `f` and write it back: the record written.
pub(super) fn update(
    txn: &WriteTransaction,
    ino: u64,
    f: impl FnOnce(&mut Inode),
) -> Result<Inode, FsError> {
    let mut inode = store::get_inode(&txn.open_table(INODES)?, ino)?;
    f(&mut inode);
    put_inode(txn, ino, &inode)?;
    Ok(inode)
}
