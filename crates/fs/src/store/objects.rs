//! The objects backend: a store's extents in segment objects of an S3 bucket
//! (`wring_objstore::ObjStore`), its metadata in the local redb file as ever. Holds where the
//! extents live (the `config` table written at mkfs: a URL, an endpoint, never credentials),
//! how to reach the bucket at open ([`Access`]), the lease a writing store holds, and the
//! pinning of freed extents until a durable commit.
//!
//! Mirrors btrfs's data block groups on a remote device: the extent items point into it as
//! into any block group, and a device that one machine has mounted is not mounted by another
//! (the lease, as btrfs's exclusive open of its devices).

use std::path::PathBuf;
use std::sync::Mutex;

use redb::{Database, ReadableDatabase, TableDefinition, WriteTransaction};
use wring_objstore::{Addr, Config, Credentials, ObjStore};

use super::data::{Range, ReaderGuard, Readers};
use crate::error::{objects_err, FsError};

/// Where a store's extents live and who it is: `data` (`local` or `objects`), `url`,
/// `endpoint`, `segment_bytes`, `credentials` (a credentials file's path), `fs_id` (the
/// filesystem's, the same in every copy of it) and `copy_id` (this directory's: new at mkfs
/// and at every fetch). Never credentials themselves.
pub const CONFIG: TableDefinition<&str, &str> = TableDefinition::new("config");

/// The largest metadata snapshot fetched (it is held in memory whole).
pub const MAX_SNAPSHOT: u64 = 4 << 30;
/// The object naming the newest snapshot's generation.
pub const HEAD: &str = "head";

/// Where a store's extents live; recorded in the store at mkfs (the [`CONFIG`] table), never
/// credentials.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DataSpec {
    /// In the data file of the store directory.
    #[default]
    Local,
    /// In segment objects of an S3 bucket.
    Objects(ObjectsSpec),
}

/// A bucket holding a store's extents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectsSpec {
    /// `s3://BUCKET/PREFIX`.
    pub url: String,
    /// The S3 endpoint (`http://127.0.0.1:8333` for a local SeaweedFS); None for AWS.
    pub endpoint: Option<String>,
    /// Segment object size (default 4 MiB).
    pub segment_bytes: Option<u64>,
    /// The credentials file mkfs or `mount --from` was given (its absolute path, never its
    /// contents): later mounts and fsck use it when not given one, so an fstab mount needs no
    /// environment.
    pub credentials: Option<PathBuf>,
}

impl ObjectsSpec {
    /// This spec with `access`'s credentials file recorded (made absolute), when it names one.
    pub fn recording(&self, access: &Access) -> ObjectsSpec {
        let mut spec = self.clone();
        if let Some(c) = &access.credentials {
            spec.credentials = Some(std::path::absolute(c).unwrap_or_else(|_| c.clone()));
        }
        spec
    }
}

/// How to reach the bucket at open time. Default: credentials from the `AWS_*` environment,
/// no lease breaking.
#[derive(Debug, Default, Clone)]
pub struct Access {
    /// A credentials file readable by its owner only (chmod 600); else the environment.
    pub credentials: Option<PathBuf>,
    /// Take the lease even when another holder has it (a stale lease: its holder is gone).
    pub break_lease: bool,
}

/// The store's identity from the [`CONFIG`] table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ids {
    /// The filesystem's id (the same in every copy).
    pub fs_id: String,
    /// This directory's copy of it.
    pub copy_id: String,
}

fn refused(why: String, errno: i32) -> FsError {
    FsError::Refused { why, errno }
}

use wring_sync::lock;

/// 16 random hex digits (getrandom).
pub fn new_id() -> String {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into the buffer it is given.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // Unique enough for an id when the kernel has no entropy call: time and pid.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b = (t ^ u64::from(std::process::id()) << 40).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// This machine's host name (printable characters only).
fn hostname() -> String {
    let mut b = [0u8; 256];
    // SAFETY: gethostname writes at most b.len() bytes, NUL-terminated when it fits.
    let r = unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) };
    // Up to the NUL, or all of it.
    let name = b.split(|&c| c == 0).next().unwrap_or_default();
    let name = if r == 0 {
        String::from_utf8_lossy(name).into_owned()
    } else {
        String::new()
    };
    let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    if name.is_empty() {
        "unknown-host".into()
    } else {
        name
    }
}

