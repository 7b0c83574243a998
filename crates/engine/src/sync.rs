//! Synchronisation primitives: std's, or shuttle's when built for model checking, through
//! the one seam every crate locks through ([`wring_sync`]).
//!
//! Everything in the engine that locks, waits or spawns goes through here so that
//! `--features shuttle` can explore its interleavings.

wring_sync::primitives!();

use atomic::{AtomicUsize, Ordering};

/// A condition variable that knows whether anyone waits on it. std's `notify_one` and
/// `notify_all` are a futex syscall each even when nobody waits, and the offload and the
/// workspace managers notified four times per extent on their hot path, where the waiters are
/// almost never there (issue 41: the engine's fixed cost per extent).
///
/// A waiter counts itself while it holds the mutex the condition is about, before the wait
/// releases it; a notifier changes that state under the same mutex first. So a notifier that
/// reads no waiter read after every waiter that could have missed its change had counted
/// itself, and skips only wake-ups nobody needs. Waits go through [`wait`] and
/// [`wait_timeout`] as on a `Condvar`.
pub(crate) struct Signal {
    cv: Condvar,
    waiting: AtomicUsize,
}

impl Signal {
    pub(crate) fn new() -> Signal {
        Signal {
            cv: Condvar::new(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Wake one waiter, if any.
    pub(crate) fn notify_one(&self) {
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.cv.notify_one();
        }
    }

    /// Wake every waiter, if any.
    pub(crate) fn notify_all(&self) {
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.cv.notify_all();
        }
    }
}

impl<'a, T> wring_sync::Wait<MutexGuard<'a, T>> for Signal {
    fn wait_for(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let guard = wait(&self.cv, guard);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        guard
    }

    fn wait_up_to(
        &self,
        guard: MutexGuard<'a, T>,
        dur: std::time::Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let r = wait_timeout(&self.cv, guard, dur);
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        r
    }
}
