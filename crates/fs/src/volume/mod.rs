//! The filesystem core shared by every FUSE thread: the store, the engine, the live options and
//! the in-memory state btrfs keeps in its in-core inodes (open counts, per-inode locks, a small
//! cache of decompressed extents, held in pages of the engine's page pool: `page_pool=N`
//! reserves them, and evicting an extent gives its pages back).
//!
//! Mirrors struct btrfs_fs_info: one per mount.
//!
//! The volume layer, between the transport above and the store below. [`Volume`]'s fields
//! are private to this folder; each file under it adds the methods of one part, as fs/btrfs
//! declares each file's functions in its own header: the namespace in [`names`] (inodes,
//! directories, xattrs, ACLs, who asks, chattr's flags, O_TMPFILE), file data in [`data`]
//! (extents, delalloc, the encoder, decoding, the cache of decoded extents), and here the
//! delayed inode items ([`delayed`]), the mount flags and access times ([`vfs`]) and the
//! reports the control attributes answer ([`stat`], [`status`]). This file keeps the mount's
//! life (open, the committer, remount, sync) and who holds which inode (opens, orphans,
//! FORGET, deletion).

pub(crate) mod data;
pub(crate) mod delayed;
pub(crate) mod names;
pub(crate) mod stat;
pub(crate) mod status;
pub(crate) mod vfs;

pub use names::creds::Caller;
pub use names::inode::NewInode;
pub use names::setattr::SetAttr;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use redb::ReadableTable;
use wring_engine::offload::{Offload, OffloadConfig};
use wring_engine::{Engine, EngineConfig};

use crate::error::{errno, io, FsError};
use crate::options::{Options, MAX_MAX_EXTENT};
use crate::store::records::{ExtentHeader, Inode, Kind};
use crate::store::{self, Store, Txn, EXTENTS, INODES, ORPHANS, SYMLINKS, XATTRS};
use crate::volume::data::cache::Cached;
use crate::volume::data::delalloc::Pending;
use crate::volume::delayed::DelayedStore;

pub(super) const LOCK_STRIPES: usize = 64;
/// Orphans whose last hold FORGET dropped, deleted together in one transaction.
const FORGET_BATCH: usize = 256;
/// Inodes [`Volume::is_bare`] knows at most (8 bytes and the set's overhead each).
const BARE_MAX: usize = 1 << 18;
/// How the volume tells the kernel that what it caches of an inode changed behind its back
/// (the transport writes FUSE_NOTIFY_INVAL_INODE): the volume names no transport.
pub trait Notify: Send + Sync {
    /// Drop the kernel's attributes of `ino` and, when `offset` is not negative, its cached
    /// pages from `offset` on (`len` bytes; all of them for 0). ENOENT: the kernel does not
    /// hold the inode.
    fn inval_inode(&self, ino: u64, offset: i64, len: i64) -> std::io::Result<()>;
}

/// One mounted store.
pub struct Volume {
    /// The store, with the inode changes not yet written to it (see [`delayed`]).
    store: DelayedStore,
    engine: Arc<Engine>,
    /// The one way this mount compresses and decompresses: the engine's offload API, whose CPU
    /// workers (one per stream) are the mount's only compression threads.
    offload: Offload,
    options: RwLock<Options>,
    stripes: Vec<Mutex<()>>,
    /// Serialise decoding the same extent for the cache: two readers of one extent (adjacent
    /// readahead requests share their boundary extents) decode it once.
    decode_stripes: Vec<Mutex<()>>,
    open: Mutex<Opens>,
    dirs: Mutex<HashMap<u64, Arc<Vec<names::dir::DirEntry>>>>,
    next_fh: AtomicU64,
    /// Reads in progress: one alone spreads its extents over the streams, several share them.
    reads: AtomicUsize,
    cache: Mutex<VecDeque<Cached>>,
    /// Buffers for a batched read's stored bytes, kept between reads.
    staging: Mutex<Vec<Vec<u8>>>,
    da: Arc<data::delalloc::Delalloc>,
    /// Trained dictionaries for small extents (`dict=auto`).
    dicts: data::dicts::Dicts,
    /// Bumped before every commit that removes file data (truncate, punch hole): a reader that
    /// took dirty extents and then a snapshot retries when one came in between, so it never
    /// mixes data from before the removal with a snapshot from after.
    removals: AtomicU64,
    /// One remount at a time: it holds the options lock only to swap the options, then applies
    /// them to the engine (a page pool resize allocates up to gigabytes) with this lock alone.
    remounting: Mutex<()>,
    /// Inodes known to have no extended attribute (see [`Volume::is_bare`]).
    bare: Mutex<HashSet<u64>>,
    /// Orphans waiting for their deletion (see [`Volume::forget`]); doomed meanwhile.
    forgotten: Mutex<Vec<u64>>,
    /// Tells the kernel to drop its copy of an inode's attributes (set once mounted).
    notifier: std::sync::OnceLock<Box<dyn Notify>>,
    /// FUSE requests by opcode, for `wring status`.
    ops: crate::counters::OpCounts,
    /// Requests that waited for a file's writeback.
    wb_waits: crate::counters::WaitCounts,
    /// The extents writeback stored, by encoding.
    written_by: crate::counters::EncodingCounts,
    /// Inodes whose attributes the kernel must drop after the store went back to an older
    /// commit (told by the committer: not from inside the store's recovery).
    stale: Mutex<Vec<u64>>,
    /// Inodes whose cached pages the kernel must drop: a write to them was refused (an
    /// immutable or append-only file), so its pages hold bytes the store does not (told by
    /// the committer: the kernel holds them locked while the write is answered).
    stale_pages: Mutex<Vec<u64>>,
}

