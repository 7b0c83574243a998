//! Notifications the daemon writes to `/dev/fuse` unasked: FUSE_NOTIFY_INVAL_INODE, when the
//! store changed what the kernel caches of an inode behind its back (a writeback commit's
//! `st_blocks`, the pages of a refused write).
//!
//! Mirrors libfuse's fuse_lowlevel_notify_inval_inode, the sending side of fs/fuse/dev.c's
//! fuse_notify_inval_inode. The volume asks through its `Notify` trait and names no
//! transport; a notification goes through `/dev/fuse` on either transport (the ring carries
//! none).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::transport::wire;
use crate::volume::Notify;

/// Writes notifications to a connection.
pub(crate) struct Notifier {
    fd: Arc<OwnedFd>,
}

impl Notifier {
    /// Notifications on connection `fd`.
    pub(crate) fn new(fd: Arc<OwnedFd>) -> Notifier {
        Notifier { fd }
    }
}

impl Notify for Notifier {
    fn inval_inode(&self, ino: u64, offset: i64, len: i64) -> io::Result<()> {
        let b = wire::inval_inode(ino, offset, len);
        match rustix::io::write(&self.fd, &b) {
            Ok(n) if n == b.len() => Ok(()),
            Ok(n) => Err(io::Error::other(format!(
                "FUSE notification: {n} of {} bytes written",
                b.len()
            ))),
            Err(e) => Err(e.into()),
        }
    }
}
