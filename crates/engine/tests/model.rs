//! Model-checked concurrency of the workspace manager (shuttle): get/put at mixed levels racing
//! the reclaim timer, shutdown racing a put, a zero memory budget, and the stream limit changed
//! at run time. Shuttle explores thread interleavings and reports any deadlock or failed assertion.
//!
//! Run with `cargo test -p wring-engine --features shuttle --test model`.
#![cfg(feature = "shuttle")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use shuttle::sync::Arc;
use shuttle::thread;
use wring_engine::clock::{Clock, ManualClock};
use wring_engine::codec::codec_for;
use wring_engine::workspace::{Manager, ManagerConfig};
use wring_engine::Algorithm;

/// Small extents keep each model iteration's allocations small.
const EXTENT: usize = 16 * 1024;
const ITERATIONS: usize = 300;

fn manager(
    alg: Algorithm,
    clock: std::sync::Arc<ManualClock>,
    streams: usize,
    budget: Option<usize>,
) -> Arc<Manager> {
    let cfg = ManagerConfig {
        streams,
        budget,
        reclaim: Duration::from_secs(307),
        max_extent: EXTENT,
    };
    Arc::new(Manager::new(
        codec_for(alg, EXTENT),
        cfg,
        clock as std::sync::Arc<dyn Clock>,
    ))
}

fn borrow_all(m: &Manager, levels: &[i32]) {
    for &level in levels {
        let ws = m.get(level);
        assert!(
            ws.level() >= level.max(1) || level == 0,
            "{ws:?} cannot serve level {level}"
        );
        m.put(ws);
    }
}

#[test]
fn get_put_reclaim_and_shutdown_race_without_deadlock() {
    shuttle::check_random(
        || {
            let clock = std::sync::Arc::new(ManualClock::new());
            let m = manager(Algorithm::Zstd, std::sync::Arc::clone(&clock), 2, None);
            let a = {
                let m = Arc::clone(&m);
                thread::spawn(move || borrow_all(&m, &[1, 22, 3]))
            };
            let b = {
                let m = Arc::clone(&m);
                thread::spawn(move || borrow_all(&m, &[3, 0, 15]))
            };
            let r = {
                let (m, clock) = (Arc::clone(&m), std::sync::Arc::clone(&clock));
                thread::spawn(move || {
                    clock.advance(Duration::from_secs(400));
                    m.reclaim_now();
                    m.kick_timer();
                })
            };
            for t in [a, b, r] {
                t.join().unwrap();
            }
            let s = m.stats();
            assert_eq!(s.busy, 0);
            assert!(
                m.idle_per_class()[21] >= 1,
                "the forward-progress workspace must survive: {s:?}"
            );
            m.shutdown();
            let s = m.stats();
            assert_eq!((s.workspaces, s.resident_bytes), (0, 0));
            assert_eq!(m.timer_deadline(), None);
        },
        ITERATIONS,
    );
}

#[test]
fn shutdown_racing_a_put_frees_everything_and_joins_the_timer() {
    shuttle::check_random(
        || {
            let clock = std::sync::Arc::new(ManualClock::new());
            let m = manager(Algorithm::Zstd, clock, 4, None);
            let ws = m.get(5);
            let putter = {
                let m = Arc::clone(&m);
                thread::spawn(move || m.put(ws))
            };
            m.shutdown();
            putter.join().unwrap();
            let s = m.stats();
            assert_eq!((s.workspaces, s.busy), (0, 0), "{s:?}");
            assert_eq!(
                m.timer_deadline(),
                None,
                "the timer cannot re-arm after shutdown"
            );
        },
        ITERATIONS,
    );
}

