//! Model-checked concurrency of the slot state machine (shuttle): whole-page writes,
//! read-modify-write of parts of one page, discard, write-zeroes, compaction and reset racing
//! on a few slots, with the toy coder (no threads of its own). Shuttle explores interleavings
//! and reports any deadlock or failed assertion; after each run every page must hold what
//! some serial order of the racing requests would leave, and mm_stat must add up.
//!
//! Run with `cargo test -p wring-blk --features shuttle --test model`.
#![cfg(feature = "shuttle")]

use shuttle::sync::Arc;
use shuttle::thread;
use wring_blk::{BlkError, PageJob, Slot, Store, Streams, ToyStreams, PAGE_SIZE};
use wring_engine::codec::{standalone, CodecState};
use wring_engine::Algorithm;

const ITERATIONS: usize = 500;
const PAGES: usize = 3;

fn store() -> Arc<Store> {
    Arc::new(Store::new((PAGES * PAGE_SIZE) as u64, 0, Box::new(ToyStreams)).unwrap())
}

fn page(fill: u8) -> Vec<u8> {
    (0..PAGE_SIZE)
        .map(|i| if i % 3 == 0 { fill } else { i as u8 })
        .collect()
}

/// A page the toy coder packs into exactly 2048 bytes (runs of 4): two objects per arena page.
fn dense(fill: u8) -> Vec<u8> {
    (0..PAGE_SIZE).map(|i| (i / 4) as u8 ^ fill).collect()
}

/// The engine's lzo-rle on the calling thread in one codec state, with no threads of its own
/// (the offload's would be outside the model): the secondary algorithm of the recompression
/// model. The lock is never held across a shuttle operation.
struct LzoRlePages(std::sync::Mutex<Box<dyn CodecState>>);

impl LzoRlePages {
    fn new() -> LzoRlePages {
        let state = standalone(Algorithm::LzoRle, 0, PAGE_SIZE).expect("a codec state");
        LzoRlePages(std::sync::Mutex::new(state))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Box<dyn CodecState>> {
        wring_sync::lock(&self.0)
    }
}

impl Streams for LzoRlePages {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        for j in jobs {
            let r = self.state().compress(0, j.input, j.output);
            j.result = Some(r.map_err(|source| BlkError::Compress {
                algorithm: self.algorithm(),
                source,
            }));
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for j in jobs {
            let want = j.output.len();
            j.result = Some(match self.state().decompress(j.input, j.output) {
                Ok(n) if n == want => Ok(Some(n)),
                Ok(n) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("{n} bytes"),
                }),
                Err(source) => Err(BlkError::Decompress {
                    page: 0,
                    algorithm: self.algorithm(),
                    source,
                }),
            });
        }
    }

    fn streams(&self) -> usize {
        1
    }

    fn set_streams(&self, _n: usize) -> Result<(), BlkError> {
        Ok(())
    }

    fn algorithm(&self) -> String {
        "lzo-rle".into()
    }
}

fn check_stats(s: &Store) {
    let m = s.stat().mm_stat;
    let pages = s.size() as usize / PAGE_SIZE;
    let stored = (0..pages)
        .filter(|&p| s.slot(p) != Some(Slot::Empty))
        .count() as u64;
    assert_eq!(m.orig_data_size, stored * PAGE_SIZE as u64);
    assert!(m.compr_data_size <= m.mem_used_total);
}

/// Two threads each write their own quarter of the same page (partial RMW) while a third
/// rewrites the next page whole and compacts: no quarter is lost.
#[test]
fn partial_writes_to_one_page_lose_nothing() {
    shuttle::check_random(
        || {
            let s = store();
            let writers: Vec<_> = (0..2u8)
                .map(|t| {
                    let s = Arc::clone(&s);
                    thread::spawn(move || {
                        s.write(t as u64 * 1024, &[t + 1; 1024]).unwrap();
                    })
                })
                .collect();
            let s2 = Arc::clone(&s);
            let other = thread::spawn(move || {
                s2.write(PAGE_SIZE as u64, &page(9)).unwrap();
                s2.compact();
            });
            for w in writers {
                w.join().unwrap();
            }
            other.join().unwrap();
            let mut b = vec![0u8; 2048];
            s.read(0, &mut b).unwrap();
            assert!(b[..1024].iter().all(|&x| x == 1) && b[1024..].iter().all(|&x| x == 2));
            let mut p = vec![0u8; PAGE_SIZE];
            s.read(PAGE_SIZE as u64, &mut p).unwrap();
            assert_eq!(p, page(9));
            check_stats(&s);
        },
        ITERATIONS,
    );
}

