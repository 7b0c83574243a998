//! The crash-safe store: a redb database file (`DIR/wring.redb`) holding every table, and a
//! data backend holding the stored bytes of extents too large to keep inline: the data file
//! (`DIR/wring.data`), or segment objects in an S3 bucket (`mkfs --data s3://…`, see
//! [`objects`], [`handover`] and [`compactor`]). A write transaction writes extent items with
//! their stored bytes ([`extents`]).
//!
//! The bottom layer: it knows tables, records and bytes, never the volume, the transport or
//! the admin code above it.
//!
//! Mirrors btrfs's trees: inodes (fs tree INODE_ITEM), directory entries (DIR_ITEM), xattrs
//! (XATTR_ITEM), file extents with their checksums (EXTENT_DATA + csum tree) and orphan items.
//! redb is copy-on-write with a two-phase commit, like btrfs's transaction commit: a crash
//! leaves the last durable commit, never a mix. As btrfs writes data before the commit that
//! refers to it, a durable commit first syncs the data file; space an extent gave up is reused
//! only after that (see [`data`]).

// The store reads the disk: damaged bytes are an error, never a panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod backend;
pub mod compactor;
pub mod data;
mod dbfile;
pub mod dicts;
pub mod extents;
pub mod format;
pub mod handover;
pub mod layout;
pub mod medium;
pub mod objects;
pub mod records;
mod recovery;
pub mod shared;
#[cfg(test)]
pub mod simdisk;
pub mod space;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{
    Builder, Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};

use crate::error::{errno, io, FsError};
use backend::Backend;
use data::{DataFile, Range, ReaderGuard};
use medium::{Medium, Overlay};
use objects::Ids;
use records::{Inode, Kind, Stored};
use recovery::{Marks, Source};
use space::{Probe, Reservation, SpaceInfo, SpaceReport};

pub use compactor::CompactReport;
pub use objects::{Access, DataSpec, ObjectsSpec};
pub use space::RESERVE_FILE;

/// Inode number → inode item.
pub const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
/// (directory, name) → (inode, kind).
pub const DIRENTS: TableDefinition<(u64, &[u8]), (u64, u8)> = TableDefinition::new("dirents");
/// (inode, name) → value.
pub const XATTRS: TableDefinition<(u64, &[u8]), &[u8]> = TableDefinition::new("xattrs");
/// (inode, extent index) → extent header + stored bytes.
pub const EXTENTS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("extents");
/// Directory inode → its parent directory (btrfs's INODE_REF of a directory), for `..`.
pub const PARENTS: TableDefinition<u64, u64> = TableDefinition::new("parents");
/// Symlink inode → target.
pub const SYMLINKS: TableDefinition<u64, &[u8]> = TableDefinition::new("symlinks");
/// Inodes with no name left that were open when unlinked (deleted at the next mount).
pub const ORPHANS: TableDefinition<u64, ()> = TableDefinition::new("orphans");
/// Counters: next_ino, seq, used (stored extent bytes), inodes.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// The root directory's inode number (FUSE_ROOT_ID).
pub const ROOT: u64 = 1;
/// File name of the database in the store directory.
pub const DB_FILE: &str = "wring.redb";
/// File name of the data file in the store directory.
pub const DATA_FILE: &str = "wring.data";
/// How long non-durable commits may pile up before one is made durable (btrfs commit=).
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(5);
/// redb's cache: half of it may hold pages of non-durable commits before they go to the file.
/// Kept small so committed data reaches the page cache early and the flusher can start its
/// writeback, instead of all of it waiting for the next durable commit.
pub const CACHE_BYTES: usize = 64 << 20;
/// How often the flusher starts writeback of the database file's dirty pages.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// The open store.
pub struct Store {
    /// The database: `None` only while it is being reopened after a failure (see
    /// [`recovery`]). Taken in [`Store`]'s Drop: closed before its file is uploaded as the
    /// metadata snapshot of a store in a bucket. Every transaction holds a reference.
    db: RwLock<Option<Arc<Database>>>,
    /// How to open the database again after a failure.
    source: Source,
    /// Free space, reservations and the global reserve.
    space: Arc<SpaceInfo>,
    /// Counters never to hand out again, even after the store went back to an older commit.
    marks: Marks,
    /// One recovery at a time.
    recovery: Mutex<()>,
    /// Told when a recovery lost commits that were not durable (see [`Store::on_rollback`]).
    rollback_hook: OnceLock<Box<dyn Fn() + Send + Sync>>,
    data: Backend,
    spec: DataSpec,
    ids: Ids,
    dir: PathBuf,
    last_durable: Mutex<Instant>,
    /// A commit since the last durable one is not durable yet.
    unsynced: AtomicBool,
    flusher: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
    /// Opened for fsck: nothing reaches the files (see [`Store::open_for_check`]).
    read_only: AtomicBool,
    /// redb rebuilt the database's allocator state on open (it was not closed cleanly).
    repaired: bool,
    /// Transactions begun and committed, for `wring status`.
    pub counts: crate::counters::TxnCounts,
    /// The compactor of a store in a bucket (see [`compactor`]).
    compaction: compactor::Compaction,
    /// The store may hold shared extents: it had records when opened, or a transaction since
    /// added one (set before, never cleared). Until then an item's removal frees its bytes
    /// without looking for a record ([`shared`]).
    may_share: AtomicBool,
}

