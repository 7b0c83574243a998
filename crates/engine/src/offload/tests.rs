//! The offload API against the engine it wraps: every completion path, backpressure, the
//! device's routing rules and fallbacks, live resizing and shutdown.

use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use super::sim::{Fault, SimConfig, SimDevice};
use super::*;
use crate::{Engine, EngineConfig, MAX_EXTENT};

fn engine(streams: usize) -> Arc<Engine> {
    Arc::new(Engine::new(EngineConfig {
        streams,
        ..EngineConfig::default()
    }))
}

fn offload(depth: usize, workers: usize, device: Option<Arc<dyn Device>>) -> Offload {
    Offload::new(
        engine(workers),
        OffloadConfig {
            depth,
            workers,
            device,
        },
    )
    .expect("offload starts")
}

/// Compressible text of `len` bytes, different for each `seed`.
fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(format!("record {} value {}\n", x % 5000, x % 17).as_bytes());
    }
    out.truncate(len);
    out
}

fn zstd(level: i32) -> CompressSpec {
    CompressSpec::new(Algorithm::Zstd, level)
}

fn compress(spec: CompressSpec, input: Vec<u8>, tag: u64) -> Request {
    Request {
        op: Op::Compress {
            spec,
            policy: Policy::Force,
            saving: Saving::Block,
        },
        input: input.into(),
        output: Vec::new(),
        tag,
    }
}

/// What the engine alone makes of `input`: the reference every provider must match.
fn reference(spec: CompressSpec, input: &[u8]) -> Vec<u8> {
    let e = Engine::new(EngineConfig::default());
    let mut dst = vec![0; input.len()];
    match e.compress(spec, input, &mut dst) {
        Ok(Outcome::Compressed(n)) => dst[..n].to_vec(),
        other => panic!("reference compression: {other:?}"),
    }
}

fn compressed(done: &Done) -> &[u8] {
    match done.result {
        Ok(Completed::Compressed(Outcome::Compressed(n))) => &done.output[..n],
        ref other => panic!("tag {}: {other:?}", done.tag),
    }
}

#[test]
fn tickets_round_trip_and_match_the_engine_byte_for_byte() {
    let o = offload(4, 2, None);
    let inputs: Vec<Vec<u8>> = (0..12)
        .map(|i| text(MAX_EXTENT - i * 1000, i as u64))
        .collect();
    // Rounds of four: a fifth ticket would wait for a slot only this thread can free.
    for round in inputs.chunks(4).enumerate() {
        let tickets: Vec<Ticket> = (round.1.iter().enumerate())
            .map(|(j, v)| compress(zstd(3), v.clone(), (round.0 * 4 + j) as u64))
            .map(|r| o.submit(r).expect("room"))
            .collect();
        for t in tickets {
            let done = t.wait();
            let i = done.tag as usize;
            assert_eq!(*done.input, inputs[i][..], "the input comes back unchanged");
            let packed = compressed(&done).to_vec();
            assert_eq!(packed, reference(zstd(3), &inputs[i]), "extent {i}");
            let back = o
                .submit(Request {
                    op: Op::Decompress {
                        algorithm: Algorithm::Zstd,
                        len: inputs[i].len(),
                    },
                    input: packed.into(),
                    output: Vec::new(),
                    tag: 99,
                })
                .expect("submitted")
                .wait();
            assert_eq!(back.result, Ok(Completed::Decompressed(inputs[i].len())));
            assert_eq!(back.output, inputs[i]);
        }
    }
    let s = o.stats();
    assert_eq!((s.cpu.submitted, s.cpu.completed, s.in_flight), (24, 24, 0));
    assert_eq!(s.cpu.service.count(), 24);
    // Each algorithm's work: zstd's twelve compressions and twelve decompressions, their
    // bytes in and out; no other algorithm did any.
    let w = s.cpu.codec(Algorithm::Zstd);
    let total: usize = inputs.iter().map(Vec::len).sum();
    let packed: usize = inputs.iter().map(|i| reference(zstd(3), i).len()).sum();
    assert_eq!((w.compress_requests, w.decompress_requests), (12, 12));
    assert_eq!(w.compress_in_bytes, total as u64);
    assert_eq!(w.compress_out_bytes, packed as u64);
    assert_eq!(w.decompress_out_bytes, total as u64);
    assert!(w.compress_nanos > 0 && w.decompress_nanos > 0);
    assert_eq!(s.cpu.codec(Algorithm::Lzo), CodecWork::default());
}

