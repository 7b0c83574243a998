//! Upload and cold-read throughput of the segment store against a local SeaweedFS
//! (`weed server -s3` started by wring_testing::seaweed, on this machine):
//! `cargo run --release -p wring-objstore --example throughput -- [MiB] [segment MiB] [uploads]`.
//! Writes MiB of incompressible extents of 64 KiB (the size of a compressed wring extent),
//! syncs, and reads them back in order from a fresh instance (empty cache). Not a test.

use std::time::Instant;

use wring_objstore::{Config, Credentials, ObjStore};
use wring_testing::seaweed::{Seaweed, BUCKET};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let (mib, seg_mib, uploads) = (arg(1, 256), arg(2, 4), arg(3, 4));
    let sw = Seaweed::server().unwrap_or_else(|e| panic!("starting SeaweedFS: {e}"));
    let creds = Credentials::new(&sw.access_key, &sw.secret_key);
    let mut cfg = Config::from_url(&format!("s3://{BUCKET}/bench"), creds).expect("url");
    cfg.endpoint = Some(sw.endpoint.clone());
    cfg.segment_bytes = (seg_mib << 20) as u32;
    cfg.max_uploads = uploads as usize;
    cfg.queue_segments = 2 * uploads as usize;
    let open = |live: &[(wring_objstore::Addr, u64)]| loop {
        match ObjStore::open(cfg.clone(), live.iter().copied()) {
            Ok(s) => break s,
            Err(e) => {
                eprintln!("waiting for SeaweedFS: {e}");
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        }
    };
    let store = open(&[]);
    let extent = 64 << 10;
    let n = (mib << 20) / extent;
    let data: Vec<Vec<u8>> = (0..16)
        .map(|i| wring_testing::random_bytes(i, extent as usize))
        .collect();
    let t = Instant::now();
    let mut addrs = Vec::with_capacity(n as usize);
    for i in 0..n {
        let a = store.append(&data[(i % 16) as usize]).expect("append");
        addrs.push((a, extent));
    }
    store.sync().expect("sync");
    let write = t.elapsed().as_secs_f64();
    let st = store.stats();
    drop(store);
    let store = open(&addrs);
    let t = Instant::now();
    let mut buf = vec![0u8; extent as usize];
    for (i, &(a, _)) in addrs.iter().enumerate() {
        store.read(a, &mut buf).expect("read");
        assert!(buf == data[i % 16], "extent {i} read back wrong");
    }
    let read = t.elapsed().as_secs_f64();
    let rst = store.stats();
    println!(
        "{mib} MiB in {} segments of {seg_mib} MiB, {uploads} uploads at once: \
         write+sync {:.1} MB/s ({:.2} s, {} PUTs), cold sequential read {:.1} MB/s ({:.2} s, {} GETs, {} cache hits)",
        st.bucket_segments,
        (mib << 20) as f64 / write / 1e6,
        write,
        st.puts,
        (mib << 20) as f64 / read / 1e6,
        read,
        rst.gets,
        rst.cache_hits
    );
    drop(store);
    sw.stop_and_check().expect("clean stop");
}