/// What a write transaction did to the data file.
#[derive(Default)]
struct TxnSpace {
    allocated: Vec<Range>,
    freed: Vec<Range>,
}

/// A transaction's [`TxnSpace`] and the data backend it came from: dropped uncommitted,
/// nothing refers to what it allocated, which goes back; what it gave up is still in use.
struct Allocated<'s> {
    data: &'s Backend,
    space: Mutex<TxnSpace>,
}

impl Drop for Allocated<'_> {
    fn drop(&mut self) {
        let space = std::mem::take(&mut *lock(&self.space));
        for r in space.allocated {
            self.data.release(r);
        }
    }
}

/// A write transaction with the data file space it allocated and gave up: the allocated
/// space goes back if it is dropped uncommitted; the space given up is pinned once committed.
pub struct Txn<'s> {
    // Before the transaction: space goes back before an uncommitted transaction is dropped.
    space: Allocated<'s>,
    txn: WriteTransaction,
    store: &'s Store,
    _db: Arc<Database>,
}

impl std::ops::Deref for Txn<'_> {
    type Target = WriteTransaction;

    fn deref(&self) -> &WriteTransaction {
        &self.txn
    }
}

impl Txn<'_> {
    /// Store an extent's bytes (in the data file, or appended to the open segment); returns
    /// their offset (an object address on a store in a bucket).
    pub fn put_stored(&self, bytes: &[u8]) -> Result<u64, FsError> {
        let range = self.store.data.put(bytes)?;
        lock(&self.space.space).allocated.push(range);
        Ok(range.0)
    }

    /// Bytes this transaction stored that its commit will refer to (the compactor's copies):
    /// released if it is dropped uncommitted.
    pub(crate) fn adopt(&self, range: Range) {
        lock(&self.space.space).allocated.push(range);
    }

    /// This transaction dropped an item whose bytes were `stored`.
    pub fn free_stored(&self, stored: Stored<'_>) {
        if let Stored::External(offset, len) = stored {
            lock(&self.space.space).freed.push((offset, len));
        }
    }

    /// Take the next value of the counter `key` in META (`next_ino`, `seq`): one never
    /// handed out before in this mount, even if a failed commit took the store back.
    pub fn next_counter(&self, key: &str) -> Result<u64, FsError> {
        let v = next_counter(self, key)?;
        self.store.marks.note(key, v + 1);
        Ok(v)
    }

    /// Set the counter `key` in META to `next` (the next value to hand out).
    pub fn set_counter(&self, key: &str, next: u64) -> Result<(), FsError> {
        self.open_table(META)?.insert(key, next)?;
        self.store.marks.note(key, next);
        Ok(())
    }
}

/// A read transaction whose extents' bytes stay in place while it lives.
pub struct Snapshot<'s> {
    txn: ReadTransaction,
    _reader: ReaderGuard<'s>,
    _db: Arc<Database>,
}

impl std::ops::Deref for Snapshot<'_> {
    type Target = ReadTransaction;

    fn deref(&self) -> &ReadTransaction {
        &self.txn
    }
}

