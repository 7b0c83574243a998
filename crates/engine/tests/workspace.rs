//! The workspace manager's rules, one test each: scan-up borrowing that keeps LRU places,
//! compressing at the requested level, monotonic memory, the reclaim timer on an injected clock,
//! shutdown, stream limits, and forward progress with no memory budget under 64 threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use wring_engine::clock::{Clock, ManualClock};
use wring_engine::codec::codec_for;
use wring_engine::workspace::{Manager, ManagerConfig, DEFAULT_RECLAIM};
use wring_engine::{Algorithm, MAX_EXTENT};

const MAX_CLASS: usize = 21; // zstd level 22

fn manager_with(alg: Algorithm, clock: Arc<ManualClock>, cfg: ManagerConfig) -> Manager {
    Manager::new(codec_for(alg, MAX_EXTENT), cfg, clock as Arc<dyn Clock>)
}

fn zstd(clock: &Arc<ManualClock>) -> Manager {
    let cfg = ManagerConfig {
        streams: 8,
        ..ManagerConfig::default()
    };
    manager_with(Algorithm::Zstd, Arc::clone(clock), cfg)
}

fn text(len: usize) -> Vec<u8> {
    let words = [
        "extent ",
        "workspace ",
        "level ",
        "btrfs ",
        "reclaim ",
        "stream ",
        "zstd ",
    ];
    let mut out = Vec::with_capacity(len + 16);
    let mut x: u32 = 12345;
    while out.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        out.extend_from_slice(words[(x >> 16) as usize % words.len()].as_bytes());
    }
    out.truncate(len);
    out
}

/// Wait (bounded) until `cond` holds; panics with `what` if it never does.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never happened: {what}"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn memory_per_level_is_monotonic_and_negative_levels_share_level_one() {
    let m = zstd(&Arc::new(ManualClock::new()));
    let bytes: Vec<usize> = (1..=22).map(|l| m.level_bytes(l)).collect();
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
    assert!(
        bytes[21] > bytes[0],
        "level 22 needs more than level 1: {bytes:?}"
    );
    for l in -15..=0 {
        assert_eq!(m.level_bytes(l), bytes[0]);
    }
}

#[test]
fn forward_progress_workspace_is_preallocated_and_hidden_from_lru() {
    let m = zstd(&Arc::new(ManualClock::new()));
    let s = m.stats();
    assert_eq!((s.workspaces, s.allocations, s.busy), (1, 1, 0));
    assert_eq!(m.idle_per_class()[MAX_CLASS], 1);
    assert_eq!(m.lru_len(), 0);
    assert_eq!(
        m.timer_deadline(),
        None,
        "nothing on the LRU, so the timer is not armed"
    );
}

#[test]
fn get_scans_up_and_a_borrowed_larger_workspace_keeps_its_lru_place() {
    let clock = Arc::new(ManualClock::new());
    let m = zstd(&clock);
    let max = m.get(22); // hold the max-level workspace so level 15 must allocate its own
    let ws15 = m.get(15);
    assert_eq!((ws15.level(), m.stats().allocations), (15, 2));
    m.put(ws15); // own class: onto the LRU at t=0
    m.put(max);
    assert_eq!(m.lru_len(), 1);

    clock.advance(Duration::from_secs(200));
    let borrowed = m.get(3);
    assert_eq!(
        (borrowed.level(), borrowed.req_level()),
        (15, 3),
        "scan up finds class 15 first"
    );
    assert_eq!(m.stats().scans_up, 1);
    m.put(borrowed); // a lower level borrowed it: last-used time stays t=0

    clock.advance(Duration::from_secs(110)); // 310 s after t=0, 110 s after the borrow
    assert_eq!(
        m.reclaim_now(),
        1,
        "reclaimed by its t=0 time, not the borrow's"
    );
    assert_eq!(m.idle_per_class()[14], 0);
    assert_eq!(
        m.idle_per_class()[MAX_CLASS],
        1,
        "the hidden max workspace survives"
    );
}

