//! Handing a store in a bucket from one machine to another: mkfs checks the prefix is unused;
//! a mount takes the bucket's lease and refuses a stale copy of the metadata; a clean close
//! makes its final commit durable, uploads the database file as the newest metadata snapshot
//! (`PREFIX/meta/snap-<generation>`, then the pointer `PREFIX/meta/head`) and releases the
//! lease; [`Store::fetch`] (`wring mount --from`) takes the lease and writes that snapshot into
//! a new directory, whose mount then takes the lease over from the fetch. A crash leaves the
//! lease held by the dead daemon: every later mount, this directory's too, must break it
//! explicitly (`--break-lease`), since nothing in the bucket tells a dead holder from a live
//! one elsewhere.
//!
//! Mirrors btrfs's superblock, which whoever mounts the device next reads (here the snapshot
//! and its generation), and its exclusive open of a device (the lease).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, ReadableTable};
use wring_objstore::ObjStore;

use super::backend::Backend;
use super::objects::{
    self, fetch_holder, head_generation, holder, new_id, open_store, snapshot_name, take_lease,
    Access, DataSpec, Ids, Objects, ObjectsSpec, CONFIG, HEAD, MAX_SNAPSHOT,
};
use super::{external_ranges, make_dir, set_mode, Store, DB_FILE, DIR_MODE, FILE_MODE, META};
use crate::error::{io, FsError};

/// The META counter of the newest metadata snapshot this copy made or fetched.
pub const SNAP_GEN: &str = "snap_gen";

fn refused(why: String, errno: i32) -> FsError {
    FsError::Refused { why, errno }
}

/// The object naming the filesystem a prefix holds (its id, as btrfs's fsid in the
/// superblock): written by mkfs, checked by every mount and fetch.
pub const FS_OBJECT: &str = "fs";

/// mkfs into a bucket: it must answer, the prefix must hold nothing of a filesystem (another
/// one's, or this one's from before: an id, segments, a lease, a metadata snapshot), and it
/// must take writes and deletes (a probe object written and deleted, so that credentials
/// that may only read are refused now rather than at the first fsync). Then the prefix is
/// claimed: `PREFIX/meta/fs` holds `fs_id`. Returns the object store for [`unclaim`].
pub fn claim(spec: &ObjectsSpec, access: &Access, fs_id: &str) -> Result<ObjStore, FsError> {
    let store = open_store(spec, access, &[])?;
    let mut there = Vec::new();
    if let Some(id) = store.get_meta(FS_OBJECT, 64)? {
        there.push(format!(
            "filesystem {}",
            String::from_utf8_lossy(&id).trim()
        ));
    }
    let segments = store.segments().len();
    if segments > 0 {
        there.push(format!("{segments} segment object(s)"));
    }
    if let Some(l) = store.lease()? {
        there.push(format!("a lease held by {} since {}", l.holder, l.since));
    }
    if let Some(gen) = head_generation(&store)? {
        there.push(format!("a metadata snapshot (generation {gen})"));
    }
    if !there.is_empty() {
        return Err(refused(
            format!(
                "{} is in use: it holds {}. Give mkfs another prefix, or take that filesystem \
                 over with `wring mount --from {}`",
                spec.url,
                there.join(", "),
                spec.url
            ),
            libc::EEXIST,
        ));
    }
    const PROBE: &str = "mkfs-probe";
    let written = store
        .put_meta(
            PROBE,
            b"wring mkfs: checking that the bucket takes writes\n".to_vec(),
        )
        .and_then(|()| store.delete_meta(PROBE))
        .and_then(|()| store.put_meta(FS_OBJECT, format!("{fs_id}\n").into_bytes()));
    written.map_err(|e| {
        refused(
            format!(
                "{} does not take writes and deletes with these credentials ({e}): allow them \
                 to put and delete objects under that prefix",
                spec.url
            ),
            libc::EACCES,
        )
    })?;
    Ok(store)
}

/// A mkfs that claimed the prefix failed afterwards: give the prefix back.
pub fn unclaim(store: &ObjStore) {
    if let Err(e) = store.delete_meta(FS_OBJECT) {
        log::warn!("giving the prefix back after a failed mkfs: {e}");
    }
}

/// Refuse a prefix that holds another filesystem than `fs_id` (a URL or endpoint that
/// points elsewhere than the store's bucket).
fn check_id(store: &ObjStore, spec: &ObjectsSpec, fs_id: &str) -> Result<(), FsError> {
    let Some(id) = store.get_meta(FS_OBJECT, 64)? else {
        return Err(refused(
            format!(
                "{} holds no wring filesystem (no meta/{FS_OBJECT} object): the store's URL \
                 or endpoint points elsewhere than where mkfs put it",
                spec.url
            ),
            libc::ENOENT,
        ));
    };
    let id = String::from_utf8_lossy(&id).trim().to_string();
    if id != fs_id {
        return Err(refused(
            format!(
                "{} holds filesystem {id}, not this store's ({fs_id}): the store's URL or \
                 endpoint points at another filesystem",
                spec.url
            ),
            libc::EINVAL,
        ));
    }
    Ok(())
}

