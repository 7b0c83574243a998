//! The store against a plain `Vec<u8>`: random writes, reads, discards, write-zeroes and
//! compactions at any offset and length, on the toy coder and on the engine's lz4 and zstd;
//! mm_stat's invariants after every step; mem_limit; same and huge pages; block status. The
//! same at every `slot_size` (4K to 32K): requests split by slot, partial slots
//! read-modified-written, same-filled and huge slots counted in 4 KiB pages.

use proptest::prelude::*;
use wring_blk::{Options, Slot, Store, ToyStreams, PAGE_SIZE, SLOT_SIZES};

const SIZE: usize = 16 * PAGE_SIZE + 1000;

#[derive(Debug, Clone)]
enum Op {
    Write {
        offset: usize,
        len: usize,
        kind: u8,
        seed: u8,
    },
    Read {
        offset: usize,
        len: usize,
    },
    Discard {
        offset: usize,
        len: usize,
    },
    Zero {
        offset: usize,
        len: usize,
    },
    Compact,
}

/// An offset in a device of `size` bytes and a length of at most `max` from it.
fn range_in(size: usize, max: usize) -> impl Strategy<Value = (usize, usize)> + Clone {
    (0..size).prop_flat_map(move |o| (Just(o), 0..=(size - o).min(max)))
}

fn range() -> impl Strategy<Value = (usize, usize)> + Clone {
    range_in(SIZE.div_ceil(PAGE_SIZE) * PAGE_SIZE, 5 * PAGE_SIZE)
}

fn ops_in(range: impl Strategy<Value = (usize, usize)> + Clone) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (range.clone(), 0u8..4, any::<u8>()).prop_map(|((offset, len), kind, seed)| Op::Write { offset, len, kind, seed }),
        3 => range.clone().prop_map(|(offset, len)| Op::Read { offset, len }),
        1 => range.clone().prop_map(|(offset, len)| Op::Discard { offset, len }),
        1 => range.prop_map(|(offset, len)| Op::Zero { offset, len }),
        1 => Just(Op::Compact),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    ops_in(range())
}

/// A slot size and operations on a device of 6 such slots less 1000 bytes, with requests of
/// up to 2.5 slots at any offset (so whole slots, partial slots and both ends of a slot).
fn slot_ops(n: usize) -> impl Strategy<Value = (usize, Vec<Op>)> {
    prop::sample::select(SLOT_SIZES.to_vec()).prop_flat_map(move |slot| {
        let r = range_in(6 * slot - 1000, slot * 5 / 2);
        (Just(slot), prop::collection::vec(ops_in(r), 1..n))
    })
}

/// Data of four kinds: compressible text, incompressible noise, one repeated word, zeros.
fn data(len: usize, kind: u8, seed: u8) -> Vec<u8> {
    let mut x = seed as u64 | 1;
    (0..len)
        .map(|i| match kind {
            0 => b"the quick brown fox jumps "[(i + seed as usize) % 26],
            1 => {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            }
            2 => [seed, 1, 2, 3, 4, 5, 6, 7][i % 8],
            _ => 0,
        })
        .collect()
}

fn check_stats(store: &Store) {
    let s = store.stat();
    let m = s.mm_stat;
    let slot = store.slot_size();
    assert_eq!(s.slot_size, slot);
    let slots: Vec<Slot> = (0..store.size() as usize / slot)
        .map(|p| store.slot(p).unwrap())
        .collect();
    let count = |f: &dyn Fn(&Slot) -> bool| slots.iter().filter(|s| f(s)).count() as u64;
    let per = (slot / PAGE_SIZE) as u64;
    assert_eq!(
        m.orig_data_size,
        count(&|s| *s != Slot::Empty) * slot as u64
    );
    // Per-page counters count 4 KiB pages: a slot is slot_size / 4096 of them.
    assert_eq!(m.same_pages, count(&|s| matches!(s, Slot::Same(_))) * per);
    assert_eq!(m.huge_pages, count(&|s| s.is_huge(slot)) * per);
    assert!(m.compr_data_size <= m.mem_used_total, "{m:?}");
    assert!(m.mem_used_total <= m.mem_used_max, "{m:?}");
    assert!(m.huge_pages <= m.huge_pages_since, "{m:?}");
}