/// A write, a discard and a write-zeroes of the same pages race; each page ends as one of the
/// serial outcomes (the write's data, or zeros) and a read racing them sees whole pages of
/// one or the other.
#[test]
fn write_discard_zero_race_leaves_a_serial_outcome() {
    shuttle::check_random(
        || {
            let s = store();
            let data: Vec<u8> = (0..PAGES as u8).flat_map(page).collect();
            let (s1, s2, s3, s4) = (
                Arc::clone(&s),
                Arc::clone(&s),
                Arc::clone(&s),
                Arc::clone(&s),
            );
            let d = data.clone();
            let t1 = thread::spawn(move || s1.write(0, &d).unwrap());
            let t2 = thread::spawn(move || s2.discard(0, (2 * PAGE_SIZE) as u64).unwrap());
            let t3 = thread::spawn(move || {
                s3.write_zeroes(PAGE_SIZE as u64, (2 * PAGE_SIZE) as u64)
                    .unwrap()
            });
            let d = data.clone();
            let t4 = thread::spawn(move || {
                let mut b = vec![0u8; PAGES * PAGE_SIZE];
                s4.read(0, &mut b).unwrap();
                for p in 0..PAGES {
                    let got = &b[p * PAGE_SIZE..(p + 1) * PAGE_SIZE];
                    assert!(
                        got == &d[p * PAGE_SIZE..(p + 1) * PAGE_SIZE]
                            || got.iter().all(|&x| x == 0),
                        "page {p} torn"
                    );
                }
            });
            for t in [t1, t2, t3, t4] {
                t.join().unwrap();
            }
            let mut b = vec![0u8; PAGES * PAGE_SIZE];
            s.read(0, &mut b).unwrap();
            for p in 0..PAGES {
                let got = &b[p * PAGE_SIZE..(p + 1) * PAGE_SIZE];
                assert!(
                    got == &data[p * PAGE_SIZE..(p + 1) * PAGE_SIZE] || got.iter().all(|&x| x == 0)
                );
            }
            check_stats(&s);
        },
        ITERATIONS,
    );
}

/// Compaction moves objects while other pages of the same size class are discarded and read:
/// every read sees its page's bytes, and the pages kept read back intact afterwards.
#[test]
fn compaction_racing_discards_and_reads_keeps_every_object() {
    shuttle::check_random(
        || {
            let pages = 4;
            let s =
                Arc::new(Store::new((pages * PAGE_SIZE) as u64, 0, Box::new(ToyStreams)).unwrap());
            // Same shape, different bytes: one size class, two objects per zspage.
            for p in 0..pages {
                s.write((p * PAGE_SIZE) as u64, &dense(p as u8 + 1))
                    .unwrap();
            }
            let (s1, s2, s3) = (Arc::clone(&s), Arc::clone(&s), Arc::clone(&s));
            let discard = thread::spawn(move || {
                s1.discard(0, PAGE_SIZE as u64).unwrap();
                s1.discard((2 * PAGE_SIZE) as u64, PAGE_SIZE as u64)
                    .unwrap();
            });
            let compact = thread::spawn(move || {
                s2.compact();
                s2.compact();
            });
            let read = thread::spawn(move || {
                for p in [1usize, 3] {
                    let mut b = vec![0u8; PAGE_SIZE];
                    s3.read((p * PAGE_SIZE) as u64, &mut b).unwrap();
                    assert_eq!(b, dense(p as u8 + 1), "page {p} during compaction");
                }
            });
            for t in [discard, compact, read] {
                t.join().unwrap();
            }
            s.compact();
            for p in [1usize, 3] {
                let mut b = vec![0u8; PAGE_SIZE];
                s.read((p * PAGE_SIZE) as u64, &mut b).unwrap();
                assert_eq!(b, dense(p as u8 + 1));
            }
            // Pages 1 and 3 sat alone in two zspages: one moved, one zspage freed.
            assert!(
                s.stat().mm_stat.pages_compacted >= 1,
                "{:?}",
                s.stat().mm_stat
            );
            check_stats(&s);
        },
        ITERATIONS,
    );
}

/// Reset racing writes: afterwards the statistics match the slots.
#[test]
fn reset_racing_writes_keeps_stats_consistent() {
    shuttle::check_random(
        || {
            let s = store();
            let s1 = Arc::clone(&s);
            let t = thread::spawn(move || {
                s1.write(0, &page(1)).unwrap();
                s1.write(100, &[5u8; 10]).unwrap();
            });
            s.reset();
            t.join().unwrap();
            check_stats(&s);
        },
        ITERATIONS,
    );
}