impl Store {
    /// Create a new store in `dir` (created if missing; must not hold one already). The
    /// directory is made [`DIR_MODE`] and its files [`FILE_MODE`] whatever the umask: they
    /// hold every file's bytes, whatever the files' own modes on the mount.
    pub fn mkfs(dir: &Path) -> Result<(), FsError> {
        Store::mkfs_with(dir, &DataSpec::Local, &Access::default())
    }

    /// Create a new store in `dir` whose extents live as `spec` says. For a bucket, first
    /// checks that it answers with `access`'s credentials, that its prefix holds nothing of a
    /// filesystem (refused, naming what is there) and that it takes writes, and claims the
    /// prefix with the filesystem's id (see [`handover::claim`]); the URL, the endpoint and
    /// the credentials file's path are recorded in the store, never the credentials.
    pub fn mkfs_with(dir: &Path, spec: &DataSpec, access: &Access) -> Result<(), FsError> {
        let ids = Ids {
            fs_id: objects::new_id(),
            copy_id: objects::new_id(),
        };
        let spec = match spec {
            DataSpec::Objects(o) => DataSpec::Objects(o.recording(access)),
            DataSpec::Local => DataSpec::Local,
        };
        let claimed = match &spec {
            DataSpec::Objects(o) => Some(handover::claim(o, access, &ids.fs_id)?),
            DataSpec::Local => None,
        };
        let made = create(dir, &spec, &ids);
        if let (Err(_), Some(bucket)) = (&made, claimed) {
            handover::unclaim(&bucket);
        }
        made
    }

    /// Open the store in `dir` for a mount: redb recovers the last durable commit after a
    /// crash, and the data file is cut after the last byte that commit refers to.
    pub fn open(dir: &Path) -> Result<Store, FsError> {
        Store::open_with(dir, &Access::default())
    }

    /// [`Store::open`] with how to reach a bucket. A store in a bucket opens its object store
    /// with the live extents and takes the bucket's lease (see [`handover`]): a lease held by
    /// another mount is refused ([`FsError::LeaseHeld`]) unless `access.break_lease`.
    pub fn open_with(dir: &Path, access: &Access) -> Result<Store, FsError> {
        let path = db_path(dir)?;
        let reserve = Medium::open(&dir.join(RESERVE_FILE))
            .map_err(io(format!("opening {}", dir.join(RESERVE_FILE).display())))?;
        let space = Arc::new(SpaceInfo::new(Probe::dir(dir)?, Some(reserve), true));
        let source = Source::File(path.clone());
        let repaired = Arc::new(AtomicBool::new(false));
        let db = source.open(&space, &repaired)?;
        format::check_version(&db.begin_read()?)?;
        let (spec, ids) = objects::read_config(&db)?;
        let parts = (source, space);
        if let DataSpec::Objects(o) = &spec {
            parts.1.set_local_data(false);
            let backend = handover::open_writer(&db, o, &ids, access)?;
            let store = Store::assemble(db, parts, backend, (spec, ids), dir, false, &repaired)?;
            if store.repaired {
                log::warn!("{}: not closed cleanly, recovered", path.display());
            }
            return Ok(store);
        }
        let data_path = dir.join(DATA_FILE);
        if !data_path.exists() && !external_ranges(&db)?.is_empty() {
            // Recreating it empty would turn every extent stored there into an I/O error.
            let what = format!(
                "opening {} (the store's extents are there)",
                data_path.display()
            );
            return Err(io(what)(std::io::ErrorKind::NotFound.into()));
        }
        let data =
            Medium::open(&data_path).map_err(io(format!("opening {}", data_path.display())))?;
        let data = Backend::Local(DataFile::new(data, external_ranges(&db)?)?);
        let store = Store::assemble(db, parts, data, (spec, ids), dir, false, &repaired)?;
        if store.repaired {
            log::warn!("{}: not closed cleanly, recovered", path.display());
        }
        store.data.trim()?;
        Ok(store)
    }

    /// Open the store in `dir` for fsck without changing it: the database on an [`Overlay`]
    /// that keeps redb's writes (its recovery after a crash, if it needs one) in memory, the
    /// data file read-only and not cut. Commits are refused (EROFS).
    pub fn open_for_check(dir: &Path) -> Result<Store, FsError> {
        Store::open_for_check_with(dir, &Access::default())
    }