#[test]
fn a_full_queue_refuses_try_submit_and_gives_the_request_back() {
    let o = offload(3, 1, None);
    // Completed but uncollected requests keep their slots: that is the bound on memory.
    let held: Vec<Ticket> = (0..3)
        .map(|i| o.submit(compress(zstd(1), text(8192, i), i)).expect("room"))
        .collect();
    match o.try_submit(compress(zstd(1), text(8192, 7), 7)) {
        Err(SubmitError::Full { request, depth }) => {
            assert_eq!((request.tag, depth), (7, 3));
            assert_eq!(*request.input, text(8192, 7)[..]);
        }
        other => panic!("expected Full, got {other:?}"),
    }
    assert_eq!(o.stats().in_flight, 3);
    drop(held);
    // Abandoned tickets free their slots once their requests finish.
    let t = o
        .submit(compress(zstd(1), text(8192, 8), 8))
        .expect("room again");
    assert_eq!(t.wait().tag, 8);
}

#[test]
fn a_blocked_submit_proceeds_when_a_slot_is_collected() {
    let o = Arc::new(offload(1, 1, None));
    let first = o.submit(compress(zstd(1), text(8192, 1), 1)).expect("room");
    let o2 = Arc::clone(&o);
    let second = std::thread::spawn(move || {
        o2.submit(compress(zstd(1), text(8192, 2), 2))
            .expect("room after the first is collected")
            .wait()
            .tag
    });
    assert_eq!(first.wait().tag, 1);
    assert_eq!(second.join().expect("no panic"), 2);
}

#[test]
fn a_completion_queue_collects_in_completion_order_and_knows_when_it_is_empty() {
    let o = offload(8, 2, None);
    let q = o.completion_queue();
    let mut tags: Vec<u64> = Vec::new();
    let mut check = |done: Done| {
        assert_eq!(
            compressed(&done),
            reference(zstd(1), &text(20_000, done.tag))
        );
        tags.push(done.tag);
    };
    for i in 0..20 {
        let mut req = compress(zstd(1), text(20_000, i), i);
        // A queue whose own uncollected completions fill the offload is refused, not hung.
        while let Err(SubmitError::Full { request, .. }) = q.submit(req) {
            req = *request;
            check(q.wait(None).expect("something outstanding"));
        }
    }
    while let Some(done) = q.wait(None) {
        check(done);
    }
    tags.sort_unstable();
    assert_eq!(tags, (0..20).collect::<Vec<_>>());
    assert_eq!((q.outstanding(), q.poll().is_none()), (0, true));
    assert_eq!(q.wait(Some(Duration::from_millis(1))).map(|d| d.tag), None);
    assert_eq!(o.stats().in_flight, 0);
}

#[test]
fn dropping_a_completion_queue_frees_what_it_held() {
    let o = offload(4, 1, None);
    {
        let q = o.completion_queue();
        for i in 0..4 {
            q.submit(compress(zstd(1), text(8192, i), i))
                .expect("submitted");
        }
    }
    // All four slots come back: a blocking submit of four more returns.
    let tickets: Vec<Ticket> = (0..4)
        .map(|i| o.submit(compress(zstd(1), text(8192, i), i)).expect("room"))
        .collect();
    assert_eq!(tickets.into_iter().map(|t| t.wait().tag).sum::<u64>(), 6);
}

#[test]
fn two_queues_holding_each_others_slots_are_told_to_collect_not_left_waiting() {
    let o = Arc::new(offload(2, 1, None));
    let (a, b) = (o.completion_queue(), o.completion_queue());
    a.submit(compress(zstd(1), text(8192, 1), 1)).expect("room");
    b.submit(compress(zstd(1), text(8192, 2), 2)).expect("room");
    assert!(eventually(|| o.stats().cpu.completed == 2));
    // Full, and `a` holds a completion: waiting would wait for `b`'s owner, which is us.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = a.submit(compress(zstd(1), text(8192, 3), 3));
        let _ = tx.send((
            r.map_err(|e| matches!(e, SubmitError::Full { .. })),
            a.poll(),
        ));
    });
    let (refused, collected) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a queue holding completions was left waiting for a slot");
    assert_eq!(refused, Err(true));
    assert_eq!(collected.map(|d| d.tag), Some(1));
    assert_eq!(b.wait(None).map(|d| d.tag), Some(2));
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// The smallest executor: poll, park until woken.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn a_ticket_is_a_future_that_any_executor_can_await() {
    let o = offload(4, 2, None);
    let input = text(100_000, 5);
    let done = block_on(async {
        let a = o.submit(compress(zstd(3), input.clone(), 1)).expect("room");
        let b = o.submit(compress(zstd(1), input.clone(), 2)).expect("room");
        (a.await, b.await)
    });
    assert_eq!(compressed(&done.0), reference(zstd(3), &input));
    assert_eq!(compressed(&done.1), reference(zstd(1), &input));
}

