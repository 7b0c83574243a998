//! wring-sync: the one seam for locks in wring (tokio's `loom/std/mutex.rs` is the model).
//!
//! Poisoning is ignored everywhere: every critical section in wring leaves its state
//! consistent before anything can panic, so the data a panicked holder leaves is good, and a
//! poisoned lock must not take a mount, a device or a benchmark down with it. [`lock`],
//! [`read`], [`write`], [`wait`] and [`wait_timeout`] are generic over std's primitives and,
//! with this crate's `shuttle` feature, shuttle's. Which ones a crate uses is that crate's
//! choice: its `sync` module invokes [`primitives!`], whose `cfg(feature = "shuttle")` is
//! evaluated in that crate, so `cargo test -p wring-fs --features shuttle` model-checks the
//! filesystem's locks without switching the engine's.

use std::time::Duration;

/// A mutex whose lock ignores poisoning.
pub trait Lock {
    /// The guard.
    type Guard<'a>
    where
        Self: 'a;
    /// Lock, taking the data back from a poisoned lock.
    fn acquire(&self) -> Self::Guard<'_>;
}

/// A reference to a lock locks it (so `lock(&m)` works whether `m` is a lock or one borrowed).
impl<L: Lock + ?Sized> Lock for &L {
    type Guard<'a>
        = L::Guard<'a>
    where
        Self: 'a;
    fn acquire(&self) -> L::Guard<'_> {
        (**self).acquire()
    }
}

/// A condition variable waited on with a guard of `G`, ignoring poisoning.
pub trait Wait<G> {
    /// Wait until notified.
    fn wait_for(&self, guard: G) -> G;
    /// Wait until notified or `dur` has passed; true when it timed out.
    fn wait_up_to(&self, guard: G, dur: Duration) -> (G, bool);
}

/// Implement [`Lock`] and [`Wait`] for one family of primitives.
macro_rules! family {
    ($sync:path) => {
        const _: () = {
            use $sync as s;

            impl<T: ?Sized> Lock for s::Mutex<T> {
                type Guard<'a>
                    = s::MutexGuard<'a, T>
                where
                    T: 'a;
                fn acquire(&self) -> s::MutexGuard<'_, T> {
                    self.lock().unwrap_or_else(|e| e.into_inner())
                }
            }

            impl<'a, T> Wait<s::MutexGuard<'a, T>> for s::Condvar {
                fn wait_for(&self, g: s::MutexGuard<'a, T>) -> s::MutexGuard<'a, T> {
                    self.wait(g).unwrap_or_else(|e| e.into_inner())
                }
                fn wait_up_to(
                    &self,
                    g: s::MutexGuard<'a, T>,
                    dur: Duration,
                ) -> (s::MutexGuard<'a, T>, bool) {
                    let (g, t) = self.wait_timeout(g, dur).unwrap_or_else(|e| e.into_inner());
                    (g, t.timed_out())
                }
            }
        };
    };
}

family!(std::sync);
#[cfg(feature = "shuttle")]
family!(shuttle::sync);

/// Lock `m`, ignoring poisoning.
pub fn lock<L: Lock + ?Sized>(m: &L) -> L::Guard<'_> {
    m.acquire()
}

/// Wait on `cv` with `guard`, ignoring poisoning.
pub fn wait<G, C: Wait<G> + ?Sized>(cv: &C, guard: G) -> G {
    cv.wait_for(guard)
}

/// Wait on `cv` with `guard` for at most `dur`, ignoring poisoning; true when it timed out.
pub fn wait_timeout<G, C: Wait<G> + ?Sized>(cv: &C, guard: G, dur: Duration) -> (G, bool) {
    cv.wait_up_to(guard, dur)
}

/// Read-lock `l`, ignoring poisoning.
pub fn read<T: ?Sized>(l: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// The data of `l`, which the caller holds exclusively, ignoring poisoning.
pub fn get_mut<T: ?Sized>(l: &mut std::sync::RwLock<T>) -> &mut T {
    l.get_mut().unwrap_or_else(|e| e.into_inner())
}

/// Write-lock `l`, ignoring poisoning.
pub fn write<T: ?Sized>(l: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// The primitives of the invoking crate's `sync` module: shuttle's when that crate is built
/// with its `shuttle` feature (model checking), std's otherwise; and this crate's helpers.
#[macro_export]
macro_rules! primitives {
    () => {
        #[cfg(feature = "shuttle")]
        #[allow(unused_imports)]
        pub(crate) use shuttle::{
            sync::{atomic, Arc, Condvar, Mutex, MutexGuard},
            thread, thread_local,
        };
        #[cfg(not(feature = "shuttle"))]
        #[allow(unused_imports)]
        pub(crate) use std::{
            sync::{atomic, Arc, Condvar, Mutex, MutexGuard},
            thread, thread_local,
        };
        #[allow(unused_imports)]
        pub(crate) use $crate::{lock, wait, wait_timeout};
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Condvar, Mutex, RwLock};

    #[test]
    fn a_poisoned_lock_gives_its_data_back() {
        let m = Arc::new(Mutex::new(7));
        let l = Arc::new(RwLock::new(8));
        let (m2, l2) = (m.clone(), l.clone());
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            let _w = l2.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && l.is_poisoned());
        *lock(&*m) += 1;
        assert_eq!(*lock(&*m), 8);
        *write(&l) += 1;
        assert_eq!(*read(&l), 9);
        let cv = Condvar::new();
        let (g, timed_out) = wait_timeout(&cv, lock(&*m), Duration::from_millis(1));
        assert!(timed_out && *g == 8);
    }
}