/// The lease holder of a mount of the copy `copy_id` on this machine: the daemon's pid makes
/// it this process's. A daemon that dies holding it (kill -9, a crash) leaves it held: the
/// next mount is refused until the lease is broken explicitly (`--break-lease`), as the
/// bucket cannot tell a dead holder from a live one on another machine.
pub fn holder(copy_id: &str) -> String {
    format!("{} copy {copy_id} pid {}", hostname(), std::process::id())
}

/// The lease holder `wring mount --from` leaves for the copy it fetched: the mount of that
/// copy that follows takes the lease over from it.
pub fn fetch_holder(copy_id: &str) -> String {
    format!("{} copy {copy_id} fetched", hostname())
}

/// A hint for a refused lease: the holder is this copy's own daemon on this machine, and that
/// process is gone.
fn own_dead_holder(holder: &str, copy_id: &str) -> Option<String> {
    let rest = holder.strip_prefix(&format!("{} copy {copy_id} pid ", hostname()))?;
    let pid: i32 = rest.parse().ok()?;
    // SAFETY: kill with signal 0 only probes whether the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    (!alive).then(|| {
        format!(
            " (this store directory's own mount daemon, pid {pid}, is no longer running: it              crashed or was killed; mount again with --break-lease)"
        )
    })
}

/// Write the [`CONFIG`] table of a new store.
pub fn write_config(txn: &WriteTransaction, spec: &DataSpec, ids: &Ids) -> Result<(), FsError> {
    let mut t = txn.open_table(CONFIG)?;
    t.insert("fs_id", ids.fs_id.as_str())?;
    t.insert("copy_id", ids.copy_id.as_str())?;
    match spec {
        DataSpec::Local => {
            t.insert("data", "local")?;
        }
        DataSpec::Objects(o) => {
            t.insert("data", "objects")?;
            t.insert("url", o.url.as_str())?;
            if let Some(e) = &o.endpoint {
                t.insert("endpoint", e.as_str())?;
            }
            if let Some(n) = o.segment_bytes {
                t.insert("segment_bytes", n.to_string().as_str())?;
            }
            if let Some(c) = o.credentials.as_ref().and_then(|c| c.to_str()) {
                t.insert("credentials", c)?;
            }
        }
    }
    Ok(())
}

/// The store's data setting and identity; a store made before the table existed is local.
pub fn read_config(db: &Database) -> Result<(DataSpec, Ids), FsError> {
    let txn = db.begin_read()?;
    let Some(t) = super::table_if_made(&txn, CONFIG)? else {
        return Ok((DataSpec::Local, Ids::default()));
    };
    let get = |k: &str| -> Result<Option<String>, FsError> {
        Ok(t.get(k)?.map(|v| v.value().to_string()))
    };
    let ids = Ids {
        fs_id: get("fs_id")?.unwrap_or_default(),
        copy_id: get("copy_id")?.unwrap_or_default(),
    };
    let damaged = |what: &str| {
        refused(
            format!("the store's config table is damaged: {what} (run wring fsck)"),
            libc::EUCLEAN,
        )
    };
    let spec = match get("data")?.as_deref() {
        None | Some("local") => DataSpec::Local,
        Some("objects") => {
            let url = get("url")?.ok_or_else(|| damaged("data=objects without a url"))?;
            let segment_bytes = match get("segment_bytes")? {
                None => None,
                Some(s) => Some(s.parse().map_err(|_| damaged("segment_bytes"))?),
            };
            DataSpec::Objects(ObjectsSpec {
                url,
                endpoint: get("endpoint")?,
                segment_bytes,
                credentials: get("credentials")?.map(PathBuf::from),
            })
        }
        Some(other) => return Err(damaged(&format!("unknown data={other}"))),
    };
    Ok((spec, ids))
}