    /// [`Store::open_for_check`] with how to reach a bucket: a store in a bucket opens its
    /// object store to read, without the lease; nothing is written to the bucket.
    pub fn open_for_check_with(dir: &Path, access: &Access) -> Result<Store, FsError> {
        let path = db_path(dir)?;
        let repaired = Arc::new(AtomicBool::new(false));
        let db = builder(&repaired).create_with_backend(Overlay::open(&path)?)?;
        format::check_version(&db.begin_read()?)?;
        let (spec, ids) = objects::read_config(&db)?;
        let data = match &spec {
            DataSpec::Objects(o) => {
                let store = objects::open_store(o, access, &external_ranges(&db)?)?;
                Backend::Objects(objects::Objects::new(store, o.clone(), None))
            }
            DataSpec::Local => {
                let data = Medium::open_read_only(&dir.join(DATA_FILE))
                    .map_err(io(format!("opening {}", dir.join(DATA_FILE).display())))?;
                Backend::Local(DataFile::new(data, external_ranges(&db)?)?)
            }
        };
        let parts = (Source::Fixed, Arc::new(SpaceInfo::unlimited()));
        Store::assemble(db, parts, data, (spec, ids), dir, true, &repaired)
    }

    /// Make a new store on simulated files.
    #[cfg(test)]
    pub(crate) fn mkfs_sim(db: &simdisk::SimFile) -> Result<(), FsError> {
        init(
            &Database::builder().create_with_backend(db.clone())?,
            &DataSpec::Local,
            &Ids::default(),
        )
    }

    /// Open the store on simulated files, as [`Store::open`] does for a mount (without a
    /// global reserve; see [`Store::open_sim_with_reserve`]).
    #[cfg(test)]
    pub(crate) fn open_sim(db: simdisk::SimFile, data: simdisk::SimFile) -> Result<Store, FsError> {
        Store::open_sim_with(db, data, None)
    }

    /// [`Store::open_sim`] with the global reserve in `reserve`, free space measured on the
    /// files' simulated disk.
    #[cfg(test)]
    pub(crate) fn open_sim_with(
        db: simdisk::SimFile,
        data: simdisk::SimFile,
        reserve: Option<simdisk::SimFile>,
    ) -> Result<Store, FsError> {
        let probe = Probe::Sim(db.disk());
        let space = Arc::new(SpaceInfo::new(probe, reserve.map(Medium::Sim), true));
        let source = Source::Sim(db);
        let repaired = Arc::new(AtomicBool::new(false));
        let db = source.open(&space, &repaired)?;
        let data = Backend::Local(DataFile::new(Medium::Sim(data), external_ranges(&db)?)?);
        let config = (DataSpec::Local, Ids::default());
        let parts = (source, space);
        let store = Store::assemble(db, parts, data, config, Path::new(""), false, &repaired)?;
        store.data.trim()?;
        Ok(store)
    }

    fn assemble(
        db: Database,
        (source, space): (Source, Arc<SpaceInfo>),
        data: Backend,
        (spec, ids): (DataSpec, Ids),
        dir: &Path,
        read_only: bool,
        repaired: &AtomicBool,
    ) -> Result<Store, FsError> {
        if !read_only {
            format::upgrade(&db)?;
        }
        let may_share = AtomicBool::new(shared::any(&db.begin_read()?)?);
        Ok(Store {
            db: RwLock::new(Some(Arc::new(db))),
            source,
            space,
            marks: Marks::default(),
            recovery: Mutex::new(()),
            rollback_hook: OnceLock::new(),
            data,
            spec,
            ids,
            dir: dir.to_path_buf(),
            last_durable: Mutex::new(Instant::now()),
            unsynced: AtomicBool::new(false),
            flusher: Mutex::new(None),
            read_only: AtomicBool::new(read_only),
            repaired: repaired.load(Ordering::Relaxed),
            counts: crate::counters::TxnCounts::default(),
            compaction: compactor::Compaction::default(),
            may_share,
        })
    }

    /// Where the extents live.
    pub fn data_spec(&self) -> &DataSpec {
        &self.spec
    }

    /// The object store, when the extents are in a bucket.
    pub fn objects(&self) -> Option<&wring_objstore::ObjStore> {
        self.data.objects().map(|o| o.store())
    }

