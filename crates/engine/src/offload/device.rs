//! The device provider seam: what an accelerator (Intel QAT or IAA, a GPU through nvCOMP)
//! states about itself and how the offload hands it work. `docs/offload.md` says how real
//! devices would plug in; [`super::sim`] is the only implementation here, a test double.
//!
//! A device runs on its own submission threads (queue depth ÷ batch of them), each handing the
//! device a batch and blocking until the batch is back or its deadline passes. A result that
//! comes back late, an error, or an item left without a result sends that request to the CPU.

use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use super::queue::Job;
use super::stats::Fallback;
use super::{Completed, Op};
use crate::error::Error;
use crate::spec::Algorithm;

/// What a device produces and how it wants to be fed.
#[derive(Debug, Clone)]
pub struct DeviceCaps {
    /// A short name for statistics (`qat`, `sim`).
    pub name: &'static str,
    /// Algorithms it compresses, each with the levels whose output it produces exactly (a
    /// request at another level stays on the CPU: levels are honoured).
    pub compress: Vec<(Algorithm, RangeInclusive<i32>)>,
    /// Algorithms it decompresses.
    pub decompress: Vec<Algorithm>,
    /// Requests it takes in one submission.
    pub batch: usize,
    /// Requests it holds at once (queued for it and running on it); more are refused as busy.
    pub queue_depth: usize,
    /// Extents smaller than this (input size to compress, decoded size to decompress) stay on
    /// the CPU: below it offloading does not pay (seed 004's threshold).
    pub min_len: usize,
    /// How long a submission may take before its requests fall back.
    pub timeout: Duration,
}

impl DeviceCaps {
    /// Whether the device produces exactly what `op` asks for. Compression with a policy other
    /// than compress-force needs the CPU's heuristic or probes, so only forced compression and
    /// [`Op::CompressInto`] go to a device.
    pub fn produces(&self, op: &Op) -> bool {
        match *op {
            Op::Compress { spec, policy, .. } => {
                policy == crate::Policy::Force && self.compresses(spec)
            }
            Op::CompressInto { spec } => self.compresses(spec),
            Op::Decompress { algorithm, .. } => self.decompress.contains(&algorithm),
        }
    }

    fn compresses(&self, spec: crate::CompressSpec) -> bool {
        spec.algorithm.is_some_and(|a| {
            self.compress
                .iter()
                .any(|(alg, levels)| *alg == a && levels.contains(&spec.level))
        })
    }
}

/// Why a device did not complete a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The device refused it for now (its rings are full).
    #[error("device busy")]
    Busy,
    /// The device reported an error.
    #[error("device failed: {0}")]
    Failed(String),
    /// The device did not answer by the deadline.
    #[error("device timed out")]
    TimedOut,
}

impl From<DeviceError> for Fallback {
    fn from(e: DeviceError) -> Fallback {
        match e {
            DeviceError::Busy => Fallback::Busy,
            DeviceError::Failed(_) => Fallback::Failed,
            DeviceError::TimedOut => Fallback::TimedOut,
        }
    }
}

/// One request handed to a device: read [`DeviceWork::op`] and [`DeviceWork::input`], write
/// the result into [`DeviceWork::output`] and report it with [`DeviceWork::complete`].
pub struct DeviceWork {
    index: usize,
    job: Job,
    result: Option<Result<Completed, DeviceError>>,
}

impl std::fmt::Debug for DeviceWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceWork")
            .field("op", &self.job.op)
            .field("result", &self.result)
            .finish()
    }
}

impl DeviceWork {
    pub(super) fn new(index: usize, job: Job) -> DeviceWork {
        DeviceWork {
            index,
            job,
            result: None,
        }
    }

    pub(super) fn into_parts(self) -> (usize, Job, Option<Result<Completed, DeviceError>>) {
        (self.index, self.job, self.result)
    }

    /// What to do.
    pub fn op(&self) -> Op {
        self.job.op
    }

    /// The bytes to work on.
    pub fn input(&self) -> &[u8] {
        self.job.input()
    }

    /// The destination, `need` bytes long; fails if the caller's buffer is shorter.
    pub fn output(&mut self, need: usize) -> Result<&mut [u8], Error> {
        self.job.output(need)
    }

    /// Report the result. Not calling this counts as a device failure.
    pub fn complete(&mut self, result: Result<Completed, DeviceError>) {
        self.result = Some(result);
    }

    /// Run this request with the CPU's own code on `engine`, as a device that produces the
    /// CPU's bytes would (the simulated device's outputs are the CPU's by construction).
    pub fn run_like_cpu(&mut self, engine: &crate::Engine) -> Result<Completed, Error> {
        super::queue::execute(engine, &mut self.job)
    }
}

/// An accelerator behind the offload API.
pub trait Device: Send + Sync + 'static {
    /// What it produces and how it is fed; read once when the offload starts.
    fn caps(&self) -> DeviceCaps;

    /// Run a batch (at most `caps().batch` requests), completing each item, and return by
    /// `deadline`: results that arrive later are discarded and their requests fall back.
    fn run(&self, batch: &mut [DeviceWork], deadline: Instant);
}