/// The credentials for `spec`: the file `access` names, else the file recorded in the store
/// (one that is gone falls back to the environment, logged), else the `AWS_*` environment.
fn credentials(spec: &ObjectsSpec, access: &Access) -> Result<Credentials, FsError> {
    if let Some(path) = &access.credentials {
        return Credentials::from_file(path).map_err(FsError::Objects);
    }
    if let Some(path) = &spec.credentials {
        if path.exists() {
            return Credentials::from_file(path).map_err(FsError::Objects);
        }
        log::warn!(
            "{}: the credentials file recorded in the store, {}, is gone; using AWS_* from \
             the environment",
            spec.url,
            path.display()
        );
    }
    let url = &spec.url;
    Credentials::from_env()?.ok_or_else(|| {
        refused(
            format!(
                "no credentials for {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
                 name a credentials file (--credentials FILE, readable by its owner only)"
            ),
            libc::EACCES,
        )
    })
}

/// The object store's configuration for `spec`.
pub fn config(spec: &ObjectsSpec, access: &Access) -> Result<Config, FsError> {
    let mut cfg = Config::from_url(&spec.url, credentials(spec, access)?)?;
    cfg.endpoint = spec.endpoint.clone();
    if let Some(n) = spec.segment_bytes {
        cfg.segment_bytes = u32::try_from(n).map_err(|_| {
            refused(
                format!("a segment size of {n} bytes is over the limit of 1 GiB"),
                libc::EINVAL,
            )
        })?;
    }
    cfg.check()?;
    Ok(cfg)
}

/// Open the object store of `spec` with `live`, the (address, length) of every extent the
/// metadata refers to.
pub fn open_store(
    spec: &ObjectsSpec,
    access: &Access,
    live: &[Range],
) -> Result<ObjStore, FsError> {
    let live = live.iter().map(|&(at, len)| (Addr::from_raw(at), len));
    ObjStore::open(config(spec, access)?, live).map_err(FsError::Objects)
}

/// Take the lease for `holder` of the copy `copy_id`. A lease the fetch of this copy left
/// (`wring mount --from`) is taken over; another holder's is broken first only when
/// `access.break_lease` (logged, naming who held it), else refused ([`FsError::LeaseHeld`]).
pub fn take_lease(
    store: &ObjStore,
    holder: &str,
    copy_id: &str,
    access: &Access,
) -> Result<(), FsError> {
    match store.acquire_lease(holder) {
        Ok(_) => Ok(()),
        Err(wring_objstore::Error::LeaseHeld {
            holder: old, since, ..
        }) if access.break_lease || old == fetch_holder(copy_id) => {
            if old != fetch_holder(copy_id) {
                log::warn!("breaking the lease of {old} (held since {since}, unix time)");
            }
            store.break_lease()?;
            store
                .acquire_lease(holder)
                .map(|_| ())
                .map_err(|e| lease_err(e, copy_id))
        }
        Err(e) => Err(lease_err(e, copy_id)),
    }
}

/// An object store error, a refused lease with a hint when its holder is this copy's dead
/// daemon.
fn lease_err(e: wring_objstore::Error, copy_id: &str) -> FsError {
    match objects_err(e) {
        FsError::LeaseHeld {
            object,
            holder,
            since,
            ..
        } => FsError::LeaseHeld {
            hint: own_dead_holder(&holder, copy_id).unwrap_or_default(),
            object,
            holder,
            since,
        },
        e => e,
    }
}

/// The generation `head` names in the bucket, if any.
pub fn head_generation(store: &ObjStore) -> Result<Option<u64>, FsError> {
    let Some(bytes) = store.get_meta(HEAD, 64)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    text.trim().parse().map(Some).map_err(|_| {
        refused(
            format!(
                "the bucket's metadata pointer `{HEAD}` is damaged: `{}`",
                text.trim()
            ),
            libc::EUCLEAN,
        )
    })
}

/// The name of generation `gen`'s metadata snapshot (sorts by generation).
pub fn snapshot_name(gen: u64) -> String {
    format!("snap-{gen:020}")
}

