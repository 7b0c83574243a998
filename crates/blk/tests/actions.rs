//! zram's sysfs actions on the store itself, with an injected clock (no sleeps): `idle`.

use std::sync::Arc;

use wring_blk::{flag, ManualClock, Slot, Store, ToyStreams, PAGE_SIZE};

const P: u64 = PAGE_SIZE as u64;

/// A page the toy coder stores compressed (runs of four).
fn text(seed: u8) -> Vec<u8> {
    (0..PAGE_SIZE).map(|i| (i / 4) as u8 ^ seed).collect()
}

fn toy_store(pages: u64, clock: &Arc<ManualClock>) -> Store {
    let mut s = Store::new(pages * P, 0, Box::new(ToyStreams)).unwrap();
    s.set_clock(Arc::clone(clock) as Arc<dyn wring_blk::Clock>);
    s
}

fn idle(s: &Store, page: usize) -> bool {
    s.flags(page).is_some_and(|f| f & flag::IDLE != 0)
}

#[test]
fn idle_all_marks_stored_pages_and_access_clears_the_mark() {
    let clock = Arc::new(ManualClock::default());
    let s = toy_store(8, &clock);
    for p in 0..4u8 {
        s.write(p as u64 * P, &text(p)).unwrap();
    }
    s.write(4 * P, &[9u8; PAGE_SIZE]).unwrap(); // same-filled: never idle
    assert!(matches!(s.slot(4), Some(Slot::Same(_))));
    assert_eq!(s.mark_idle(None), 4);
    assert_eq!(s.stat().idle_pages, 4);
    assert!((0..4).all(|p| idle(&s, p)) && !idle(&s, 4) && !idle(&s, 5));
    // A read of part of page 1, a whole write of page 2, a partial write of page 3.
    let mut b = [0u8; 10];
    s.read(P + 100, &mut b).unwrap();
    s.write(2 * P, &text(7)).unwrap();
    s.write(3 * P + 5, &[1, 2, 3]).unwrap();
    assert!(idle(&s, 0) && !idle(&s, 1) && !idle(&s, 2) && !idle(&s, 3));
    assert_eq!(s.stat().idle_pages, 1);
    // Discarding the idle page drops the count; reset clears everything.
    s.discard(0, P).unwrap();
    assert_eq!(s.stat().idle_pages, 0);
    s.mark_idle(None);
    s.reset();
    assert_eq!(s.stat().idle_pages, 0);
}

#[test]
fn idle_seconds_marks_pages_not_accessed_for_that_long() {
    let clock = Arc::new(ManualClock::default());
    let s = toy_store(4, &clock);
    for p in 0..3u8 {
        s.write(p as u64 * P, &text(p)).unwrap(); // at t=0
    }
    clock.advance(100);
    let mut b = [0u8; 1];
    s.read(0, &mut b).unwrap(); // page 0 at t=100
    clock.advance(50); // t=150
    s.write(2 * P, &text(5)).unwrap(); // page 2 at t=150
    assert_eq!(s.mark_idle(Some(150)), 1, "only page 1 is 150 s old");
    assert!(!idle(&s, 0) && idle(&s, 1) && !idle(&s, 2));
    assert_eq!(
        s.mark_idle(Some(50)),
        2,
        "pages 0 and 1 are at least 50 s old"
    );
    assert!(idle(&s, 0) && idle(&s, 1) && !idle(&s, 2));
    // A longer age clears marks that no longer qualify, as zram does.
    assert_eq!(s.mark_idle(Some(1000)), 0);
    assert_eq!(s.stat().idle_pages, 0);
    assert_eq!(s.mark_idle(Some(0)), 3, "idle 0 is every stored page");
}
