//! An engine with its own compression streams: batches run on the offload's CPU workers
//! (one per stream), the calling thread waiting.

use std::ffi::c_char;
use std::sync::Arc;

use ::wring_engine::frame::{self, FrameError};
use ::wring_engine::offload::{Offload, OffloadConfig};
use ::wring_engine::{Engine, EngineConfig};

use crate::call::{guard, input, put, wring_status, Failure};
use crate::oneshot::{dict, wring_dict};

/// An engine and its workers.
pub struct wring_engine {
    offload: Offload,
}

/// One item of a batch: the caller fills `src`, `src_len`, `dst`, `dst_cap` (and, for
/// decompression, `dst_len` with the decoded size if known, else 0); the batch sets `dst_len`
/// and `status`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wring_job {
    /// The input.
    pub src: *const u8,
    /// Its length.
    pub src_len: usize,
    /// Where the output goes.
    pub dst: *mut u8,
    /// Its capacity.
    pub dst_cap: usize,
    /// Bytes written (in: the decoded size for decompression, 0 if unknown).
    pub dst_len: usize,
    /// This item's result, a `wring_status` value (`wring_last_error` holds the last failed
    /// item's message). An integer, so that whatever the caller left in it is a valid value.
    pub status: i32,
}

/// A new engine with `streams` compression streams (workers; 0 means one per CPU) and a
/// workspace memory budget of `workspace_mem` bytes (0: no limit); `*out` is set to a handle
/// to free with `wring_engine_free`.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn wring_engine_new(
    streams: usize,
    workspace_mem: usize,
    out: *mut *mut wring_engine,
) -> wring_status {
    guard(|| {
        let mut config = EngineConfig::default();
        if streams > 0 {
            config.streams = streams;
        }
        config.workspace_mem = (workspace_mem > 0).then_some(workspace_mem);
        let engine = Arc::new(Engine::new(config));
        let offload = Offload::new(engine.clone(), OffloadConfig::for_engine(&engine))?;
        let handle = Box::into_raw(Box::new(wring_engine { offload }));
        // SAFETY: the caller's contract.
        unsafe { put(out, handle, "out") }?;
        Ok(wring_status::WRING_OK)
    })
}

/// Stop the engine's workers and free it (NULL is ignored).
///
/// # Safety
/// `engine` is NULL or a live handle, not used afterwards nor by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn wring_engine_free(engine: *mut wring_engine) {
    if !engine.is_null() {
        // SAFETY: made by Box::into_raw in this crate and freed once, per the contract.
        drop(unsafe { Box::from_raw(engine) });
    }
}

/// Compress `n` jobs (each input at most 128 KiB) under `spec` on the engine's streams.
/// Returns `WRING_OK` when every job succeeded, else the first failed job's status; each
/// job's own `status` says which.
///
/// # Safety
/// `engine` is live; `spec` is a NUL-terminated string; `jobs` holds `n` jobs whose buffers
/// are as `wring_compress` requires; `dict` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn wring_engine_compress_many(
    engine: *const wring_engine,
    spec: *const c_char,
    dict: *const wring_dict,
    jobs: *mut wring_job,
    n: usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract, for each argument.
        let (engine, spec, dict, jobs) = unsafe {
            (
                handle(engine)?,
                crate::call::spec(spec)?,
                self::dict(dict),
                slice(jobs, n)?,
            )
        };
        let inputs = inputs(jobs)?;
        let results = frame::compress_many(&engine.offload, spec, dict, &inputs);
        finish(jobs, results)
    })
}

/// Decompress `n` jobs of `algorithm` on the engine's streams. A job's `dst_len` on entry is
/// its decoded size, or 0 to take it from a zstd frame's header. Returns as
/// `wring_engine_compress_many`.
///
/// # Safety
/// As `wring_engine_compress_many`.
#[no_mangle]
pub unsafe extern "C" fn wring_engine_decompress_many(
    engine: *const wring_engine,
    algorithm: *const c_char,
    dict: *const wring_dict,
    jobs: *mut wring_job,
    n: usize,
) -> wring_status {
    guard(|| {
        // SAFETY: the caller's contract, for each argument.
        let (engine, algorithm, dict, jobs) = unsafe {
            (
                handle(engine)?,
                crate::call::algorithm(algorithm)?,
                self::dict(dict),
                slice(jobs, n)?,
            )
        };
        let algorithm =
            algorithm.ok_or_else(|| Failure::invalid("nothing to decompress with 'no'"))?;
        let inputs = inputs(jobs)?;
        let sizes: Vec<Option<usize>> = jobs
            .iter()
            .map(|j| (j.dst_len > 0).then_some(j.dst_len))
            .collect();
        // No job can take more than the widest destination: a frame declaring more is refused
        // before anything that size is allocated.
        let max_size = jobs.iter().map(|j| j.dst_cap).max().unwrap_or(0);
        let results =
            frame::decompress_many(&engine.offload, algorithm, dict, &inputs, &sizes, max_size);
        finish(jobs, results)
    })
}

/// # Safety
/// `engine` is NULL or live.
unsafe fn handle<'a>(engine: *const wring_engine) -> Result<&'a wring_engine, Failure> {
    // SAFETY: NULL or live, per the contract.
    unsafe { engine.as_ref() }.ok_or_else(|| Failure::invalid("engine is NULL"))
}

/// # Safety
/// `jobs` is NULL with `n` 0, or holds `n` jobs.
unsafe fn slice<'a>(jobs: *mut wring_job, n: usize) -> Result<&'a mut [wring_job], Failure> {
    match (jobs.is_null(), n) {
        (true, 0) => Ok(&mut []),
        (true, _) => Err(Failure::invalid("jobs is NULL")),
        // SAFETY: n jobs at a non-null pointer, per the contract.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts_mut(jobs, n) }),
    }
}

fn inputs(jobs: &[wring_job]) -> Result<Vec<&[u8]>, Failure> {
    jobs.iter()
        // SAFETY: each job's src holds src_len bytes, per the callers' contracts.
        .map(|j| unsafe { input(j.src, j.src_len, "a job's src") })
        .collect()
}

/// Copy each result into its job's buffer and set its status.
fn finish(
    jobs: &mut [wring_job],
    results: Vec<Result<Vec<u8>, FrameError>>,
) -> Result<wring_status, Failure> {
    let mut first: Option<Failure> = None;
    for (job, result) in jobs.iter_mut().zip(results) {
        let outcome = result.map_err(Failure::from).and_then(|bytes| {
            // SAFETY: the job's dst has dst_cap writable bytes, per the callers' contracts.
            let dst = unsafe { crate::call::output(job.dst, job.dst_cap) }?;
            let out = dst.get_mut(..bytes.len()).ok_or_else(|| {
                Failure::from(::wring_engine::Error::ShortBuffer {
                    got: job.dst_cap,
                    need: bytes.len(),
                })
            })?;
            out.copy_from_slice(&bytes);
            Ok(bytes.len())
        });
        match outcome {
            Ok(n) => {
                job.dst_len = n;
                job.status = wring_status::WRING_OK as i32;
            }
            Err(f) => {
                job.status = f.0 as i32;
                first.get_or_insert(f);
            }
        }
    }
    match first {
        None => Ok(wring_status::WRING_OK),
        Some(f) => Err(f),
    }
}
