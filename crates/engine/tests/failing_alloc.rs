//! A failed workspace allocation is memory pressure, never an abort: with an allocator that
//! refuses large allocations on demand, `get` waits for the preallocated workspace to come back
//! (fs/btrfs/compression.c's btrfs_get_workspace sleeps on `wsm.wait` when the allocation
//! fails), and a standalone codec state returns its [`AllocError`]. Every algorithm.
//!
//! The refusal is per thread (a thread-local switch), so the test harness, the manager's timer
//! and the other tests allocate as usual.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use wring_engine::clock::SystemClock;
use wring_engine::codec::{codec_for, standalone};
use wring_engine::workspace::{Manager, ManagerConfig};
use wring_engine::{Algorithm, MAX_EXTENT};

struct Failing;

/// The switch of one thread: refuse one allocation larger than [`SMALL`], after letting `skip`
/// such allocations through. One refusal, then the switch is off, so whatever runs after it
/// (an abort message, a panic hook, the test harness's output capture) allocates as usual.
#[derive(Clone, Copy)]
struct Switch {
    armed: bool,
    skip: usize,
    /// Whether the refusal happened.
    refused: bool,
}

thread_local! {
    static SWITCH: Cell<Switch> = const {
        Cell::new(Switch { armed: false, skip: 0, refused: false })
    };
}

/// Larger than any small object (a boxed codec handle, a thread's bookkeeping), smaller than
/// every workspace buffer: lzo's 16 KiB dictionary, zlib's streams and drain buffer, lz4's and
/// zstd's contexts, the 128 KiB extent buffer.
const SMALL: usize = 2048;

fn refused(size: usize) -> bool {
    if size <= SMALL {
        return false;
    }
    // `try_with`: the thread-local may already be gone while a thread is torn down.
    SWITCH
        .try_with(|s| {
            let mut sw = s.get();
            if !sw.armed {
                return false;
            }
            if sw.skip > 0 {
                sw.skip -= 1;
                s.set(sw);
                return false;
            }
            s.set(Switch {
                armed: false,
                skip: 0,
                refused: true,
            });
            true
        })
        .unwrap_or(false)
}

// SAFETY: forwards every call to the system allocator unchanged, except that it returns null
// (which GlobalAlloc allows for any request) when the thread's switch refuses the size.
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if refused(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if refused(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && refused(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` came from System with `layout`; the new size is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Failing = Failing;

/// Run `f` on this thread with the `skip`+1-th large allocation refused; also says whether
/// the refusal happened (false: `f` made at most `skip` large allocations).
fn refusing<R>(skip: usize, f: impl FnOnce() -> R) -> (R, bool) {
    SWITCH.with(|s| {
        s.set(Switch {
            armed: true,
            skip,
            refused: false,
        })
    });
    let r = f();
    let sw = SWITCH.with(|s| {
        s.replace(Switch {
            armed: false,
            skip: 0,
            refused: false,
        })
    });
    (r, sw.refused)
}

const ALGORITHMS: [Algorithm; Algorithm::ALL.len()] = Algorithm::ALL;

/// Each large allocation a codec state makes, refused in turn, is an AllocError.
#[test]
fn a_standalone_state_returns_the_allocation_error() {
    for alg in ALGORITHMS {
        let level = alg.default_level();
        for skip in 0.. {
            let (r, hit) = refusing(skip, || standalone(alg, level, MAX_EXTENT).map(|_| ()));
            if !hit {
                assert!(r.is_ok(), "{alg}: {r:?}");
                assert!(skip > 0, "{alg}: a codec state made no large allocation");
                break;
            }
            assert!(
                r.is_err(),
                "{alg}: large allocation {skip} of a codec state was refused, yet it was built"
            );
        }
    }
}

/// Each large allocation of a workspace, refused in turn, makes `get` wait for the
/// preallocated workspace instead of aborting or panicking.
#[test]
fn get_waits_for_the_preallocated_workspace_when_allocation_fails() {
    for alg in ALGORITHMS {
        for skip in 0.. {
            if !one_failed_get(alg, skip) {
                assert!(skip > 0, "{alg}: a workspace made no large allocation");
                break;
            }
        }
    }
}

/// Lend the preallocated workspace, then `get` on another thread with the `skip`+1-th large
/// allocation refused. Returns whether the refusal happened (and `get` had to wait).
fn one_failed_get(alg: Algorithm, skip: usize) -> bool {
    let cfg = ManagerConfig {
        streams: 2,
        ..ManagerConfig::default()
    };
    let manager = Arc::new(Manager::new(
        codec_for(alg, MAX_EXTENT),
        cfg,
        Arc::new(SystemClock::default()),
    ));
    let level = alg.default_level();
    // The preallocated workspace, lent out: the next get has to allocate.
    let held = manager.get(level);
    let waiter = {
        let manager = Arc::clone(&manager);
        std::thread::spawn(move || {
            refusing(skip, || {
                let ws = manager.get(level);
                manager.put(ws);
            })
            .1
        })
    };
    // Wait (without a deadline) until the waiter has got a workspace of its own or sleeps.
    while manager.stats().waits == 0 && !waiter.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    if manager.stats().waits == 0 {
        let hit = waiter.join();
        assert_eq!(
            hit.as_ref().ok(),
            Some(&false),
            "{alg}: large allocation {skip} was refused and get neither waited nor returned"
        );
        manager.put(held);
        return false;
    }
    let stats = manager.stats();
    assert!(stats.alloc_failures >= 1, "{alg}: {stats:?}");
    manager.put(held);
    let hit = waiter.join();
    assert_eq!(
        hit.as_ref().ok(),
        Some(&true),
        "{alg}: the waiting get panicked instead of taking the workspace that came back"
    );
    assert_eq!(
        manager.stats().workspaces,
        1,
        "{alg}: {:?}",
        manager.stats()
    );
    true
}