    /// The store's identity (empty for a store made before it was recorded).
    pub fn ids(&self) -> &Ids {
        &self.ids
    }

    /// Whether redb had to repair the database on open (it was not closed cleanly).
    pub fn repaired(&self) -> bool {
        self.repaired
    }

    /// Start the flusher: every [`FLUSH_INTERVAL`] it asks the kernel to start writing the
    /// database file's dirty pages (sync_file_range, no waiting), as the kernel's flusher
    /// threads would for btrfs's data, so a durable commit finds little left to write. Only
    /// for real files.
    pub fn start_flusher(&self) -> Result<(), FsError> {
        if self.dir.as_os_str().is_empty() {
            return Ok(());
        }
        let db = std::fs::File::open(self.dir.join(DB_FILE))
            .map_err(io(format!("opening {}", self.dir.join(DB_FILE).display())))?;
        let mut files = vec![db];
        if let Some(data) = self.data.file() {
            files.push((data.try_clone()).map_err(io(format!(
                "opening {}",
                self.dir.join(DATA_FILE).display()
            )))?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("wring-flush".into())
            .spawn(move || flush_loop(files, flag))
            .map_err(io("starting the flusher"))?;
        *wring_sync::lock(&self.flusher) = Some((stop, handle));
        Ok(())
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Begin a write transaction. It is committed durably by [`Store::commit`] only when asked
    /// or when the commit interval has passed. EROFS on a store opened for fsck.
    pub fn write(&self) -> Result<Txn<'_>, FsError> {
        if self.read_only() {
            return Err(errno(libc::EROFS));
        }
        let db = self.db()?;
        self.counts.writes.fetch_add(1, Ordering::Relaxed);
        Ok(Txn {
            space: Allocated {
                data: &self.data,
                space: Mutex::default(),
            },
            txn: db.begin_write()?,
            store: self,
            _db: db,
        })
    }

    /// Begin a read transaction (a consistent snapshot of the last commit).
    pub fn read(&self) -> Result<Snapshot<'_>, FsError> {
        let db = self.db()?;
        let reader = self.data.reader();
        self.counts.reads.fetch_add(1, Ordering::Relaxed);
        Ok(Snapshot {
            txn: db.begin_read()?,
            _reader: reader,
            _db: db,
        })
    }

    /// The database, reopened first if it failed (see [`recovery`]).
    fn db(&self) -> Result<Arc<Database>, FsError> {
        if self.space.is_failed() {
            self.recover()?;
        }
        match &*wring_sync::read(&self.db) {
            Some(db) => Ok(Arc::clone(db)),
            None => Err(errno(self.space.failure_errno())),
        }
    }

    /// Whether commits are refused (a store opened for fsck or a read-only mount, or made
    /// read-only by a remount).
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::SeqCst)
    }

    /// Refuse commits from now on (`remount,ro`; the caller has made everything durable), or
    /// take them again (`remount,rw`). A store opened without writing to its files (a
    /// read-only mount, fsck) cannot take them: EROFS, saying so.
    pub fn set_read_only(&self, ro: bool) -> Result<(), FsError> {
        if !ro && matches!(self.source, Source::Fixed) {
            return Err(FsError::Refused {
                why: format!(
                    "{} was mounted read-only, opened without writing to its files (as on \
                     read-only media): unmount it and mount it rw",
                    self.dir.display()
                ),
                errno: libc::EROFS,
            });
        }
        self.read_only.store(ro, Ordering::SeqCst);
        Ok(())
    }

    /// The store's space: free space, reservations, the global reserve.
    pub fn space(&self) -> &Arc<SpaceInfo> {
        &self.space
    }

    /// Reserve `bytes` for data not yet written back (see [`space`]); `None` when they do
    /// not fit now.
    pub fn reserve(&self, bytes: u64) -> Option<Reservation> {
        self.space.try_reserve(bytes)
    }

    /// ENOSPC unless an operation that adds `bytes` of metadata fits (create, mkdir,
    /// setxattr…; deleting needs no room).
    pub fn check_room(&self, bytes: u64) -> Result<(), FsError> {
        self.space.check(bytes, self.data.reclaimable())
    }

    /// An operation that wanted `bytes` was refused for lack of room (counted and logged).
    pub fn refused(&self, bytes: u64) {
        self.space.refused(bytes, self.data.reclaimable());
    }

    /// The space figures, for statfs and `wring status`.
    pub fn space_report(&self) -> SpaceReport {
        self.space.report(self.data.reclaimable())
    }

    /// Read an extent's stored bytes, from the data file or the bucket (under a [`Snapshot`]
    /// that refers to them). A bucket's errors (unreachable, a corrupt object) are EIO.
    pub fn read_stored(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.data.read_at(buf, offset)
    }

    /// (free bytes inside the data file's used part, its used length); for a bucket, (dead
    /// bytes, every segment byte).
    pub fn data_usage(&self) -> (u64, u64) {
        self.data.usage()
    }

    /// Commit `txn`: durable when `durable` or when the last durable commit is older than
    /// [`COMMIT_INTERVAL`]; otherwise in memory and the OS page cache only.
    pub fn commit(&self, t: Txn<'_>, durable: bool) -> Result<(), FsError> {
        let Txn { space, mut txn, .. } = t;
        let start = Instant::now();
        let mut last = wring_sync::lock(&self.last_durable);
        let durable = durable || last.elapsed() >= COMMIT_INTERVAL;
        if durable {
            // Data before the commit that refers to it.
            self.data.sync()?;
            txn.set_durability(Durability::Immediate)?;
            txn.set_quick_repair(true);
        } else {
            txn.set_durability(Durability::None)?;
            self.unsynced.store(true, Ordering::SeqCst);
        }
        if let Err(e) = txn.commit() {
            // Dropping `space` gives back what it allocated.
            return Err(e.into());
        }
        let space = std::mem::take(&mut *lock(&space.space));
        self.data.pin(space.freed);
        if durable {
            self.data.unpin();
            *last = Instant::now();
            self.unsynced.store(false, Ordering::SeqCst);
        }
        self.counts.committed(start, durable);
        Ok(())
    }

    /// btrfs's transaction kthread: make the commits since the last durable one durable once
    /// that is [`COMMIT_INTERVAL`] old, so data written and then left alone survives a crash
    /// as it would after btrfs's `commit=` interval. Returns whether it committed.
    pub fn commit_if_due(&self) -> Result<bool, FsError> {
        let due = lock(&self.last_durable).elapsed() >= COMMIT_INTERVAL;
        if self.read_only() || !due || !self.unsynced.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.sync().map(|_| true)
    }

    /// Make every commit so far durable (fsync, unmount); nothing to do on a store opened for
    /// fsck.
    pub fn sync(&self) -> Result<(), FsError> {
        if self.read_only() {
            return Ok(());
        }
        let txn = self.write()?;
        self.commit(txn, true)
    }

    /// redb's integrity check of every page (fsck). A check that passes makes the commits so far
    /// durable, so the data file is synced first, as for any durable commit.
    pub fn check_integrity(&mut self) -> Result<bool, FsError> {
        if !self.read_only() {
            self.data.sync()?;
        }
        let slot = wring_sync::get_mut(&mut self.db);
        match slot.as_mut().and_then(Arc::get_mut) {
            Some(db) => Ok(db.check_integrity()?),
            None => Err(errno(libc::EBUSY)),
        }
    }
}