pub(crate) use wring_sync::lock;

/// Who has which inode open, and which inodes are on their way out (btrfs keeps the same in
/// the VFS inode's i_count and its orphan list).
#[derive(Default)]
pub(crate) struct Opens {
    /// Open count per inode.
    counts: HashMap<u64, u32>,
    /// Inodes left without a name while open, since the mount: the last release deletes them.
    orphans: HashSet<u64>,
    /// Inodes a transaction not yet committed is deleting: an open of one fails.
    doomed: HashSet<u64>,
    /// Opens for writing (OPEN, CREATE) not yet released, per inode: the files whose dirty
    /// pages the kernel may hold (a close writes them back: fuse_flush).
    writers: HashMap<u64, u32>,
}

/// The locks of several inodes (a writeback batch): the first one waited for, the others
/// taken only while free, so holding some never waits for another (no lock order to keep).
pub(crate) struct InodeLocks<'a> {
    vol: &'a Volume,
    held: Vec<(usize, MutexGuard<'a, ()>)>,
}

impl<'a> InodeLocks<'a> {
    /// Wait for `ino`'s lock.
    pub(crate) fn new(vol: &'a Volume, ino: u64) -> InodeLocks<'a> {
        let held = vec![(Volume::stripe(ino), vol.inode_lock(ino))];
        InodeLocks { vol, held }
    }

    /// Hold `ino`'s lock too if it is free (or already held: locks are striped); false if
    /// another thread holds it.
    pub(crate) fn try_add(&mut self, ino: u64) -> bool {
        let s = Volume::stripe(ino);
        if self.held.iter().any(|(h, _)| *h == s) {
            return true;
        }
        match self.vol.stripes[s].try_lock() {
            Ok(g) => self.held.push((s, g)),
            Err(std::sync::TryLockError::Poisoned(e)) => self.held.push((s, e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        }
        true
    }
}

/// An entry of a READDIRPLUS reply, held (see [`Volume::hold_listed`]).
pub(crate) enum Listed {
    /// Its attributes.
    Held(Inode),
    /// Its record does not decode: a stand-in of its kind that the kernel must not keep
    /// (attributes and entry valid for no time), so every stat of it asks again and gets EIO.
    Damaged(Inode),
}

/// While alive, an inode being deleted stays doomed (see [`Opens::doomed`]).
pub(crate) struct Doom<'a> {
    vol: &'a Volume,
    ino: u64,
}

impl Drop for Doom<'_> {
    fn drop(&mut self) {
        lock(&self.vol.open).doomed.remove(&self.ino);
    }
}

impl Volume {
    /// Open the store in `dir` with `options`, deleting orphans a crash left behind.
    pub fn open(dir: &std::path::Path, options: Options) -> Result<Volume, FsError> {
        Volume::open_with(dir, options, &store::Access::default())
    }

    /// [`Volume::open`] with how to reach a store's bucket (see [`Store::open_with`]). With
    /// `ro` nothing reaches the store's files, as for fsck: not redb's recovery after a crash,
    /// not the orphans' deletion; a store on read-only media mounts, and a store in a bucket
    /// takes no lease.
    pub fn open_with(
        dir: &std::path::Path,
        options: Options,
        access: &store::Access,
    ) -> Result<Volume, FsError> {
        if options.read_only {
            return Volume::new(Store::open_for_check_with(dir, access)?, options);
        }
        let store = Store::open_with(dir, access)?;
        store.start_flusher()?;
        Volume::mount(store, options)
    }

    /// Start the compactor of a store in a bucket (see [`store::compactor`]): each tick it
    /// reads the live options (`compact`, `compact_threshold`, which a remount changes). It
    /// ends with the mount; [`Store::stop_compactor`] stops it before the final commit.
    pub fn start_compactor(self: &Arc<Self>) -> Result<(), FsError> {
        use store::compactor::Tick;
        let weak = Arc::downgrade(self);
        self.store.start_compactor(move || {
            let Some(vol) = weak.upgrade() else {
                return Tick::Gone;
            };
            let o = vol.options();
            match o.compact {
                true => Tick::Ran(vol.store.compact_counted(o.compact_threshold)),
                false => Tick::Idle,
            }
        })
    }

    /// Start the committer: every second it makes the store's commits durable once the
    /// oldest non-durable one is [`crate::store::COMMIT_INTERVAL`] old (btrfs's transaction kthread).
    /// It ends with the mount.
    pub fn start_committer(self: &Arc<Self>) -> Result<(), FsError> {
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("wring-commit".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                let Some(vol) = weak.upgrade() else {
                    return;
                };
                // Extents the offload could not take when they were queued, and finished
                // ones a completion left for the next (see Writeback::complete).
                vol.submit_writeback();
                vol.commit_ready();
                vol.purge_forgotten();
                vol.maybe_train();
                if let Err(e) = vol.store.commit_if_due() {
                    log::error!("periodic commit failed: {e}");
                }
                vol.store.space().refill();
                for ino in std::mem::take(&mut *lock(&vol.stale)) {
                    vol.attrs_changed(ino);
                }
                for ino in std::mem::take(&mut *lock(&vol.stale_pages)) {
                    vol.pages_changed(ino);
                }
            })
            .map_err(io("starting the committer"))?;
        Ok(())
    }