#[test]
fn a_batch_larger_than_the_queue_finishes_every_job() {
    let o = offload(2, 2, None);
    let inputs: Vec<Vec<u8>> = (0..9).map(|i| text(50_000, i)).collect();
    let mut outputs: Vec<Vec<u8>> = inputs.iter().map(|v| vec![0; v.len()]).collect();
    let mut jobs: Vec<BatchJob<'_>> = inputs
        .iter()
        .zip(outputs.iter_mut())
        .map(|(i, o)| {
            BatchJob::new(
                Op::Compress {
                    spec: zstd(3),
                    policy: Policy::Force,
                    saving: Saving::Block,
                },
                i,
                o,
            )
        })
        .collect();
    o.run_batch(&mut jobs);
    let results: Vec<_> = jobs.into_iter().map(|j| j.result).collect();
    for (i, r) in results.into_iter().enumerate() {
        let Some(Ok(Completed::Compressed(Outcome::Compressed(n)))) = r else {
            panic!("job {i}: {r:?}");
        };
        assert_eq!(outputs[i][..n], reference(zstd(3), &inputs[i])[..]);
    }
    assert_eq!(o.stats().in_flight, 0);
}

#[test]
fn a_batch_job_with_a_short_output_fails_alone() {
    let o = offload(4, 1, None);
    let input = text(20_000, 1);
    let (mut small, mut big) = (vec![0u8; 10], vec![0u8; 20_000]);
    let op = Op::Compress {
        spec: zstd(1),
        policy: Policy::Force,
        saving: Saving::Block,
    };
    let mut jobs = [
        BatchJob::new(op, &input, &mut small),
        BatchJob::new(op, &input, &mut big),
    ];
    o.run_batch(&mut jobs);
    assert!(matches!(
        jobs[0].result,
        Some(Err(Error::ShortBuffer { got: 10, .. }))
    ));
    assert!(matches!(
        jobs[1].result,
        Some(Ok(Completed::Compressed(Outcome::Compressed(_))))
    ));
}

fn sim(timeout: Duration) -> Arc<SimDevice> {
    let mut cfg = SimConfig::pcie_like();
    cfg.caps.timeout = timeout;
    SimDevice::new(cfg, MAX_EXTENT)
}

#[test]
fn the_device_takes_only_what_it_produces_above_its_threshold() {
    let dev = sim(Duration::from_secs(5));
    let o = offload(16, 1, Some(dev.clone()));
    let big = text(64 * 1024, 1);
    let cases = [
        (compress(zstd(3), big.clone(), 0), Ran::Device),
        (
            compress(zstd(9), big.clone(), 1),
            Ran::Cpu(Some(Fallback::Unsupported)),
        ),
        (
            compress(CompressSpec::new(Algorithm::Zlib, 3), big.clone(), 2),
            Ran::Cpu(Some(Fallback::Unsupported)),
        ),
        (
            compress(zstd(3), text(8192, 2), 3),
            Ran::Cpu(Some(Fallback::BelowThreshold)),
        ),
        (
            Request {
                op: Op::Compress {
                    spec: zstd(3),
                    policy: Policy::Heuristic,
                    saving: Saving::Block,
                },
                ..compress(zstd(3), big.clone(), 4)
            },
            Ran::Cpu(Some(Fallback::Unsupported)),
        ),
    ];
    for (req, ran) in cases {
        let (spec, input) = match req.op {
            Op::Compress { spec, .. } => (spec, req.input.to_vec()),
            _ => unreachable!(),
        };
        let done = o.submit(req).expect("room").wait();
        assert_eq!(done.ran, ran, "tag {}", done.tag);
        assert_eq!(
            compressed(&done),
            reference(spec, &input),
            "tag {}",
            done.tag
        );
    }
    // Decompression is judged by the decoded size: a 64 KiB extent stored in far less still
    // goes to the device.
    let packed = reference(zstd(3), &big);
    assert!(packed.len() < 16 * 1024, "{} bytes", packed.len());
    let done = o
        .submit(Request {
            op: Op::Decompress {
                algorithm: Algorithm::Zstd,
                len: big.len(),
            },
            input: packed.into(),
            output: Vec::new(),
            tag: 5,
        })
        .expect("room")
        .wait();
    assert_eq!((done.ran, &done.output), (Ran::Device, &big));
    assert_eq!(dev.submissions(), 2);
    let s = o.stats();
    let d = s.device.expect("device stats");
    assert_eq!((d.submitted, d.completed), (2, 2));
    assert_eq!(s.cpu.fallbacks(Fallback::Unsupported), 3);
    assert_eq!(s.cpu.fallbacks(Fallback::BelowThreshold), 1);
}

