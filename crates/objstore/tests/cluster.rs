//! The segment store on a SeaweedFS cluster on this machine: one master, three volume
//! servers, replication 001, a filer with the S3 gateway. A volume server is killed while
//! segments are being written; everything synced must still read back.

mod common;

use std::time::Duration;

use common::{check_all, config, extents, open, write_all};
use wring_testing::seaweed::Seaweed;
use wring_testing::{require, Need};

#[test]
fn kill_a_volume_server_mid_write() {
    if !require("kill_a_volume_server_mid_write", &[Need::Seaweed]) {
        return;
    }
    let mut sw = Seaweed::cluster().unwrap_or_else(|e| panic!("starting the cluster: {e}"));
    let mut cfg = config(&sw, "cluster");
    cfg.wait = Duration::from_secs(180);
    let first = extents(11, 200, 8000);
    let second = extents(12, 200, 8000);
    let store = open(&cfg, &[]);
    let mut addrs = write_all(&store, &first);
    store.sync().expect("sync before the kill");
    // Mid-write: segments of the second batch are sealed and uploading when it dies.
    let half = second.len() / 2;
    addrs.extend(write_all(&store, &second[..half]));
    sw.kill("volume1").expect("kill volume1");
    addrs.extend(write_all(&store, &second[half..]));
    store.sync().expect("sync with a volume server down");
    drop(store);
    let all: Vec<Vec<u8>> = first.iter().chain(&second).cloned().collect();
    let again = open(&cfg, &addrs);
    check_all(&again, &all, &addrs);
    drop(again);
    sw.stop_and_check().expect("clean stop");
}
