//! `get(level)` / `put(workspace)`: the manager a single algorithm's callers share.

use std::time::Duration;

use super::reclaim;
use super::state::State;
use super::{ManagerConfig, ManagerStats, Workspace};
use crate::clock::Clock;
use crate::codec::{AllocError, Codec};
use crate::error::Error;
use crate::spec::Algorithm;
use crate::sync::{lock, thread, wait, wait_timeout, Arc, Mutex, Signal};

/// Sleep between retries when an allocation failed and no workspace exists to wait for.
const ALLOC_RETRY: Duration = Duration::from_millis(10);

/// One algorithm's workspace manager (see the module doc of `workspace`).
pub struct Manager {
    shared: Arc<Shared>,
    timer: Mutex<Option<thread::JoinHandle<()>>>,
}

struct Shared {
    codec: Box<dyn Codec>,
    /// Memory per class, made monotonic (zstd_calc_ws_mem_sizes).
    class_bytes: Vec<usize>,
    max_extent: usize,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    /// Callers waiting for a stream or for memory (the kernel's `wsm.wait`).
    wake: Signal,
    /// The reclaim timer thread.
    timer_wake: Signal,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("algorithm", &self.algorithm())
            .finish()
    }
}

impl Manager {
    /// A manager for `codec`, with one max-level workspace preallocated for forward progress.
    pub fn new(codec: Box<dyn Codec>, cfg: ManagerConfig, clock: Arc<dyn Clock>) -> Manager {
        let cfg = ManagerConfig {
            streams: cfg.streams.max(1),
            ..cfg
        };
        let class_bytes = monotonic((0..codec.classes()).map(|c| codec.estimate_bytes(c)));
        let classes = class_bytes.len();
        let shared = Arc::new(Shared {
            codec,
            class_bytes,
            max_extent: cfg.max_extent,
            clock,
            state: Mutex::new(State::new(classes, cfg)),
            wake: Signal::new(),
            timer_wake: Signal::new(),
        });
        shared.preallocate();
        let timer_shared = Arc::clone(&shared);
        let timer = thread::spawn(move || timer_shared.timer_loop());
        Manager {
            shared,
            timer: Mutex::new(Some(timer)),
        }
    }

    /// The algorithm this manager serves.
    pub fn algorithm(&self) -> Algorithm {
        self.shared.codec.algorithm()
    }

    /// Decompress without a workspace where the algorithm's decoder keeps no state
    /// ([`Codec::decompress_stateless`]); `None` when it needs one.
    pub fn decompress_stateless(&self, src: &[u8], dst: &mut [u8]) -> Option<Result<usize, Error>> {
        self.shared.codec.decompress_stateless(src, dst)
    }

    /// Codec memory of a workspace that serves `level` (monotonic in the level).
    pub fn level_bytes(&self, level: i32) -> usize {
        self.shared.class_bytes[self.shared.codec.class_of(level)]
    }

    /// Total bytes a workspace serving `level` holds: codec memory plus its extent buffer.
    pub fn workspace_bytes(&self, level: i32) -> usize {
        self.shared.ws_bytes(self.shared.codec.class_of(level))
    }

    /// Borrow a workspace that can compress at `level` (0: any workspace, for decompression).
    /// Never fails: under the stream limit or memory pressure it waits for one to come back.
    pub fn get(&self, level: i32) -> Workspace {
        self.shared.get(level)
    }

    /// Return a workspace borrowed with [`Manager::get`].
    pub fn put(&self, ws: Workspace) {
        self.shared.put(ws)
    }

