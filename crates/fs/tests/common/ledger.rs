//! A ledger of fsync'ed blocks for crash tests: a writer thread overwrites random 16 KiB
//! blocks of one file with a pattern naming the block and a generation, fsyncing each, and
//! records for every block the last generation whose fsync returned (acked) and the last one
//! written (tried); after a crash every block must read back as a generation between the two.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::lockstep::read_all;
use super::{text, Rng};

/// The size of a block.
pub const BLOCK: usize = 16 * 1024;

/// Block `block`'s contents at `generation`.
pub fn pattern(block: u64, generation: u64) -> Vec<u8> {
    let mut rng = Rng(block * 1_000_003 + generation + 1);
    let mut v = format!("block {block} generation {generation} ").into_bytes();
    v.extend(text(&mut rng, BLOCK));
    v.truncate(BLOCK);
    v
}

/// acked[b]: the last generation of block b whose fsync returned; tried[b]: the last written.
#[derive(Clone)]
pub struct Ledger {
    blocks: u64,
    pub acked: Arc<Mutex<Vec<Option<u64>>>>,
    pub tried: Arc<Mutex<Vec<Option<u64>>>>,
}

impl Ledger {
    /// A ledger of a file of `blocks` blocks.
    pub fn new(blocks: u64) -> Ledger {
        Ledger {
            blocks,
            acked: Arc::new(Mutex::new(vec![None; blocks as usize])),
            tried: Arc::new(Mutex::new(vec![None; blocks as usize])),
        }
    }

    /// Every block reads back as its acknowledged generation or a later one tried.
    pub fn check(&self, path: &Path, what: &str) {
        let Some(all) = read_all(path) else {
            let acked = self.acked.lock().unwrap();
            assert!(
                acked.iter().all(Option::is_none),
                "{what}: the file is gone"
            );
            return;
        };
        let (acked, tried) = (self.acked.lock().unwrap(), self.tried.lock().unwrap());
        for b in 0..self.blocks {
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
                "{what}: block {b} reads back wrong (acked {:?}, tried {:?})",
                acked[b as usize], tried[b as usize]
            );
        }
    }

    /// A writer of fsync'ed blocks of `path` from generation `base` on, until `stop`; returns
    /// the last generation. A failed write or fsync ends it, or with `errors` is counted there
    /// (the block not acknowledged) and the writer goes on after a pause.
    pub fn writer(
        &self,
        path: PathBuf,
        base: u64,
        seed: u64,
        stop: Arc<AtomicBool>,
        errors: Option<Arc<AtomicU64>>,
    ) -> std::thread::JoinHandle<u64> {
        let (acked, tried, blocks) = (self.acked.clone(), self.tried.clone(), self.blocks);
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
                let b = rng.below(blocks);
                tried.lock().unwrap()[b as usize] = Some(g);
                let ok = f.seek(SeekFrom::Start(b * BLOCK as u64)).is_ok()
                    && f.write_all(&pattern(b, g)).is_ok()
                    && f.sync_data().is_ok();
                if ok {
                    acked.lock().unwrap()[b as usize] = Some(g);
                } else if let Some(e) = &errors {
                    e.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(100));
                } else {
                    break;
                }
            }
            g
        })
    }

    /// Blocks acknowledged at least once.
    pub fn acked_count(&self) -> usize {
        self.acked.lock().unwrap().iter().flatten().count()
    }

    /// Wait (up to 3 minutes) until `n` blocks are acknowledged.
    pub fn wait_acks(&self, n: usize, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(180);
        while self.acked_count() < n {
            assert!(
                Instant::now() < deadline,
                "{what}: fsyncs stopped returning"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait (up to 3 minutes) until an fsync returns after the acknowledgements `then`.
    pub fn wait_past(&self, then: &[Option<u64>], what: &str) {
        let deadline = Instant::now() + Duration::from_secs(180);
        while *self.acked.lock().unwrap() == then {
            assert!(Instant::now() < deadline, "{what}: no fsync returned");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