/// Mode of a store directory: only its owner may enter it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files in a store: only their owner may read or write them.
pub const FILE_MODE: u32 = 0o600;
/// The log file of a background daemon, in the store directory.
pub const LOG_FILE: &str = "wring.log";

/// Set `path`'s permission bits to exactly `mode` (the umask applies at creation only).
fn set_mode(path: &Path, mode: u32) -> Result<(), FsError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(format!(
        "setting the mode of {} to {mode:04o}",
        path.display()
    )))
}

/// Create the empty file `path` with [`FILE_MODE`] (EEXIST if it is there).
fn create_private(path: &Path) -> Result<(), FsError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(io(format!("creating {}", path.display())))?;
    set_mode(path, FILE_MODE)
}

/// Refuse a store that other users could read (see [`exposure`]): the stored bytes are every
/// file's contents, which a mode of 0600 on the mount must keep from other users.
pub fn check_private(dir: &Path) -> Result<(), FsError> {
    match exposure(dir) {
        None => Ok(()),
        Some(why) => Err(FsError::Io {
            what: format!("refusing the store {}", dir.display()),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
        }),
    }
}

/// What makes the store in `dir` readable by other users, and the command that fixes it: its
/// directory, or any of its files ([`DB_FILE`], [`DATA_FILE`], [`LOG_FILE`]), open to group or
/// others. Files that are not there are not looked at.
pub fn exposure(dir: &Path) -> Option<String> {
    let mut open = Vec::new();
    let mut fix = Vec::new();
    if let Ok(m) = std::fs::metadata(dir) {
        let mode = m.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            open.push(format!("{} mode {mode:04o}", dir.display()));
            fix.push(format!("chmod {:o} {}", mode & !0o077, dir.display()));
        }
    }
    let mut files = Vec::new();
    for name in [DB_FILE, DATA_FILE, LOG_FILE, RESERVE_FILE] {
        let path = dir.join(name);
        let Ok(m) = std::fs::metadata(&path) else {
            continue;
        };
        let mode = m.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            open.push(format!("{name} mode {mode:04o}"));
            files.push(path.display().to_string());
        }
    }
    if !files.is_empty() {
        fix.push(format!("chmod 600 {}", files.join(" ")));
    }
    (!open.is_empty()).then(|| {
        format!(
            "it is open to other users ({}); run `{}`",
            open.join(", "),
            fix.join(" && ")
        )
    })
}

