//! The manager's state under its lock: idle lists per size class, the bitmap of populated
//! classes, the LRU, and the accounting (the kernel's `struct zstd_workspace_manager`).

use std::time::Duration;

use super::reclaim::Lru;
use super::{ManagerConfig, ManagerStats, Workspace};

pub(super) struct State {
    /// Idle workspaces per class, most recently returned last (the kernel's `idle_ws[]`).
    pub idle_ws: Vec<Vec<Workspace>>,
    /// Bit `c` set while `idle_ws[c]` is non-empty (the kernel's `active_map`).
    pub active_map: u64,
    pub lru: Lru,
    /// Workspaces that exist per class, idle or lent.
    pub count: Vec<usize>,
    pub cfg: ManagerConfig,
    pub stats: ManagerStats,
    /// Bytes of the preallocated max-level workspace, outside the budget.
    pub reserve_bytes: usize,
    /// The stream limit was lowered while workspaces beyond it were lent: free them (down to
    /// the limit) as they come back.
    pub trim_pending: bool,
    pub shutdown: bool,
    /// When the reclaim timer fires next, if armed.
    pub deadline: Option<Duration>,
    pub next_id: u64,
}

impl State {
    pub(super) fn new(classes: usize, cfg: ManagerConfig) -> State {
        State {
            idle_ws: (0..classes).map(|_| Vec::new()).collect(),
            active_map: 0,
            lru: Lru::default(),
            count: vec![0; classes],
            cfg,
            stats: ManagerStats {
                streams: cfg.streams,
                ..ManagerStats::default()
            },
            reserve_bytes: 0,
            trim_pending: false,
            shutdown: false,
            deadline: None,
            next_id: 0,
        }
    }

    pub(super) fn max_class(&self) -> usize {
        self.idle_ws.len() - 1
    }

    /// zstd_find_workspace(): scan the bitmap upward from `class` for an idle workspace.
    /// One of exactly this class leaves the LRU; a larger one keeps its place and last-used time.
    pub(super) fn find(&mut self, class: usize, req_level: i32) -> Option<Workspace> {
        let candidates = self.active_map & (u64::MAX << class);
        if candidates == 0 {
            return None;
        }
        let found = candidates.trailing_zeros() as usize;
        let list = &mut self.idle_ws[found];
        // The one this thread used last, if it is idle: its codec tables are still in this
        // core's cache (a workspace that moved between two workers' cores every extent cost a
        // refetch of them each time). Else the most recently returned, as the kernel takes.
        let me = super::thread_token();
        let pos = list.iter().rposition(|w| w.home == me);
        let mut ws = match pos {
            Some(i) => list.remove(i),
            None => list.pop()?,
        };
        if self.idle_ws[found].is_empty() {
            self.active_map &= !(1 << found);
        }
        if found == class {
            self.lru.remove(&mut ws);
            self.stats.hits += 1;
        } else {
            self.stats.scans_up += 1;
        }
        ws.req_level = req_level;
        self.lend();
        Some(ws)
    }

    /// zstd_put_workspace(): back on its idle list. A workspace returned by a borrower of its
    /// own class goes to the LRU's head with a fresh time — unless it is the only idle
    /// max-class workspace, which stays hidden from reclaim for forward progress.
    pub(super) fn put_idle(&mut self, mut ws: Workspace, own_class: bool, now: Duration) {
        let class = ws.class;
        if own_class {
            self.lru.remove(&mut ws);
            let hide = class == self.max_class() && self.idle_ws[class].is_empty();
            if !hide {
                self.lru.insert(&mut ws, now);
            }
        }
        ws.req_level = 0;
        self.idle_ws[class].push(ws);
        self.active_map |= 1 << class;
    }

    pub(super) fn lend(&mut self) {
        self.stats.busy += 1;
    }

    pub(super) fn can_stream(&self) -> bool {
        self.stats.busy < self.cfg.streams
    }

    /// Whether `bytes` more fit in the budget (the preallocated workspace is outside it).
    pub(super) fn fits_budget(&self, bytes: usize) -> bool {
        match self.cfg.budget {
            None => true,
            Some(b) => self.stats.resident_bytes + bytes <= self.reserve_bytes.saturating_add(b),
        }
    }

    /// Account for a workspace about to be allocated outside the lock.
    pub(super) fn reserve(&mut self, class: usize, bytes: usize) -> u64 {
        self.count[class] += 1;
        self.stats.workspaces += 1;
        self.stats.resident_bytes += bytes;
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.stats.resident_bytes);
        self.next_id += 1;
        self.next_id
    }

    /// Undo [`State::reserve`] (the allocation failed) or account for a freed workspace.
    pub(super) fn unreserve(&mut self, class: usize, bytes: usize) {
        self.count[class] -= 1;
        self.stats.workspaces -= 1;
        self.stats.resident_bytes -= bytes;
    }

    /// Whether freeing a workspace of `class` keeps one max-class workspace in existence.
    pub(super) fn may_free(&self, class: usize) -> bool {
        self.shutdown || class != self.max_class() || self.count[class] > 1
    }

    /// Free a workspace (it is dropped here); returns it for dropping outside the lock.
    pub(super) fn forget(&mut self, mut ws: Workspace) -> Workspace {
        self.lru.remove(&mut ws);
        self.unreserve(ws.class, ws.bytes);
        ws
    }

    /// Take idle workspaces off their lists while the total exceeds the stream limit
    /// (zcomp_set_max_streams), sparing the last max-class one.
    pub(super) fn trim_to_streams(&mut self) -> Vec<Workspace> {
        let freed = self.free_beyond_streams();
        self.trim_pending = self.stats.workspaces > self.cfg.streams;
        freed
    }

    /// [`State::trim_to_streams`] once more if a lowered limit is still not reached.
    pub(super) fn trim_if_pending(&mut self) -> Vec<Workspace> {
        match self.trim_pending {
            true => self.trim_to_streams(),
            false => Vec::new(),
        }
    }

    fn free_beyond_streams(&mut self) -> Vec<Workspace> {
        let mut freed = Vec::new();
        for class in 0..self.idle_ws.len() {
            while self.stats.workspaces > self.cfg.streams && self.may_free(class) {
                let Some(ws) = self.idle_ws[class].pop() else {
                    break;
                };
                freed.push(self.forget(ws));
                self.stats.frees += 1;
            }
            if self.idle_ws[class].is_empty() {
                self.active_map &= !(1 << class);
            }
        }
        freed
    }

    /// Take every idle workspace off its list (shutdown).
    pub(super) fn drain(&mut self) -> Vec<Workspace> {
        let mut all = Vec::new();
        for class in 0..self.idle_ws.len() {
            while let Some(ws) = self.idle_ws[class].pop() {
                all.push(self.forget(ws));
                self.stats.frees += 1;
            }
        }
        self.active_map = 0;
        all
    }

    /// Remove one idle workspace by id from its class list (reclaim).
    pub(super) fn take_idle(&mut self, class: usize, id: u64) -> Option<Workspace> {
        let list = &mut self.idle_ws[class];
        let pos = list.iter().position(|w| w.id == id)?;
        let ws = list.remove(pos);
        if list.is_empty() {
            self.active_map &= !(1 << class);
        }
        Some(ws)
    }
}
