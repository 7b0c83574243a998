//! Ctrl-C, cooperatively: the binary's signal handler calls [`request`]; the benchmarks call
//! [`check`] between steps and return [`BenchError::Interrupted`], so that unwinding runs the
//! guards that unmount scratch filesystems and reset zram.
//!
//! While nothing needs undoing ([`Cleanup`] guards count what does), the handler may simply
//! exit; [`needs_cleanup`] tells it which.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::BenchError;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static GUARDS: AtomicUsize = AtomicUsize::new(0);

/// Ask the running benchmark to stop at its next step.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Forget an earlier request (tests run several benchmarks in one process).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}

/// `Err(Interrupted)` once a stop was requested.
pub fn check() -> Result<(), BenchError> {
    if requested() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// Whether something set up (a mount, a configured zram) must be undone before exiting.
pub fn needs_cleanup() -> bool {
    GUARDS.load(Ordering::SeqCst) > 0
}

/// Marks, while it lives, that something must be undone before the process may exit.
#[derive(Debug)]
pub struct Cleanup(());

impl Cleanup {
    /// Start a section that must not be cut short by an immediate exit.
    pub fn enter() -> Cleanup {
        GUARDS.fetch_add(1, Ordering::SeqCst);
        Cleanup(())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        GUARDS.fetch_sub(1, Ordering::SeqCst);
    }
}
