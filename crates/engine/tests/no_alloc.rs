//! Once workspaces exist, compressing and decompressing an extent makes no heap allocation:
//! every allocation made on this thread through the global allocator is counted while the
//! engine works. (zstd's contexts are static — ZSTD_initStaticCCtx — so it cannot call malloc;
//! lz4 uses its extState entry points; zlib-rs allocates through Rust's allocator, counted here.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig, Outcome, Policy, MAX_EXTENT};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: `ptr` came from System with `layout`; the new size is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCATIONS.load(Ordering::SeqCst) - before)
}

fn text(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut i = 0u32;
    while out.len() < len {
        i = i.wrapping_mul(2_654_435_761).wrapping_add(7);
        out.extend_from_slice(
            format!("line {} of the extent, value {}\n", i % 977, i % 13).as_bytes(),
        );
    }
    out.truncate(len);
    out
}

/// Compress and decompress one extent; returns (compressed length, round trip ok).
fn round_trip(
    engine: &Engine,
    spec: CompressSpec,
    policy: Policy,
    src: &[u8],
    packed: &mut [u8],
    out: &mut [u8],
) -> (usize, bool) {
    let Ok(Outcome::Compressed(n)) = engine.compress_with(spec, policy, src, packed) else {
        return (0, false);
    };
    let ok = spec
        .algorithm
        .map(|a| engine.decompress(a, &packed[..n], out))
        .is_some_and(|r| r == Ok(src.len()));
    (n, ok && out == src)
}

#[test]
fn compress_and_decompress_allocate_nothing_once_workspaces_exist() {
    let engine = Engine::new(EngineConfig {
        streams: 1,
        ..EngineConfig::default()
    });
    // A full extent, and a file tail whose length is not a multiple of the sector.
    let sources = [text(MAX_EXTENT), text(5001)];
    let mut packed = vec![0u8; MAX_EXTENT];
    let specs: Vec<CompressSpec> = Algorithm::ALL
        .into_iter()
        .flat_map(|a| a.levels().map(move |l| CompressSpec::new(a, l)))
        .collect();
    let policies = [Policy::Force, Policy::Heuristic, Policy::EarlyAbort];
    let mut out = vec![0u8; MAX_EXTENT];
    for src in &sources {
        let out = &mut out[..src.len()];
        for &spec in &specs {
            for policy in policies {
                let (_, ok) = round_trip(&engine, spec, policy, src, &mut packed, out);
                assert!(ok, "warm-up {spec}");
            }
        }
    }
    let mut total = 0;
    for src in &sources {
        let out = &mut out[..src.len()];
        for &spec in &specs {
            for policy in policies {
                let ((n, ok), allocs) =
                    counted(|| round_trip(&engine, spec, policy, src, &mut packed, out));
                assert!(ok && n > 0, "{spec} {policy:?} on {} bytes", src.len());
                assert_eq!(
                    allocs,
                    0,
                    "{spec} {policy:?} on {} bytes allocated",
                    src.len()
                );
                total += 1;
            }
        }
    }
    assert_eq!(total, specs.len() * policies.len() * sources.len());
    // The counter works: an allocation inside `counted` is seen.
    let (_, seen) = counted(|| std::hint::black_box(vec![0u8; 10]));
    assert_eq!(seen, 1);
}