    /// Take the store going back to its last durable commit (a commit failed and the
    /// database was reopened, see [`crate::store::recovery`]) as the kernel takes a lost
    /// writeback: every file the kernel holds fails its next fsync with EIO (and the next
    /// sync once), the decoded extents cached are dropped, and the kernel is told to drop the
    /// attributes it keeps of them. It ends with the mount.
    pub fn watch_rollbacks(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        self.store.on_rollback(move || {
            if let Some(vol) = weak.upgrade() {
                vol.rolled_back();
            }
        });
    }

    /// See [`Volume::watch_rollbacks`]: runs inside the store's recovery, so it only marks.
    pub(crate) fn rolled_back(&self) {
        let inos: Vec<u64> = lock(&self.open).counts.keys().copied().collect();
        self.da.lost(&inos);
        lock(&self.cache).clear();
        lock(&self.dirs).clear();
        lock(&self.stale).extend(inos);
    }

    /// Open the store in `dir` for fsck: nothing on disk changes, orphans stay; a store in a
    /// bucket is read with `access`, without its lease.
    pub(crate) fn open_for_check_with(
        dir: &std::path::Path,
        access: &store::Access,
    ) -> Result<Volume, FsError> {
        Volume::new(Store::open_for_check_with(dir, access)?, Options::default())
    }

    /// Open the store in `dir` for `fsck --repair`: written as a mount writes it (redb's
    /// recovery after a crash, its lock held, a bucket's lease taken), but without a mount's
    /// deletion of orphans, which the repair judges first.
    pub(crate) fn open_for_repair_with(
        dir: &std::path::Path,
        access: &store::Access,
    ) -> Result<Volume, FsError> {
        Volume::new(Store::open_with(dir, access)?, Options::default())
    }

    /// Open a store on simulated files, as [`Volume::open`] does (no writeback threads).
    #[cfg(test)]
    pub(crate) fn open_sim(
        db: store::simdisk::SimFile,
        data: store::simdisk::SimFile,
        options: Options,
    ) -> Result<Volume, FsError> {
        Volume::mount(Store::open_sim(db, data)?, options)
    }

    /// [`Volume::open_sim`] with the global reserve in `reserve` and free space measured on
    /// the files' simulated disk.
    #[cfg(test)]
    pub(crate) fn open_sim_with(
        db: store::simdisk::SimFile,
        data: store::simdisk::SimFile,
        reserve: Option<store::simdisk::SimFile>,
        options: Options,
    ) -> Result<Volume, FsError> {
        Volume::mount(Store::open_sim_with(db, data, reserve)?, options)
    }

    /// The volume over `store`, after deleting the orphans a crash left behind.
    fn mount(store: Store, options: Options) -> Result<Volume, FsError> {
        let vol = Volume::new(store, options)?;
        vol.purge_orphans()?;
        Ok(vol)
    }

    fn new(store: Store, options: Options) -> Result<Volume, FsError> {
        let engine = Arc::new(Engine::new(EngineConfig {
            max_extent: MAX_MAX_EXTENT,
            streams: options.streams,
            workspace_mem: options.workspace_mem,
            reclaim: options.reclaim,
            page_pool: options.page_pool,
            ..Default::default()
        }));
        let offload = Offload::new(Arc::clone(&engine), OffloadConfig::for_engine(&engine))
            .map_err(|e| FsError::Io {
                what: "starting the compression workers".into(),
                source: std::io::Error::other(e),
            })?;
        let dicts = data::dicts::Dicts::load(store::dicts::all(&*store.read()?)?);
        Ok(Volume {
            dicts,
            store: DelayedStore::new(store)?,
            engine,
            offload,
            options: RwLock::new(options),
            stripes: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            decode_stripes: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            open: Mutex::default(),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            reads: AtomicUsize::new(0),
            cache: Mutex::new(VecDeque::new()),
            staging: Mutex::new(Vec::new()),
            da: Arc::default(),
            removals: AtomicU64::new(0),
            remounting: Mutex::new(()),
            bare: Mutex::default(),
            forgotten: Mutex::default(),
            notifier: std::sync::OnceLock::new(),
            ops: crate::counters::OpCounts::default(),
            wb_waits: crate::counters::WaitCounts::default(),
            written_by: crate::counters::EncodingCounts::default(),
            stale: Mutex::default(),
            stale_pages: Mutex::default(),
        })
    }

    /// The live options.
    pub fn options(&self) -> Options {
        wring_sync::read(&self.options).clone()
    }