/// Create a store directory (and its parents) with [`DIR_MODE`]; one already there is kept
/// as it is (the caller sets its mode once it knows the directory may be used).
fn make_dir(dir: &Path) -> Result<(), FsError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(io(format!("creating {}", dir.display()))(e))
        }
        _ => Ok(()),
    }
}

/// Make the directory and files of a new store (the data file only for a local one).
fn create(dir: &Path, spec: &DataSpec, ids: &Ids) -> Result<(), FsError> {
    make_dir(dir)?;
    let path = dir.join(DB_FILE);
    if path.exists() {
        return Err(FsError::Io {
            what: format!("{}", path.display()),
            source: std::io::Error::from_raw_os_error(libc::EEXIST),
        });
    }
    set_mode(dir, DIR_MODE)?;
    // redb creates its file with the umask's mode; it opens one made here as it is.
    create_private(&path)?;
    init(&Database::create(&path)?, spec, ids)?;
    if *spec != DataSpec::Local {
        return Ok(());
    }
    let data = dir.join(DATA_FILE);
    Medium::open(&data).map_err(io(format!("creating {}", data.display())))?;
    set_mode(&data, FILE_MODE)
}

/// The database of a new store: the root directory, the counters, every table.
fn init(db: &Database, spec: &DataSpec, ids: &Ids) -> Result<(), FsError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut inodes = txn.open_table(INODES)?;
        // The root belongs to whoever made the store.
        // SAFETY: geteuid and getegid have no preconditions and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        inodes.insert(
            ROOT,
            Inode::new(Kind::Dir, 0o755, uid, gid).to_bytes().as_slice(),
        )?;
        let mut meta = txn.open_table(META)?;
        meta.insert("next_ino", 2)?;
        meta.insert("seq", 1)?;
        meta.insert("used", 0)?;
        meta.insert("version", format::VERSION)?;
        txn.open_table(DIRENTS)?;
        txn.open_table(XATTRS)?;
        txn.open_table(EXTENTS)?;
        txn.open_table(SYMLINKS)?;
        txn.open_table(ORPHANS)?;
        txn.open_table(PARENTS)?;
        objects::write_config(&txn, spec, ids)?;
    }
    txn.commit()?;
    Ok(())
}

