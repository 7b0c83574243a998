//! The filesystem with its extents in a real SeaweedFS (`weed server -s3`, see
//! wring_testing::seaweed), through real mounts: cp -a and diff -r across a remount, the
//! random-ops test against a reference directory, kill -9 of the daemon mid-write (every
//! fsync'ed byte back after a remount that breaks the dead daemon's lease), SeaweedFS killed
//! and restarted under load, a bucket that refuses writes, handover between two store
//! directories standing for two machines, and compaction while writing. Every test ends with
//! `stop_and_check` (no weed process, directory or socket left); mounts and daemons are
//! unmounted and killed by Drop guards whatever happens.
mod common;
use common::ledger::Ledger;
use common::lockstep::{self, read_all};
use common::*;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wring_fs::store::{Access, DataSpec, ObjectsSpec, Store};
use wring_testing::seaweed::{Seaweed, BUCKET};
use wring_testing::{require, Need};

/// A SeaweedFS for one test and a credentials file for it (0600, in the harness's directory,
/// so it goes with it).
struct S3 {
    sw: Seaweed,
    creds: PathBuf,
}

fn seaweed(test: &str) -> Option<S3> {
    seaweed_with(test, Seaweed::server)
}

/// [`seaweed`] with SeaweedFS started by `start` (one server, or a cluster).
fn seaweed_with(test: &str, start: fn() -> std::io::Result<Seaweed>) -> Option<S3> {
    if !require(test, &[Need::Root, Need::Seaweed]) {
        return None;
    }
    let sw = start().unwrap_or_else(|e| panic!("starting SeaweedFS: {e}"));
    let creds = sw.dir().join("credentials");
    write_creds(&creds, &sw.access_key, &sw.secret_key);
    Some(S3 { sw, creds })
}

