//! Shared by the object-store tests: a configuration for a harness, and opening a store once
//! the fresh SeaweedFS answers.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use wring_objstore::{Addr, Config, Credentials, ObjStore};
use wring_testing::seaweed::{Seaweed, BUCKET};

/// A small-segment configuration for `prefix` in the harness's bucket.
pub fn config(sw: &Seaweed, prefix: &str) -> Config {
    let creds = Credentials::new(&sw.access_key, &sw.secret_key);
    let mut cfg = Config::from_url(&format!("s3://{BUCKET}/{prefix}"), creds).expect("url");
    cfg.endpoint = Some(sw.endpoint.clone());
    cfg.segment_bytes = 64 << 10;
    cfg.chunk_bytes = 16 << 10;
    cfg.cache_bytes = 4 << 20;
    cfg.wait = Duration::from_secs(120);
    cfg.request_timeout = Duration::from_secs(10);
    cfg
}

/// Open, retrying while the new server settles (its S3 gateway learns of the bucket a moment
/// after weed shell made it).
pub fn open(cfg: &Config, live: &[(Addr, u64)]) -> ObjStore {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match ObjStore::open(cfg.clone(), live.iter().copied()) {
            Ok(s) => return s,
            Err(e) if Instant::now() < deadline => {
                eprintln!("open: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("opening the store on SeaweedFS: {e}"),
        }
    }
}

/// `n` extents of sizes 1..max, deterministic from `seed`, compressible and not.
pub fn extents(seed: u64, n: usize, max: u64) -> Vec<Vec<u8>> {
    let mut g = wring_testing::SplitMix(seed);
    (0..n)
        .map(|i| {
            let len = 1 + g.below(max) as usize;
            if i % 2 == 0 {
                wring_testing::random_bytes(g.next(), len)
            } else {
                vec![(i % 251) as u8; len]
            }
        })
        .collect()
}

/// Append every extent; their addresses and lengths.
pub fn write_all(store: &ObjStore, ext: &[Vec<u8>]) -> Vec<(Addr, u64)> {
    ext.iter()
        .map(|e| (store.append(e).expect("append"), e.len() as u64))
        .collect()
}

/// Read every extent back and compare.
pub fn check_all(store: &ObjStore, ext: &[Vec<u8>], addrs: &[(Addr, u64)]) {
    for (i, (e, &(a, len))) in ext.iter().zip(addrs).enumerate() {
        let mut buf = vec![0u8; len as usize];
        store
            .read(a, &mut buf)
            .unwrap_or_else(|err| panic!("reading extent {i} at {a}: {err}"));
        assert!(buf == *e, "extent {i} at {a} read back different bytes");
    }
}