/// A store's extents in a bucket.
pub struct Objects {
    store: ObjStore,
    spec: ObjectsSpec,
    /// The lease holder when this store writes (None: opened for fsck, holds no lease).
    holder: Option<String>,
    readers: Mutex<Readers>,
    /// Freed by committed transactions since the last durable commit.
    pinned: Mutex<Vec<Range>>,
    /// Segments compaction emptied, with the reader epoch they wait for.
    pub(super) doomed: Mutex<Vec<(u64, Vec<u32>)>>,
    /// One compaction at a time.
    pub(super) compacting: Mutex<()>,
    /// The database went back to an older commit: the live counts no longer match it, so
    /// compaction deletes nothing until the next mount counts them again.
    frozen: std::sync::atomic::AtomicBool,
}

impl Objects {
    /// The backend over an open object store; `holder` is the lease this store holds.
    pub fn new(store: ObjStore, spec: ObjectsSpec, holder: Option<String>) -> Objects {
        Objects {
            store,
            spec,
            holder,
            readers: Mutex::default(),
            pinned: Mutex::default(),
            doomed: Mutex::default(),
            compacting: Mutex::new(()),
            frozen: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Stop compaction for the rest of the mount (see `frozen`).
    pub fn freeze(&self) {
        if !self.frozen.swap(true, std::sync::atomic::Ordering::SeqCst) {
            log::warn!(
                "{}: the database went back to its last durable commit; compaction is off \
                 until the next mount counts the live extents again",
                self.spec.url
            );
        }
    }

    /// Whether compaction is off (see [`Objects::freeze`]).
    pub fn frozen(&self) -> bool {
        self.frozen.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The object store.
    pub fn store(&self) -> &ObjStore {
        &self.store
    }

    /// Where the extents are.
    pub fn spec(&self) -> &ObjectsSpec {
        &self.spec
    }

    /// The lease this store holds (None when opened for fsck).
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref()
    }

    /// The readers' epochs.
    pub(super) fn readers(&self) -> &Mutex<Readers> {
        &self.readers
    }

    /// Append an extent's bytes to the open segment.
    pub fn put(&self, bytes: &[u8]) -> Result<Range, FsError> {
        let addr = self.store.append(bytes)?;
        Ok((addr.raw(), bytes.len() as u64))
    }

    /// Bytes no commit refers to: dead from now on.
    pub fn release(&self, (at, len): Range) {
        self.store.free(Addr::from_raw(at), len);
    }

    /// Bytes a committed transaction stopped referring to: dead after the next durable commit.
    pub fn pin(&self, ranges: Vec<Range>) {
        lock(&self.pinned).extend(ranges);
    }

    /// A durable commit happened: the pinned extents are dead. Their segments are deleted
    /// only by compaction, which waits for the readers that could still see them.
    pub fn unpin(&self) {
        for r in std::mem::take(&mut *lock(&self.pinned)) {
            self.release(r);
        }
    }

    /// Every appended byte in the bucket.
    pub fn sync(&self) -> Result<(), FsError> {
        Ok(self.store.sync()?)
    }

    /// Read an extent (verified against its crc32 in the segment's index). Damage (a corrupt
    /// or missing object, no such extent in it) is `InvalidData`; a bucket that does not
    /// answer is another kind. The error names the object.
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        use wring_objstore::Error as E;
        self.store.read(Addr::from_raw(at), buf).map_err(|e| {
            let kind = match e {
                E::Corrupt { .. } | E::MissingSegment { .. } | E::NoExtent { .. } => {
                    std::io::ErrorKind::InvalidData
                }
                E::TooLarge(_) => std::io::ErrorKind::InvalidData,
                _ => std::io::ErrorKind::Other,
            };
            std::io::Error::new(kind, e.to_string())
        })
    }

    /// Register a reader.
    pub fn reader(&self) -> ReaderGuard<'_> {
        Readers::enter(&self.readers)
    }

    /// (dead bytes in the bucket, every segment byte in the bucket or waiting for upload).
    pub fn usage(&self) -> (u64, u64) {
        let st = self.store.stats();
        (st.dead_bytes, st.bucket_bytes + st.pending_bytes)
    }
}