#[test]
fn borrowed_workspace_compresses_at_the_requested_level() {
    let clock = Arc::new(ManualClock::new());
    let data = text(MAX_EXTENT);
    let compress = |ws: &mut wring_engine::workspace::Workspace, level| {
        let mut out = vec![0u8; MAX_EXTENT];
        let n = ws
            .compress(level, &data, &mut out)
            .unwrap()
            .expect("text compresses");
        out.truncate(n);
        out
    };
    let m = zstd(&clock);
    let mut big = m.get(1);
    assert_eq!(big.level(), 22);
    let via_big = compress(&mut big, 1);
    let at_22 = compress(&mut big, 22);
    let holder = m.get(0); // the max workspace is out; this one is sized for level 1
    let mut own = m.get(1);
    assert_eq!(own.level(), 1);
    let via_own = compress(&mut own, 1);
    assert_eq!(
        via_big, via_own,
        "a level-22 workspace compresses at level 1 exactly as a level-1 one"
    );
    assert_ne!(via_big, at_22);
    for ws in [big, holder, own] {
        m.put(ws);
    }
}

#[test]
fn reclaim_timer_frees_idle_workspaces_and_rearms_only_while_lru_non_empty() {
    let clock = Arc::new(ManualClock::new());
    let m = zstd(&clock);
    let held = m.get(22);
    let a = m.get(3);
    let b = m.get(9);
    m.put(a);
    assert_eq!(m.timer_deadline(), Some(DEFAULT_RECLAIM));
    clock.advance(Duration::from_secs(100));
    m.put(b);
    m.put(held);
    assert_eq!(m.lru_len(), 2);

    clock.advance(Duration::from_secs(206)); // t=306: nothing idle for 307 s yet
    assert_eq!(m.reclaim_now(), 0);
    assert_eq!(
        m.timer_deadline(),
        Some(Duration::from_secs(306) + DEFAULT_RECLAIM)
    );
    clock.advance(Duration::from_secs(2)); // t=308: `a` expired, `b` not
    assert_eq!(m.reclaim_now(), 1);
    assert!(m.timer_deadline().is_some(), "b is still on the LRU");
    clock.advance(Duration::from_secs(400));
    assert_eq!(m.reclaim_now(), 1);
    assert_eq!(
        m.timer_deadline(),
        None,
        "LRU empty: the timer does not re-arm"
    );
    let s = m.stats();
    assert_eq!((s.reclaims, s.workspaces), (2, 1));
    clock.advance(Duration::from_secs(10_000));
    assert_eq!(
        m.reclaim_now(),
        0,
        "the forward-progress workspace is never reclaimed"
    );
}

#[test]
fn timer_thread_fires_on_the_injected_clock() {
    let clock = Arc::new(ManualClock::new());
    let m = zstd(&clock);
    let held = m.get(22);
    let ws = m.get(5);
    m.put(ws);
    m.put(held);
    assert_eq!(m.stats().reclaims, 0);
    clock.advance(Duration::from_secs(308));
    m.kick_timer();
    eventually("the timer thread reclaims", || m.stats().reclaims == 1);
    eventually("the timer disarms", || m.timer_deadline().is_none());
}

/// A zstd manager reclaiming after `reclaim`, with a level-22 and a level-2 workspace put
/// back idle.
fn two_idle(reclaim: Duration) -> (Arc<ManualClock>, Manager) {
    let clock = Arc::new(ManualClock::new());
    let cfg = ManagerConfig {
        reclaim,
        ..ManagerConfig::default()
    };
    let m = manager_with(Algorithm::Zstd, Arc::clone(&clock), cfg);
    let held = m.get(22);
    let ws = m.get(2);
    m.put(ws);
    m.put(held);
    (clock, m)
}

#[test]
fn reclaim_interval_is_configurable() {
    let (clock, m) = two_idle(Duration::from_secs(5));
    clock.advance(Duration::from_secs(6));
    assert_eq!(m.reclaim_now(), 1);
}

/// An interval too long to add to the clock means "never": putting workspaces back arms the
/// timer without overflowing, and nothing is reclaimed.
#[test]
fn a_reclaim_interval_past_the_end_of_time_never_fires() {
    let (clock, m) = two_idle(Duration::MAX);
    clock.advance(Duration::from_secs(1 << 40));
    assert_eq!(m.reclaim_now(), 0);
}