fn write_creds(path: &Path, key: &str, secret: &str) {
    let text = format!("[default]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

impl S3 {
    fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    fn access(&self, break_lease: bool) -> Access {
        Access {
            credentials: Some(self.creds.clone()),
            break_lease,
        }
    }

    /// mkfs --data s3://BUCKET/PREFIX, retrying while the new server settles (its S3 gateway
    /// learns of the bucket a moment after weed shell made it).
    fn mkfs(&self, dir: &Path, prefix: &str, segment_bytes: Option<u64>) {
        let spec = DataSpec::Objects(ObjectsSpec {
            url: self.url(prefix),
            endpoint: Some(self.sw.endpoint.clone()),
            segment_bytes,
            credentials: None,
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match Store::mkfs_with(dir, &spec, &self.access(false)) {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("mkfs: {e}; retrying");
                    let _ = fs::remove_dir_all(dir);
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("mkfs --data {} in {}: {e}", self.url(prefix), dir.display()),
            }
        }
    }

    /// `wring mount --from URL`'s first half: the lease and the newest snapshot into `dir`.
    fn fetch(&self, prefix: &str, dir: &Path, break_lease: bool) -> Result<(), String> {
        Store::fetch(
            &self.url(prefix),
            Some(&self.sw.endpoint),
            &self.access(break_lease),
            dir,
        )
        .map_err(|e| e.to_string())
    }

    fn fsck_clean(&self, dir: &Path, what: &str) {
        let r = wring_fs::fsck::fsck_with(dir, &self.access(false))
            .unwrap_or_else(|e| panic!("{what}: fsck: {e}"));
        assert!(r.problems.is_empty(), "{what}: {:?}", r.problems);
        assert!(
            r.notes.iter().any(|n| n.contains("segment object")),
            "{what}: fsck did not check the bucket: {:?}",
            r.notes
        );
    }
}

/// One machine: a store directory, a mount point, the daemon (common's [`Mount`], unmounted
/// and killed on drop), and how the daemon finds the bucket's credentials.
struct Node {
    m: Mount,
    /// Named on the daemon's command line; None: the daemon finds the file mkfs recorded.
    creds: Option<PathBuf>,
}

impl std::ops::Deref for Node {
    type Target = Mount;

    fn deref(&self) -> &Mount {
        &self.m
    }
}

impl std::ops::DerefMut for Node {
    fn deref_mut(&mut self) -> &mut Mount {
        &mut self.m
    }
}

impl Node {
    fn new(name: &str, s3: &S3) -> Node {
        Node {
            m: Mount::unmade(&format!("s3-{name}")),
            creds: Some(s3.creds.clone()),
        }
    }

    /// Start the daemon (the credentials file named on its command line, as `wring mount`
    /// passes it on); Err(its error output) when the mount does not get ready.
    fn try_start(&mut self, opts: &str, break_lease: bool) -> Result<(), String> {
        let mut pre: Vec<std::ffi::OsString> = Vec::new();
        if let Some(c) = &self.creds {
            pre.extend(["--credentials".into(), c.into()]);
        }
        if break_lease {
            pre.push("--break-lease".into());
        }
        self.m.try_start_with(&pre, opts)
    }

    fn start(&mut self, opts: &str, break_lease: bool) {
        if let Err(e) = self.try_start(opts, break_lease) {
            panic!("mounting {}: {e}", self.store.display());
        }
    }

    fn status(&self) -> String {
        wring_fs::daemon::status(&self.mnt).expect("wring status")
    }

    /// Wait (up to a minute) until nothing waits for upload and no upload error is left.
    fn status_settles(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.status();
            let raw = self.objects_raw();
            if s.contains("objects last_error: none") && raw["pending_bytes"] == 0 {
                return;
            }
            assert!(Instant::now() < deadline, "uploads do not settle:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait (up to two minutes) until no dictionary training or rewrite pass runs or is due;
    /// the dictionaries' count.
    fn dicts_settle(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        while status_figure(&self.mnt, "dicts:", "busy=") != 0 {
            assert!(
                Instant::now() < deadline,
                "dictionaries stay busy:\n{}",
                self.status()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        status_figure(&self.mnt, "dicts:", "count=")
    }

    /// Wait (up to two minutes) until dead bytes are at most `percent` of the bucket.
    fn dead_settles(&self, percent: u64) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let raw = self.objects_raw();
            if raw["dead_bytes"] * 100 <= raw["bucket_bytes"] * percent {
                return;
            }
            let s = self.status();
            assert!(
                Instant::now() < deadline,
                "dead bytes stay above {percent}% of the bucket: {raw:?}\n{s}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The `objects raw:` counters of `wring status`.
    fn objects_raw(&self) -> HashMap<String, u64> {
        let s = self.status();
        let line = s
            .lines()
            .find_map(|l| l.strip_prefix("objects raw:"))
            .unwrap_or_else(|| panic!("no 'objects raw:' line in wring status:\n{s}"));
        line.split_whitespace()
            .filter_map(|w| {
                let (k, v) = w.split_once('=')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect()
    }
}

fn run(c: &str) {
    let o = sh(c);
    assert!(
        o.status.success(),
        "{c}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A corpus slice in `src`: the first `each` bytes of every corpus file, a doc tree, a
/// symlink, a hard link and a sparse file.
fn slice(src: &Path, each: usize) {
    fs::create_dir_all(src).unwrap();
    let prep = format!(
        "set -e; cd {s}; for f in {c}/*; do [ -f \"$f\" ] && head -c {each} \"$f\" > \"$(basename \"$f\")\" || true; done; \
         mkdir -p sub/deep; cp -a /usr/share/doc/bash sub/deep/ 2>/dev/null || true; ln -s sparse sub/link; \
         ln sub/link sub/hard 2>/dev/null || true; truncate -s 5M sub/sparse; \
         printf x | dd of=sub/sparse bs=1 seek=3000000 conv=notrunc 2>/dev/null",
        s = src.display(),
        c = corpus().display()
    );
    run(&prep);
}

#[test]
fn cp_diff_remount_fsck_status_and_stat() {
    let Some(s3) = seaweed("cp_diff_remount_fsck_status_and_stat") else {
        return;
    };
    let mut a = Node::new("cp", &s3);
    s3.mkfs(&a.store, "cp", Some(1 << 20));
    a.start("compress=zstd:3", false);
    let src = a.base.join("src");
    slice(&src, 2 << 20);
    let mnt = a.mnt.display().to_string();
    run(&format!("cp -a {} {mnt}/cp", src.display()));
    run(&format!("diff -r {} {mnt}/cp", src.display()));
    a.sync();
    let raw = a.objects_raw();
    assert!(raw["bucket_bytes"] > 0, "{raw:?}");
    let status = a.status();
    assert!(status.contains("objects: bucket="), "{status}");
    assert!(status.contains("objects last_error: none"), "{status}");
    let stat = String::from_utf8_lossy(
        &wring_fs::daemon::get_xattr(&a.p("cp"), wring_fs::STAT_XATTR).unwrap(),
    )
    .into_owned();
    assert!(stat.contains("\nBucket "), "{stat}");
    let raw = stat
        .lines()
        .find_map(|l| l.strip_prefix("raw bucket: "))
        .unwrap_or_else(|| panic!("no raw bucket line: {stat}"));
    for field in ["files=", "bucket=", "dead=", "cache=", "uploads_in_flight="] {
        assert!(raw.contains(field), "{field} in {raw}");
    }
    assert!(!raw.contains(" bucket=0 "), "{raw}");
    a.stop();
    s3.fsck_clean(&a.store, "after cp -a");
    // The prefix is this filesystem's: a second mkfs there is refused, naming it, and a copy
    // of the store pointed at another prefix is refused at mount.
    let spec = DataSpec::Objects(ObjectsSpec {
        url: s3.url("cp"),
        endpoint: Some(s3.sw.endpoint.clone()),
        segment_bytes: None,
        credentials: None,
    });
    let e = Store::mkfs_with(&a.base.join("again"), &spec, &s3.access(false)).unwrap_err();
    assert!(
        e.to_string().contains("is in use: it holds filesystem "),
        "{e}"
    );
    let mut elsewhere = Node::new("cp-elsewhere", &s3);
    run(&format!(
        "cp -a {} {}",
        a.store.display(),
        elsewhere.store.display()
    ));
    point_at(&elsewhere.store, &s3.url("nothing-here"));
    let e = elsewhere.try_start("", false).unwrap_err();
    assert!(e.contains("holds no wring filesystem"), "{e}");
    drop(elsewhere);
    // The metadata says where each extent is: the bucket is only read, through a cold cache.
    // No --credentials and no AWS_* this time: the daemon uses the file mkfs recorded.
    a.creds = None;
    a.start("compress=zstd:3", false);
    run(&format!("diff -r {} {mnt}/cp", src.display()));
    let raw = a.objects_raw();
    assert!(
        raw["get_bytes"] > 0,
        "the remount read nothing from the bucket: {raw:?}"
    );
    run(&format!("rm -r {mnt}/cp"));
    a.stop();
    s3.fsck_clean(&a.store, "after rm -r");
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// Change the bucket URL recorded in a store (as if the prefix were mistyped).
fn point_at(store: &Path, url: &str) {
    let db = redb::Database::open(store.join("wring.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    txn.open_table(wring_fs::store::objects::CONFIG)
        .unwrap()
        .insert("url", url)
        .unwrap();
    txn.commit().unwrap();
}

#[test]
fn random_ops_against_a_reference_directory() {
    let Some(s3) = seaweed("random_ops_against_a_reference_directory") else {
        return;
    };
    let mut a = Node::new("ops", &s3);
    s3.mkfs(&a.store, "ops", Some(256 << 10));
    a.start("compress-force=zstd:1,max_extent=64K", false);
    let reference = a.base.join("ref");
    lockstep::run(&a.mnt, &reference, 2, 100, 0x5eed_0018);
    a.stop();
    s3.fsck_clean(&a.store, "after the random operations");
    a.start("compress=lzo", false);
    for t in 0..2 {
        lockstep::compare(&a.mnt, &reference, t, "remount");
    }
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

#[test]
fn kill_9_mid_write_then_break_the_lease() {
    let Some(s3) = seaweed("kill_9_mid_write_then_break_the_lease") else {
        return;
    };
    let mut a = Node::new("kill9", &s3);
    s3.mkfs(&a.store, "kill9", Some(256 << 10));
    let ledger = Ledger::new(128);
    let mut rng = Rng(18);
    let mut generation = 0u64;
    let opts = "compress-force=zstd:1,max_extent=64K";
    for cycle in 0..6 {
        if cycle > 0 {
            // The killed daemon still holds the lease: a plain mount is refused, naming it.
            let e = a.try_start(opts, false).unwrap_err();
            assert!(e.contains("held by"), "cycle {cycle}: {e}");
        }
        a.start(opts, cycle > 0);
        ledger.check(&a.p("data"), &format!("cycle {cycle}"));
        let stop = Arc::new(AtomicBool::new(false));
        let w = ledger.writer(a.p("data"), generation, rng.next(), stop.clone(), None);
        std::thread::sleep(Duration::from_millis(300 + rng.below(900)));
        a.kill();
        stop.store(true, Ordering::Relaxed);
        generation = w.join().unwrap() + 1;
        s3.fsck_clean(&a.store, &format!("cycle {cycle}"));
    }
    assert!(ledger.acked_count() > 0, "no fsync ever returned");
    a.start(opts, true);
    ledger.check(&a.p("data"), "the end");
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// kill -9 while the compactor is at work (overwrites of fsync'ed blocks leave small and
/// half-dead segments every second): after each kill fsck finds every extent in its segment
/// (none points at a deleted object), every fsync'ed block reads back, and the orphans the
/// kills left are deleted by later passes.
#[test]
fn kill_9_while_compacting() {
    let Some(s3) = seaweed("kill_9_while_compacting") else {
        return;
    };
    let mut a = Node::new("kill9c", &s3);
    s3.mkfs(&a.store, "kill9c", Some(256 << 10));
    let ledger = Ledger::new(128);
    let mut rng = Rng(1818);
    let mut generation = 0u64;
    let opts = "compress-force=zstd:1,max_extent=16K,compact=1,compact_threshold=90";
    let mut moved = 0;
    for cycle in 0..6 {
        a.start(opts, cycle > 0);
        ledger.check(&a.p("data"), &format!("cycle {cycle}"));
        let stop = Arc::new(AtomicBool::new(false));
        let w = ledger.writer(a.p("data"), generation, rng.next(), stop.clone(), None);
        std::thread::sleep(Duration::from_millis(1500 + rng.below(2000)));
        moved += compaction(&a)["extents_moved"];
        a.kill();
        stop.store(true, Ordering::Relaxed);
        generation = w.join().unwrap() + 1;
        s3.fsck_clean(&a.store, &format!("cycle {cycle}"));
    }
    assert!(moved > 0, "the compactor moved nothing before the kills");
    a.start(opts, true);
    ledger.check(&a.p("data"), "the end");
    // The segments the kills left half done (copies never committed, old ones never deleted)
    // are dead: compaction reclaims them.
    a.dead_settles(15);
    a.stop();
    s3.fsck_clean(&a.store, "after the last remount");
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// The compactor's order, through the store without a mount: a read snapshot from before a
/// pass keeps the segments it emptied (and reads them) until it ends; once they are deleted,
/// the database file as a crash would leave it (copied while the store is open: redb's
/// recovery keeps the durable commits only) points at objects in the bucket, each reading
/// back. Deterministic, unlike a kill -9's timing: a pass that deleted before its commit was
/// durable, or under an older snapshot, fails here.
#[test]
fn a_crash_after_a_compaction_pass_finds_every_extent() {
    use redb::{ReadableDatabase, ReadableTable};
    use wring_fs::store::records::{checksum, external_item_of, stored};
    use wring_fs::store::records::{Encoding, ExtentHeader, Stored};
    use wring_fs::store::EXTENTS;
    let Some(s3) = seaweed("a_crash_after_a_compaction_pass_finds_every_extent") else {
        return;
    };
    let base = PathBuf::from(format!("/tmp/wring-s3-test-order-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    let dir = base.join("store");
    s3.mkfs(&dir, "order", Some(64 << 10));
    let store = Store::open_with(&dir, &s3.access(false)).expect("open");
    let mut rng = Rng(5);
    let extents: Vec<Vec<u8>> = (0..200)
        .map(|_| {
            let n = 3000 + rng.below(6000) as usize;
            text(&mut rng, n)
        })
        .collect();
    let txn = store.write().unwrap();
    {
        let mut t = txn.open_table(EXTENTS).unwrap();
        for (i, e) in extents.iter().enumerate() {
            let at = txn.put_stored(e).unwrap();
            let h = ExtentHeader {
                encoding: Encoding::Raw,
                ram_len: e.len() as u32,
                crc: checksum(e),
                seq: i as u64,
                dict: 0,
            };
            let item = external_item_of(&h, e.len(), at);
            t.insert((1, i as u64), item.as_slice()).unwrap();
        }
    }
    store.commit(txn, true).unwrap();
    // Every other extent goes: every segment is about half dead.
    let txn = store.write().unwrap();
    {
        let mut t = txn.open_table(EXTENTS).unwrap();
        for i in (0..200).step_by(2) {
            let old = t.remove((1, i)).unwrap().unwrap();
            txn.free_stored(stored(old.value()).unwrap());
        }
    }
    store.commit(txn, true).unwrap();
    let before: Vec<u32> = store
        .objects()
        .unwrap()
        .segments()
        .iter()
        .map(|s| s.segment)
        .collect();
    // A read snapshot from before the pass keeps the emptied segments: its items name them.
    let snap = store.read().unwrap();
    let r = store.compact(90).expect("a compaction pass");
    assert!(r.moved > 0 && r.deleted == 0 && r.waiting > 0, "{r:?}");
    for r in snap.open_table(EXTENTS).unwrap().iter().unwrap() {
        let (k, v) = r.unwrap();
        let Ok(Stored::External(at, len)) = stored(v.value()) else {
            panic!("item {:?} is not external", k.value());
        };
        let mut buf = vec![0; len as usize];
        store.read_stored(&mut buf, at).unwrap();
        assert!(
            buf == extents[k.value().1 as usize],
            "{:?} in the snapshot",
            k.value()
        );
    }
    drop(snap);
    let r = store.compact(90).expect("the next pass");
    assert!(r.deleted > 0 && r.waiting == 0, "{r:?}");
    // A crash now.
    let crashed = base.join("crashed.redb");
    fs::copy(dir.join("wring.redb"), &crashed).unwrap();
    let db = redb::Database::open(&crashed).unwrap();
    let rtxn = db.begin_read().unwrap();
    let objects = store.objects().unwrap();
    let now: Vec<u32> = objects.segments().iter().map(|s| s.segment).collect();
    assert!(
        before.iter().any(|s| !now.contains(s)),
        "no segment was deleted"
    );
    let mut n = 0;
    for r in rtxn.open_table(EXTENTS).unwrap().iter().unwrap() {
        let (k, v) = r.unwrap();
        let Ok(Stored::External(at, len)) = stored(v.value()) else {
            panic!("item {:?} is not external", k.value());
        };
        let addr = wring_objstore::Addr::from_raw(at);
        assert!(
            now.contains(&addr.segment()),
            "{:?} names deleted segment {}",
            k.value(),
            addr.segment()
        );
        let mut buf = vec![0; len as usize];
        objects
            .read(addr, &mut buf)
            .unwrap_or_else(|e| panic!("{:?}: {e}", k.value()));
        assert!(
            buf == extents[k.value().1 as usize],
            "{:?} reads back wrong",
            k.value()
        );
        n += 1;
    }
    assert_eq!(n, 100);
    drop((rtxn, db, store));
    let _ = fs::remove_dir_all(&base);
    s3.sw.stop_and_check().expect("clean stop");
}

#[test]
fn seaweedfs_killed_and_restarted_under_load() {
    let Some(mut s3) = seaweed("seaweedfs_killed_and_restarted_under_load") else {
        return;
    };
    let mut a = Node::new("restart", &s3);
    s3.mkfs(&a.store, "restart", Some(256 << 10));
    let opts = "compress-force=zstd:1,max_extent=64K";
    a.start(opts, false);
    let ledger = Ledger::new(128);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let w = ledger.writer(a.p("data"), 0, 7, stop.clone(), Some(errors.clone()));
    ledger.wait_acks(10, "before the kill");
    s3.sw.kill("server").expect("killing weed");
    let acked_before = ledger.acked.lock().unwrap().clone();
    std::thread::sleep(Duration::from_secs(3));
    // The mount is alive while the bucket is away: metadata answers, written data reads
    // (from the cache; the writer is still at it, so only the length is known), and status
    // says why the writer waits.
    assert!(fs::metadata(a.p("data")).is_ok(), "the mount died");
    assert!(read_all(&a.p("data")).is_some(), "the file does not read");
    let status = a.status();
    assert!(
        !status.contains("objects last_error: none"),
        "no upload error while SeaweedFS is down:\n{status}"
    );
    s3.sw.restart("server").expect("restarting weed");
    // Writes go on once it is back: more blocks are acknowledged than before the kill.
    ledger.wait_past(&acked_before, "after the restart");
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    eprintln!(
        "fsyncs that failed while SeaweedFS was down: {}",
        errors.load(Ordering::Relaxed)
    );
    // Everything queued went up: no error left, nothing pending.
    a.status_settles();
    a.stop();
    s3.fsck_clean(&a.store, "after the restart");
    a.start(opts, false);
    ledger.check(&a.p("data"), "after a remount");
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// The issue's cluster on one machine (one master, three volume servers, replication 001, a
/// filer and the S3 gateway): a volume server is killed while a writer of fsync'ed blocks and
/// a cp -a are at it. Writes go on (the other replicas take them), every fsync'ed block and
/// the copy read back after a remount, and fsck verifies every segment.
#[test]
fn a_volume_server_killed_mid_write_in_a_cluster() {
    let Some(mut s3) = seaweed_with(
        "a_volume_server_killed_mid_write_in_a_cluster",
        Seaweed::cluster,
    ) else {
        return;
    };
    let mut a = Node::new("cluster", &s3);
    s3.mkfs(&a.store, "cluster", Some(512 << 10));
    let opts = "compress=zstd:3,max_extent=64K";
    a.start(opts, false);
    let src = a.base.join("src");
    slice(&src, 1 << 20);
    let ledger = Ledger::new(128);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let w = ledger.writer(a.p("data"), 0, 11, stop.clone(), Some(errors.clone()));
    ledger.wait_acks(20, "before the kill");
    run(&format!("cp -a {} {}", src.display(), a.p("one").display()));
    // The volume server holding the most replicas of what is written so far goes.
    let held = |v: usize| -> u64 {
        let dir = s3.sw.dir().join(format!("volume{v}"));
        let o = sh(&format!("cat {}/*.dat 2>/dev/null | wc -c", dir.display()));
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    // The writer goes on meanwhile: give the replicas time to hold more than a MiB (what the
    // three servers get of a first MiB depends on how the master spreads its volumes).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while (0..3).map(held).max().unwrap_or(0) <= 1 << 20 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let victim = (0..3).max_by_key(|&v| held(v)).unwrap_or(0);
    let bytes = held(victim);
    assert!(
        bytes > 1 << 20,
        "volume{victim} holds only {bytes} bytes before the kill"
    );
    eprintln!("killing volume{victim}, which holds {bytes} bytes of volumes");
    s3.sw
        .kill(&format!("volume{victim}"))
        .expect("killing a volume server");
    let acked = ledger.acked.lock().unwrap().clone();
    // Mid-write: the copy and the writer go on with a volume server gone.
    run(&format!("cp -a {} {}", src.display(), a.p("two").display()));
    run(&format!("sync -f {}", a.p("two").display()));
    ledger.wait_past(&acked, "after the kill");
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    eprintln!(
        "fsyncs that failed with volume{victim} down: {}",
        errors.load(Ordering::Relaxed)
    );
    for d in ["one", "two"] {
        run(&format!("diff -r {} {}", src.display(), a.p(d).display()));
    }
    a.stop();
    s3.fsck_clean(&a.store, "with a volume server down");
    // A cold remount reads everything from the two volume servers left.
    a.start(opts, false);
    ledger.check(&a.p("data"), "after a remount");
    for d in ["one", "two"] {
        run(&format!("diff -r {} {}", src.display(), a.p(d).display()));
    }
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// Rewrite the harness's S3 identity with `actions` and restart weed to load it.
fn set_actions(s3: &mut S3, actions: &str) {
    let config = format!(
        r#"{{"identities":[{{"name":"wring","credentials":[{{"accessKey":"{}","secretKey":"{}"}}],"actions":[{actions}]}}]}}"#,
        s3.sw.access_key, s3.sw.secret_key
    );
    fs::write(s3.sw.dir().join("s3.json"), config).unwrap();
    s3.sw.kill("server").unwrap();
    s3.sw.restart("server").unwrap();
}

/// The mount options of the refusal tests.
const REFUSED_OPTS: &str = "compress-force=zstd:1";

/// A mounted store in the bucket (prefix `name`) with 500 KB fsync'ed in `before`.
fn mounted_with_a_file(s3: &S3, name: &str) -> (Node, Vec<u8>) {
    let mut a = Node::new(name, s3);
    s3.mkfs(&a.store, name, Some(256 << 10));
    a.start(REFUSED_OPTS, false);
    let before = text(&mut Rng(1), 500_000);
    fs::write(a.p("before"), &before).unwrap();
    fs::File::open(a.p("before")).unwrap().sync_all().unwrap();
    (a, before)
}

/// Write `len` bytes to a new file `after` and fsync it while the bucket refuses writes:
/// ENOSPC within 20 s (never the minute's wait for a bucket that does not answer).
fn fsync_is_enospc(a: &Node, len: usize) {
    let data = text(&mut Rng(2), len);
    let f = fs::File::create(a.p("after")).unwrap();
    let t = Instant::now();
    let r = (&f).write_all(&data).and_then(|_| f.sync_all());
    let e = r.expect_err("fsync returned while the bucket refuses writes");
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

#[test]
fn a_bucket_that_refuses_writes() {
    let Some(mut s3) = seaweed("a_bucket_that_refuses_writes") else {
        return;
    };
    let (mut a, before) = mounted_with_a_file(&s3, "refuse");
    let opts = REFUSED_OPTS;
    // The identity may now only read: uploads are refused (403), and fsync says so at once
    // (the bucket has no room for the data), not after the wait for an unreachable bucket.
    set_actions(&mut s3, r#""Read","List""#);
    fsync_is_enospc(&a, 500_000);
    let data = text(&mut Rng(2), 500_000);
    // The mount survives and says why.
    assert_eq!(read_all(&a.p("before")).as_deref(), Some(&before[..]));
    let status = a.status();
    let last = status
        .lines()
        .find(|l| l.starts_with("objects last_error:"))
        .unwrap_or_default();
    assert!(!last.ends_with(": none"), "{status}");
    eprintln!("{last}");
    // A new filesystem cannot be made with it, and says so.
    let spec = DataSpec::Objects(ObjectsSpec {
        url: s3.url("refuse-mkfs"),
        endpoint: Some(s3.sw.endpoint.clone()),
        segment_bytes: None,
        credentials: None,
    });
    let dir = a.base.join("store2");
    let e = Store::mkfs_with(&dir, &spec, &s3.access(false))
        .expect_err("mkfs with credentials that may only read");
    let e = e.to_string();
    assert!(e.contains("does not take writes"), "{e}");
    assert!(
        !dir.join("wring.redb").exists(),
        "mkfs left a store behind: {e}"
    );
    eprintln!("mkfs with a read-only identity: {e}");
    // Writes allowed again: the queued data goes up and a later fsync succeeds.
    set_actions(&mut s3, r#""Admin","Read","Write","List","Tagging""#);
    fs::write(a.p("later"), &data).unwrap();
    fs::File::open(a.p("later")).unwrap().sync_all().unwrap();
    a.status_settles();
    a.stop();
    s3.fsck_clean(&a.store, "after writes were allowed again");
    a.start(opts, false);
    assert_eq!(read_all(&a.p("before")).as_deref(), Some(&before[..]));
    assert_eq!(read_all(&a.p("later")).as_deref(), Some(&data[..]));
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// A bucket over its quota: SeaweedFS's quota enforcement makes it read-only, and its S3
/// gateway then answers every upload with a plain 500 InternalError. A bucket that keeps
/// answering uploads with errors refuses writes: fsync is ENOSPC within seconds (never the
/// minute's wait for an unreachable bucket), `wring status` shows the bucket's answer, what
/// was fsync'ed stays, and once the bucket takes writes again the queued data goes up and
/// the next fsync succeeds, without a remount.
#[test]
fn a_bucket_over_quota() {
    let Some(s3) = seaweed("a_bucket_over_quota") else {
        return;
    };
    let (mut a, before) = mounted_with_a_file(&s3, "quota");
    let opts = REFUSED_OPTS;
    s3.sw.set_read_only(true).unwrap();
    fsync_is_enospc(&a, 700_000);
    let status = a.status();
    let last = status
        .lines()
        .find(|l| l.starts_with("objects last_error:"))
        .unwrap_or_default();
    assert!(last.contains("500"), "{status}");
    assert_eq!(read_all(&a.p("before")).as_deref(), Some(&before[..]));
    s3.sw.set_read_only(false).unwrap();
    let later = text(&mut Rng(3), 300_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        fs::write(a.p("later"), &later).unwrap();
        match fs::File::open(a.p("later")).unwrap().sync_all() {
            Ok(()) => break,
            // The gateway learns of the change a moment after weed shell made it.
            Err(e) if Instant::now() < deadline => eprintln!("not yet: {e}"),
            Err(e) => panic!("fsync after the bucket takes writes again: {e}"),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    a.stop();
    s3.fsck_clean(&a.store, "after the bucket took writes again");
    a.start(opts, false);
    assert_eq!(read_all(&a.p("before")).as_deref(), Some(&before[..]));
    assert_eq!(read_all(&a.p("later")).as_deref(), Some(&later[..]));
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

#[test]
fn handover_between_two_machines() {
    let Some(s3) = seaweed("handover_between_two_machines") else {
        return;
    };
    let (mut a, mut b) = (Node::new("hand-a", &s3), Node::new("hand-b", &s3));
    s3.mkfs(&a.store, "hand", Some(1 << 20));
    // Small files get trained dictionaries, which the snapshot carries to the other machine.
    let opts = "compress=zstd:3,dict_train=64K";
    a.start(opts, false);
    let src = a.base.join("src");
    slice(&src, 1 << 20);
    run(&format!(
        "mkdir -p {s}/h && cd {s}/h && for i in $(seq 1 300); do \
         (echo '/* SPDX-License-Identifier: GPL-2.0 */'; echo '#pragma once'; \
         for j in $(seq 1 $((20 + i % 40))); do echo \"#define H${{i}}_$j (1U << $((j % 31))) /* flag */\"; \
         done) > h$i.h; done",
        s = src.display()
    ));
    run(&format!("cp -a {} {}", src.display(), a.p("one").display()));
    assert!(a.dicts_settle() >= 1, "no dictionary:\n{}", a.status());
    a.stop();
    // Machine B takes over from the snapshot A's unmount left in the bucket.
    s3.fetch("hand", &b.store, false)
        .expect("mount --from on B");
    // The fetched copy is its owner's alone, as mkfs makes a store.
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&b.store), 0o700);
    assert_eq!(mode(&b.store.join("wring.redb")), 0o600);
    b.start(opts, false);
    run(&format!(
        "diff -r {} {}",
        src.display(),
        b.p("one").display()
    ));
    let stat = String::from_utf8_lossy(
        &wring_fs::daemon::get_xattr(&b.p("one"), wring_fs::STAT_XATTR).unwrap(),
    )
    .into_owned();
    assert!(
        stat.contains("\ndict "),
        "no extent uses a dictionary on B:\n{stat}"
    );
    run(&format!("cp -a {} {}", src.display(), b.p("two").display()));
    // While B holds the lease, A can neither mount its old copy nor fetch the new one.
    let e = a.try_start(opts, false).unwrap_err();
    assert!(e.contains("held by"), "{e}");
    let e = s3
        .fetch("hand", &a.base.join("store-again"), false)
        .unwrap_err();
    assert!(e.contains("held by"), "{e}");
    b.stop();
    // Back to A: what B wrote is there.
    let _ = fs::remove_dir_all(&a.store);
    s3.fetch("hand", &a.store, false)
        .expect("mount --from on A");
    a.start(opts, false);
    run(&format!(
        "diff -r {} {}",
        src.display(),
        a.p("one").display()
    ));
    run(&format!(
        "diff -r {} {}",
        src.display(),
        a.p("two").display()
    ));
    // A dies holding the lease: B breaks it explicitly and takes over from the last snapshot.
    a.kill();
    let _ = fs::remove_dir_all(&b.store);
    let e = s3.fetch("hand", &b.store, false).unwrap_err();
    assert!(e.contains("held by"), "{e}");
    let _ = fs::remove_dir_all(&b.store);
    s3.fetch("hand", &b.store, true)
        .expect("mount --from --break-lease");
    b.start(opts, false);
    run(&format!(
        "diff -r {} {}",
        src.display(),
        b.p("two").display()
    ));
    b.stop();
    s3.fsck_clean(&b.store, "on B at the end");
    drop((a, b));
    s3.sw.stop_and_check().expect("clean stop");
}

/// The counters of `wring status`'s `compaction:` line.
fn compaction(node: &Node) -> HashMap<String, u64> {
    let s = node.status();
    let line = s
        .lines()
        .find_map(|l| l.strip_prefix("compaction: "))
        .unwrap_or_else(|| panic!("no 'compaction:' line in wring status:\n{s}"));
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn compaction_while_writing() {
    let Some(s3) = seaweed("compaction_while_writing") else {
        return;
    };
    let mut a = Node::new("compact", &s3);
    s3.mkfs(&a.store, "compact", Some(256 << 10));
    a.start(
        "compress-force=zstd:1,max_extent=64K,compact=1,compact_threshold=90",
        false,
    );
    let size = 4 << 20;
    let mut rng = Rng(99);
    let mut want = text(&mut rng, size);
    fs::write(a.p("f"), &want).unwrap();
    fs::File::open(a.p("f")).unwrap().sync_all().unwrap();
    let mut f = OpenOptions::new().write(true).open(a.p("f")).unwrap();
    let mut written = 0u64;
    let started = Instant::now();
    // Overwrites until the compactor has made a few passes and deleted segments while they go
    // on (a few seconds), reading the file back now and then as the extents move under the
    // reads.
    for round in 0.. {
        for _ in 0..8 {
            let off = rng.below((size - 65536) as u64) as usize;
            let block = text(&mut rng, 65536);
            want[off..off + 65536].copy_from_slice(&block);
            f.seek(SeekFrom::Start(off as u64)).unwrap();
            f.write_all(&block).unwrap();
            written += 65536;
        }
        f.sync_all().unwrap();
        if round % 10 == 9 {
            assert!(
                read_all(&a.p("f")) == Some(want.clone()),
                "round {round}: the file differs"
            );
            let c = compaction(&a);
            eprintln!("round {round}: {c:?} {:?}", a.objects_raw());
            let done = c["passes"] >= 3 && c["segments_deleted"] > 0 && c["extents_moved"] > 0;
            if round >= 30 && done {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no segment was compacted while writing:\n{}",
            a.status()
        );
    }
    drop(f);
    // The compactor goes on until every segment is at least 90% live: what is dead then is
    // the rest under that, bounded by 10% of the bucket plus the segments still waiting.
    a.dead_settles(15);
    // Then it stops: nothing left to rewrite means no more rewriting.
    std::thread::sleep(Duration::from_secs(2));
    let before = compaction(&a);
    std::thread::sleep(Duration::from_secs(3));
    let after = compaction(&a);
    assert_eq!(
        before["segments_rewritten"], after["segments_rewritten"],
        "the compactor keeps rewriting with nothing written: {after:?}"
    );
    assert_eq!(after["errors"], 0, "{}", a.status());
    let raw = a.objects_raw();
    assert!(
        raw["bucket_bytes"] < written,
        "the bucket holds {} bytes after {written} bytes of overwrites",
        raw["bucket_bytes"]
    );
    assert!(
        read_all(&a.p("f")) == Some(want.clone()),
        "the file differs after compaction"
    );
    a.stop();
    s3.fsck_clean(&a.store, "after compaction");
    a.start("compress-force=zstd:1,max_extent=64K", false);
    assert!(
        read_all(&a.p("f")) == Some(want),
        "the file differs after a remount"
    );
    a.stop();
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

/// `curl --aws-sigv4` against the harness's S3 endpoint (the test's own throwaway keys).
fn s3_curl(s3: &S3, args: &str, key: &str) -> std::process::Output {
    sh(&format!(
        "curl -sS -f --aws-sigv4 aws:amz:us-east-1:s3 --user '{}:{}' {args} '{}/{BUCKET}/{key}'",
        s3.sw.access_key, s3.sw.secret_key, s3.sw.endpoint
    ))
}

#[test]
fn fsck_names_a_missing_and_a_corrupt_segment() {
    let Some(s3) = seaweed("fsck_names_a_missing_and_a_corrupt_segment") else {
        return;
    };
    let mut a = Node::new("fsck", &s3);
    s3.mkfs(&a.store, "fsck", Some(256 << 10));
    a.start("compress-force=zstd:1,max_extent=64K", false);
    let mut rng = Rng(3);
    for i in 0..4 {
        fs::write(a.p(&format!("f{i}")), text(&mut rng, 600_000)).unwrap();
    }
    a.stop();
    s3.fsck_clean(&a.store, "before the damage");
    // Segment 1 with one byte flipped in its data, segment 2 gone.
    let (one, two) = ("fsck/seg/0000000000000001", "fsck/seg/0000000000000002");
    let copy = a.base.join("seg1");
    let o = s3_curl(&s3, &format!("-o {}", copy.display()), one);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut bytes = fs::read(&copy).unwrap();
    bytes[100] ^= 0x40;
    fs::write(&copy, &bytes).unwrap();
    let o = s3_curl(&s3, &format!("-T {}", copy.display()), one);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = s3_curl(&s3, "-X DELETE", two);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = wring_fs::fsck::fsck_with(&a.store, &s3.access(false)).expect("fsck runs");
    let names = |object: &str, why: &str| {
        r.problems.iter().any(|p| {
            p.contains("(inode ") && p.contains("extent ") && p.contains(object) && p.contains(why)
        })
    };
    assert!(names(one, "corrupt"), "{:#?}", r.problems);
    assert!(names(two, "not in the bucket"), "{:#?}", r.problems);
    drop(a);
    s3.sw.stop_and_check().expect("clean stop");
}

#[test]
fn shared_extents_in_a_bucket_survive_compaction_and_a_remount() {
    use wring_fs::store::ROOT;
    use wring_fs::{CopyRange, NewInode, Options, Volume};
    let Some(s3) = seaweed("shared_extents_in_a_bucket_survive_compaction_and_a_remount") else {
        return;
    };
    let base = PathBuf::from(format!("/tmp/wring-s3-test-shared-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    let dir = base.join("store");
    s3.mkfs(&dir, "shared", Some(256 << 10));
    const E: u64 = 128 << 10;
    let data = text(&mut Rng(21), (24 * E) as usize);
    let open = || {
        Volume::open_with(
            &dir,
            Options::parse("compress=zstd:1").unwrap(),
            &s3.access(false),
        )
        .expect("open the volume")
    };
    let vol = open();
    let create = |name: &str| {
        vol.create(ROOT, name.as_bytes(), NewInode::file(0o644))
            .unwrap()
            .0
    };
    let (src, dst) = (create("src"), create("dst"));
    vol.write(src, 0, &data, None).unwrap();
    vol.fsync(src).unwrap();
    let req = CopyRange {
        ino_in: src,
        off_in: 0,
        ino_out: dst,
        off_out: 0,
        len: data.len() as u64,
    };
    assert_eq!(vol.copy_range(req, None).unwrap(), data.len() as u64);
    // Every other extent of both files written again: those extents' old bytes are dead, so
    // every segment is about half dead, and a pass moves the others, which both files name.
    let (mut src_data, mut dst_data) = (data.clone(), data.clone());
    for i in (0..24).step_by(2) {
        for (ino, seed, mine) in [(src, 100, &mut src_data), (dst, 200, &mut dst_data)] {
            let patch = text(&mut Rng(seed + i), E as usize);
            vol.write(ino, i * E, &patch, None).unwrap();
            mine[(i * E) as usize..][..E as usize].copy_from_slice(&patch);
        }
    }
    vol.fsync(dst).unwrap();
    vol.fsync(src).unwrap();
    vol.sync().unwrap();
    drop(vol);
    let store = Store::open_with(&dir, &s3.access(false)).expect("open the store");
    let r = store.compact(90).expect("a compaction pass");
    // Each shared extent is copied once for its two items.
    assert!(r.moved > 0 && r.raced == 0, "{r:?}");
    drop(store);
    s3.fsck_clean(&dir, "after compaction");
    let read = |vol: &Volume, ino: u64| vol.read(ino, 0, data.len() as u32).unwrap();
    let vol = open();
    assert!(read(&vol, src) == src_data, "the source after compaction");
    assert!(read(&vol, dst) == dst_data, "the copy after compaction");
    vol.remove(ROOT, b"src", false).unwrap();
    vol.sync().unwrap();
    assert!(read(&vol, dst) == dst_data, "the copy with the source gone");
    drop(vol);
    s3.fsck_clean(&dir, "with the source gone");
    let _ = fs::remove_dir_all(&base);
    s3.sw.stop_and_check().expect("clean stop");
}

#[test]
fn copies_racing_the_compactor_keep_every_reference() {
    use std::sync::Arc;
    use wring_fs::store::ROOT;
    use wring_fs::{CopyRange, NewInode, Options, Volume};
    let Some(s3) = seaweed("copies_racing_the_compactor_keep_every_reference") else {
        return;
    };
    let base = PathBuf::from(format!("/tmp/wring-s3-test-racing-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    let dir = base.join("store");
    s3.mkfs(&dir, "racing", Some(256 << 10));
    const E: u64 = 128 << 10;
    let opts = Options::parse("compress=zstd:1,compact=1,compact_threshold=90").unwrap();
    let vol = Arc::new(Volume::open_with(&dir, opts, &s3.access(false)).expect("open"));
    vol.start_compactor().expect("the compactor");
    let create = |name: &str| {
        vol.create(ROOT, name.as_bytes(), NewInode::file(0o644))
            .unwrap()
            .0
    };
    let src = create("src");
    let mut rng = Rng(51);
    let mut model = text(&mut rng, (16 * E) as usize);
    vol.write(src, 0, &model, None).unwrap();
    let mut copies: Vec<(u64, Vec<u8>)> = Vec::new();
    let t = Instant::now();
    let mut round = 0;
    // For 6 s (six compactor passes): overwrite extents of the source (their old bytes die,
    // so segments fall under the threshold), copy it whole, drop old copies.
    while t.elapsed() < Duration::from_secs(6) {
        round += 1;
        for _ in 0..4 {
            let i = rng.below(16);
            let patch = text(&mut rng, E as usize);
            vol.write(src, i * E, &patch, None).unwrap();
            model[(i * E) as usize..][..E as usize].copy_from_slice(&patch);
        }
        let c = create(&format!("c{round}"));
        let req = CopyRange {
            ino_in: src,
            off_in: 0,
            ino_out: c,
            off_out: 0,
            len: model.len() as u64,
        };
        assert_eq!(vol.copy_range(req, None).unwrap(), model.len() as u64);
        copies.push((c, model.clone()));
        if copies.len() > 4 {
            copies.remove(0);
            vol.remove(ROOT, format!("c{}", round - 4).as_bytes(), false)
                .unwrap();
        }
        vol.sync().unwrap();
    }
    for (c, want) in &copies {
        assert!(
            vol.read(*c, 0, want.len() as u32).unwrap() == *want,
            "copy {c}"
        );
    }
    assert!(vol.read(src, 0, model.len() as u32).unwrap() == model);
    vol.sync().unwrap();
    // The compactor's thread holds the volume through a pass it is in: the store closes when
    // that pass ends and the thread lets go of the last reference.
    let weak = Arc::downgrade(&vol);
    drop(vol);
    let deadline = Instant::now() + Duration::from_secs(60);
    while weak.strong_count() > 0 || wring_fs::fsck::fsck_with(&dir, &s3.access(false)).is_err() {
        assert!(Instant::now() < deadline, "the store was not let go of");
        std::thread::sleep(Duration::from_millis(50));
    }
    s3.fsck_clean(&dir, "after copies racing the compactor");
    let _ = fs::remove_dir_all(&base);
    s3.sw.stop_and_check().expect("clean stop");
}