/// The generation of the newest snapshot this copy made or fetched (0: none).
fn local_generation(db: &Database) -> Result<u64, FsError> {
    let txn = db.begin_read()?;
    let meta = txn.open_table(META)?;
    Ok(meta.get(SNAP_GEN)?.map_or(0, |v| v.value()))
}

/// Open a writing store's object store: the live extents, the lease (broken first when
/// `access` says so), and a check that the bucket holds no newer metadata than `db` (another
/// machine mounted the filesystem since this copy was made: writing from here would lose its
/// changes, and this copy's compactor would delete its segments).
pub fn open_writer(
    db: &Database,
    spec: &ObjectsSpec,
    ids: &Ids,
    access: &Access,
) -> Result<Backend, FsError> {
    let store = open_store(spec, access, &external_ranges(db)?)?;
    check_id(&store, spec, &ids.fs_id)?;
    let holder = holder(&ids.copy_id);
    take_lease(&store, &holder, &ids.copy_id, access)?;
    if let Err(e) = check_fresh(db, &store, spec) {
        if let Err(r) = store.release_lease(&holder) {
            log::warn!("releasing the lease after a refused mount: {r}");
        }
        return Err(e);
    }
    Ok(Backend::Objects(Objects::new(
        store,
        spec.clone(),
        Some(holder),
    )))
}

/// Refuse a copy of the metadata older than the bucket's newest snapshot.
fn check_fresh(db: &Database, store: &ObjStore, spec: &ObjectsSpec) -> Result<(), FsError> {
    let local = local_generation(db)?;
    match head_generation(store)? {
        Some(head) if head > local => Err(refused(
            format!(
                "{} holds metadata generation {head}, newer than this directory's ({local}): \
                 the filesystem was mounted elsewhere since this copy was made. Mount the \
                 newest one with `wring mount --from {} NEWDIR MOUNTPOINT`",
                spec.url, spec.url
            ),
            libc::ESTALE,
        )),
        _ => Ok(()),
    }
}

/// Before a writing store in a bucket closes its database: the next generation, made durable
/// in a final commit (which uploads every segment first). None, with the error logged, when
/// that fails: the lease then stays held, and no snapshot is written.
pub(super) fn prepare(store: &Store) -> Option<u64> {
    let bump = || -> Result<u64, FsError> {
        let txn = store.write()?;
        let gen = {
            let mut meta = txn.open_table(META)?;
            let gen = meta.get(SNAP_GEN)?.map_or(0, |v| v.value()) + 1;
            meta.insert(SNAP_GEN, gen)?;
            gen
        };
        store.commit(txn, true)?;
        Ok(gen)
    };
    match bump() {
        Ok(gen) => Some(gen),
        Err(e) => {
            log::error!(
                "{}: the final commit failed ({e}); what was not made durable before is lost, \
                 the bucket's lease stays held and no metadata snapshot is written: mount this \
                 directory again with --break-lease to go on from its last durable commit",
                store.dir.display()
            );
            None
        }
    }
}

/// After the database is closed: upload it as snapshot `gen`, point `head` at it, delete the
/// snapshot before it (its segments may be compacted away since), release the lease. On an
/// error the lease stays held (logged): a later mount of this directory (with
/// --break-lease) retries, and nobody takes over an older snapshot meanwhile.
pub(super) fn close(store: &Store, gen: u64) {
    let Some(o) = store.data.objects() else {
        return;
    };
    let Some(holder) = o.holder() else {
        return;
    };
    let path = store.dir.join(DB_FILE);
    let upload = || -> Result<(), FsError> {
        let bytes = std::fs::read(&path).map_err(io(format!("reading {}", path.display())))?;
        let len = bytes.len();
        o.store().put_meta(&snapshot_name(gen), bytes)?;
        o.store().put_meta(HEAD, gen.to_string().into_bytes())?;
        log::info!(
            "{}: metadata snapshot {gen} ({len} bytes) uploaded",
            o.spec().url
        );
        if let Some(old) = gen.checked_sub(1).filter(|&g| g > 0) {
            if let Err(e) = o.store().delete_meta(&snapshot_name(old)) {
                log::warn!("{}: deleting the old snapshot {old}: {e}", o.spec().url);
            }
        }
        Ok(())
    };
    if let Err(e) = upload() {
        log::error!(
            "{}: uploading the metadata snapshot failed ({e}); the lease stays held: mount {} \
             again with --break-lease to retry",
            o.spec().url,
            store.dir.display()
        );
        return;
    }
    if let Err(e) = o.store().release_lease(holder) {
        log::error!("{}: releasing the lease: {e}", o.spec().url);
    }
}

