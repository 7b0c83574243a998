//! A counting global allocator for the tests that prove a steady-state path allocates no
//! buffer (the filesystem's and the block device's `read_alloc` tests): it forwards every call
//! to the system allocator and, while counting is on, counts the allocations of at least
//! [`LARGE`] bytes and the smaller ones, in every thread of the process. A test binary that
//! uses it holds one test, so that no other test's threads allocate during the count.
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: wring_testing::alloc::Counting = wring_testing::alloc::Counting::new();
//! ALLOC.start();
//! // … the steady-state path …
//! let counts = ALLOC.stop();
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Allocations of this many bytes or more are "large" (a page-sized buffer).
pub const LARGE: usize = 4096;

/// What [`Counting::stop`] counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Allocations (and reallocations) of at least [`LARGE`] bytes.
    pub large: usize,
    /// The smaller ones.
    pub small: usize,
}

/// The counting allocator; install it with `#[global_allocator]`.
#[derive(Debug)]
pub struct Counting {
    on: AtomicBool,
    large: AtomicUsize,
    small: AtomicUsize,
}

impl Counting {
    /// An allocator that is not counting yet.
    pub const fn new() -> Counting {
        Counting {
            on: AtomicBool::new(false),
            large: AtomicUsize::new(0),
            small: AtomicUsize::new(0),
        }
    }

    /// Count from now on, from zero.
    pub fn start(&self) {
        self.large.store(0, Ordering::SeqCst);
        self.small.store(0, Ordering::SeqCst);
        self.on.store(true, Ordering::SeqCst);
    }

    /// Stop counting and say what was counted since [`Counting::start`].
    pub fn stop(&self) -> Counts {
        self.on.store(false, Ordering::SeqCst);
        Counts {
            large: self.large.load(Ordering::SeqCst),
            small: self.small.load(Ordering::SeqCst),
        }
    }

    fn count(&self, size: usize) {
        if self.on.load(Ordering::SeqCst) {
            let which = if size >= LARGE {
                &self.large
            } else {
                &self.small
            };
            which.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Default for Counting {
    fn default() -> Counting {
        Counting::new()
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count(new_size);
        // SAFETY: as for dealloc; the new size comes from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
