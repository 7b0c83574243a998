//! The text lines and the JSON of `wring status`, from the same figures.

use wring_engine::pool::PoolStats;
use wring_engine::workspace::ManagerStats;
use wring_engine::Algorithm;
use wring_objstore::Stats;

use super::{Objects, PagePool, Status, Workspaces};

#[test]
fn objects_lines_name_every_counter() {
    let st = Stats {
        bucket_bytes: 3 << 20,
        bucket_segments: 2,
        live_bytes: 2 << 20,
        dead_bytes: 1 << 20,
        pending_bytes: 4096,
        pending_segments: 1,
        uploads_in_flight: 1,
        cache_bytes: 1 << 20,
        cache_limit: 256 << 20,
        gets: 7,
        get_bytes: 70,
        puts: 3,
        put_bytes: 30,
        last_error: Some("uploading s3://b/p/seg/1:\nrefused".into()),
        ..Stats::default()
    };
    assert_eq!(
        Objects::from(&st).to_string(),
        "objects: bucket=3.0M segments=2 live=2.0M dead=1.0M cache=1.0M/256.0M \
         pending=4.0K pending_segments=1 uploads_in_flight=1 gets=7 puts=3 deletes=0 \
         cache_hits=0 cache_misses=0\n\
         objects raw: bucket_bytes=3145728 live_bytes=2097152 dead_bytes=1048576 \
         pending_bytes=4096 cache_bytes=1048576 get_bytes=70 put_bytes=30\n\
         objects last_error: uploading s3://b/p/seg/1: refused\n"
    );
}

#[test]
fn engine_lines_name_every_counter() {
    let m = ManagerStats {
        hits: 11,
        scans_up: 2,
        allocations: 3,
        waits: 1,
        resident_bytes: 3 << 20,
        peak_bytes: 6 << 20,
        workspaces: 2,
        busy: 1,
        streams: 2,
        ..ManagerStats::default()
    };
    let pool = PoolStats {
        size: 64,
        free: 60,
        in_use: 4,
        locked: 64,
        hits: 9,
        misses: 1,
        fallbacks: 1,
        alloc_nanos: 2_500_000,
    };
    let text =
        Workspaces::from(&(Algorithm::Zstd, m)).to_string() + &PagePool::from(&pool).to_string();
    assert_eq!(
        text,
        "workspaces zstd: count=2 busy=1 streams=2 mem=3.0M peak_mem=6.0M hits=11 scans_up=2 \
         allocations=3 alloc_failures=0 waits=1 reclaims=0 frees=0\n\
         page_pool: size=64 free=60 in_use=4 locked=64 hits=9 misses=1 fallbacks=1 \
         alloc_ms=2.5\n"
    );
}

/// The JSON names every part with its unit, and a fresh status's times are seconds.
#[test]
fn the_json_names_its_units() {
    let mut st = Status::default();
    st.transactions.commit_nanos = 1_500_000_000;
    st.page_pool = PagePool::from(&PoolStats {
        size: 8,
        ..PoolStats::default()
    });
    let v: serde_json::Value = serde_json::from_str(&st.json()).unwrap();
    assert_eq!(v["transactions"]["commit_seconds"], 1.5);
    assert_eq!(v["page_pool"]["size_pages"], 8);
    assert_eq!(v["space"]["available_bytes"], 0);
    assert!(v["objects"].is_null());
    assert!(v["fuse"].is_array());
}

/// A mount's writeback and codec figures: what a write of compressible text at zstd:3
/// stored, by encoding, and the compressor's bytes in, in the status, its text, its JSON and
/// its Prometheus exposition.
#[test]
fn writeback_and_codecs_count_what_was_written() {
    use crate::store::{Store, ROOT};
    use crate::volume::{NewInode, Volume};
    let dir = std::env::temp_dir().join(format!("wring-status-wb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, crate::Options::parse("compress=zstd:3").unwrap()).unwrap();
    let (ino, _) = vol.create(ROOT, b"f", NewInode::file(0o644)).unwrap();
    let text: Vec<u8> = (0..4u32 << 17)
        .flat_map(|i| format!("line {} of the status test\n", i % 1000).into_bytes())
        .take(4 << 17)
        .collect();
    vol.write(ino, 0, &text, None).unwrap();
    vol.fsync(ino).unwrap();
    let st = Status::of(&vol);
    let zstd: Vec<_> = st
        .writeback
        .iter()
        .filter(|w| w.algorithm == "zstd")
        .collect();
    assert_eq!(zstd.len(), 1, "{:?}", st.writeback);
    assert_eq!((zstd[0].level, zstd[0].extents), (Some(3), 4));
    assert_eq!(zstd[0].bytes, text.len() as u64);
    assert!(zstd[0].stored_bytes > 0 && zstd[0].stored_bytes < zstd[0].bytes / 4);
    let c = st.codecs.iter().find(|c| c.algorithm == "zstd").unwrap();
    assert_eq!(c.compress_requests, 4);
    assert_eq!(c.compress_in_bytes, text.len() as u64);
    assert!(st
        .to_string()
        .contains("writeback zstd:3: extents=4 bytes=524288 stored="));
    let v: serde_json::Value = serde_json::from_str(&st.json()).unwrap();
    assert_eq!(v["writeback"][0]["bytes"], 524288);
    assert!(v["codecs"][0]["compress_seconds"].as_f64().unwrap() > 0.0);
    let exposition = super::prometheus::exposition(&st, "/m");
    let want =
        "wring_writeback_bytes_total{mountpoint=\"/m\",algorithm=\"zstd\",level=\"3\"} 524288";
    assert!(exposition.contains(want), "{exposition}");
    assert!(
        exposition.contains("wring_compress_input_bytes_total{"),
        "{exposition}"
    );
    drop(vol);
    let _ = std::fs::remove_dir_all(&dir);
}
