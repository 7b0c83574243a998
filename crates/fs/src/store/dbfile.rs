//! The database file as redb sees it: the real file (or a simulated one), with the two things
//! a full filesystem needs from it.
//!
//! - A write or length change that meets ENOSPC or EDQUOT takes blocks from the global
//!   reserve ([`SpaceInfo::rescue`]) and is tried again, so the commits of unlink, truncate
//!   and sync go through on a full filesystem, as btrfs's global block reserve lets them.
//! - Any error handed to redb is noted ([`SpaceInfo::failed`]): redb then refuses every
//!   later transaction (its backend latches the first I/O failure) until the database is
//!   reopened, which the store does before its next transaction ([`super::Store`]'s
//!   recovery).
//!
//! Mirrors the kernel's block device under btrfs only in passing errors up; the retry is
//! btrfs's `btrfs_use_block_rsv` falling back to the global reserve.

use std::fmt;
use std::io;
use std::ops::Bound;
use std::sync::Arc;

use redb::{BackendError, StorageBackend};

use super::space::{no_room, SpaceInfo};

/// A database file backend whose writes may use the global reserve.
pub(super) struct DbFile<B> {
    inner: B,
    space: Arc<SpaceInfo>,
}

impl<B> fmt::Debug for DbFile<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbFile").finish_non_exhaustive()
    }
}

impl<B: StorageBackend> DbFile<B> {
    /// `inner` with `space`'s global reserve behind its writes.
    pub(super) fn new(inner: B, space: Arc<SpaceInfo>) -> DbFile<B> {
        DbFile { inner, space }
    }

    /// Run `op`, which needs about `need` new bytes; on a full filesystem take them from the
    /// global reserve and run it again. An error that is returned is noted as a failure.
    fn growing(&self, what: &str, need: u64, op: impl Fn() -> io::Result<()>) -> io::Result<()> {
        loop {
            match op() {
                Ok(()) => return Ok(()),
                Err(e) if no_room(&e).is_some() && self.space.rescue(need) => {}
                Err(e) => return Err(self.fail(what, e)),
            }
        }
    }

    fn fail(&self, what: &str, e: io::Error) -> io::Error {
        self.space.failed(what, &e);
        e
    }
}

impl<B: StorageBackend> StorageBackend for DbFile<B> {
    fn len(&self) -> io::Result<u64> {
        self.inner
            .len()
            .map_err(|e| self.fail("database file (length)", e))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner
            .read(offset, out)
            .map_err(|e| self.fail("database file (read)", e))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let grow = len.saturating_sub(self.inner.len().unwrap_or(len));
        self.growing("database file (length change)", grow, || {
            self.inner.set_len(len)
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.growing("database file (sync)", 0, || self.inner.sync_data())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.growing("database file (write)", data.len() as u64, || {
            self.inner.write(offset, data)
        })
    }

    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::super::medium::Medium;
    use super::super::simdisk::SimDisk;
    use super::super::space::Probe;
    use super::*;

    #[test]
    fn a_write_on_a_full_disk_takes_the_reserve_then_fails_and_is_noted() {
        let disk = SimDisk::with_capacity(64 << 20);
        let reserve = Medium::Sim(disk.new_file());
        let space = Arc::new(SpaceInfo::new(
            Probe::Sim(disk.clone()),
            Some(reserve),
            true,
        ));
        let hog = disk.new_file();
        hog.set_len(disk.space().0).unwrap();
        let db = DbFile::new(disk.new_file(), Arc::clone(&space));
        db.write(0, &[1u8; 3 << 20 >> 1]).unwrap();
        assert!(!space.is_failed());
        assert_eq!(
            space
                .counts
                .rescues
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        let e = db.write(4 << 20, &[1u8; 1 << 20]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(
            space.is_failed(),
            "redb latches the error: the store must reopen"
        );
        assert_eq!(space.failure_errno(), libc::ENOSPC);
    }

    #[test]
    fn other_errors_are_not_retried() {
        let disk = SimDisk::default();
        let space = Arc::new(SpaceInfo::unlimited());
        let db = DbFile::new(disk.new_file(), Arc::clone(&space));
        disk.fail_at(1, libc::EIO, false);
        assert_eq!(db.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert!(space.is_failed());
        assert_eq!(space.failure_errno(), libc::EIO);
        assert_eq!(disk.heal(), 1);
    }
}