#[test]
fn shutdown_frees_everything_and_the_timer_cannot_rearm() {
    let clock = Arc::new(ManualClock::new());
    let m = zstd(&clock);
    let held = m.get(22);
    let lent = m.get(4);
    m.put(held);
    assert!(m.timer_deadline().is_none());
    m.shutdown();
    assert_eq!(m.stats().workspaces, 1, "only the lent workspace is left");
    m.put(lent); // comes back after shutdown: freed, not listed, timer not armed
    let s = m.stats();
    assert_eq!((s.workspaces, s.resident_bytes, s.busy), (0, 0, 0));
    assert_eq!(m.timer_deadline(), None);
    clock.advance(Duration::from_secs(1000));
    assert_eq!(m.reclaim_now(), 0);
    assert_eq!(m.timer_deadline(), None);
    let late = m.get(3); // get never fails, even after shutdown
    m.put(late);
    m.shutdown(); // idempotent
}

#[test]
fn callers_above_the_stream_limit_wait_and_raising_it_lets_them_in() {
    let clock = Arc::new(ManualClock::new());
    let cfg = ManagerConfig {
        streams: 2,
        ..ManagerConfig::default()
    };
    let m = Arc::new(manager_with(Algorithm::Zlib, clock, cfg));
    let a = m.get(1);
    let b = m.get(9);
    let waiter = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            let ws = m.get(3);
            m.put(ws);
        })
    };
    eventually("the third caller waits", || m.stats().waits >= 1);
    assert_eq!(m.stats().busy, 2);
    m.set_streams(3);
    waiter.join().unwrap();
    m.put(a);
    m.put(b);
    assert_eq!(m.stats().busy, 0);
}

#[test]
fn a_returned_workspace_wakes_a_waiter() {
    let clock = Arc::new(ManualClock::new());
    let cfg = ManagerConfig {
        streams: 1,
        ..ManagerConfig::default()
    };
    let m = Arc::new(manager_with(Algorithm::Lzo, clock, cfg));
    let a = m.get(0);
    let waiter = {
        let m = Arc::clone(&m);
        thread::spawn(move || m.put(m.get(0)))
    };
    eventually("the second caller waits", || m.stats().waits >= 1);
    m.put(a);
    waiter.join().unwrap();
}

fn zstd_with_four_streams() -> Manager {
    let cfg = ManagerConfig {
        streams: 4,
        ..ManagerConfig::default()
    };
    manager_with(Algorithm::Zstd, Arc::new(ManualClock::new()), cfg)
}

#[test]
fn lowering_the_stream_limit_frees_idle_workspaces() {
    let m = zstd_with_four_streams();
    let held: Vec<_> = (0..4).map(|_| m.get(1)).collect();
    assert_eq!(m.stats().workspaces, 4);
    held.into_iter().for_each(|ws| m.put(ws));
    m.set_streams(1);
    let s = m.stats();
    assert_eq!((s.workspaces, s.frees, s.streams), (1, 3, 1));
    assert_eq!(
        m.idle_per_class()[MAX_CLASS],
        1,
        "the max-level workspace is the one kept"
    );
}

#[test]
fn lowering_the_stream_limit_frees_lent_workspaces_as_they_come_back() {
    let m = zstd_with_four_streams();
    let held: Vec<_> = (0..4).map(|_| m.get(1)).collect();
    m.set_streams(1);
    assert_eq!(m.stats().workspaces, 4, "lent ones stay lent");
    held.into_iter().for_each(|ws| m.put(ws));
    let s = m.stats();
    assert_eq!((s.workspaces, s.frees, s.busy), (1, 3, 0));
    // Once at the limit, returning workspaces frees nothing more.
    let again = m.get(1);
    m.put(again);
    assert_eq!(m.stats().frees, 3);
}

