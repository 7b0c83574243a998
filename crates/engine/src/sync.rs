//! Synchronisation primitives: std's, or shuttle's when built for model checking.
//!
//! Everything in the engine that locks, waits or spawns goes through here so that
//! `--features shuttle` can explore its interleavings.

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::{
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread, thread_local,
};
#[cfg(not(feature = "shuttle"))]
pub(crate) use std::{
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread, thread_local,
};

/// Lock a mutex, recovering the data if a panicking thread poisoned it: every critical
/// section in the engine leaves its state consistent before anything can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wait on a condition variable with the same poison policy as [`lock`].
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g).unwrap_or_else(|e| e.into_inner())
}

/// Wait with a timeout, same poison policy.
pub(crate) fn wait_timeout<'a, T>(
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    dur: std::time::Duration,
) -> MutexGuard<'a, T> {
    match cv.wait_timeout(g, dur) {
        Ok((g, _)) => g,
        Err(e) => e.into_inner().0,
    }
}