#[test]
fn failed_busy_and_hung_devices_fall_back_with_the_same_bytes() {
    let dev = sim(Duration::from_millis(50));
    let o = offload(16, 1, Some(dev.clone()));
    let input = text(64 * 1024, 3);
    let want = reference(zstd(2), &input);
    for (fault, why) in [
        (Fault::Fail, Fallback::Failed),
        (Fault::Busy, Fallback::Busy),
        (Fault::Hang, Fallback::TimedOut),
    ] {
        dev.set_fault(fault);
        let done = o
            .submit(compress(zstd(2), input.clone(), 0))
            .expect("room")
            .wait();
        assert_eq!(done.ran, Ran::Cpu(Some(why)), "{fault:?}");
        assert_eq!(compressed(&done), want, "{fault:?}");
        assert_eq!(o.stats().cpu.fallbacks(why), 1, "{fault:?}");
    }
    dev.set_fault(Fault::None);
    let done = o
        .submit(compress(zstd(2), input.clone(), 0))
        .expect("room")
        .wait();
    assert_eq!((done.ran, compressed(&done)), (Ran::Device, &want[..]));
}

#[test]
fn a_full_device_queue_sends_the_rest_to_the_cpu_as_busy() {
    let mut cfg = SimConfig::pcie_like();
    cfg.caps.queue_depth = 2;
    cfg.caps.batch = 1;
    cfg.per_submission = Duration::from_millis(200);
    cfg.caps.timeout = Duration::from_secs(10);
    let dev = SimDevice::new(cfg, MAX_EXTENT);
    let o = offload(8, 1, Some(dev));
    let tickets: Vec<Ticket> = (0..6)
        .map(|i| {
            o.submit(compress(zstd(1), text(32 * 1024, i), i))
                .expect("room")
        })
        .collect();
    let ran: Vec<Ran> = tickets.into_iter().map(|t| t.wait().ran).collect();
    let on_device = ran.iter().filter(|r| **r == Ran::Device).count();
    let busy = ran
        .iter()
        .filter(|r| **r == Ran::Cpu(Some(Fallback::Busy)))
        .count();
    // The device holds two at once; the other four find it full (it is still on its first
    // 200 ms submission when they arrive).
    assert_eq!((on_device, busy), (2, 4), "{ran:?}");
}

/// Wait (boundedly) until `f` holds; workers exit asynchronously.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    (0..2000).any(|_| {
        let ok = f();
        if !ok {
            std::thread::sleep(Duration::from_millis(5));
        }
        ok
    })
}

#[test]
fn streams_resize_the_worker_pool_live() {
    let o = offload(8, 2, None);
    assert_eq!(o.workers(), 2);
    o.set_streams(4).expect("grows");
    assert_eq!((o.workers(), o.engine().config().streams), (4, 4));
    o.set_streams(1).expect("shrinks");
    assert!(eventually(|| o.workers() == 1), "{} workers", o.workers());
    assert_eq!(o.engine().config().streams, 1);
    let tags: u64 = (0..6)
        .map(|i| o.submit(compress(zstd(1), text(8192, i), i)).expect("room"))
        .map(|t| t.wait().tag)
        .sum();
    assert_eq!(tags, 15);
    assert_eq!(o.stats().cpu.workers, 1);
}

#[test]
fn shutdown_finishes_what_was_accepted_and_refuses_the_rest() {
    let o = offload(8, 1, None);
    let tickets: Vec<Ticket> = (0..8)
        .map(|i| {
            o.submit(compress(zstd(3), text(MAX_EXTENT, i), i))
                .expect("room")
        })
        .collect();
    o.shutdown();
    assert_eq!(o.workers(), 0);
    for t in tickets {
        let done = t.wait();
        assert_eq!(
            compressed(&done),
            reference(zstd(3), &text(MAX_EXTENT, done.tag))
        );
    }
    match o.submit(compress(zstd(1), vec![1; 10], 42)) {
        Err(SubmitError::ShutDown { request }) => assert_eq!(request.tag, 42),
        other => panic!("expected ShutDown, got {other:?}"),
    }
    let (input, mut out) = (text(8192, 0), vec![0u8; 8192]);
    let mut jobs = [BatchJob::new(
        Op::Compress {
            spec: zstd(1),
            policy: Policy::Force,
            saving: Saving::Block,
        },
        &input,
        &mut out,
    )];
    o.run_batch(&mut jobs);
    assert_eq!(jobs[0].result, Some(Err(Error::ShutDown)));
}

