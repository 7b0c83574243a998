//! The segment store against a real SeaweedFS (`weed server -s3`, see
//! wring_testing::seaweed): round trips across segments, ranged reads through the cache and
//! its limit, read-ahead, durability of sync, the lease, credentials files, compaction's
//! order, corrupt objects, and the server stopped and restarted under writes.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{check_all, config, extents, open, write_all};
use object_store::ObjectStore;
use wring_objstore::{Addr, Credentials, Error, ObjStore};
use wring_testing::seaweed::{Seaweed, BUCKET};
use wring_testing::{require, Need};

fn seaweed(test: &str) -> Option<Seaweed> {
    if !require(test, &[Need::Seaweed]) {
        return None;
    }
    Some(Seaweed::server().unwrap_or_else(|e| panic!("starting SeaweedFS: {e}")))
}

#[test]
fn round_trip_across_segments_and_a_new_instance() {
    let Some(sw) = seaweed("round_trip_across_segments_and_a_new_instance") else {
        return;
    };
    let mut cfg = config(&sw, "rt");
    cfg.index_cache = 4;
    let ext = extents(1, 400, 9000);
    let store = open(&cfg, &[]);
    let addrs = write_all(&store, &ext);
    // Before sync: served from the open segment and the upload queue.
    check_all(&store, &ext, &addrs);
    store.sync().expect("sync");
    let st = store.stats();
    assert_eq!(st.pending_bytes, 0, "{st:?}");
    assert!(st.bucket_segments > 20, "{st:?}");
    // Whole objects, index and trailer included, stay within the segment size.
    for s in store.segments() {
        assert!(s.object_len <= u64::from(cfg.segment_bytes), "{s:?}");
    }
    let total: u64 = addrs.iter().map(|a| a.1).sum();
    assert_eq!(st.live_bytes, total);
    drop(store);
    // A new instance (empty cache) reads what was synced.
    let again = open(&cfg, &addrs);
    assert_eq!(again.stats().live_bytes, total);
    check_all(&again, &ext, &addrs);
    // Reading every segment kept no more indexes than the limit.
    let st = again.stats();
    assert!(st.indexes_cached <= 4, "{} indexes held", st.indexes_cached);
    // New segments are numbered after the old ones: nothing is overwritten.
    let a = again.append(b"after").expect("append");
    assert!(a.segment() > addrs.iter().map(|x| x.0.segment()).max().unwrap_or(0));
    again.sync().expect("sync");
    drop(again);
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn a_second_writer_never_replaces_a_segment() {
    let Some(sw) = seaweed("a_second_writer_never_replaces_a_segment") else {
        return;
    };
    let cfg = config(&sw, "two");
    // Both open on an empty prefix, so both number their first segment 1.
    let a = open(&cfg, &[]);
    let b = open(&cfg, &[]);
    let ext_a = extents(11, 5, 3000);
    let ext_b = extents(12, 5, 3000);
    let addrs_a = write_all(&a, &ext_a);
    a.sync().expect("the first writer's sync");
    let addrs_b = write_all(&b, &ext_b);
    assert_eq!(addrs_a[0].0.segment(), addrs_b[0].0.segment());
    let err = b
        .sync()
        .expect_err("the second writer's sync replaced the first one's segment");
    let msg = err.to_string();
    assert!(matches!(err, Error::AnotherWriter { .. }), "{msg}");
    let seg = addrs_a[0].0.segment();
    assert!(
        msg.contains(&format!(
            "segment {seg} exists: another writer holds s3://wring-test/two"
        )),
        "{msg}"
    );
    let err = b
        .append(b"more")
        .expect_err("appends went on after the conflict");
    assert!(matches!(err, Error::AnotherWriter { .. }), "{err}");
    drop((a, b));
    // What the first writer synced is intact.
    let again = open(&cfg, &addrs_a);
    check_all(&again, &ext_a, &addrs_a);
    drop(again);
    // A PUT whose answer was lost and is retried finds its own object: same bytes, success.
    // Two writers appending identical extents stand for that here.
    let cfg = config(&sw, "retried");
    let c = open(&cfg, &[]);
    let d = open(&cfg, &[]);
    let ext = extents(13, 5, 3000);
    let addrs = write_all(&c, &ext);
    c.sync().expect("sync");
    assert_eq!(write_all(&d, &ext), addrs);
    d.sync()
        .expect("a retried PUT of the same segment is not a conflict");
    drop((c, d));
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn unsynced_appends_are_not_promised() {
    let Some(sw) = seaweed("unsynced_appends_are_not_promised") else {
        return;
    };
    let cfg = config(&sw, "unsynced");
    let store = open(&cfg, &[]);
    let a = store.append(b"only in memory").expect("append");
    drop(store);
    let again = open(&cfg, &[(a, 14)]);
    let mut buf = [0u8; 14];
    // The new instance numbers its open segment after what is in the bucket, so the lost
    // address names a segment that is missing or empty: no bytes, never the old ones.
    let err = again
        .read(a, &mut buf)
        .expect_err("an unsynced extent came back");
    assert!(
        matches!(err, Error::MissingSegment { .. } | Error::NoExtent { .. }),
        "{err}"
    );
    drop(again);
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn ranged_reads_cache_limit_and_read_ahead() {
    let Some(sw) = seaweed("ranged_reads_cache_limit_and_read_ahead") else {
        return;
    };
    let mut cfg = config(&sw, "ranged");
    cfg.segment_bytes = 1 << 20;
    let ext = extents(2, 300, 8000);
    let store = open(&cfg, &[]);
    let addrs = write_all(&store, &ext);
    store.sync().expect("sync");
    drop(store);
    cfg.cache_bytes = 128 << 10;
    let store = open(&cfg, &addrs);
    // One small extent: one chunk (plus the index and trailer), not the whole segment.
    let (a, len) = addrs[100];
    let mut buf = vec![0u8; len as usize];
    store.read(a, &mut buf).expect("read");
    assert_eq!(buf, ext[100]);
    let st = store.stats();
    let seg_len = store
        .segments()
        .into_iter()
        .find(|s| s.segment == a.segment())
        .map(|s| s.object_len)
        .unwrap_or(0);
    assert!(
        st.get_bytes < seg_len / 4,
        "reading {len} bytes fetched {} of a {seg_len}-byte segment",
        st.get_bytes
    );
    // Everything, twice: the cache never passes its limit.
    for _ in 0..2 {
        for (i, &(a, len)) in addrs.iter().enumerate() {
            let mut buf = vec![0u8; len as usize];
            store.read(a, &mut buf).expect("read");
            assert!(buf == ext[i]);
            let st = store.stats();
            assert!(st.cache_bytes <= st.cache_limit, "{st:?}");
        }
    }
    assert!(store.stats().cache_evictions > 0);
    // Read-ahead: sequential reads from the start of a segment bring the chunk after them in.
    drop(store);
    let store = open(&cfg, &addrs);
    let seg = addrs[0].0.segment();
    let in_seg: Vec<usize> = (0..addrs.len())
        .filter(|&i| addrs[i].0.segment() == seg)
        .collect();
    let chunk = cfg.chunk_bytes as u64;
    let mut last = 0;
    for &i in &in_seg {
        let (a, len) = addrs[i];
        let mut buf = vec![0u8; len as usize];
        store.read(a, &mut buf).expect("read");
        last = i;
        if a.offset() as u64 + len > chunk * 2 {
            break;
        }
    }
    // The first extent wholly past the chunks the reads touched.
    let (a_last, len_last) = addrs[last];
    let next_chunk = (a_last.offset() as u64 + len_last - 1) / chunk + 1;
    let next = in_seg
        .iter()
        .copied()
        .find(|&i| i > last && addrs[i].0.offset() as u64 >= next_chunk * chunk)
        .expect("an extent in a later chunk of the segment");
    let ahead = addrs[next].0;
    let mut waited = 0;
    while !store.is_cached(ahead) && waited < 300 {
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
    }
    assert!(
        store.is_cached(ahead),
        "sequential reads did not bring the next chunk ({ahead}) in"
    );
    drop(store);
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn lease_held_refused_broken_and_raced() {
    let Some(sw) = seaweed("lease_held_refused_broken_and_raced") else {
        return;
    };
    let cfg = config(&sw, "lease");
    let a = open(&cfg, &[]);
    let b = open(&cfg, &[]);
    assert_eq!(a.lease().expect("lease"), None);
    a.acquire_lease("machine-a:1").expect("a takes the lease");
    let err = b
        .acquire_lease("machine-b:2")
        .expect_err("b took a held lease");
    let msg = err.to_string();
    assert!(matches!(err, Error::LeaseHeld { .. }), "{msg}");
    assert!(
        msg.contains("machine-a:1") && msg.contains("break the lease"),
        "{msg}"
    );
    a.acquire_lease("machine-a:1").expect("the holder renews");
    assert!(
        b.release_lease("machine-b:2").is_err(),
        "b released a's lease"
    );
    let broken = b.break_lease().expect("break").expect("there was a lease");
    assert_eq!(broken.holder, "machine-a:1");
    b.acquire_lease("machine-b:2")
        .expect("b takes the broken lease");
    assert!(a.release_lease("machine-a:1").is_err());
    b.release_lease("machine-b:2").expect("release");
    assert_eq!(a.lease().expect("lease"), None);
    // Conditional put: of writers racing for a free lease exactly one wins.
    for round in 0..3 {
        let cfg = config(&sw, &format!("race{round}"));
        let stores: Vec<ObjStore> = (0..6).map(|_| open(&cfg, &[])).collect();
        let barrier = std::sync::Barrier::new(stores.len());
        let wins = std::thread::scope(|s| {
            let handles: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(i, st)| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        st.acquire_lease(&format!("racer-{i}")).is_ok()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(false))
                .filter(|&w| w)
                .count()
        });
        assert_eq!(wins, 1, "round {round}: {wins} writers took the lease");
    }
    drop((a, b));
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn credentials_file_mode_and_owner_and_wrong_secret() {
    let Some(sw) = seaweed("credentials_file_mode_and_owner_and_wrong_secret") else {
        return;
    };
    let path = sw.dir().join("creds");
    let text = format!(
        "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
        sw.access_key, sw.secret_key
    );
    std::fs::write(&path, text).expect("write creds");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = Credentials::from_file(&path).expect_err("a 0644 credentials file was used");
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("chmod 600"),
        "{msg}"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let creds = Credentials::from_file(&path).expect("a 0600 file of ours");
    let mut cfg = config(&sw, "creds");
    cfg.credentials = creds;
    let shown = format!("{cfg:?}");
    assert!(
        !shown.contains(&sw.secret_key),
        "the secret is in Debug output"
    );
    let store = open(&cfg, &[]);
    let a = store.append(b"with file credentials").expect("append");
    store.sync().expect("sync");
    drop(store);
    // A wrong secret is refused by the server with a clear error.
    cfg.credentials = Credentials::new(&sw.access_key, "not-the-secret");
    let err = ObjStore::open(cfg.clone(), [(a, 21)]).expect_err("a wrong secret opened the store");
    let msg = err.to_string();
    assert!(msg.contains("listing s3://wring-test/creds/seg"), "{msg}");
    assert!(!msg.contains(&sw.secret_key));
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn compaction_rewrites_then_deletes_in_order() {
    let Some(sw) = seaweed("compaction_rewrites_then_deletes_in_order") else {
        return;
    };
    let cfg = config(&sw, "compact");
    let ext = extents(3, 120, 6000);
    let store = open(&cfg, &[]);
    let addrs = write_all(&store, &ext);
    store.sync().expect("sync");
    // Free three of every four extents: most segments fall under the threshold.
    let mut live = Vec::new();
    for (i, &(a, len)) in addrs.iter().enumerate() {
        if i % 4 == 0 {
            live.push(i);
        } else {
            store.free(a, len);
        }
    }
    let before = store.stats();
    assert!(before.dead_bytes > before.live_bytes, "{before:?}");
    let victims = store.compaction_candidates(0.5);
    assert!(!victims.is_empty());
    // Deleting a segment that still has live extents is refused.
    let err = store
        .delete_segments(&victims[..1])
        .expect_err("deleted a live segment");
    assert!(matches!(err, Error::InUse { .. }), "{err}");
    let moving: Vec<(Addr, u64)> = live
        .iter()
        .map(|&i| addrs[i])
        .filter(|(a, _)| victims.contains(&a.segment()))
        .collect();
    // A rewrite that fails partway (an extent that is not there) moves nothing and leaks no
    // live bytes.
    let mut bad = moving.clone();
    bad.push((Addr::new(999_999, 0), 10));
    let err = store
        .rewrite(&bad)
        .expect_err("rewrite of a missing extent");
    assert!(matches!(err, Error::MissingSegment { .. }), "{err}");
    let st = store.stats();
    assert_eq!(
        st.live_bytes, before.live_bytes,
        "a failed rewrite changed the live bytes"
    );
    let map = store.rewrite(&moving).expect("rewrite");
    assert_eq!(map.len(), moving.len());
    // Until the caller commits, the old extents are live: their segments cannot go.
    let err = store
        .delete_segments(&victims)
        .expect_err("deleted old segments before the caller committed the new addresses");
    assert!(matches!(err, Error::InUse { .. }), "{err}");
    // The caller has not committed yet: a crash now reopens with the old addresses, and
    // everything still reads.
    let old_live: Vec<(Addr, u64)> = live.iter().map(|&i| addrs[i]).collect();
    let crashed = open(&cfg, &old_live);
    for &i in &live {
        let mut buf = vec![0u8; addrs[i].1 as usize];
        crashed
            .read(addrs[i].0, &mut buf)
            .expect("old address after a crash");
        assert!(buf == ext[i]);
    }
    // The new segments are orphans there: all dead, first in line for the compactor.
    let new_segs: Vec<u32> = map.iter().map(|(_, n, _)| n.segment()).collect();
    let orphans = crashed.compaction_candidates(0.5);
    assert!(
        new_segs.iter().all(|s| orphans.contains(s)),
        "{orphans:?} {new_segs:?}"
    );
    drop(crashed);
    // The caller commits the new addresses, then deletes the old segments.
    let new_live: Vec<(Addr, u64)> = live
        .iter()
        .map(|&i| {
            let (a, len) = addrs[i];
            let moved = map.iter().find(|(o, _, _)| *o == a).map(|(_, n, _)| *n);
            (moved.unwrap_or(a), len)
        })
        .collect();
    store.commit_rewrite(&map);
    store
        .delete_segments(&victims)
        .expect("delete after commit");
    for (&i, &(a, len)) in live.iter().zip(&new_live) {
        let mut buf = vec![0u8; len as usize];
        store.read(a, &mut buf).expect("new address");
        assert!(buf == ext[i]);
    }
    let (old, _) = moving[0];
    let mut buf = vec![0u8; moving[0].1 as usize];
    let err = store
        .read(old, &mut buf)
        .expect_err("read a deleted segment");
    assert!(matches!(err, Error::MissingSegment { .. }), "{err}");
    let after = store.stats();
    assert!(
        after.bucket_bytes < before.bucket_bytes,
        "{before:?} {after:?}"
    );
    drop(store);
    let reopened = open(&cfg, &new_live);
    let st = reopened.stats();
    assert!(st.dead_bytes < before.dead_bytes, "{st:?}");
    for (&i, &(a, len)) in live.iter().zip(&new_live) {
        let mut buf = vec![0u8; len as usize];
        reopened
            .read(a, &mut buf)
            .expect("new address after reopen");
        assert!(buf == ext[i]);
    }
    drop(reopened);
    sw.stop_and_check().expect("clean stop");
}

/// An S3 client on the harness, for planting bad objects.
fn raw_client(sw: &Seaweed) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_endpoint(&sw.endpoint)
        .with_allow_http(true)
        .with_access_key_id(&sw.access_key)
        .with_secret_access_key(&sw.secret_key)
        .build()
        .expect("client")
}

#[test]
fn corrupt_and_short_objects_are_errors() {
    let Some(sw) = seaweed("corrupt_and_short_objects_are_errors") else {
        return;
    };
    let cfg = config(&sw, "corrupt");
    let ext = extents(4, 6, 3000);
    let store = open(&cfg, &[]);
    let addrs = write_all(&store, &ext);
    store.sync().expect("sync");
    let seg = addrs[0].0.segment();
    let key = object_store::path::Path::from(format!("corrupt/seg/{:016x}", seg));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let raw = raw_client(&sw);
    let good = rt
        .block_on(async { raw.get(&key).await?.bytes().await })
        .expect("get");
    drop(store);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("flipped data byte", {
            let mut b = good.to_vec();
            b[addrs[1].0.offset() as usize] ^= 0x40;
            b
        }),
        ("truncated", good[..good.len() - 7].to_vec()),
        ("empty", Vec::new()),
        ("garbage", vec![0x5a; 100]),
    ];
    for (what, bytes) in cases {
        rt.block_on(raw.put(&key, bytes.into())).expect("plant");
        let store = open(&cfg, &addrs);
        let mut failed = false;
        for (i, &(a, len)) in addrs.iter().enumerate() {
            let mut buf = vec![0u8; len as usize];
            match store.read(a, &mut buf) {
                Ok(()) => assert!(buf == ext[i], "{what}: extent {i} read back wrong bytes"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(matches!(e, Error::Corrupt { .. }), "{what}: {msg}");
                    assert!(msg.contains("corrupt/seg/"), "{what}: {msg}");
                    failed = true;
                }
            }
        }
        assert!(failed, "{what}: every read succeeded");
        let err = store
            .verify_segment(seg)
            .expect_err("verify passed a bad object");
        assert!(matches!(err, Error::Corrupt { .. }), "{what}: {err}");
    }
    // A chunk that failed its checksum is not kept: once the object is good again, the same
    // store reads the extent.
    let mut bad = good.to_vec();
    bad[addrs[1].0.offset() as usize] ^= 0x40;
    rt.block_on(raw.put(&key, bad.into())).expect("plant");
    let store = open(&cfg, &addrs);
    let (a, len) = addrs[1];
    let mut buf = vec![0u8; len as usize];
    let err = store.read(a, &mut buf).expect_err("read a flipped byte");
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    rt.block_on(raw.put(&key, good.clone().into()))
        .expect("repair");
    store
        .read(a, &mut buf)
        .expect("the repaired object read back (was the corrupt chunk kept in the cache?)");
    assert!(buf == ext[1]);
    drop(store);
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn server_stopped_mid_upload_then_restarted() {
    let Some(mut sw) = seaweed("server_stopped_mid_upload_then_restarted") else {
        return;
    };
    let mut cfg = config(&sw, "restart");
    let before = extents(5, 100, 8000);
    let during = extents(6, 200, 8000);
    // The first batch with the default wait (a loaded machine may be slow), then an instance
    // that gives up after 3 s for the rest.
    let first = open(&cfg, &[]);
    let mut addrs = write_all(&first, &before);
    first.sync().expect("sync before the stop");
    drop(first);
    cfg.wait = Duration::from_secs(3);
    cfg.queue_segments = 64;
    cfg.request_timeout = Duration::from_secs(2);
    let store = open(&cfg, &addrs);
    sw.kill("server").expect("kill weed");
    // Writes go on into memory; their uploads fail and are retried.
    addrs.extend(write_all(&store, &during));
    let err = store
        .sync()
        .expect_err("sync returned with the server down");
    let msg = err.to_string();
    assert!(matches!(err, Error::Unavailable { .. }), "{msg}");
    assert!(
        msg.contains("uploading s3://wring-test/restart/seg/"),
        "{msg}"
    );
    assert!(store.stats().last_error.is_some());
    // Past the upload queue, appends wait and then fail, naming the upload error.
    let over = extents(8, 4000, 8000);
    let mut refused = None;
    for e in &over {
        match store.append(e) {
            Ok(a) => addrs.push((a, e.len() as u64)),
            Err(err) => {
                refused = Some(err);
                break;
            }
        }
    }
    let err = refused.expect("appends past a full upload queue never failed");
    let msg = err.to_string();
    assert!(matches!(err, Error::Unavailable { .. }), "{msg}");
    assert!(
        msg.contains("appending an extent") && msg.contains("uploading s3://"),
        "{msg}"
    );
    let taken = addrs.len() - before.len() - during.len();
    let all: Vec<Vec<u8>> = before
        .iter()
        .chain(&during)
        .chain(&over[..taken])
        .cloned()
        .collect();
    sw.restart("server").expect("restart weed");
    // Once it is back, the queued uploads go in and sync returns.
    let mut synced = false;
    for _ in 0..60 {
        match store.sync() {
            Ok(()) => {
                synced = true;
                break;
            }
            Err(e) => eprintln!("sync after restart: {e}"),
        }
    }
    assert!(synced, "sync never succeeded after the restart");
    assert_eq!(store.stats().pending_segments, 0);
    drop(store);
    cfg.wait = Duration::from_secs(60);
    let again = open(&cfg, &addrs);
    check_all(&again, &all, &addrs);
    drop(again);
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn reads_while_the_server_is_down_fail_clearly() {
    let Some(mut sw) = seaweed("reads_while_the_server_is_down_fail_clearly") else {
        return;
    };
    let mut cfg = config(&sw, "down");
    cfg.request_timeout = Duration::from_secs(2);
    let ext = extents(7, 40, 4000);
    let store = open(&cfg, &[]);
    let addrs = write_all(&store, &ext);
    store.sync().expect("sync");
    drop(store);
    let store = open(&cfg, &addrs);
    sw.kill("server").expect("kill weed");
    let (a, len) = addrs[3];
    let mut buf = vec![0u8; len as usize];
    let err = store
        .read(a, &mut buf)
        .expect_err("read with the server down");
    let msg = err.to_string();
    assert!(matches!(err, Error::Request { .. }), "{msg}");
    assert!(msg.contains("s3://wring-test/down/seg/"), "{msg}");
    sw.restart("server").expect("restart");
    let mut ok = false;
    for _ in 0..60 {
        if store.read(a, &mut buf).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        ok && buf == ext[3],
        "reads did not come back after the restart"
    );
    drop(store);
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn untrusted_objects_and_addresses_are_bounded() {
    let Some(sw) = seaweed("untrusted_objects_and_addresses_are_bounded") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let raw = raw_client(&sw);
    let plant = |key: &str, bytes: Vec<u8>| {
        let key = object_store::path::Path::from(key);
        rt.block_on(raw.put(&key, bytes.into())).expect("plant");
    };
    // New segments are numbered past the live extents the caller names, even when the
    // bucket has none of them (a metadata snapshot ahead of the listing).
    let cfg = config(&sw, "ahead");
    let store = open(&cfg, &[(Addr::new(50, 0), 10)]);
    let a = store.append(b"new").expect("append");
    assert!(a.segment() > 50, "a new extent went to {a}");
    store.sync().expect("sync");
    // An extent length over MAX_EXTENT from the caller is refused, not allocated.
    let err = store
        .rewrite(&[(a, wring_objstore::config::MAX_EXTENT + 1)])
        .expect_err("rewrite of an oversized extent");
    assert!(matches!(err, Error::TooLarge(_)), "{err}");
    // A segment object replaced by a larger one is refused before its bytes are read.
    let listed = store.stats().bucket_bytes;
    plant(
        &format!("ahead/seg/{:016x}", a.segment()),
        vec![0u8; 4 << 20],
    );
    let got_before = store.stats().get_bytes;
    let err = store
        .verify_segment(a.segment())
        .expect_err("verified a replaced segment");
    assert!(matches!(err, Error::TooLarge(_)), "{err}");
    assert!(
        store.stats().get_bytes - got_before <= listed,
        "verify read past the listed size"
    );
    drop(store);
    // A huge lease record is refused by its size.
    plant("ahead/lease", vec![b'x'; 1 << 20]);
    let store = open(&cfg, &[]);
    let err = store.lease().expect_err("an oversized lease record parsed");
    let msg = err.to_string();
    assert!(
        matches!(err, Error::Corrupt { .. }) && msg.contains("more than the 4096"),
        "{msg}"
    );
    store.break_lease().expect("break an oversized lease");
    drop(store);
    // The last segment number in the bucket: nothing can be numbered after it.
    let cfg = config(&sw, "last");
    plant("last/seg/00000000ffffffff", b"foreign".to_vec());
    let mut refused = None;
    for _ in 0..120 {
        match ObjStore::open(cfg.clone(), []) {
            Ok(_) => break,
            Err(Error::TooLarge(m)) => {
                refused = Some(m);
                break;
            }
            Err(e) => {
                eprintln!("open: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    let msg = refused.expect("opened with segment ffffffff in the bucket");
    assert!(msg.contains("0xffffffff"), "{msg}");
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn seaweedfs_conditional_puts() {
    let Some(sw) = seaweed("seaweedfs_conditional_puts") else {
        return;
    };
    use object_store::{PutMode, PutOptions, UpdateVersion};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let raw = raw_client(&sw);
    let key = object_store::path::Path::from("cond/object");
    let put = |mode: PutMode, body: &'static [u8]| {
        rt.block_on(raw.put_opts(&key, body.into(), PutOptions::from(mode)))
    };
    // The bucket answers once weed shell's bucket reaches the gateway.
    let mut first = put(PutMode::Create, b"one");
    for _ in 0..120 {
        if first.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        first = put(PutMode::Create, b"one");
    }
    let v1 = first.expect("create");
    let again = put(PutMode::Create, b"two").expect_err("If-None-Match: * replaced an object");
    assert!(
        matches!(again, object_store::Error::AlreadyExists { .. }),
        "{again}"
    );
    let version = |r: &object_store::PutResult| UpdateVersion {
        e_tag: r.e_tag.clone(),
        version: r.version.clone(),
    };
    let v2 = put(PutMode::Update(version(&v1)), b"three").expect("If-Match with the current ETag");
    let stale = put(PutMode::Update(version(&v1)), b"four");
    let got = rt
        .block_on(async { raw.get(&key).await?.bytes().await })
        .expect("get");
    assert!(
        stale.is_err(),
        "If-Match with a stale ETag replaced the object (now {got:?})"
    );
    assert_eq!(&got[..], b"three");
    put(PutMode::Update(version(&v2)), b"five").expect("If-Match with the current ETag");
    sw.stop_and_check().expect("clean stop");
}

#[test]
fn metadata_objects_round_trip() {
    let Some(sw) = seaweed("metadata_objects_round_trip") else {
        return;
    };
    let cfg = config(&sw, "meta");
    let store = open(&cfg, &[]);
    assert!(store
        .get_meta("snapshot-1", 8 << 20)
        .expect("get")
        .is_none());
    let snapshot = wring_testing::random_bytes(9, 3 << 20);
    store.put_meta("snapshot-1", snapshot.clone()).expect("put");
    let got = store
        .get_meta("snapshot-1", 8 << 20)
        .expect("get")
        .expect("there");
    assert!(got[..] == snapshot[..], "the snapshot came back different");
    store
        .put_meta("snapshot-1", b"newer".to_vec())
        .expect("replace");
    let got = store
        .get_meta("snapshot-1", 8 << 20)
        .expect("get")
        .expect("there");
    assert_eq!(&got[..], b"newer");
    // A snapshot larger than the caller's limit is refused, not read.
    store
        .put_meta("big", snapshot.clone())
        .expect("put a big one");
    let err = store
        .get_meta("big", 1 << 20)
        .map(|got| got.map(|b| b.len()))
        .expect_err("read a snapshot over the limit");
    assert!(matches!(err, Error::TooLarge(_)), "{err}");
    // Deleted (an old snapshot after a newer one is in place); deleting it again is no error.
    store.delete_meta("big").expect("delete");
    assert!(store.get_meta("big", 8 << 20).expect("get").is_none());
    store.delete_meta("big").expect("delete what is gone");
    for bad in ["", "../lease", "a/b", ".hidden"] {
        let err = store.put_meta(bad, Vec::new()).expect_err(bad);
        assert!(matches!(err, Error::Config(_)), "{bad}: {err}");
        let err = store.delete_meta(bad).expect_err(bad);
        assert!(matches!(err, Error::Config(_)), "{bad}: {err}");
    }
    // Not a segment: a new instance does not count it.
    drop(store);
    let again = open(&cfg, &[]);
    assert_eq!(again.stats().bucket_segments, 0);
    drop(again);
    sw.stop_and_check().expect("clean stop");
}
