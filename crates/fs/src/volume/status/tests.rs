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