#[test]
fn corrupt_input_is_the_requests_error_on_every_provider() {
    let dev = sim(Duration::from_secs(5));
    let o = offload(4, 1, Some(dev));
    for len in [4096, 64 * 1024] {
        let done = o
            .submit(Request {
                op: Op::Decompress {
                    algorithm: Algorithm::Zstd,
                    len,
                },
                input: vec![0xAB; len / 2].into(),
                output: Vec::new(),
                tag: len as u64,
            })
            .expect("room")
            .wait();
        assert!(
            matches!(done.result, Err(Error::Corrupt { .. })),
            "{done:?}"
        );
    }
    let done = o
        .submit(Request {
            op: Op::Decompress {
                algorithm: Algorithm::Zstd,
                len: usize::MAX,
            },
            input: vec![0; 16].into(),
            output: Vec::new(),
            tag: 0,
        })
        .expect("room")
        .wait();
    assert!(
        matches!(done.result, Err(Error::ExtentTooLarge { .. })),
        "{done:?}"
    );
    assert!(
        done.output.is_empty(),
        "no output was allocated for an absurd size"
    );
}

/// Records completions; panics on the tag it is told to.
struct Recorder {
    got: std::sync::Mutex<Vec<(u64, Ran, bool)>>,
    panic_on: u64,
}

impl Complete for Recorder {
    fn complete(&self, done: Done) {
        if done.tag == self.panic_on {
            panic!("a handler bug");
        }
        let ok = matches!(
            done.result,
            Ok(Completed::Compressed(Outcome::Compressed(_)))
        );
        crate::sync::lock(&self.got).push((done.tag, done.ran, ok));
    }
}

#[test]
fn handlers_get_every_completion_on_cpu_and_device_and_survive_a_panic() {
    let sim: Arc<dyn Device> = SimDevice::new(SimConfig::pcie_like(), MAX_EXTENT);
    let o = offload(4, 2, Some(sim));
    let rec = Arc::new(Recorder {
        got: std::sync::Mutex::new(Vec::new()),
        panic_on: 3,
    });
    let handler: Arc<dyn Complete> = rec.clone();
    let shared = Arc::new(text(64 << 10, 9));
    for tag in 0..12u64 {
        // Small requests stay on the CPU (below the device's threshold); large ones, shared
        // and not copied, go to the simulated device.
        let input: Input = match tag % 2 {
            0 => text(8 << 10, tag).into(),
            _ => Input::Shared(Arc::clone(&shared)),
        };
        let r = Request {
            op: Op::Compress {
                spec: zstd(3),
                policy: Policy::Force,
                saving: Saving::Block,
            },
            input,
            output: Vec::new(),
            tag,
        };
        o.submit_with(r, &handler).expect("accepted");
    }
    o.shutdown();
    let mut got = rec.got.lock().unwrap().clone();
    got.sort_by_key(|g| g.0);
    let tags: Vec<u64> = got.iter().map(|g| g.0).collect();
    let want: Vec<u64> = (0..12).filter(|&t| t != 3).collect();
    assert_eq!(
        tags, want,
        "every completion once; the panicking one lost alone"
    );
    assert!(got.iter().all(|g| g.2), "{got:?}");
    assert!(got.iter().any(|g| g.1 == Ran::Device), "{got:?}");
    assert!(got.iter().any(|g| matches!(g.1, Ran::Cpu(_))), "{got:?}");
    assert_eq!(
        Arc::strong_count(&shared),
        1,
        "shared inputs are given back"
    );
    assert_eq!(o.stats().in_flight, 0);
}