    /// Borrow a workspace that goes back by itself when the lease is dropped.
    pub fn lease(&self, level: i32) -> Lease<'_> {
        Lease {
            manager: self,
            ws: Some(self.get(level)),
        }
    }

    /// The live configuration.
    pub fn config(&self) -> ManagerConfig {
        lock(&self.shared.state).cfg
    }

    /// Change the stream limit; lowering it frees idle workspaces beyond the new limit.
    pub fn set_streams(&self, streams: usize) {
        let freed = {
            let mut st = lock(&self.shared.state);
            st.cfg.streams = streams.max(1);
            st.stats.streams = st.cfg.streams;
            st.trim_to_streams()
        };
        self.shared.wake.notify_all();
        drop(freed);
    }

    /// Change the memory budget beyond the preallocated workspace (`None`: unlimited).
    pub fn set_budget(&self, budget: Option<usize>) {
        lock(&self.shared.state).cfg.budget = budget;
        self.shared.wake.notify_all();
    }

    /// Change the reclaim interval; takes effect when the timer next fires or is armed.
    pub fn set_reclaim(&self, interval: Duration) {
        lock(&self.shared.state).cfg.reclaim = interval;
        self.shared.timer_wake.notify_all();
    }

    /// The manager's counters.
    pub fn stats(&self) -> ManagerStats {
        lock(&self.shared.state).stats
    }

    /// Idle workspaces per class (index = class; zstd's class c serves level c+1).
    pub fn idle_per_class(&self) -> Vec<usize> {
        lock(&self.shared.state)
            .idle_ws
            .iter()
            .map(Vec::len)
            .collect()
    }

    /// Workspaces on the LRU now.
    pub fn lru_len(&self) -> usize {
        lock(&self.shared.state).lru.len()
    }

    /// When the reclaim timer fires next (clock time), if it is armed.
    pub fn timer_deadline(&self) -> Option<Duration> {
        lock(&self.shared.state).deadline
    }

    /// Run the timer function now, as if it had fired; returns how many workspaces it freed.
    pub fn reclaim_now(&self) -> usize {
        self.shared.fire_timer()
    }

    /// Wake the timer thread so it re-reads the clock (after a test moves a manual clock).
    pub fn kick_timer(&self) {
        let _g = lock(&self.shared.state);
        self.shared.timer_wake.notify_all();
    }

    /// Free every idle workspace and stop the timer: take the lock, free everything (which keeps
    /// the timer from re-arming), then join the timer thread. Workspaces still lent are freed
    /// when they come back. Idempotent.
    pub fn shutdown(&self) {
        let freed = {
            let mut st = lock(&self.shared.state);
            st.shutdown = true;
            st.deadline = None;
            st.drain()
        };
        self.shared.timer_wake.notify_all();
        self.shared.wake.notify_all();
        let handle = lock(&self.timer).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        drop(freed);
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A borrowed workspace that returns itself to its manager on drop.
pub struct Lease<'a> {
    manager: &'a Manager,
    ws: Option<Workspace>,
}

impl std::ops::Deref for Lease<'_> {
    type Target = Workspace;
    fn deref(&self) -> &Workspace {
        self.ws
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lease holds its workspace until drop"))
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Workspace {
        self.ws
            .as_mut()
            .unwrap_or_else(|| unreachable!("a lease holds its workspace until drop"))
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(ws) = self.ws.take() {
            self.manager.put(ws);
        }
    }
}

impl Shared {
    fn ws_bytes(&self, class: usize) -> usize {
        self.class_bytes[class] + self.max_extent
    }

    fn max_class(&self) -> usize {
        self.class_bytes.len() - 1
    }

    /// Allocate the max-level workspace and put it, hidden from the LRU (zstd_init_workspace_manager).
    fn preallocate(&self) {
        let class = self.max_class();
        let bytes = self.ws_bytes(class);
        let id = {
            let mut st = lock(&self.state);
            st.reserve_bytes = bytes;
            let id = st.reserve(class, bytes);
            st.lend();
            id
        };
        let level = self.codec.class_level(class);
        match self.alloc(class, id, level) {
            Ok(ws) => {
                lock(&self.state).stats.allocations += 1;
                self.put(ws)
            }
            Err(e) => {
                let mut st = lock(&self.state);
                st.unreserve(class, bytes);
                st.stats.busy -= 1;
                st.stats.alloc_failures += 1;
                // No preallocated workspace: the budget must not keep room for one.
                st.reserve_bytes = 0;
                log::error!(
                    "{}: no preallocated workspace ({e}); get() may wait for memory",
                    self.codec.algorithm()
                );
            }
        }
    }