fn run(store: &Store, ops: &[Op]) {
    let mut reference = vec![0u8; store.size() as usize];
    for op in ops {
        match *op {
            Op::Write {
                offset,
                len,
                kind,
                seed,
            } => {
                let d = data(len, kind, seed);
                store.write(offset as u64, &d).unwrap();
                reference[offset..offset + len].copy_from_slice(&d);
            }
            Op::Read { offset, len } => {
                let mut buf = vec![0xAAu8; len];
                store.read(offset as u64, &mut buf).unwrap();
                assert_eq!(
                    buf,
                    &reference[offset..offset + len],
                    "read {len} at {offset}"
                );
            }
            Op::Discard { offset, len } => {
                store.discard(offset as u64, len as u64).unwrap();
                let slot = store.slot_size();
                let first = offset.div_ceil(slot) * slot;
                let end = (offset + len) / slot * slot;
                if end > first {
                    reference[first..end].fill(0);
                }
            }
            Op::Zero { offset, len } => {
                store.write_zeroes(offset as u64, len as u64).unwrap();
                reference[offset..offset + len].fill(0);
            }
            Op::Compact => {
                store.compact();
            }
        }
        check_stats(store);
    }
    let mut all = vec![0u8; reference.len()];
    store.read(0, &mut all).unwrap();
    assert!(
        all == reference,
        "the whole device differs from the reference"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn toy_store_matches_a_vec(ops in prop::collection::vec(op(), 1..40)) {
        let store = Store::new(SIZE as u64, 0, Box::new(ToyStreams)).unwrap();
        run(&store, &ops);
    }

    #[test]
    fn every_slot_size_matches_a_vec((slot, ops) in slot_ops(40)) {
        let store = Store::with_slot_size(6 * slot as u64 - 1000, slot, 0, Box::new(ToyStreams)).unwrap();
        assert_eq!(store.size(), 6 * slot as u64, "the size rounds up to whole slots");
        run(&store, &ops);
    }

    #[test]
    fn zstd_at_every_slot_size_matches_a_vec((slot, ops) in slot_ops(20)) {
        let o = Options::parse(&format!("comp_algorithm=zstd:3,streams=2,slot_size={slot}")).unwrap();
        let store = wring_blk::open(6 * slot as u64 - 1000, &o).unwrap();
        run(&store, &ops);
    }

    #[test]
    fn lz4_store_matches_a_vec(ops in prop::collection::vec(op(), 1..30)) {
        let store = wring_blk::open(SIZE as u64, &Options::parse("comp_algorithm=lz4,streams=2").unwrap()).unwrap();
        run(&store, &ops);
    }
}

#[test]
fn every_algorithm_round_trips() {
    for alg in ["lzo", "lzo-rle", "lz4", "lz4hc", "zstd:3", "deflate:6"] {
        let o = Options::parse(&format!("comp_algorithm={alg},streams=2")).unwrap();
        let store = wring_blk::open(8 * PAGE_SIZE as u64, &o).unwrap();
        let d: Vec<u8> = (0..8).flat_map(|k| data(PAGE_SIZE, k % 3, k)).collect();
        store.write(0, &d).unwrap();
        let mut back = vec![0u8; d.len()];
        store.read(0, &mut back).unwrap();
        assert!(back == d, "{alg}");
        let s = store.stat();
        assert_eq!(s.comp_algorithm, o.comp_algorithm.text());
        assert!(
            s.mm_stat.compr_data_size < s.mm_stat.orig_data_size,
            "{alg}: {:?}",
            s.mm_stat
        );
    }
}

#[test]
fn same_huge_and_compressed_pages_are_counted_as_zram_counts_them() {
    let store = wring_blk::open(
        4 * PAGE_SIZE as u64,
        &Options::parse("comp_algorithm=lz4").unwrap(),
    )
    .unwrap();
    store.write(0, &data(PAGE_SIZE, 2, 9)).unwrap(); // same-filled, not zero
    store
        .write(PAGE_SIZE as u64, &data(PAGE_SIZE, 1, 9))
        .unwrap(); // noise: huge
    store
        .write(2 * PAGE_SIZE as u64, &data(PAGE_SIZE, 0, 9))
        .unwrap(); // text
    let m = store.stat().mm_stat;
    assert_eq!(m.same_pages, 1);
    assert_eq!((m.huge_pages, m.huge_pages_since), (1, 1));
    assert_eq!(m.orig_data_size, 3 * PAGE_SIZE as u64);
    assert!(m.compr_data_size > PAGE_SIZE as u64 && m.compr_data_size < 2 * PAGE_SIZE as u64);
    assert!(matches!(store.slot(0), Some(Slot::Same(_))));
    assert!(store.slot(1).is_some_and(|s| s.is_huge(PAGE_SIZE)));
    // Overwriting the huge page with text: huge_pages drops, huge_pages_since stays.
    store
        .write(PAGE_SIZE as u64, &data(PAGE_SIZE, 0, 3))
        .unwrap();
    let m = store.stat().mm_stat;
    assert_eq!((m.huge_pages, m.huge_pages_since), (0, 1));
    // Block status: page 0 holds a non-zero word (data), page 3 was never written (hole).
    let e = store.extents(0, 4 * PAGE_SIZE as u64).unwrap();
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(!e[0].hole && e[0].len == 3 * PAGE_SIZE as u64);
    assert!(e[1].hole);
}

#[test]
fn out_of_range_requests_fail_and_change_nothing() {
    let store = Store::new(2 * PAGE_SIZE as u64, 0, Box::new(ToyStreams)).unwrap();
    store.write(0, &[7u8; 100]).unwrap();
    let before = store.stat();
    assert!(store.write(2 * PAGE_SIZE as u64 - 10, &[1u8; 11]).is_err());
    assert!(store.write(u64::MAX - 1, &[1u8; 11]).is_err());
    assert!(store.read(2 * PAGE_SIZE as u64, &mut [0u8; 1]).is_err());
    assert!(store
        .discard(PAGE_SIZE as u64, 2 * PAGE_SIZE as u64)
        .is_err());
    let e = store.write(2 * PAGE_SIZE as u64, &[1u8; 1]).unwrap_err();
    assert_eq!(e.errno(), libc_einval());
    let after = store.stat();
    assert_eq!(after.mm_stat, before.mm_stat);
    assert_eq!(after.io_stat.invalid_io, before.io_stat.invalid_io + 5);
    let mut back = [0u8; 100];
    store.read(0, &mut back).unwrap();
    assert_eq!(back, [7u8; 100]);
}

fn libc_einval() -> i32 {
    22
}

#[test]
fn at_mem_limit_writes_fail_with_enospc_and_nothing_stored_is_lost() {
    let o = Options::parse("comp_algorithm=lz4,mem_limit=64K").unwrap();
    let pages = 64;
    let store = wring_blk::open((pages * PAGE_SIZE) as u64, &o).unwrap();
    let mut reference = vec![0u8; pages * PAGE_SIZE];
    let mut failed = None;
    for p in 0..pages {
        let d = data(PAGE_SIZE, 1, p as u8);
        match store.write((p * PAGE_SIZE) as u64, &d) {
            Ok(()) => reference[p * PAGE_SIZE..(p + 1) * PAGE_SIZE].copy_from_slice(&d),
            Err(e) => {
                assert_eq!(e.errno(), 28, "{e}"); // ENOSPC
                failed = Some(p);
                break;
            }
        }
    }
    // Incompressible pages are huge: one arena page each, so 16 fit under 64 KiB.
    let p = failed.expect("64 KiB of limit cannot hold 64 incompressible pages");
    assert_eq!(p, 16);
    let s = store.stat();
    assert!(s.mm_stat.mem_used_total <= 64 * 1024, "{:?}", s.mm_stat);
    assert_eq!(s.io_stat.failed_writes, 1);
    // Overwriting a stored page fails too (the new object is allocated before the old one is
    // freed), and keeps the old contents.
    assert!(store.write(0, &data(PAGE_SIZE, 1, 200)).is_err());
    let mut all = vec![0u8; reference.len()];
    store.read(0, &mut all).unwrap();
    assert!(all == reference, "stored pages changed after ENOSPC");
    // Discarding frees room: the write that failed now succeeds.
    store.discard(0, (4 * PAGE_SIZE) as u64).unwrap();
    store
        .write((p * PAGE_SIZE) as u64, &data(PAGE_SIZE, 1, 1))
        .unwrap();
    // Raising the limit live lets writes go on.
    store.set_mem_limit(0);
    store
        .write(((p + 1) * PAGE_SIZE) as u64, &data(PAGE_SIZE, 1, 2))
        .unwrap();
}

#[test]
fn compact_returns_free_arena_space() {
    let store = wring_blk::open(
        (256 * PAGE_SIZE) as u64,
        &Options::parse("comp_algorithm=lz4").unwrap(),
    )
    .unwrap();
    for p in 0..256u64 {
        store
            .write(p * PAGE_SIZE as u64, &data(PAGE_SIZE, 0, p as u8))
            .unwrap();
    }
    for p in (0..256u64).filter(|p| p % 4 != 0) {
        store
            .discard(p * PAGE_SIZE as u64, PAGE_SIZE as u64)
            .unwrap();
    }
    let before = store.stat().mm_stat;
    let freed = store.compact();
    let after = store.stat().mm_stat;
    assert!(freed > 0, "{before:?}");
    assert_eq!(after.pages_compacted, freed);
    assert_eq!(
        after.mem_used_total,
        before.mem_used_total - freed * PAGE_SIZE as u64
    );
    assert!(
        after.mem_used_total < 2 * after.compr_data_size + 8 * PAGE_SIZE as u64,
        "{after:?}"
    );
    for p in (0..256u64).filter(|p| p % 4 == 0) {
        let mut b = vec![0u8; PAGE_SIZE];
        store.read(p * PAGE_SIZE as u64, &mut b).unwrap();
        assert_eq!(b, data(PAGE_SIZE, 0, p as u8));
    }
}

#[test]
fn concurrent_writers_on_distinct_and_shared_pages() {
    let store = std::sync::Arc::new(
        wring_blk::open(
            (64 * PAGE_SIZE) as u64,
            &Options::parse("comp_algorithm=lz4,streams=2").unwrap(),
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let s = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                for round in 0..50u8 {
                    // Each thread owns 16 pages, and all write byte t of page 63 (partial RMW).
                    let p = (t as u64) * 16 + (round as u64 % 15);
                    s.write(p * PAGE_SIZE as u64, &data(PAGE_SIZE, 0, round))
                        .unwrap();
                    s.write(63 * PAGE_SIZE as u64 + t as u64 * 100, &[t + 1; 100])
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut last = vec![0u8; PAGE_SIZE];
    store.read(63 * PAGE_SIZE as u64, &mut last).unwrap();
    for t in 0..4usize {
        assert!(
            last[t * 100..t * 100 + 100]
                .iter()
                .all(|&b| b == t as u8 + 1),
            "thread {t}'s bytes were lost"
        );
    }
}