impl Store {
    /// `wring mount --from`: take the bucket's lease (as the holder [`Store::open_with`] on
    /// `dir` will be) and write the newest metadata snapshot from the bucket into `dir`
    /// (created [`DIR_MODE`]; it must not hold a store). Refused when the bucket holds no
    /// snapshot, or another holder has the lease (unless `access.break_lease`). The URL, the
    /// endpoint and the credentials file given here are recorded in the copy (the bucket may
    /// have moved; the other machine's credentials file is not this one's).
    pub fn fetch(
        url: &str,
        endpoint: Option<&str>,
        access: &Access,
        dir: &Path,
    ) -> Result<(), FsError> {
        let db_file = dir.join(DB_FILE);
        if db_file.exists() {
            return Err(refused(
                format!(
                    "{} holds a store already; fetch into a new directory",
                    dir.display()
                ),
                libc::EEXIST,
            ));
        }
        let spec = ObjectsSpec {
            url: url.to_string(),
            endpoint: endpoint.map(str::to_string),
            segment_bytes: None,
            credentials: None,
        }
        .recording(access);
        let store = open_store(&spec, access, &[])?;
        let Some(gen) = head_generation(&store)? else {
            return Err(refused(
                format!(
                    "{url} holds no metadata snapshot: its filesystem was never unmounted \
                     cleanly (mount the directory that made it), or none was made there"
                ),
                libc::ENOENT,
            ));
        };
        let fs_id = match store.get_meta(FS_OBJECT, 64)? {
            Some(id) => String::from_utf8_lossy(&id).trim().to_string(),
            None => String::new(),
        };
        let copy_id = new_id();
        let holder = fetch_holder(&copy_id);
        take_lease(&store, &holder, &copy_id, access)?;
        let ids = Ids { fs_id, copy_id };
        let r = write_copy(&store, gen, &spec, &ids, dir);
        if r.is_err() {
            let _ = std::fs::remove_file(&db_file);
            let _ = std::fs::remove_file(dir.join(PARTIAL));
            if let Err(e) = store.release_lease(&holder) {
                log::warn!("releasing the lease after a failed fetch: {e}");
            }
        }
        r
    }
}

/// The snapshot while it is being written.
const PARTIAL: &str = "wring.redb.fetching";

/// Write snapshot `gen` into `dir` and make it this directory's copy: its `copy_id`, and
/// the URL and endpoint it came from.
fn write_copy(
    store: &ObjStore,
    gen: u64,
    spec: &ObjectsSpec,
    ids: &Ids,
    dir: &Path,
) -> Result<(), FsError> {
    let name = snapshot_name(gen);
    let Some(bytes) = store.get_meta(&name, MAX_SNAPSHOT)? else {
        return Err(refused(
            format!(
                "{}: {HEAD} names generation {gen}, but its snapshot {name} is missing",
                spec.url
            ),
            libc::ENOENT,
        ));
    };
    make_dir(dir)?;
    set_mode(dir, DIR_MODE)?;
    let partial = dir.join(PARTIAL);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&partial)
        .map_err(io(format!("creating {}", partial.display())))?;
    f.write_all(&bytes)
        .and_then(|()| f.sync_all())
        .map_err(io(format!("writing {}", partial.display())))?;
    drop(f);
    let db_file = dir.join(DB_FILE);
    std::fs::rename(&partial, &db_file)
        .map_err(io(format!("renaming to {}", db_file.display())))?;
    make_copy(&db_file, gen, spec, ids)
}

/// Record in the fetched database that it is this directory's copy (`ids.copy_id`), after
/// checking it is a snapshot of the filesystem the prefix holds (`ids.fs_id`).
fn make_copy(db_file: &Path, gen: u64, spec: &ObjectsSpec, ids: &Ids) -> Result<(), FsError> {
    let db = Database::open(db_file)?;
    let (data, theirs) = objects::read_config(&db)?;
    if data == DataSpec::Local {
        return Err(refused(
            format!(
                "{}: the snapshot is of a store whose extents are not in a bucket",
                spec.url
            ),
            libc::EINVAL,
        ));
    }
    if theirs.fs_id != ids.fs_id {
        return Err(refused(
            format!(
                "{}: the snapshot is of filesystem {}, but the prefix holds filesystem {}",
                spec.url, theirs.fs_id, ids.fs_id
            ),
            libc::EINVAL,
        ));
    }
    let copy_id = ids.copy_id.as_str();
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut config = txn.open_table(CONFIG)?;
        config.insert("copy_id", copy_id)?;
        config.insert("url", spec.url.as_str())?;
        match &spec.endpoint {
            Some(e) => {
                config.insert("endpoint", e.as_str())?;
            }
            None => {
                config.remove("endpoint")?;
            }
        }
        // The other machine's credentials file is not this one's.
        match spec.credentials.as_ref().and_then(|c| c.to_str()) {
            Some(c) => {
                config.insert("credentials", c)?;
            }
            None => {
                config.remove("credentials")?;
            }
        }
        txn.open_table(META)?.insert(SNAP_GEN, gen)?;
    }
    txn.commit()?;
    Ok(())
}
