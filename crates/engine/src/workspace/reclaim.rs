//! The global LRU of idle workspaces and the reclaim timer (zstd_reclaim_timer_fn): every
//! interval, free the workspaces idle for longer than it; re-arm only while the LRU is non-empty.

use std::collections::BTreeMap;
use std::time::Duration;

use super::state::State;
use super::Workspace;

/// A place on the LRU: last-used time, then the workspace id to break ties.
pub(crate) type LruKey = (Duration, u64);

/// Oldest first; values are the workspace's class.
#[derive(Default)]
pub(crate) struct Lru {
    map: BTreeMap<LruKey, usize>,
}

impl Lru {
    pub(super) fn insert(&mut self, ws: &mut Workspace, now: Duration) {
        let key = (now, ws.id);
        self.map.insert(key, ws.class);
        ws.lru_key = Some(key);
    }

    pub(super) fn remove(&mut self, ws: &mut Workspace) {
        if let Some(key) = ws.lru_key.take() {
            self.map.remove(&key);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Entries last used at or before `threshold`, oldest first.
    fn expired(&self, threshold: Duration) -> Vec<(LruKey, usize)> {
        self.map
            .range(..=(threshold, u64::MAX))
            .map(|(k, c)| (*k, *c))
            .collect()
    }
}

/// The timer function, run at `now` with the lock held. Returns the freed workspaces so the
/// caller can drop them after unlocking. Lent workspaces (borrowed by a lower level, so still
/// on the LRU) are skipped, as the kernel skips a victim whose `req_level` is set.
pub(super) fn reclaim(state: &mut State, now: Duration) -> Vec<Workspace> {
    let mut freed = Vec::new();
    if state.shutdown {
        state.deadline = None;
        return freed;
    }
    if let Some(threshold) = now.checked_sub(state.cfg.reclaim) {
        for ((_, id), class) in state.lru.expired(threshold) {
            if !state.may_free(class) {
                continue;
            }
            if let Some(ws) = state.take_idle(class, id) {
                freed.push(state.forget(ws));
                state.stats.reclaims += 1;
            }
        }
    }
    state.deadline = (!state.lru.is_empty()).then(|| now.saturating_add(state.cfg.reclaim));
    freed
}

/// Arm the timer if the LRU has entries and it is not armed yet (mod_timer in put).
pub(super) fn arm(state: &mut State, now: Duration) -> bool {
    if state.shutdown || state.lru.is_empty() || state.deadline.is_some() {
        return false;
    }
    state.deadline = Some(now.saturating_add(state.cfg.reclaim));
    true
}