#[test]
fn zero_budget_always_completes_on_the_reserve() {
    shuttle::check_random(
        || {
            let clock = std::sync::Arc::new(ManualClock::new());
            let m = manager(Algorithm::Zstd, clock, 3, Some(0));
            let threads: Vec<_> = [[1, 9], [22, -5], [0, 3]]
                .into_iter()
                .map(|levels| {
                    let m = Arc::clone(&m);
                    thread::spawn(move || borrow_all(&m, &levels))
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let s = m.stats();
            assert_eq!((s.allocations, s.workspaces, s.busy), (1, 1, 0), "{s:?}");
        },
        ITERATIONS,
    );
}

#[test]
fn stream_limit_changes_at_run_time_bound_concurrency() {
    shuttle::check_random(
        || {
            let clock = std::sync::Arc::new(ManualClock::new());
            let m = manager(Algorithm::Lz4, clock, 1, None);
            let holders = Arc::new(AtomicUsize::new(0));
            let peak = Arc::new(AtomicUsize::new(0));
            let users: Vec<_> = (0..3)
                .map(|_| {
                    let (m, holders, peak) =
                        (Arc::clone(&m), Arc::clone(&holders), Arc::clone(&peak));
                    thread::spawn(move || {
                        let ws = m.get(0);
                        let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        thread::yield_now();
                        holders.fetch_sub(1, Ordering::SeqCst);
                        m.put(ws);
                    })
                })
                .collect();
            let tuner = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    m.set_streams(2);
                    m.set_streams(1);
                })
            };
            for t in users.into_iter().chain([tuner]) {
                t.join().unwrap();
            }
            assert!(
                peak.load(Ordering::SeqCst) <= 2,
                "never more than the highest limit set"
            );
            let s = m.stats();
            assert_eq!(s.busy, 0);
            assert_eq!(
                s.workspaces, 1,
                "the last limit set, 1, holds once all came back"
            );
        },
        ITERATIONS,
    );
}

mod offload {
    //! The offload queue's state machine: submitters blocked on a full queue, workers
    //! completing, tickets collected, batches and a resize, all racing a shutdown.

