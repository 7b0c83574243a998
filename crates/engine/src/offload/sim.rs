//! A simulated device — a **test double**, not a product claim: this machine has no
//! accelerator. It has a configurable latency per submission and per byte, a queue depth, a
//! batch size and a minimum request size, and injected failure, busy refusals and hangs. Its
//! outputs are the CPU's (it runs the same codecs on an engine of its own), so it proves the
//! submission path, the fallback and the threshold, never a speed.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::device::{Device, DeviceCaps, DeviceError, DeviceWork};
use crate::engine::{Engine, EngineConfig};
use crate::spec::Algorithm;

/// What the simulated device does wrong, changeable while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Nothing: every request completes.
    #[default]
    None,
    /// Every request fails with a device error.
    Fail,
    /// Every request is refused as busy.
    Busy,
    /// Submissions take longer than the deadline (the device hangs until then).
    Hang,
}

/// The simulated device's settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// What it says it produces and how it is fed.
    pub caps: DeviceCaps,
    /// Fixed latency of one submission (a batch).
    pub per_submission: Duration,
    /// Added latency per input byte, in nanoseconds.
    pub per_byte_ns: f64,
}

impl SimConfig {
    /// A device that compresses zstd levels 1–3 and lz4, decompresses zstd and lz4, takes
    /// batches of 8, holds 32 requests and nothing under 16 KiB, with a 20 µs submission
    /// latency and 1 ns per byte — roughly the shape of a PCIe accelerator.
    pub fn pcie_like() -> SimConfig {
        SimConfig {
            caps: DeviceCaps {
                name: "sim",
                compress: vec![(Algorithm::Zstd, 1..=3), (Algorithm::Lz4, 1..=1)],
                decompress: vec![Algorithm::Zstd, Algorithm::Lz4],
                batch: 8,
                queue_depth: 32,
                min_len: 16 * 1024,
                timeout: Duration::from_millis(100),
            },
            per_submission: Duration::from_micros(20),
            per_byte_ns: 1.0,
        }
    }
}

/// The simulated device.
pub struct SimDevice {
    config: SimConfig,
    engine: Engine,
    fault: AtomicU32,
    submissions: AtomicU64,
}

impl std::fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDevice")
            .field("config", &self.config)
            .field("fault", &self.fault())
            .finish()
    }
}

impl SimDevice {
    /// A device with these settings and an engine of its own for `max_extent`-sized work.
    pub fn new(config: SimConfig, max_extent: usize) -> Arc<SimDevice> {
        let engine = Engine::new(EngineConfig {
            max_extent,
            streams: config.caps.queue_depth.max(1),
            ..EngineConfig::default()
        });
        Arc::new(SimDevice {
            config,
            engine,
            fault: AtomicU32::new(0),
            submissions: AtomicU64::new(0),
        })
    }

    /// Inject a fault from now on.
    pub fn set_fault(&self, fault: Fault) {
        let v = match fault {
            Fault::None => 0,
            Fault::Fail => 1,
            Fault::Busy => 2,
            Fault::Hang => 3,
        };
        self.fault.store(v, Ordering::SeqCst);
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        match self.fault.load(Ordering::SeqCst) {
            1 => Fault::Fail,
            2 => Fault::Busy,
            3 => Fault::Hang,
            _ => Fault::None,
        }
    }

    /// Batches submitted so far.
    pub fn submissions(&self) -> u64 {
        self.submissions.load(Ordering::Relaxed)
    }

    fn latency(&self, batch: &[DeviceWork]) -> Duration {
        let bytes: usize = batch.iter().map(|w| w.input().len()).sum();
        self.config.per_submission
            + Duration::from_nanos((bytes as f64 * self.config.per_byte_ns) as u64)
    }
}

/// Sleep until `until` (the simulated device's busy time).
fn sleep_until(until: Instant) {
    let now = Instant::now();
    if until > now {
        std::thread::sleep(until - now);
    }
}

impl Device for SimDevice {
    fn caps(&self) -> DeviceCaps {
        self.config.caps.clone()
    }

    fn run(&self, batch: &mut [DeviceWork], deadline: Instant) {
        self.submissions.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        match self.fault() {
            Fault::Busy => {
                return batch
                    .iter_mut()
                    .for_each(|w| w.complete(Err(DeviceError::Busy)))
            }
            Fault::Hang => {
                // A hung device answers nothing; the submission thread gives up at the deadline.
                sleep_until(deadline + Duration::from_millis(1));
                return;
            }
            Fault::Fail | Fault::None => {}
        }
        let fail = self.fault() == Fault::Fail;
        for w in batch.iter_mut() {
            let r = match fail {
                true => Err(DeviceError::Failed("injected failure".into())),
                false => w
                    .run_like_cpu(&self.engine)
                    .map_err(|e| DeviceError::Failed(e.to_string())),
            };
            w.complete(r);
        }
        sleep_until(start + self.latency(batch));
    }
}
