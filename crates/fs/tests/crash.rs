//! kill -9 of the daemon at random moments under a writer doing fsync'ed writes: after every
//! cycle the store mounts again, every acknowledged block reads back, nothing reads back
//! wrong, and fsck finds nothing.
mod common;
use common::*;

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BLOCK: usize = 16 * 1024;
const BLOCKS: u64 = 256;

fn pattern(block: u64, generation: u64) -> Vec<u8> {
    let mut rng = Rng(block * 1_000_003 + generation + 1);
    let mut v = format!("block {block} generation {generation} ").into_bytes();
    v.extend(text(&mut rng, BLOCK));
    v.truncate(BLOCK);
    v
}

#[test]
fn kill_9_cycles() {
    if !require_root("kill_9_cycles") {
        return;
    }
    let mut m = Mount::new("crash");
    // acked[b] = last generation whose fsync returned; tried[b] = last generation attempted.
    let acked = Arc::new(Mutex::new(vec![None::<u64>; BLOCKS as usize]));
    let tried = Arc::new(Mutex::new(vec![None::<u64>; BLOCKS as usize]));
    let mut rng = Rng(42);
    let mut generation = 0u64;
    for cycle in 0..12 {
        m.start("compress-force=zstd:1,max_extent=64K");
        let path = m.p("data");
        // Check what survived the previous kill.
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut all = Vec::new();
            f.read_to_end(&mut all).unwrap();
            let (acked, tried) = (acked.lock().unwrap(), tried.lock().unwrap());
            for b in 0..BLOCKS {
                let start = b as usize * BLOCK;
                let got = all.get(start..start + BLOCK);
                let ok = match (acked[b as usize], tried[b as usize], got) {
                    (None, _, None) => true,
                    (None, _, Some(g)) if g.iter().all(|&x| x == 0) => true,
                    (a, Some(t), Some(g)) => (a.unwrap_or(0)..=t).any(|gen| pattern(b, gen) == g),
                    _ => false,
                };
                assert!(
                    ok,
                    "cycle {cycle}: block {b} reads back wrong (acked {:?}, tried {:?})",
                    acked[b as usize], tried[b as usize]
                );
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (acked, tried, stop) = (acked.clone(), tried.clone(), stop.clone());
            let base = generation;
            let seed = rng.next();
            std::thread::spawn(move || -> u64 {
                let mut rng = Rng(seed | 1);
                let Ok(mut f) = OpenOptions::new()
                    .create(true)
                    .write(true)
                    .truncate(false)
                    .open(&path)
                else {
                    return base;
                };
                let mut g = base;
                while !stop.load(Ordering::Relaxed) {
                    g += 1;
                    let b = rng.below(BLOCKS);
                    tried.lock().unwrap()[b as usize] = Some(g);
                    let ok = f.seek(SeekFrom::Start(b * BLOCK as u64)).is_ok()
                        && f.write_all(&pattern(b, g)).is_ok()
                        && f.sync_data().is_ok();
                    if !ok {
                        break;
                    }
                    acked.lock().unwrap()[b as usize] = Some(g);
                }
                g
            })
        };
        std::thread::sleep(Duration::from_millis(100 + rng.below(600)));
        m.kill();
        stop.store(true, Ordering::Relaxed);
        generation = writer.join().unwrap() + 1;
        let r = wring_fs::fsck::fsck(&m.store).unwrap();
        assert!(r.problems.is_empty(), "cycle {cycle}: {:?}", r.problems);
    }
}

/// Data written and closed but never fsync'ed is durable once btrfs's commit interval has
/// passed (the committer thread): a kill -9 after that loses none of it.
#[test]
fn closed_writes_survive_a_kill_after_the_commit_interval() {
    if !require_root("closed_writes_survive_a_kill_after_the_commit_interval") {
        return;
    }
    let mut m = Mount::new("commit-interval");
    m.start("compress-force=zstd:1");
    let data = text(&mut Rng(7), 300_000);
    std::fs::create_dir(m.p("d")).unwrap();
    // close(2) writes the file's pages back to the daemon (FUSE flush).
    std::fs::write(m.p("d/f"), &data).unwrap();
    std::thread::sleep(wring_fs::store::COMMIT_INTERVAL + Duration::from_secs(3));
    m.kill();
    m.start("compress-force=zstd:1");
    let back = std::fs::read(m.p("d/f")).expect("the file survives");
    assert!(back == data, "the file reads back different");
    m.stop();
}