    /// Apply option text to the live mount (remount). Nothing changes on error.
    /// The options lock, which every operation takes, is held only to swap the options: the
    /// engine is resized after it is released (growing the page pool allocates its pages).
    pub fn remount(&self, text: &str) -> Result<Options, FsError> {
        let _one = lock(&self.remounting);
        // Remounts are one at a time: nothing else changes the options meanwhile.
        let old = self.options();
        let new = old.apply(text)?;
        let fixed = [
            // The session's access rule is fixed when the FUSE session starts.
            (new.allow_other != old.allow_other, "allow_other"),
            // So are its request threads, and the transport they serve.
            (new.threads != old.threads, "threads"),
            (new.uring != old.uring, "uring"),
            // The metrics listener is bound at mount.
            (new.metrics != old.metrics, "metrics"),
        ];
        if let Some((_, name)) = fixed.iter().find(|(changed, _)| *changed) {
            return Err(crate::options::OptionError::MountOnly(name.to_string()).into());
        }
        // ro/rw and the other VFS flags first: they can be refused (EBUSY, EPERM).
        self.change_vfs(&old, &new)?;
        *wring_sync::write(&self.options) = new.clone();
        if new.streams != old.streams {
            // The engine's stream limit and the worker pool together; then the writeback
            // threads follow (more start, surplus ones exit after their batch).
            self.offload
                .set_streams(new.streams)
                .map_err(|e| FsError::Io {
                    what: "resizing the compression workers".into(),
                    source: std::io::Error::other(e),
                })?;
        }
        if new.workspace_mem != old.workspace_mem {
            self.engine.set_workspace_mem(new.workspace_mem);
        }
        if new.reclaim != old.reclaim {
            self.engine.set_reclaim(new.reclaim);
        }
        if new.page_pool != old.page_pool {
            self.engine.set_page_pool(new.page_pool);
        }
        Ok(new)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The store with its delayed inode items, for what reads it beside the volume (fsck,
    /// the simulations) and for stopping its compactor at unmount.
    pub(crate) fn store(&self) -> &DelayedStore {
        &self.store
    }

    /// redb's integrity check of the store's database (see [`Store::check_integrity`]).
    pub(crate) fn check_integrity(&mut self) -> Result<bool, FsError> {
        self.store.check_integrity()
    }

    /// FUSE requests by opcode, for `wring status` (the transport counts them).
    pub(crate) fn op_counts(&self) -> &crate::counters::OpCounts {
        &self.ops
    }

    /// Bytes of dirty extents waiting for (or in) writeback, and how many extents.
    pub fn delalloc_totals(&self) -> (usize, usize) {
        self.da.totals()
    }

    /// Serialises data changes to one inode (btrfs's inode lock).
    pub(crate) fn inode_lock(&self, ino: u64) -> MutexGuard<'_, ()> {
        lock(&self.stripes[Self::stripe(ino)])
    }

    /// The stripe of `ino`'s lock.
    fn stripe(ino: u64) -> usize {
        (ino as usize) % LOCK_STRIPES
    }

    /// Make everything durable: all writeback, then a durable commit. A writeback error since
    /// the last sync is reported (after the commit).
    pub fn sync(&self) -> Result<(), FsError> {
        self.purge_forgotten();
        let r = self.flush_all_delalloc();
        self.store.sync()?;
        r
    }

    /// [`Volume::sync`] of everything written so far, also what the kernel still holds in
    /// its page cache for files open for writing: syncfs does not wait for a FUSE server
    /// (the kernel marks FUSE's mappings AS_NO_DATA_INTEGRITY, as sync would otherwise hang
    /// on a server), so such a file's last writes could reach the daemon after the commit.
    /// Each such file's pages are invalidated (FUSE_NOTIFY_INVAL_INODE), which makes the
    /// kernel write its dirty ones back and wait for them (fuse_launder_folio) before the
    /// notification returns. Only from a request's handler with no lock held: the writes come
    /// in on the other request threads.
    pub fn sync_all(&self) -> Result<(), FsError> {
        let writers: Vec<u64> = lock(&self.open).writers.keys().copied().collect();
        if let Some(n) = self.notifier.get() {
            for ino in writers {
                // ENOENT: the kernel holds the inode no more, nor its pages.
                let _ = n.inval_inode(ino, 0, 0);
            }
        }
        self.sync()
    }

    /// An open of `ino` for writing (see [`Volume::sync_all`]).
    pub(crate) fn write_opened(&self, ino: u64) {
        *lock(&self.open).writers.entry(ino).or_insert(0) += 1;
    }

    /// The release of an open of `ino` for writing.
    pub(crate) fn write_released(&self, ino: u64) {
        let mut open = lock(&self.open);
        if let Some(n) = open.writers.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                open.writers.remove(&ino);
            }
        }
    }

    /// A new file handle number.
    pub(crate) fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// `ino` has no name while held (an O_TMPFILE): its last release or FORGET deletes it.
    pub(crate) fn unnamed(&self, ino: u64) {
        lock(&self.open).orphans.insert(ino);
    }

    /// `ino` has a name again (linkat of an O_TMPFILE): its last release keeps it.
    pub(crate) fn named(&self, ino: u64) {
        lock(&self.open).orphans.remove(&ino);
    }

    /// Count an open of `ino` (a new inode: nothing can be deleting it).
    pub(crate) fn opened(&self, ino: u64) {
        *lock(&self.open).counts.entry(ino).or_insert(0) += 1;
    }

    /// open(2) of an existing inode: count the open unless a deletion of the inode is under
    /// way, then read the inode; the count is undone when it is not there.
    pub fn open_existing(&self, ino: u64) -> Result<Inode, FsError> {
        {
            let mut open = lock(&self.open);
            if open.doomed.contains(&ino) {
                return Err(errno(libc::ENOENT));
            }
            *open.counts.entry(ino).or_insert(0) += 1;
        }
        match self.inode(ino) {
            Ok(i) => Ok(i),
            Err(e) => {
                if let Err(u) = self.released(ino) {
                    log::warn!("undoing a failed open of inode {ino}: {u}");
                }
                Err(e)
            }
        }
    }

    /// Whether `ino` is known to have no extended attribute: it was made without one (no
    /// inherited ACL, no compression property) by this mount, and none was set since — every
    /// setter calls [`Volume::not_bare`] before its transaction, so a getxattr that still
    /// finds the inode here comes before that setter's change. Inodes from before the mount
    /// are not known (their xattrs are looked up).
    pub(crate) fn is_bare(&self, ino: u64) -> bool {
        lock(&self.bare).contains(&ino)
    }

    /// `ino` was just made with no extended attribute (kept for at most [`BARE_MAX`] inodes).
    pub(crate) fn set_bare(&self, ino: u64) {
        let mut bare = lock(&self.bare);
        if bare.len() < BARE_MAX {
            bare.insert(ino);
        }
    }

    /// `ino` may get an extended attribute, or is being deleted.
    pub(crate) fn not_bare(&self, ino: u64) {
        lock(&self.bare).remove(&ino);
    }

    /// [`Volume::open_existing`] for the entries of a READDIRPLUS reply, `(inode, dot, kind)`
    /// each (`.` and `..` are read, not held: the kernel takes no lookup for them), from one
    /// snapshot: the holds first, then (as [`Volume::inode`] does) the dirty extents, then
    /// the snapshot with the delayed records. `None` for an entry gone or being deleted (its
    /// hold undone); [`Listed::Damaged`] (held) for one whose record does not decode.
    pub(crate) fn hold_listed(
        &self,
        entries: &[(u64, bool, Kind)],
    ) -> Result<Vec<Option<Listed>>, FsError> {
        let held: Vec<bool> = {
            let mut open = lock(&self.open);
            let hold = |(ino, dot, _): &(u64, bool, Kind)| match (dot, open.doomed.contains(ino)) {
                (true, _) => true,
                (false, true) => false,
                (false, false) => {
                    *open.counts.entry(*ino).or_insert(0) += 1;
                    true
                }
            };
            entries.iter().map(hold).collect()
        };
        let read = || -> Result<Vec<Option<Listed>>, FsError> {
            loop {
                let removals = self.removals.load(Ordering::SeqCst);
                let pending: Vec<_> = entries.iter().map(|e| self.da.pending(e.0)).collect();
                let (snap, delayed) = self.store.snapshot()?;
                if self.removals.load(Ordering::SeqCst) != removals {
                    continue;
                }
                let inodes = snap.open_table(INODES)?;
                let mut out = Vec::with_capacity(entries.len());
                for ((&(ino, _, kind), &h), p) in entries.iter().zip(&held).zip(pending) {
                    let listed = match (h, delayed.get(&ino)) {
                        (false, _) => None,
                        (true, Some(i)) => Some(Listed::Held(with_pending(p, i.clone()))),
                        (true, None) => match store::get_inode(&inodes, ino) {
                            Ok(i) => Some(Listed::Held(with_pending(p, i))),
                            Err(FsError::Errno(libc::ENOENT)) => None,
                            Err(e) => {
                                // Its name is still listed; a stat of it gets EIO, as before.
                                log::warn!("listing: inode {ino}: {e}");
                                Some(Listed::Damaged(Inode::new(kind, 0, 0, 0)))
                            }
                        },
                    };
                    out.push(listed);
                }
                return Ok(out);
            }
        };
        let r = read();
        // Undo the holds of entries not returned.
        for (k, &(ino, dot, _)) in entries.iter().enumerate() {
            let returned = matches!(&r, Ok(v) if v[k].is_some());
            if held[k] && !dot && !returned {
                if let Err(u) = self.released(ino) {
                    log::warn!("undoing the hold of a listed entry: {u}");
                }
            }
        }
        r
    }

    /// Invalidate the kernel's attributes of `ino` through `notifier` from now on.
    pub fn set_notifier(&self, notifier: Box<dyn Notify>) {
        let _ = self.notifier.set(notifier);
    }

    /// The daemon changed `ino`'s attributes behind the kernel (a writeback commit changes
    /// `st_blocks`): the kernel asks again at the next stat instead of trusting its copy for
    /// the attribute timeout. Not under any lock a request thread may wait for: the kernel
    /// may have to wait for a request to finish before it can drop the inode's attributes.
    pub(crate) fn attrs_changed(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            // ENOENT: the kernel does not hold the inode; nothing to drop.
            let _ = n.inval_inode(ino, -1, 0);
        }
    }

    /// The kernel's cached pages of `ino` are not what the store holds: it drops them (and
    /// its attributes). Not from a request's handler: the kernel may hold the pages locked.
    pub(crate) fn pages_changed(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(ino, 0, 0);
        }
    }

    /// FUSE FORGET: the kernel dropped `n` references to `ino` (entry replies). When that was
    /// the last hold on an orphan, its deletion joins a batch committed in one transaction
    /// (now when the batch is full, else at the committer's next tick or the next sync).
    pub fn forget(&self, ino: u64, n: u64) {
        let last = {
            let mut open = lock(&self.open);
            let Some(c) = open.counts.get_mut(&ino) else {
                return;
            };
            *c = c.saturating_sub(n.min(u32::MAX as u64) as u32);
            if *c > 0 {
                return;
            }
            open.counts.remove(&ino);
            let orphan = open.orphans.remove(&ino);
            if orphan {
                open.doomed.insert(ino);
            }
            orphan
        };
        if last {
            self.store.discard(ino);
            let full = {
                let mut f = lock(&self.forgotten);
                f.push(ino);
                f.len() >= FORGET_BATCH
            };
            if full {
                self.purge_forgotten();
            }
        }
    }

    /// Delete the orphans whose last hold FORGET dropped, in one transaction.
    pub(crate) fn purge_forgotten(&self) {
        if self.store.read_only() {
            // Kept for when the mount is rw again (or for the next mount's orphan purge).
            return;
        }
        let inos = std::mem::take(&mut *lock(&self.forgotten));
        if inos.is_empty() {
            return;
        }
        let r = (|| {
            let txn = self.store.write()?;
            // Each once (purge_all counts what it deletes), and only what has no name.
            let unlinked: Vec<u64> = {
                let inodes = txn.open_table(INODES)?;
                let nlink = |ino| store::get_inode(&inodes, ino).ok().map(|i| i.nlink);
                let once: std::collections::BTreeSet<u64> = inos.iter().copied().collect();
                once.into_iter().filter(|&i| nlink(i) == Some(0)).collect()
            };
            self.purge_all(&txn, &unlinked)?;
            self.store.commit(txn, false)
        })();
        if let Err(e) = r {
            // Still in the orphan table: the next mount deletes them.
            log::warn!("deleting {} forgotten orphans: {e}", inos.len());
        }
        let mut open = lock(&self.open);
        for ino in inos {
            open.doomed.remove(&ino);
        }
    }

    /// Count a release of `ino`; the last one of an orphan deletes it.
    pub(crate) fn released(&self, ino: u64) -> Result<(), FsError> {
        let Some(_doom) = self.release_count(ino) else {
            return Ok(());
        };
        self.store.discard(ino);
        let _g = self.inode_lock(ino);
        let txn = self.store.write()?;
        let nlink = {
            let inodes = txn.open_table(INODES)?;
            store::get_inode(&inodes, ino).ok().map(|i| i.nlink)
        };
        // Checked again: the orphan mark may come from a transaction that was not committed.
        if nlink == Some(0) {
            self.purge(&txn, ino)?;
            self.store.commit(txn, false)?;
        }
        Ok(())
    }

    /// Take one open of `ino` off; when it was the last one of an orphan, the inode is doomed
    /// (opens of it fail) until the returned guard drops, after its deletion commits.
    fn release_count(&self, ino: u64) -> Option<Doom<'_>> {
        let mut open = lock(&self.open);
        match open.counts.get_mut(&ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                return None;
            }
            Some(_) => {
                open.counts.remove(&ino);
            }
            None => return None,
        }
        open.orphans.remove(&ino).then(|| self.doom(&mut open, ino))
    }

    fn doom<'a>(&'a self, open: &mut Opens, ino: u64) -> Doom<'a> {
        open.doomed.insert(ino);
        Doom { vol: self, ino }
    }

    /// Drop one link of `ino` within `txn`: when none is left, delete it, or leave it as an
    /// orphan while it is open (btrfs's orphan item). A deletion returns the guard that keeps
    /// opens of the inode failing until it is dropped, after the caller's commit.
    pub(crate) fn drop_link<'a>(
        &'a self,
        txn: &Txn<'_>,
        ino: u64,
    ) -> Result<Option<Doom<'a>>, FsError> {
        let inode = {
            let inodes = txn.open_table(INODES)?;
            store::get_inode(&inodes, ino)?
        };
        self.drop_link_of(txn, ino, inode)
    }

    /// [`Volume::drop_link`] of `ino`, whose record the caller has just read in `txn`.
    pub(crate) fn drop_link_of<'a>(
        &'a self,
        txn: &Txn<'_>,
        ino: u64,
        mut inode: crate::store::records::Inode,
    ) -> Result<Option<Doom<'a>>, FsError> {
        inode.nlink = inode.nlink.saturating_sub(1);
        if inode.kind == crate::store::records::Kind::Dir {
            inode.nlink = 0;
        }
        inode.ctime = crate::store::records::Time::now();
        if inode.nlink > 0 {
            txn.open_table(INODES)?
                .insert(ino, inode.to_bytes().as_slice())?;
            return Ok(None);
        }
        // The open counts and the mark are looked at and set together: an open counted
        // before keeps the inode; one after sees it doomed.
        let doom = {
            let mut open = lock(&self.open);
            match open.counts.contains_key(&ino) {
                true => {
                    open.orphans.insert(ino);
                    None
                }
                false => Some(self.doom(&mut open, ino)),
            }
        };
        match doom {
            None => {
                txn.open_table(INODES)?
                    .insert(ino, inode.to_bytes().as_slice())?;
                txn.open_table(ORPHANS)?.insert(ino, ())?;
            }
            Some(_) => self.purge(txn, ino)?,
        }
        Ok(doom)
    }

    /// Delete an inode with its extents, xattrs and symlink target.
    pub(crate) fn purge(&self, txn: &Txn<'_>, ino: u64) -> Result<(), FsError> {
        self.purge_all(txn, &[ino])
    }

    /// [`Volume::purge`] of every inode of `inos` in `txn`, each table opened once for all of
    /// them: a batch of 256 orphans (rm -rf's FORGETs, a mount's orphan purge) opened six
    /// tables per inode before, and the opens cost as much as the deletions.
    pub(crate) fn purge_all(&self, txn: &Txn<'_>, inos: &[u64]) -> Result<(), FsError> {
        if inos.is_empty() {
            return Ok(());
        }
        let mut used = 0i64;
        {
            let mut extents = txn.open_table(EXTENTS)?;
            for &ino in inos {
                let keys: Vec<(u64, u64)> = extents
                    .range((ino, 0)..=(ino, u64::MAX))?
                    .map(|r| r.map(|(k, _)| k.value()))
                    .collect::<Result<_, _>>()?;
                for k in keys {
                    used += txn.remove_item(&mut extents, k)?.used;
                }
            }
        }
        {
            let mut xattrs = txn.open_table(XATTRS)?;
            for &ino in inos {
                let keys: Vec<Vec<u8>> = xattrs
                    .range((ino, &[][..])..(ino + 1, &[][..]))?
                    .map(|r| r.map(|(k, _)| k.value().1.to_vec()))
                    .collect::<Result<_, _>>()?;
                for k in keys {
                    xattrs.remove((ino, k.as_slice()))?;
                }
            }
        }
        {
            let mut symlinks = txn.open_table(SYMLINKS)?;
            let mut parents = txn.open_table(store::PARENTS)?;
            let mut inodes = txn.open_table(INODES)?;
            let mut orphans = txn.open_table(ORPHANS)?;
            for &ino in inos {
                symlinks.remove(ino)?;
                parents.remove(ino)?;
                inodes.remove(ino)?;
                orphans.remove(ino)?;
            }
        }
        store::add_counter(txn, "used", used)?;
        store::add_counter(txn, "inodes", -(inos.len() as i64))?;
        for &ino in inos {
            self.forget_cache(ino, None);
            self.not_bare(ino);
        }
        Ok(())
    }

    /// The mount's orphan cleanup (btrfs_orphan_cleanup): every inode in the orphan table
    /// that has no link is deleted. One that has links again (the table is damaged: a
    /// linkat of an O_TMPFILE takes its inode out) only leaves the table, so no name is
    /// ever left pointing at a deleted inode.
    fn purge_orphans(&self) -> Result<(), FsError> {
        let txn = self.store.write()?;
        let listed: Vec<u64> = txn
            .open_table(ORPHANS)?
            .iter()?
            .map(|r| r.map(|(k, _)| k.value()))
            .collect::<Result<_, _>>()?;
        let mut orphans = Vec::with_capacity(listed.len());
        {
            let inodes = txn.open_table(INODES)?;
            let mut table = txn.open_table(ORPHANS)?;
            for ino in listed {
                match store::get_inode(&inodes, ino).map(|i| i.nlink) {
                    Ok(n) if n > 0 => {
                        log::warn!(
                            "orphan inode {ino} has {n} links: kept, out of the orphan table"
                        );
                        table.remove(ino)?;
                    }
                    _ => {
                        log::info!("deleting orphan inode {ino}");
                        orphans.push(ino);
                    }
                }
            }
        }
        self.purge_all(&txn, &orphans)?;
        self.store.commit(txn, !orphans.is_empty())
    }

    /// A path for `ino` for log lines (best effort: scans the directory table).
    pub fn path_of(&self, ino: u64) -> String {
        let Ok(txn) = self.store.read() else {
            return format!("inode {ino}");
        };
        let Ok(dirents) = txn.open_table(crate::store::DIRENTS) else {
            return format!("inode {ino}");
        };
        let mut parts = Vec::new();
        let mut cur = ino;
        while cur != store::ROOT && parts.len() < 256 {
            let found = dirents.iter().ok().and_then(|mut it| {
                it.find_map(|r| {
                    let (k, v) = r.ok()?;
                    (v.value().0 == cur).then(|| (k.value().0, k.value().1.to_vec()))
                })
            });
            match found {
                Some((parent, name)) => {
                    parts.push(String::from_utf8_lossy(&name).into_owned());
                    cur = parent;
                }
                None => return format!("inode {ino} (no name)"),
            }
        }
        parts.reverse();
        format!("/{} (inode {ino})", parts.join("/"))
    }

    /// Header of an extent value. The header has no checksum of its own, so its decoded length
    /// is checked against the largest extent before anything is sized by it.
    pub(crate) fn header(ino: u64, offset: u64, value: &[u8]) -> Result<ExtentHeader, FsError> {
        let damaged = |reason: String| FsError::Corrupt {
            ino,
            offset,
            reason,
        };
        let h = ExtentHeader::decode(value).map_err(|e| damaged(e.to_string()))?;
        if h.ram_len == 0 || h.ram_len as usize > MAX_MAX_EXTENT {
            return Err(damaged(format!(
                "extent header gives a length of {} bytes",
                h.ram_len
            )));
        }
        Ok(h)
    }

    /// `ino`'s record in `snap`, or the record a delayed create keeps of it (see
    /// [`delayed`]) while `snap` has none: such an inode has nothing else in the store yet.
    pub(crate) fn record_in(&self, snap: &store::Snapshot<'_>, ino: u64) -> Result<Inode, FsError> {
        match store::get_inode(&snap.open_table(INODES)?, ino) {
            Err(FsError::Errno(libc::ENOENT)) => self.store.inode(ino),
            r => r,
        }
    }

    /// Read an inode: its delayed record or the last commit's, with what its dirty extents
    /// add.
    pub fn inode(&self, ino: u64) -> Result<Inode, FsError> {
        loop {
            // Pending before the snapshot: a writeback that commits and finishes in between is
            // in the snapshot; the other order could miss it in both.
            let removals = self.removals.load(Ordering::SeqCst);
            let pending = self.da.pending(ino);
            // The delayed record, else the last commit's (see DelayedStore::inode).
            let inode = self.store.inode(ino)?;
            if self.removals.load(Ordering::SeqCst) != removals {
                continue;
            }
            return Ok(with_pending(pending, inode));
        }
    }
}

