//! The crash-safe store: one redb database file (`DIR/wring.redb`) holding every table.
//!
//! Mirrors btrfs's trees: inodes (fs tree INODE_ITEM), directory entries (DIR_ITEM), xattrs
//! (XATTR_ITEM), file extents with their checksums (EXTENT_DATA + csum tree) and orphan items.
//! redb is copy-on-write with a two-phase commit, like btrfs's transaction commit: a crash
//! leaves the last durable commit, never a mix.

pub mod records;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};

use crate::error::{errno, FsError};
use records::{Inode, Kind};

/// Inode number → inode item.
pub const INODES: TableDefinition<u64, &[u8]> = TableDefinition::new("inodes");
/// (directory, name) → (inode, kind).
pub const DIRENTS: TableDefinition<(u64, &[u8]), (u64, u8)> = TableDefinition::new("dirents");
/// (inode, name) → value.
pub const XATTRS: TableDefinition<(u64, &[u8]), &[u8]> = TableDefinition::new("xattrs");
/// (inode, extent index) → extent header + stored bytes.
pub const EXTENTS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("extents");
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
    db: Database,
    dir: PathBuf,
    last_durable: Mutex<Instant>,
    flusher: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> FsError {
    move |source| FsError::Io { what, source }
}

impl Store {
    /// Create a new store in `dir` (created if missing; must not hold one already).
    pub fn mkfs(dir: &Path) -> Result<(), FsError> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let path = dir.join(DB_FILE);
        if path.exists() {
            return Err(FsError::Io {
                what: format!("{}", path.display()),
                source: std::io::Error::from_raw_os_error(libc::EEXIST),
            });
        }
        let db = Database::create(&path)?;
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        {
            let mut inodes = txn.open_table(INODES)?;
            // SAFETY of ownership: the root belongs to whoever made the store.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            inodes.insert(
                ROOT,
                Inode::new(Kind::Dir, 0o755, uid, gid).to_bytes().as_slice(),
            )?;
            let mut meta = txn.open_table(META)?;
            meta.insert("next_ino", 2)?;
            meta.insert("seq", 1)?;
            meta.insert("used", 0)?;
            meta.insert("version", 1)?;
            txn.open_table(DIRENTS)?;
            txn.open_table(XATTRS)?;
            txn.open_table(EXTENTS)?;
            txn.open_table(SYMLINKS)?;
            txn.open_table(ORPHANS)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Open the store in `dir` (repairing after a crash, as redb does on open).
    pub fn open(dir: &Path) -> Result<Store, FsError> {
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
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .open(&path)?;
        Ok(Store {
            db,
            dir: dir.to_path_buf(),
            last_durable: Mutex::new(Instant::now()),
            flusher: Mutex::new(None),
        })
    }

    /// Start the flusher: every [`FLUSH_INTERVAL`] it asks the kernel to start writing the
    /// database file's dirty pages (sync_file_range, no waiting), as the kernel's flusher
    /// threads would for btrfs's data, so a durable commit finds little left to write.
    pub fn start_flusher(&self) -> Result<(), FsError> {
        let file = std::fs::File::open(self.dir.join(DB_FILE))
            .map_err(io(format!("opening {}", self.dir.join(DB_FILE).display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("wring-flush".into())
            .spawn(move || flush_loop(file, flag))
            .map_err(io("starting the flusher".into()))?;
        *self.flusher.lock().unwrap_or_else(|e| e.into_inner()) = Some((stop, handle));
        Ok(())
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Begin a write transaction. It is committed durably by [`Store::commit`] only when asked
    /// or when the commit interval has passed.
    pub fn write(&self) -> Result<WriteTransaction, FsError> {
        Ok(self.db.begin_write()?)
    }

    /// Begin a read transaction (a consistent snapshot of the last commit).
    pub fn read(&self) -> Result<ReadTransaction, FsError> {
        Ok(self.db.begin_read()?)
    }

    /// Commit `txn`: durable when `durable` or when the last durable commit is older than
    /// [`COMMIT_INTERVAL`]; otherwise in memory and the OS page cache only.
    pub fn commit(&self, mut txn: WriteTransaction, durable: bool) -> Result<(), FsError> {
        let mut last = self.last_durable.lock().unwrap_or_else(|e| e.into_inner());
        let durable = durable || last.elapsed() >= COMMIT_INTERVAL;
        if durable {
            txn.set_durability(Durability::Immediate)?;
            txn.set_quick_repair(true);
        } else {
            txn.set_durability(Durability::None)?;
        }
        txn.commit()?;
        if durable {
            *last = Instant::now();
        }
        Ok(())
    }

    /// Make every commit so far durable (fsync, unmount).
    pub fn sync(&self) -> Result<(), FsError> {
        let txn = self.write()?;
        self.commit(txn, true)
    }

    /// Mutable access for integrity checks (fsck) on a store nobody has mounted.
    pub fn check_integrity(&mut self) -> Result<bool, FsError> {
        Ok(self.db.check_integrity()?)
    }
}

fn flush_loop(file: std::fs::File, stop: Arc<AtomicBool>) {
    use std::os::fd::AsRawFd;
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(FLUSH_INTERVAL);
        // SAFETY: sync_file_range on a descriptor this thread owns; whole file, start only.
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let flusher = self
            .flusher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((stop, handle)) = flusher {
            stop.store(true, Ordering::Relaxed);
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

/// Read an inode within a transaction.
pub fn get_inode<T: ReadableTable<u64, &'static [u8]>>(
    table: &T,
    ino: u64,
) -> Result<Inode, FsError> {
    match table.get(ino)? {
        Some(v) => Inode::from_bytes(v.value()).ok_or(FsError::Corrupt {
            ino,
            offset: 0,
            reason: "inode item is damaged".into(),
        }),
        None => Err(errno(libc::ENOENT)),
    }
}

/// Increment and return a counter in META.
pub fn next_counter(txn: &WriteTransaction, key: &str) -> Result<u64, FsError> {
    let mut meta = txn.open_table(META)?;
    let v = meta.get(key)?.map(|g| g.value()).unwrap_or(1);
    meta.insert(key, v + 1)?;
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

/// Read a counter.
pub fn counter(txn: &ReadTransaction, key: &str) -> Result<u64, FsError> {
    let meta = txn.open_table(META)?;
    Ok(meta.get(key)?.map(|g| g.value()).unwrap_or(0))
}
