//! Locks of the delayed inode items: std's, or shuttle's when built for model checking
//! (`--features shuttle`), as the engine's and the block device's `sync` modules.

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Lock, recovering the data if a panicking thread poisoned the lock: every critical section
/// leaves its state consistent before anything can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