/// The database file of the store in `dir`, which must exist.
fn db_path(dir: &Path) -> Result<PathBuf, FsError> {
    let path = dir.join(DB_FILE);
    if !path.exists() {
        return Err(FsError::Io {
            what: format!(
                "{} is not a wring store (run `wring mkfs` first)",
                dir.display()
            ),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
    }
    Ok(path)
}

/// redb's builder for the store, noting in `repaired` whether the open repairs.
pub(crate) fn builder(repaired: &Arc<AtomicBool>) -> Builder {
    let mut b = Database::builder();
    let flag = repaired.clone();
    b.set_cache_size(CACHE_BYTES)
        .set_repair_callback(move |_| flag.store(true, Ordering::Relaxed));
    b
}

fn flush_loop(files: Vec<std::fs::File>, stop: Arc<AtomicBool>) {
    use std::os::fd::AsRawFd;
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(FLUSH_INTERVAL);
        for f in &files {
            // SAFETY: sync_file_range on a descriptor this thread owns; whole file, start only.
            unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        }
    }
}

use wring_sync::lock;

/// The data file ranges the last commit's extent items refer to, each once (the items of a
/// shared extent name the same range).
pub(crate) fn external_ranges(db: &Database) -> Result<Vec<Range>, FsError> {
    let txn = db.begin_read()?;
    let table = txn.open_table(EXTENTS)?;
    let mut ranges = Vec::new();
    for r in table.iter()? {
        if let Ok(Stored::External(offset, len)) = records::stored(r?.1.value()) {
            ranges.push((offset, len));
        }
    }
    ranges.sort_unstable();
    ranges.dedup();
    Ok(ranges)
}

impl Drop for Store {
    /// Stops the flusher and the compactor and closes the database. A writing store in a
    /// bucket then hands over (see [`handover::close`]): its final durable commit, the
    /// database file as the newest metadata snapshot, and the lease released.
    fn drop(&mut self) {
        let flusher = lock(&self.flusher).take();
        if let Some((stop, handle)) = flusher {
            stop.store(true, Ordering::Relaxed);
            handle.thread().unpark();
            let _ = handle.join();
        }
        self.stop_compactor();
        let handover = match self.data.objects() {
            Some(o) if !self.read_only() && o.holder().is_some() => handover::prepare(self),
            _ => None,
        };
        // Closed here: nothing else holds it once the store is being dropped.
        drop(wring_sync::get_mut(&mut self.db).take());
        if let Some(gen) = handover {
            handover::close(self, gen);
        }
    }
}

/// Read an inode within a transaction.
pub fn get_inode<T: ReadableTable<u64, &'static [u8]>>(
    table: &T,
    ino: u64,
) -> Result<Inode, FsError> {
    match table.get(ino)? {
        Some(v) => Inode::decode(v.value()).map_err(|e| e.at(ino, 0)),
        None => Err(errno(libc::ENOENT)),
    }
}

/// Increment and return a counter in META.
pub fn next_counter(txn: &WriteTransaction, key: &str) -> Result<u64, FsError> {
    let mut meta = txn.open_table(META)?;
    let v = meta.get(key)?.map(|g| g.value());
    // mkfs sets every counter; a missing one is damage (defaulting `next_ino` would hand out
    // the root's number again).
    let Some((v, next)) = v.and_then(|v| Some((v, v.checked_add(1)?))) else {
        log::error!("the store's {key} counter is missing or exhausted; run wring fsck");
        return Err(errno(libc::EUCLEAN));
    };
    meta.insert(key, next)?;
    Ok(v)
}

/// Add `delta` (may be negative) to a counter in META.
pub fn add_counter(txn: &WriteTransaction, key: &str, delta: i64) -> Result<(), FsError> {
    if delta == 0 {
        return Ok(());
    }
    let mut meta = txn.open_table(META)?;
    let v = meta.get(key)?.map(|g| g.value()).unwrap_or(0);
    meta.insert(key, v.saturating_add_signed(delta))?;
    Ok(())
}

/// The table `def` as `txn` sees it; `None` when the store has never made it (a store older
/// than the table, or one that never needed it), which every reader takes as empty.
pub fn table_if_made<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &ReadTransaction,
    def: TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>, FsError> {
    match txn.open_table(def) {
        Ok(t) => Ok(Some(t)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The parent of directory `dir` (the root for itself, and for directories of stores made
/// before parents were recorded).
pub fn parent_of(txn: &ReadTransaction, dir: u64) -> Result<u64, FsError> {
    let Some(parents) = table_if_made(txn, PARENTS)? else {
        return Ok(ROOT);
    };
    Ok(parents.get(dir)?.map_or(ROOT, |v| v.value()))
}

/// Read a counter.
pub fn counter(txn: &ReadTransaction, key: &str) -> Result<u64, FsError> {
    let meta = txn.open_table(META)?;
    Ok(meta.get(key)?.map(|g| g.value()).unwrap_or(0))
}