    use shuttle::sync::Arc;
    use shuttle::thread;
    use wring_engine::offload::{
        BatchJob, Complete, Completed, Done, Offload, OffloadConfig, Op, Request, SubmitError,
    };
    use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig, Outcome, Policy, Saving};

    use super::{EXTENT, ITERATIONS};

    fn offload(depth: usize, workers: usize) -> Arc<Offload> {
        let engine = std::sync::Arc::new(Engine::new(EngineConfig {
            max_extent: EXTENT,
            streams: workers,
            ..EngineConfig::default()
        }));
        // The engine creates a manager in a std OnceLock, which shuttle cannot schedule
        // around (a racing initialiser blocks the one OS thread shuttle runs on): create it
        // first. The manager's own races are modelled above.
        engine.manager(Algorithm::Lz4);
        let cfg = OffloadConfig {
            depth,
            workers,
            device: None,
        };
        Arc::new(Offload::new(engine, cfg).expect("offload starts"))
    }

    const OP: Op = Op::Compress {
        spec: CompressSpec {
            algorithm: Some(Algorithm::Lz4),
            level: 1,
        },
        policy: Policy::Force,
        saving: Saving::Block,
    };

    fn request(tag: u64) -> Request {
        Request {
            op: OP,
            input: vec![tag as u8; 8192].into(),
            output: Vec::new(),
            tag,
        }
    }

    fn is_compressed(r: &Result<Completed, wring_engine::Error>) -> bool {
        matches!(r, Ok(Completed::Compressed(Outcome::Compressed(_))))
    }

    #[test]
    fn submit_complete_and_shutdown_race_on_a_full_queue() {
        shuttle::check_random(
            || {
                let o = offload(1, 1);
                let submitters: Vec<_> = (0..2u64)
                    .map(|t| {
                        let o = Arc::clone(&o);
                        thread::spawn(move || {
                            let mut finished = 0;
                            for i in 0..2 {
                                match o.submit(request(t * 10 + i)) {
                                    Ok(ticket) => {
                                        let done = ticket.wait();
                                        assert_eq!(done.tag, t * 10 + i);
                                        assert!(is_compressed(&done.result), "{done:?}");
                                        finished += 1;
                                    }
                                    Err(SubmitError::ShutDown { request }) => {
                                        assert_eq!(request.tag, t * 10 + i);
                                    }
                                    Err(e) => panic!("{e}"),
                                }
                            }
                            finished
                        })
                    })
                    .collect();
                let stopper = {
                    let o = Arc::clone(&o);
                    thread::spawn(move || o.shutdown())
                };
                let finished: usize = submitters.into_iter().map(|t| t.join().unwrap()).sum();
                stopper.join().unwrap();
                let s = o.stats();
                assert_eq!(s.in_flight, 0, "{s:?}");
                assert_eq!(s.cpu.completed as usize, finished);
                assert_eq!(o.workers(), 0);
            },
            ITERATIONS,
        );
    }

    #[test]
    fn batches_larger_than_the_queue_race_a_resize_and_a_try_submit() {
        shuttle::check_random(
            || {
                let o = offload(2, 1);
                let batcher = {
                    let o = Arc::clone(&o);
                    thread::spawn(move || {
                        let inputs = [[1u8; 8192], [2u8; 8192], [3u8; 8192]];
                        let mut outs = [[0u8; 8192]; 3];
                        let mut jobs: Vec<BatchJob<'_>> = inputs
                            .iter()
                            .zip(outs.iter_mut())
                            .map(|(i, o)| BatchJob::new(OP, i, o))
                            .collect();
                        o.run_batch(&mut jobs);
                        for j in &jobs {
                            assert!(j.result.as_ref().is_some_and(is_compressed), "{j:?}");
                        }
                    })
                };
                let tuner = {
                    let o = Arc::clone(&o);
                    thread::spawn(move || {
                        o.set_streams(2).expect("grows");
                        o.set_streams(1).expect("shrinks");
                    })
                };
                let prober = {
                    let o = Arc::clone(&o);
                    thread::spawn(move || match o.try_submit(request(7)) {
                        Ok(t) => assert!(is_compressed(&t.wait().result)),
                        Err(SubmitError::Full { request, .. }) => assert_eq!(request.tag, 7),
                        Err(e) => panic!("{e}"),
                    })
                };
                for t in [batcher, tuner, prober] {
                    t.join().unwrap();
                }
                assert_eq!(o.stats().in_flight, 0);
                o.shutdown();
                assert_eq!(o.workers(), 0);
            },
            ITERATIONS,
        );
    }

    /// A front end run by its completions (the filesystem's writeback): each completion is
    /// recorded and, for a first-round request, submits a follow-up from inside the handler
    /// with `try_submit_with`; a full queue or a shutdown hands it back, which is fine.
    #[derive(Default)]
    struct Chain {
        offload: shuttle::sync::Mutex<std::sync::Weak<Offload>>,
        me: shuttle::sync::Mutex<std::sync::Weak<Chain>>,
        delivered: shuttle::sync::Mutex<Vec<u64>>,
        chained: shuttle::sync::Mutex<Vec<u64>>,
    }

    impl Complete for Chain {
        fn complete(&self, done: Done) {
            assert!(is_compressed(&done.result), "{done:?}");
            self.delivered.lock().unwrap().push(done.tag);
            if done.tag >= 100 {
                return;
            }
            let o = self.offload.lock().unwrap().upgrade();
            let me = self.me.lock().unwrap().upgrade();
            if let (Some(o), Some(me)) = (o, me) {
                let me: Arc<dyn Complete> = me;
                if o.try_submit_with(request(done.tag + 100), &me).is_ok() {
                    self.chained.lock().unwrap().push(done.tag + 100);
                }
            }
        }
    }

    #[test]
    fn handlers_complete_every_request_once_and_may_submit_from_inside() {
        shuttle::check_random(
            || {
                let o = offload(2, 2);
                let chain = Arc::new(Chain::default());
                *chain.offload.lock().unwrap() = Arc::downgrade(&o);
                *chain.me.lock().unwrap() = Arc::downgrade(&chain);
                let handler: Arc<dyn Complete> = chain.clone();
                let submitters: Vec<_> = (0..2u64)
                    .map(|t| {
                        let (o, h) = (Arc::clone(&o), Arc::clone(&handler));
                        thread::spawn(move || {
                            let mut accepted = Vec::new();
                            for i in 0..2 {
                                let tag = t * 10 + i;
                                match o.submit_with(request(tag), &h) {
                                    Ok(()) => accepted.push(tag),
                                    Err(SubmitError::ShutDown { request }) => {
                                        assert_eq!(request.tag, tag)
                                    }
                                    Err(e) => panic!("{e}"),
                                }
                            }
                            accepted
                        })
                    })
                    .collect();
                let stopper = {
                    let o = Arc::clone(&o);
                    thread::spawn(move || o.shutdown())
                };
                let mut accepted: Vec<u64> = submitters
                    .into_iter()
                    .flat_map(|t| t.join().unwrap())
                    .collect();
                stopper.join().unwrap();
                // Shut down: every accepted request was handed to its handler exactly once.
                let mut delivered = chain.delivered.lock().unwrap().clone();
                accepted.extend(chain.chained.lock().unwrap().iter());
                accepted.sort_unstable();
                delivered.sort_unstable();
                assert_eq!(delivered, accepted);
                assert_eq!(o.stats().in_flight, 0);
                assert_eq!(o.workers(), 0);
            },
            ITERATIONS,
        );
    }
}