    fn alloc(&self, class: usize, id: u64, req_level: i32) -> Result<Workspace, AllocError> {
        let bytes = self.ws_bytes(class);
        let state = self.codec.alloc(class, self.class_bytes[class])?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(self.max_extent)
            .map_err(|_| AllocError { bytes })?;
        Ok(Workspace {
            id,
            class,
            level: self.codec.class_level(class),
            req_level,
            bytes,
            lru_key: None,
            home: 0,
            state,
            buf,
        })
    }

    fn get(&self, level: i32) -> Workspace {
        let class = self.codec.class_of(level);
        let bytes = self.ws_bytes(class);
        let mut st = lock(&self.state);
        loop {
            if st.can_stream() || st.shutdown {
                if let Some(ws) = st.find(class, level) {
                    return ws;
                }
                if st.fits_budget(bytes) || st.shutdown || st.stats.workspaces == 0 {
                    let id = st.reserve(class, bytes);
                    st.lend();
                    drop(st);
                    match self.alloc(class, id, level) {
                        Ok(ws) => {
                            lock(&self.state).stats.allocations += 1;
                            return ws;
                        }
                        Err(_) => st = self.alloc_failed(class, bytes),
                    }
                    // A workspace may have come back while the lock was dropped, its wakeup
                    // gone before this caller sleeps: look again first.
                    if let Some(ws) = st.find(class, level) {
                        return ws;
                    }
                    if st.stats.workspaces == 0 {
                        st = wait_timeout(&self.wake, st, ALLOC_RETRY).0;
                        continue;
                    }
                }
            }
            // Stream limit reached or memory pressure: sleep until a workspace comes back,
            // then rescan (a smaller one may do as well as the max-level one).
            st.stats.waits += 1;
            st = wait(&self.wake, st);
        }
    }

    fn alloc_failed(&self, class: usize, bytes: usize) -> crate::sync::MutexGuard<'_, State> {
        let mut st = lock(&self.state);
        st.unreserve(class, bytes);
        st.stats.busy -= 1;
        st.stats.alloc_failures += 1;
        st
    }

    fn put(&self, mut ws: Workspace) {
        let now = self.clock.now();
        ws.home = super::thread_token();
        let own_class = self.codec.class_of(ws.req_level) == ws.class;
        let (freed, armed) = {
            let mut st = lock(&self.state);
            st.stats.busy -= 1;
            let freed = if st.shutdown {
                st.stats.frees += 1;
                vec![st.forget(ws)]
            } else {
                st.put_idle(ws, own_class, now);
                // Lent while the stream limit was lowered: free what is now beyond it.
                st.trim_if_pending()
            };
            (freed, reclaim::arm(&mut st, now))
        };
        self.wake.notify_all();
        if armed {
            self.timer_wake.notify_all();
        }
        drop(freed);
    }

    fn fire_timer(&self) -> usize {
        let now = self.clock.now();
        let freed = reclaim::reclaim(&mut lock(&self.state), now);
        if !freed.is_empty() {
            self.wake.notify_all();
        }
        freed.len()
    }

    /// The timer thread: sleep until the deadline (re-reading the clock when woken), fire,
    /// repeat; exit at shutdown.
    fn timer_loop(&self) {
        let mut st = lock(&self.state);
        loop {
            if st.shutdown {
                return;
            }
            let Some(deadline) = st.deadline else {
                st = wait(&self.timer_wake, st);
                continue;
            };
            let now = self.clock.now();
            if now < deadline {
                st = wait_timeout(&self.timer_wake, st, deadline - now).0;
                continue;
            }
            let freed = reclaim::reclaim(&mut st, now);
            drop(st);
            self.wake.notify_all();
            drop(freed);
            st = lock(&self.state);
        }
    }
}

/// Make memory per class monotonic: a higher level never needs less.
fn monotonic(raw: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut max = 0;
    raw.map(|b| {
        max = max.max(b);
        max
    })
    .collect()
}
