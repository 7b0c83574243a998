//! The offload API's steady state makes no heap allocation on any thread: a request's buffers
//! travel with it and come back with its completion, slots and queues are preallocated, and
//! statistics are fixed histograms. Every allocation in the process is counted while a warm
//! offload compresses and decompresses through tickets, a completion queue and a borrowed
//! batch, on the CPU workers and on the simulated device (a test double).
//!
//! One test in this binary, so that no other test's threads allocate during the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wring_engine::offload::sim::{SimConfig, SimDevice};
use wring_engine::offload::{BatchJob, Completed, Done, Offload, OffloadConfig, Op, Ran, Request};
use wring_engine::{
    Algorithm, CompressSpec, Engine, EngineConfig, Outcome, Policy, Saving, MAX_EXTENT,
};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller's layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: as for dealloc; the new size comes from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut x = seed | 1;
    while out.len() < len {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.extend_from_slice(format!("entry {} of {}\n", x >> 52, x % 11).as_bytes());
    }
    out.truncate(len);
    out
}

const SPEC: CompressSpec = CompressSpec {
    algorithm: Some(Algorithm::Zstd),
    level: 2,
};

/// One round: compress `input` through a ticket and decompress it through a completion
/// queue, reusing the buffers; then a borrowed batch of both. Returns the buffers.
fn round(
    o: &Offload,
    input: Vec<u8>,
    packed: Vec<u8>,
    out: Vec<u8>,
) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let op = Op::Compress {
        spec: SPEC,
        policy: Policy::Force,
        saving: Saving::Block,
    };
    let done = o
        .submit(Request {
            op,
            input: input.into(),
            output: packed,
            tag: 1,
        })
        .expect("room")
        .wait();
    let Ok(Completed::Compressed(Outcome::Compressed(n))) = done.result else {
        panic!("compress: {:?}", done.result);
    };
    let Done {
        input,
        output: mut packed,
        ..
    } = done;
    let q = o.completion_queue();
    let mut src = std::mem::take(&mut packed);
    src.truncate(n);
    q.submit(Request {
        op: Op::Decompress {
            algorithm: Algorithm::Zstd,
            len: input.len(),
        },
        input: src.into(),
        output: out,
        tag: 2,
    })
    .expect("room");
    let back = q.wait(None).expect("one outstanding");
    assert_eq!(back.result, Ok(Completed::Decompressed(input.len())));
    assert!(back.output[..] == input[..]);
    let (mut packed, out) = (back.input.into_vec(), back.output);
    // Borrowed batch: compress again into the packed buffer's spare room.
    let cap = packed.capacity();
    packed.resize(cap, 0);
    let mut jobs = [BatchJob::new(op, &input, &mut packed)];
    o.run_batch(&mut jobs);
    assert!(matches!(
        jobs[0].result,
        Some(Ok(Completed::Compressed(Outcome::Compressed(_))))
    ));
    drop(jobs);
    (input.into_vec(), packed, out)
}

#[test]
fn steady_state_submit_and_complete_allocate_nothing() {
    let engine = Arc::new(Engine::new(EngineConfig {
        streams: 2,
        ..EngineConfig::default()
    }));
    let mut sim = SimConfig::pcie_like();
    sim.per_submission = Duration::ZERO;
    sim.caps.timeout = Duration::from_secs(30);
    let device = SimDevice::new(sim, MAX_EXTENT);
    let o = Offload::new(
        engine,
        OffloadConfig {
            depth: 8,
            workers: 2,
            device: Some(device.clone()),
        },
    )
    .expect("offload starts");
    let mut bufs = (text(MAX_EXTENT, 3), Vec::new(), Vec::new());
    // Warm up: workspaces on every worker and on the device, buffers grown to size.
    for _ in 0..20 {
        bufs = round(&o, bufs.0, bufs.1, bufs.2);
    }
    let before = o.stats();
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..50 {
        bufs = round(&o, bufs.0, bufs.1, bufs.2);
    }
    COUNTING.store(false, Ordering::SeqCst);
    let allocations = ALLOCATIONS.load(Ordering::SeqCst);
    let after = o.stats();
    let device_done = after.device.as_ref().map_or(0, |d| d.completed)
        - before.device.as_ref().map_or(0, |d| d.completed);
    assert!(
        device_done >= 100,
        "the device ran its share: {device_done}"
    );
    assert_eq!(allocations, 0, "allocations in 50 warm rounds");
    let _ = Ran::Device;
}
