//! Reopening the database after an I/O error, so a full or failing disk never wedges the
//! mount.
//!
//! redb latches the first I/O error its file returns (a write that met ENOSPC beyond the
//! global reserve, an EIO from the disk): every later transaction, reads included, fails
//! with `PreviousIo` until the database is reopened. The store notices the error as it
//! happens ([`super::dbfile`]) and, before its next transaction, closes the database and
//! opens it again; redb then recovers its last durable commit, as after a crash. So the
//! operation that met the error fails with its errno, and the next one works once the cause
//! is gone (space freed, the disk back).
//!
//! Mirrors btrfs's transaction abort only in what is lost: the commits since the last durable
//! one, as a crash would lose them (btrfs also forces the filesystem read-only until it is
//! mounted again; wring goes on). After such a rollback:
//! - the data file's free space is rebuilt from the extent items of the commit reopened (what
//!   later commits wrote is free again, what they freed is in use again); a bucket's live
//!   counts cannot be rebuilt, so its compaction stops until the next mount;
//! - the counters the kernel has seen (inode numbers, extent sequence numbers) are moved past
//!   every value handed out before, so no inode number the kernel may still hold is reused;
//! - the layer above is told ([`Store::on_rollback`]): the filesystem fails the next fsync of
//!   every file the kernel holds with EIO, as the kernel's errseq reports a lost writeback.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, Durability, ReadableTable};

use super::dbfile::DbFile;
use super::space::SpaceInfo;
use super::{builder, external_ranges, lock, Store, META};
use crate::error::{errno, io, FsError};

/// How long a recovery waits for the transactions still holding the failed database (a
/// request's read snapshot) before it gives up for this time.
const WAIT: Duration = Duration::from_secs(1);

/// How the database is opened.
pub(crate) enum Source {
    /// The file at this path.
    File(PathBuf),
    /// A simulated file.
    #[cfg(test)]
    Sim(super::simdisk::SimFile),
    /// Opened once and never again (fsck's overlay, which cannot fail a write).
    Fixed,
}

impl Source {
    /// Open the database, its writes backed by `space`'s global reserve.
    pub(crate) fn open(
        &self,
        space: &Arc<SpaceInfo>,
        repaired: &Arc<AtomicBool>,
    ) -> Result<Database, FsError> {
        match self {
            Source::File(path) => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(io(format!("opening {}", path.display())))?;
                let empty = file.metadata().map(|m| m.len() == 0).unwrap_or(false);
                if empty {
                    // create_with_backend would make a new, empty database in it.
                    return Err(FsError::Refused {
                        why: format!("{} is empty: not a wring store", path.display()),
                        errno: libc::EUCLEAN,
                    });
                }
                let backend = redb::backends::FileBackend::new(file)?;
                let db = builder(repaired)
                    .create_with_backend(DbFile::new(backend, Arc::clone(space)))?;
                Ok(db)
            }
            #[cfg(test)]
            Source::Sim(f) => {
                Ok(builder(repaired)
                    .create_with_backend(DbFile::new(f.clone(), Arc::clone(space)))?)
            }
            Source::Fixed => Err(errno(libc::EIO)),
        }
    }
}

/// The highest `next_ino` and `seq` handed out in this mount.
#[derive(Default)]
pub(crate) struct Marks {
    next_ino: AtomicU64,
    seq: AtomicU64,
}

impl Marks {
    /// The counter `key` will next hand out `next`.
    pub(crate) fn note(&self, key: &str, next: u64) {
        let mark = match key {
            "next_ino" => &self.next_ino,
            "seq" => &self.seq,
            _ => return,
        };
        mark.fetch_max(next, Ordering::Relaxed);
    }
}

impl Store {
    /// Call `hook` whenever a recovery lost commits that were not durable (once; later calls
    /// are ignored).
    pub fn on_rollback(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.rollback_hook.set(Box::new(hook));
    }

    /// Reopen the database after a store file failed (see the module's header). An error
    /// when it cannot be reopened yet: the operation fails with the failure's errno and a
    /// later one tries again.
    pub(super) fn recover(&self) -> Result<(), FsError> {
        let _one = lock(&self.recovery);
        if !self.space.is_failed() {
            return Ok(());
        }
        let unavailable = || errno(self.space.failure_errno());
        if matches!(self.source, Source::Fixed) {
            return Err(unavailable());
        }
        self.close_failed().map_err(|_| unavailable())?;
        let repaired = Arc::new(AtomicBool::new(false));
        let db = match self.source.open(&self.space, &repaired) {
            Ok(db) => db,
            Err(e) => {
                log::error!("reopening the store's database: {e}; retried by the next operation");
                return Err(unavailable());
            }
        };
        let lost = self.unsynced.swap(false, Ordering::SeqCst);
        let restored = self
            .data
            .rebuild(external_ranges(&db)?)
            .and_then(|()| self.restore_marks(&db));
        if let Err(e) = restored {
            log::error!("reopening the store's database: {e}; retried by the next operation");
            return Err(unavailable());
        }
        *wring_sync::write(&self.db) = Some(Arc::new(db));
        *lock(&self.last_durable) = Instant::now();
        self.space.recovered(lost);
        if lost {
            log::error!(
                "the store's database was reopened at its last durable commit: changes of the \
                 last seconds that no fsync or sync had made durable are lost, and the next \
                 fsync of each open file reports EIO"
            );
            if let Some(hook) = self.rollback_hook.get() {
                hook();
            }
        } else {
            log::warn!("the store's database was reopened; nothing was lost");
        }
        Ok(())
    }

    /// Take the failed database out and close it, once the transactions still holding it
    /// are done (waiting up to [`WAIT`]); put back when they are not.
    fn close_failed(&self) -> Result<(), ()> {
        let Some(mut old) = wring_sync::write(&self.db).take() else {
            return Ok(());
        };
        let start = Instant::now();
        loop {
            match Arc::try_unwrap(old) {
                Ok(db) => {
                    // A latched failure closes without writing anything.
                    drop(db);
                    return Ok(());
                }
                Err(still) if start.elapsed() < WAIT => {
                    old = still;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(still) => {
                    log::warn!("reopening the store's database: a transaction still holds it");
                    *wring_sync::write(&self.db) = Some(still);
                    return Err(());
                }
            }
        }
    }

    /// Move `next_ino` and `seq` past every value handed out before the store went back,
    /// durably.
    fn restore_marks(&self, db: &Database) -> Result<(), FsError> {
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        {
            let mut meta = txn.open_table(META)?;
            for (key, mark) in [("next_ino", &self.marks.next_ino), ("seq", &self.marks.seq)] {
                let have = meta.get(key)?.map_or(0, |v| v.value());
                let want = mark.load(Ordering::Relaxed);
                if want > have {
                    meta.insert(key, want)?;
                }
            }
        }
        txn.commit()?;
        Ok(())
    }
}