#[test]
fn a_full_queue_refuses_try_submit_with_and_hands_the_request_back() {
    let o = offload(1, 1, None);
    let rec: Arc<dyn Complete> = Arc::new(Recorder {
        got: std::sync::Mutex::new(Vec::new()),
        panic_on: u64::MAX,
    });
    let r = |tag| Request {
        op: Op::Compress {
            spec: zstd(3),
            policy: Policy::Force,
            saving: Saving::Block,
        },
        input: text(64 << 10, tag).into(),
        output: Vec::new(),
        tag,
    };
    // An uncollected ticket holds the only slot.
    let ticket = o.submit(r(1)).expect("room for one");
    match o.try_submit_with(r(2), &rec) {
        Err(SubmitError::Full { request, depth }) => assert_eq!((request.tag, depth), (2, 1)),
        other => panic!("{other:?}"),
    }
    assert_eq!(ticket.wait().tag, 1);
    o.try_submit_with(r(3), &rec).expect("room again");
    o.shutdown();
}

/// Owns the offload until its first completion, then drops it from inside the handler (a
/// front end's last owner going away on a worker thread).
struct DropsTheOffload {
    offload: std::sync::Mutex<Option<Offload>>,
    dropped: std::sync::mpsc::Sender<u64>,
}

impl Complete for DropsTheOffload {
    fn complete(&self, done: Done) {
        let o = crate::sync::lock(&self.offload).take();
        drop(o);
        let _ = self.dropped.send(done.tag);
    }
}

#[test]
fn a_handler_may_drop_the_last_owner_of_the_offload() {
    let (tx, rx) = std::sync::mpsc::channel();
    let handler = Arc::new(DropsTheOffload {
        offload: std::sync::Mutex::new(Some(offload(2, 2, None))),
        dropped: tx,
    });
    let as_dyn: Arc<dyn Complete> = handler.clone();
    {
        let guard = handler.offload.lock().unwrap();
        let o = guard.as_ref().expect("still there");
        o.submit_with(compress(zstd(1), text(8192, 1), 1), &as_dyn)
            .expect("accepted");
    }
    // A shutdown that waited for its own thread would never get here.
    let tag = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the handler returned after dropping the offload");
    assert_eq!(tag, 1);
    assert!(handler.offload.lock().unwrap().is_none());
}

#[test]
fn a_dictionary_travels_with_batch_jobs_and_keeps_them_on_the_cpu() {
    use crate::dict::Dictionary;
    let dict = Dictionary::new(text(32 << 10, 7)).expect("raw content is a dictionary");
    let o = offload(8, 2, Some(sim(Duration::from_secs(5))));
    // A page the dictionary holds (its first 4 KiB): zstd finds all of it there.
    let page = text(4096, 7);
    let op = Op::CompressInto { spec: zstd(3) };
    let (mut with, mut without) = (vec![0u8; 4096], vec![0u8; 4096]);
    let mut jobs = [
        BatchJob::new(op, &page, &mut with).with_dictionary(Some(&dict)),
        BatchJob::new(op, &page, &mut without),
    ];
    o.run_batch(&mut jobs);
    let sizes: Vec<usize> = jobs
        .iter()
        .map(|j| match j.result {
            Some(Ok(Completed::CompressedInto(Some(n)))) => n,
            ref r => panic!("{r:?}"),
        })
        .collect();
    assert!(
        sizes[0] < sizes[1],
        "the dictionary saves nothing: {sizes:?}"
    );
    let decode = Op::Decompress {
        algorithm: Algorithm::Zstd,
        len: 4096,
    };
    let mut back = vec![0u8; 4096];
    let mut jobs =
        [BatchJob::new(decode, &with[..sizes[0]], &mut back).with_dictionary(Some(&dict))];
    o.run_batch(&mut jobs);
    assert!(matches!(
        jobs[0].result,
        Some(Ok(Completed::Decompressed(4096)))
    ));
    assert_eq!(back, page);
    // Without its dictionary the page does not decode.
    let mut jobs = [BatchJob::new(decode, &with[..sizes[0]], &mut back)];
    o.run_batch(&mut jobs);
    assert!(
        matches!(jobs[0].result, Some(Err(_))),
        "{:?}",
        jobs[0].result
    );
    // An algorithm that takes no dictionary says so.
    let lz4 = Op::CompressInto {
        spec: CompressSpec::default_for(Algorithm::Lz4),
    };
    let mut jobs = [BatchJob::new(lz4, &page, &mut with).with_dictionary(Some(&dict))];
    o.run_batch(&mut jobs);
    assert!(matches!(
        jobs[0].result,
        Some(Err(Error::NoDictionary(Algorithm::Lz4)))
    ));
    // Every job with a dictionary ran on the CPU: the device takes none.
    let unsupported = o.stats().cpu.fallbacks[Fallback::Unsupported as usize];
    assert!(unsupported >= 3, "{unsupported}");
}
