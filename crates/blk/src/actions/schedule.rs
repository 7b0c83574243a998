//! Beyond zram: a schedule (the `policy` option; not the engine's compression
//! [`Policy`](wring_engine::Policy)) that ages, recompresses and writes back idle pages. zram's
//! `idle`, `recompress` and `writeback` are one-shot triggers that users drive from cron or
//! systemd timers (zram-generator users keep asking for a schedule); here one option does it:
//!
//! ```text
//! policy=every=60 age=300 recompress=idle writeback=idle
//! ```
//!
//! Every `every` seconds: mark pages not accessed for `age` seconds idle ([`mark_idle`]),
//! recompress pages of type `recompress` with every `recomp_algorithm` (`off` to skip; skipped
//! when the device has none), then write back pages of type `writeback` (`off` to skip; skipped
//! without a `backing_dev`). A full backing file or an exhausted `writeback_limit` ends that
//! round's writeback and is reported in the round's result, not treated as a failure of the
//! device. The schedule reads the store's [`Clock`](wring_engine::clock::Clock), so tests move
//! time by hand.
//!
//! The policy's words are the options' ([`Schedule`]); the device holds the value and its
//! rounds (`Store::set_policy`), and shows them in `stat`; the rounds are run here.

use std::sync::Arc;
use std::time::Duration;

use super::idle::mark_idle;
use super::recompress::{recompress, RecompressRequest};
use super::writeback::writeback;
use crate::device::Store;
use crate::options::Schedule;
use crate::report::ScheduleReport;

/// Run a round of `store`'s policy if one is due (the first at once, then every `every`
/// seconds on the store's clock); returns its report. The policy thread calls this about once
/// a second.
pub fn policy_tick(store: &Store) -> Option<ScheduleReport> {
    let now = store.now();
    let policy = {
        let mut s = store.policy_state();
        let p = s.policy.clone()?;
        if s.last_run.is_some_and(|t| now < t + p.every) {
            return None;
        }
        s.last_run = Some(now);
        p
    };
    let report = run_policy(store, &policy, now);
    let mut s = store.policy_state();
    s.rounds += 1;
    s.last = Some(report.clone());
    Some(report)
}

fn run_policy(store: &Store, p: &Schedule, now: u64) -> ScheduleReport {
    let mut r = ScheduleReport {
        at: now,
        idle: mark_idle(store, Some(p.age)),
        ..ScheduleReport::default()
    };
    let has_recomp = store.algorithms().secondaries().next().is_some();
    if let Some(kind) = p.recompress.filter(|_| has_recomp) {
        let req = RecompressRequest {
            kind,
            ..RecompressRequest::default()
        };
        match recompress(store, &req) {
            Ok(rep) => r.recompress = Some(rep),
            Err(e) => r.error = Some(e.to_string()),
        }
    }
    if let Some(kind) = p
        .writeback
        .filter(|_| store.writeback_state().file().is_some())
    {
        match writeback(store, kind) {
            Ok(rep) => r.writeback = Some(rep),
            Err(e) => r.error = Some(e.to_string()),
        }
    }
    r
}

/// Run the store's policy from a thread of its own for as long as the process lives, checking
/// about once a second (a store without a policy costs one lock a second).
pub fn spawn_policy(store: Arc<Store>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || loop {
        policy_tick(&store);
        std::thread::sleep(Duration::from_secs(1));
    })
}
