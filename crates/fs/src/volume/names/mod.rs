//! The namespace: inodes and their attributes ([`inode`]), directories ([`dir`]), extended
//! attributes ([`xattr`]) and POSIX ACLs ([`acl`]), who asks ([`creds`]), the inode flags of
//! chattr ([`fsflags`]) and O_TMPFILE ([`tmpfile`]); below them what a setattr changes
//! ([`setattr`]) and an inode's record written in a transaction ([`record`]).
//!
//! Mirrors fs/btrfs/inode.c's namespace half, dir-item.c, xattr.c, props.c, acl.c and
//! ioctl.c's fileattr calls.

pub mod acl;
pub(crate) mod creds;
pub(crate) mod dir;
pub(crate) mod fsflags;
pub(crate) mod inode;
pub(crate) mod record;
pub(crate) mod setattr;
mod tmpfile;
pub(crate) mod xattr;