/// `inode` as it will be once the dirty extents `pending` describes are written back (size and
/// times), and with the bytes they cover added to its own (btrfs_getattr's `st_blocks` adds
/// the delalloc bytes; an extent rewritten counts twice until its writeback commits, as there).
pub(crate) fn with_pending(pending: Option<Pending>, mut inode: Inode) -> Inode {
    if let Some(p) = pending {
        inode.size = inode.size.max(p.size);
        inode.bytes = inode.bytes.saturating_add(p.covered);
        if let Some(t) = p.mtime {
            apply_write_time(&mut inode, t);
        }
    }
    inode
}

/// A write made at `t` reaches the inode (its writeback commits, or a lookup adds its dirty
/// extents), unless a setattr set the times after it (see `Delalloc::times_set`): from the
/// last change on (`ctime`) the write sets both times; before it (a chmod, rename, link or
/// xattr change came after the write, or a later writeback of the file committed first) it
/// still moves mtime forward.
pub(crate) fn apply_write_time(inode: &mut Inode, t: crate::store::records::Time) {
    if t >= inode.ctime {
        inode.mtime = t;
        inode.ctime = t;
    } else if t > inode.mtime {
        inode.mtime = t;
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        // Nothing holds the orphans any more: the kernel's references went with the mount.
        let orphans: Vec<u64> = lock(&self.open).orphans.drain().collect();
        lock(&self.forgotten).extend(orphans);
        if let Err(e) = self.sync() {
            log::error!("final commit failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use crate::store::{Store, ORPHANS, ROOT};
    use crate::volume::NewInode;
    use crate::{Options, Volume};

    /// An inode with a name that the orphan table lists (a damaged table) survives the next
    /// mount's orphan cleanup: only the table entry goes, and fsck is clean after.
    #[test]
    fn a_named_inode_in_the_orphan_table_is_kept_at_mount() {
        let dir = std::env::temp_dir().join(format!("wring-orphan-named-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
        vol.write(a, 0, b"kept", None).unwrap();
        vol.sync().unwrap();
        let txn = vol.store.write().unwrap();
        txn.open_table(ORPHANS).unwrap().insert(a, ()).unwrap();
        vol.store.commit(txn, true).unwrap();
        drop(vol);
        let vol = Volume::open(&dir, Options::default()).unwrap();
        assert_eq!(vol.lookup(ROOT, b"a").unwrap().0, a);
        assert_eq!(vol.read(a, 0, 10).unwrap(), b"kept");
        drop(vol);
        let r = crate::admin::fsck::fsck(&dir).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let _ = std::fs::remove_dir_all(&dir);
    }

    use super::*;

    /// Regression: remount held the options lock, which every operation takes, while growing
    /// the page pool allocated its pages (up to 4 GiB), so every read and write waited for it.
    /// A hook holds the resize between two chunks; meanwhile the options are free and a write,
    /// a read and a getattr complete.
    #[test]
    fn a_page_pool_resize_does_not_stall_operations() {
        // A size no other test asks for: the hook is process-wide.
        const PAGES: usize = 12_345;
        let dir = std::env::temp_dir().join(format!("wring-vol-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Arc::new(Volume::open(&dir, Options::default()).unwrap());
        let (ino, _) = vol.create(ROOT, b"f", NewInode::file(0o644)).unwrap();

        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        wring_engine::pool::set_grow_hook(Some(Arc::new(move |count| {
            if count == PAGES {
                let _ = entered_tx.send(());
                // Returns once the test lets go (drops the sender).
                let _ = lock(&release_rx).recv();
            }
        })));
        let remount = {
            let vol = Arc::clone(&vol);
            std::thread::spawn(move || vol.remount(&format!("page_pool={PAGES}")).map(|_| ()))
        };
        entered_rx.recv().unwrap();
        // The resize is under way: the options must be free, and operations must run.
        let free = vol.options.try_read().is_ok();
        let ops = free.then(|| {
            vol.write(ino, 0, b"while the pool grows", None).unwrap();
            let back = vol.read(ino, 0, 64).unwrap();
            (back, vol.inode(ino).unwrap().size)
        });
        drop(release_tx);
        let r = remount.join();
        wring_engine::pool::set_grow_hook(None);
        assert!(
            free,
            "the options lock is held while the page pool allocates its pages"
        );
        assert!(matches!(r, Ok(Ok(()))), "remount failed");
        assert_eq!(
            ops,
            Some((b"while the pool grows".to_vec(), 20)),
            "operations during the resize"
        );
        let pool = vol.engine().stats().pool;
        assert_eq!((pool.size, pool.free), (PAGES, PAGES), "{pool:?}");
        assert_eq!(vol.options().page_pool, PAGES);
        drop(vol);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