/// Idle marking and writeback racing a partial write, a whole write and a read of the same
/// page: the page ends as a serial order leaves it (the partial write on top of either the
/// first contents or the whole write), every written-back block is counted, and the stats
/// add up.
#[test]
fn writeback_racing_writes_and_reads_keeps_every_page() {
    /// Removes the backing file also when a run fails.
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let path = std::env::temp_dir().join(format!("wring-blk-model-{}.img", std::process::id()));
    let _guard = Remove(path.clone());
    let p = path.clone();
    shuttle::check_random(
        move || {
            let path = &p;
            let _ = std::fs::remove_file(path);
            let mut st = Store::new((PAGES * PAGE_SIZE) as u64, 0, Box::new(ToyStreams)).unwrap();
            st.set_backing(wring_blk::Backing::open(path, PAGES as u64).unwrap())
                .unwrap();
            let s = Arc::new(st);
            s.write(0, &dense(1)).unwrap();
            s.write(PAGE_SIZE as u64, &dense(2)).unwrap();
            let s1 = Arc::clone(&s);
            let wb = thread::spawn(move || {
                wring_blk::mark_idle(&s1, None);
                wring_blk::writeback(&s1, wring_blk::WritebackType::Idle).unwrap();
            });
            let s2 = Arc::clone(&s);
            let writer = thread::spawn(move || {
                s2.write(10, &[0xEE; 100]).unwrap();
                s2.write(PAGE_SIZE as u64, &dense(3)).unwrap();
            });
            let mut b = vec![0u8; PAGE_SIZE];
            s.read(0, &mut b).unwrap();
            let mut first = dense(1);
            first[10..110].fill(0xEE);
            assert!(b == dense(1) || b == first, "a read saw a torn page");
            wb.join().unwrap();
            writer.join().unwrap();
            s.read(0, &mut b).unwrap();
            assert!(b == first, "page 0 lost the partial write");
            s.read(PAGE_SIZE as u64, &mut b).unwrap();
            assert!(b == dense(3), "page 1 is not the last whole write");
            check_stats(&s);
            let written = (0..PAGES)
                .filter(|&p| matches!(s.slot(p), Some(Slot::Written { .. })))
                .count() as u64;
            assert_eq!(s.stat().bd_stat.bd_count, written);
        },
        ITERATIONS,
    );
}

/// Recompression (toy primary, lzo-rle secondary, which packs these pages tighter) racing a
/// partial write, a whole write and a read of the same pages: no torn read, no lost write,
/// and a page is recompressed or rewritten, never both half-way.
#[test]
fn recompress_racing_writes_and_reads_keeps_every_page() {
    shuttle::check_random(
        || {
            let mut st = Store::new((PAGES * PAGE_SIZE) as u64, 0, Box::new(ToyStreams)).unwrap();
            st.set_recomp(1, Box::new(LzoRlePages::new())).unwrap();
            let s = Arc::new(st);
            s.write(0, &dense(1)).unwrap();
            s.write(PAGE_SIZE as u64, &dense(2)).unwrap();
            let s1 = Arc::clone(&s);
            let rc = thread::spawn(move || {
                wring_blk::recompress(&s1, &wring_blk::RecompressRequest::default()).unwrap();
            });
            let s2 = Arc::clone(&s);
            let writer = thread::spawn(move || {
                s2.write(10, &[0xEE; 100]).unwrap();
                s2.write(PAGE_SIZE as u64, &dense(3)).unwrap();
            });
            let mut b = vec![0u8; PAGE_SIZE];
            s.read(0, &mut b).unwrap();
            let mut first = dense(1);
            first[10..110].fill(0xEE);
            assert!(b == dense(1) || b == first, "a read saw a torn page");
            rc.join().unwrap();
            writer.join().unwrap();
            s.read(0, &mut b).unwrap();
            assert!(b == first, "page 0 lost the partial write");
            s.read(PAGE_SIZE as u64, &mut b).unwrap();
            assert!(b == dense(3), "page 1 is not the last whole write");
            check_stats(&s);
            let recompressed = (0..PAGES).filter(|&p| s.priority(p) == Some(1)).count() as u64;
            assert_eq!(s.stat().recompressed_pages, recompressed);
        },
        ITERATIONS,
    );
}
