//! Beyond zram: a schedule (the `policy` option; not the engine's compression
//! [`Policy`](wring_engine::Policy)) that ages, recompresses and writes back idle pages. zram's `idle`, `recompress` and `writeback` are one-shot triggers that users drive from
//! cron or systemd timers (zram-generator users keep asking for a schedule); here one option
//! does it:
//!
//! ```text
//! policy=every=60 age=300 recompress=idle writeback=idle
//! ```
//!
//! Every `every` seconds: mark pages not accessed for `age` seconds idle ([`Store::mark_idle`]),
//! recompress pages of type `recompress` with every `recomp_algorithm` (`off` to skip; skipped
//! when the device has none), then write back pages of type `writeback` (`off` to skip; skipped
//! without a `backing_dev`). A full backing file or an exhausted `writeback_limit` ends that
//! round's writeback and is reported in the round's result, not treated as a failure of the
//! device. The schedule reads the store's [`Clock`](wring_engine::clock::Clock), so tests move time
//! by hand.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backing::{WritebackReport, WritebackType};
use crate::error::BlkError;
use crate::recompress::{RecompressReport, RecompressRequest, RecompressType};
use crate::store::Store;
use crate::sync::lock;

/// A schedule of aging, recompression and writeback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Seconds between rounds.
    pub every: u64,
    /// Pages not accessed for this many seconds are idle.
    pub age: u64,
    /// Which pages to recompress (`None`: skip).
    pub recompress: Option<RecompressType>,
    /// Which pages to write back (`None`: skip).
    pub writeback: Option<WritebackType>,
}

impl Schedule {
    /// Parse `every=60 age=300 recompress=idle writeback=idle` (every and age required).
    pub fn parse(text: &str) -> Result<Schedule, BlkError> {
        let bad = |word: &str| {
            BlkError::Option(format!(
                "policy: '{word}' is not understood; write 'every=SECONDS age=SECONDS \
                 [recompress=idle|huge|huge_idle|all|off] [writeback=idle|huge|huge_idle|\
                 incompressible|off]'"
            ))
        };
        let (mut every, mut age) = (None, None);
        let mut p = Schedule {
            every: 0,
            age: 0,
            recompress: Some(RecompressType::Idle),
            writeback: Some(WritebackType::Idle),
        };
        for word in text.split_whitespace() {
            match word.split_once('=') {
                Some(("every", v)) => every = v.parse::<u64>().ok().filter(|&n| n > 0),
                Some(("age", v)) => age = v.parse::<u64>().ok(),
                Some(("recompress", "off")) => p.recompress = None,
                Some(("recompress", "all")) => p.recompress = Some(RecompressType::All),
                Some(("recompress", v)) => {
                    p.recompress = Some(RecompressRequest::parse(&format!("type={v}"))?.kind)
                }
                Some(("writeback", "off")) => p.writeback = None,
                Some(("writeback", v)) => p.writeback = Some(WritebackType::parse(v)?),
                _ => return Err(bad(word)),
            }
        }
        match (every, age) {
            (Some(e), Some(a)) => {
                p.every = e;
                p.age = a;
                Ok(p)
            }
            _ => Err(bad(text.trim())),
        }
    }

    /// The text [`Schedule::parse`] reads back.
    pub fn text(&self) -> String {
        let r = match self.recompress {
            None => "off",
            Some(RecompressType::All) => "all",
            Some(RecompressType::Huge) => "huge",
            Some(RecompressType::Idle) => "idle",
            Some(RecompressType::HugeIdle) => "huge_idle",
        };
        let w = self.writeback.map_or("off", WritebackType::name);
        format!(
            "every={} age={} recompress={r} writeback={w}",
            self.every, self.age
        )
    }
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleReport {
    /// When it ran (seconds on the store's clock).
    pub at: u64,
    /// Pages marked idle.
    pub idle: u64,
    /// The recompression, if it ran.
    pub recompress: Option<RecompressReport>,
    /// The writeback, if it ran.
    pub writeback: Option<WritebackReport>,
    /// Why a step stopped early (a full backing file, say).
    pub error: Option<String>,
}

/// The policy state a store keeps: the policy, when it last ran, the last report and the
/// number of rounds.
#[derive(Debug, Default)]
pub(crate) struct ScheduleState {
    pub(crate) policy: Option<Schedule>,
    pub(crate) last_run: Option<u64>,
    pub(crate) last: Option<ScheduleReport>,
    pub(crate) rounds: u64,
}

impl Store {
    /// Set or clear the policy live.
    pub fn set_policy(&self, policy: Option<Schedule>) {
        let mut s = lock(&self.policy);
        s.policy = policy;
        s.last_run = None;
    }

    /// The policy, the rounds run and the last round's report.
    pub fn policy(&self) -> (Option<Schedule>, u64, Option<ScheduleReport>) {
        let s = lock(&self.policy);
        (s.policy.clone(), s.rounds, s.last.clone())
    }

    /// Run a round if one is due (the first at once, then every `every` seconds on the
    /// store's clock); returns its report. The policy thread calls this about once a second.
    pub fn policy_tick(&self) -> Option<ScheduleReport> {
        let now = self.now();
        let policy = {
            let mut s = lock(&self.policy);
            let p = s.policy.clone()?;
            if s.last_run.is_some_and(|t| now < t + p.every) {
                return None;
            }
            s.last_run = Some(now);
            p
        };
        let report = self.run_policy(&policy, now);
        let mut s = lock(&self.policy);
        s.rounds += 1;
        s.last = Some(report.clone());
        Some(report)
    }

    fn run_policy(&self, p: &Schedule, now: u64) -> ScheduleReport {
        let mut r = ScheduleReport {
            at: now,
            idle: self.mark_idle(Some(p.age)),
            ..ScheduleReport::default()
        };
        if let Some(kind) = p.recompress.filter(|_| self.recomps().next().is_some()) {
            let req = RecompressRequest {
                kind,
                ..RecompressRequest::default()
            };
            match self.recompress(&req) {
                Ok(rep) => r.recompress = Some(rep),
                Err(e) => r.error = Some(e.to_string()),
            }
        }
        if let Some(kind) = p.writeback.filter(|_| self.has_backing()) {
            match self.writeback(kind) {
                Ok(rep) => r.writeback = Some(rep),
                Err(e) => r.error = Some(e.to_string()),
            }
        }
        r
    }
}

/// Run the store's policy from a thread of its own for as long as the process lives, checking
/// about once a second (a store without a policy costs one lock a second).
pub fn spawn(store: Arc<Store>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || loop {
        store.policy_tick();
        std::thread::sleep(Duration::from_secs(1));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        let p = Schedule::parse("every=60 age=300").unwrap();
        assert_eq!(p.text(), "every=60 age=300 recompress=idle writeback=idle");
        let q = Schedule::parse("every=5 age=0 recompress=huge_idle writeback=off").unwrap();
        assert_eq!(Schedule::parse(&q.text()).unwrap(), q);
        let a = Schedule::parse("every=1 age=1 recompress=all writeback=incompressible").unwrap();
        assert_eq!(Schedule::parse(&a.text()).unwrap(), a);
        for bad in [
            "",
            "every=60",
            "age=5",
            "every=0 age=5",
            "every=1 age=1 recompress=some",
            "every=1 age=1 writeback=all",
            "every=1 age=1 often",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad:?}");
        }
    }
}