#[test]
fn generic_manager_serves_every_level_from_one_class_at_the_requested_level() {
    let m = manager_with(
        Algorithm::Zlib,
        Arc::new(ManualClock::new()),
        ManagerConfig::default(),
    );
    let data = text(64 * 1024);
    let mut sizes = Vec::new();
    for level in [1, 9, 1] {
        let mut ws = m.get(level);
        let mut out = vec![0u8; data.len()];
        sizes.push(ws.compress(level, &data, &mut out).unwrap().unwrap());
        m.put(ws);
    }
    assert_eq!(
        m.stats().workspaces,
        1,
        "zlib workspaces do not depend on the level"
    );
    assert_eq!(sizes[0], sizes[2]);
    assert!(
        sizes[1] < sizes[0],
        "level 9 beats level 1 on text: {sizes:?}"
    );
}

#[test]
fn zero_budget_64_threads_mixed_levels_all_complete_on_the_reserve() {
    let clock = Arc::new(ManualClock::new());
    let cfg = ManagerConfig {
        streams: 64,
        budget: Some(0),
        ..ManagerConfig::default()
    };
    let m = Arc::new(manager_with(Algorithm::Zstd, clock, cfg));
    let data = Arc::new(text(16 * 1024));
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..64)
        .map(|t| {
            let (m, data, done) = (Arc::clone(&m), Arc::clone(&data), Arc::clone(&done));
            thread::spawn(move || {
                let mut out = vec![0u8; data.len()];
                for i in 0..8 {
                    let level = [-5, 0, 1, 3, 9, 15, 19, 22][(t + i) % 8];
                    let mut ws = m.get(level);
                    assert!(ws
                        .compress(level.max(1), &data, &mut out)
                        .unwrap()
                        .is_some());
                    m.put(ws);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = m.stats();
    assert_eq!(done.load(Ordering::Relaxed), 64 * 8);
    assert_eq!(
        (s.allocations, s.workspaces, s.busy),
        (1, 1, 0),
        "nothing beyond the reserve: {s:?}"
    );
    assert_eq!(s.peak_bytes, m.workspace_bytes(22));
    assert!(s.waits > 0, "64 threads on one workspace must have waited");
}

#[test]
fn budget_allows_allocation_up_to_its_size() {
    let clock = Arc::new(ManualClock::new());
    let m = zstd(&clock);
    let one = m.workspace_bytes(1);
    m.set_budget(Some(one));
    let a = m.get(22);
    let b = m.get(1); // fits the budget: allocated
    assert_eq!(m.stats().workspaces, 2);
    let m = Arc::new(m);
    let waiter = {
        let m = Arc::clone(&m);
        thread::spawn(move || m.put(m.get(1)))
    };
    eventually("a third caller waits on the budget", || {
        m.stats().waits >= 1
    });
    m.put(b);
    waiter.join().unwrap();
    m.put(a);
    assert_eq!(m.stats().workspaces, 2);
}

/// The id a workspace's Debug shows.
fn id_of(ws: &wring_engine::workspace::Workspace) -> String {
    let d = format!("{ws:?}");
    d.split("id: ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_default()
        .to_string()
}

/// A thread gets back the workspace it returned last while that one is idle, not the one
/// another thread returned after it: a workspace stays on the core whose cache holds its
/// tables (two offload workers swapped theirs on every extent before, issue 41).
#[test]
fn a_thread_gets_back_the_workspace_it_returned() {
    let clock = Arc::new(ManualClock::new());
    let m = Arc::new(zstd(&clock));
    // The preallocated max-level workspace, held so that both come from level 3's class.
    let max = m.get(22);
    let mine = m.get(3);
    let my_id = id_of(&mine);
    let theirs = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            let ws = m.get(3);
            let id = id_of(&ws);
            (ws, id)
        })
        .join()
        .unwrap()
    };
    assert_ne!(my_id, theirs.1);
    m.put(mine);
    // Returned after mine, so on top of the idle list: the kernel's choice for the next get.
    let other = Arc::clone(&m);
    thread::spawn(move || other.put(theirs.0)).join().unwrap();
    for _ in 0..3 {
        let ws = m.get(3);
        assert_eq!(id_of(&ws), my_id);
        m.put(ws);
    }
    m.put(max);
}
