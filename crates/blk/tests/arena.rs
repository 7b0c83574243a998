//! The arena against a map of live objects: random stores of every size, frees and
//! compactions; every live object reads back, memory never goes below what is live, and an
//! emptied arena holds no page.

use proptest::prelude::*;
use wring_blk::arena::{Arena, Handle, MAX_OBJECT};
use wring_blk::PAGE_SIZE;

#[derive(Debug, Clone)]
enum Op {
    Store(usize, u8),
    Free(usize),
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (prop_oneof![1usize..64, 1000usize..1100, 2000usize..2100, 3000..=PAGE_SIZE], any::<u8>())
            .prop_map(|(n, b)| Op::Store(n, b)),
        4 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::Compact),
    ]
}

/// Objects for an arena built for 32 KiB slots: small ones, and ones across page boundaries.
fn large_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (prop_oneof![1usize..64, 3000usize..5000, 9000usize..13000, 20000..=MAX_OBJECT], any::<u8>())
            .prop_map(|(n, b)| Op::Store(n, b)),
        4 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::Compact),
    ]
}

fn check(a: &Arena, live: &[(Handle, usize, u8)]) {
    for &(h, n, b) in live {
        let mut out = vec![0u8; n];
        a.read(h, &mut out);
        assert!(
            out.iter().all(|&x| x == b),
            "object of {n} bytes of {b} changed"
        );
    }
    let bytes: usize = live.iter().map(|&(_, n, _)| n).sum();
    assert!(a.total_pages() as usize * PAGE_SIZE >= bytes);
    assert!(a.max_pages() >= a.total_pages());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arena_matches_a_map_of_live_objects(ops in prop::collection::vec(op(), 1..300)) {
        run(Arena::new(), ops)?;
    }

    #[test]
    fn a_32k_arena_matches_a_map_of_live_objects(ops in prop::collection::vec(large_op(), 1..200)) {
        run(Arena::with_max_object(MAX_OBJECT), ops)?;
    }
}

fn run(a: Arena, ops: Vec<Op>) -> Result<(), TestCaseError> {
    {
        let mut live: Vec<(Handle, usize, u8)> = Vec::new();
        for op in ops {
            match op {
                Op::Store(n, b) => {
                    let h = a.store(&vec![b; n], 0).unwrap();
                    live.push((h, n, b));
                }
                Op::Free(i) if !live.is_empty() => {
                    let (h, _, _) = live.swap_remove(i % live.len());
                    a.free(h);
                }
                Op::Free(_) => {}
                Op::Compact => {
                    let before = a.total_pages();
                    let freed = a.compact();
                    prop_assert_eq!(a.total_pages(), before - freed);
                }
            }
            check(&a, &live);
        }
        for (h, _, _) in live.drain(..) {
            a.free(h);
        }
        prop_assert_eq!(a.total_pages(), 0);
    }
    Ok(())
}
