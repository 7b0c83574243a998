//! Running one row of `wring bench offload`: every request of a size compressed and then
//! decompressed through a completion queue, timed per request, checked byte for byte.

use super::*;

/// One request of a phase.
struct Job<'a> {
    op: Op,
    input: &'a [u8],
    out_len: usize,
    /// Original (decoded) bytes it stands for.
    original: usize,
    /// Index of the request in corpus order.
    index: usize,
}

/// What became of one request's compression.
#[derive(Debug, Clone, Copy)]
enum Stored {
    /// `len` bytes at `offset` of the arena.
    Compressed { offset: usize, len: usize },
    /// Did not fit: stored raw.
    Raw,
}

/// One run of one row: compress every chunk, decompress every compressed one, compare.
pub(super) fn measure(
    engine: &Arc<Engine>,
    device: Option<&Arc<SimDevice>>,
    cfg: &OffloadBenchConfig,
    size: usize,
    provider: &Provider,
    chunks: &[&[u8]],
) -> Result<OffloadRow, BenchError> {
    let spec = cfg.spec;
    let jobs: Vec<Job<'_>> = chunks
        .iter()
        .enumerate()
        .map(|(index, c)| Job {
            op: Op::CompressInto { spec },
            input: c,
            out_len: c.len(),
            original: c.len(),
            index,
        })
        .collect();
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let mut arena: Vec<u8> = Vec::with_capacity(total);
    let mut stored = vec![Stored::Raw; chunks.len()];
    let compress = run_phase(engine, device, cfg, &jobs, |job, done| match &done.result {
        Ok(Completed::CompressedInto(Some(n))) => {
            let bytes = done.output.get(..*n).ok_or_else(|| {
                BenchError::Spec(format!(
                    "{spec}: request {} claims {n} compressed bytes in a shorter buffer",
                    job.index
                ))
            })?;
            stored[job.index] = Stored::Compressed {
                offset: arena.len(),
                len: *n,
            };
            arena.extend_from_slice(bytes);
            Ok(())
        }
        Ok(Completed::CompressedInto(None)) => Ok(()),
        Ok(other) => Err(BenchError::Spec(format!(
            "{spec}: request {} completed as {other:?}, not as a compression",
            job.index
        ))),
        Err(e) => Err(BenchError::Engine {
            spec: spec.to_string(),
            index: job.index,
            source: e.clone(),
        }),
    })?;
    let mut raw = 0u64;
    let mut stored_bytes = 0u64;
    let mut djobs = Vec::new();
    for (index, s) in stored.iter().enumerate() {
        match *s {
            Stored::Compressed { offset, len } => {
                stored_bytes += len as u64;
                djobs.push(Job {
                    op: Op::Decompress {
                        algorithm: engine_algorithm(spec)?,
                        len: chunks[index].len(),
                    },
                    input: &arena[offset..offset + len],
                    out_len: chunks[index].len(),
                    original: chunks[index].len(),
                    index,
                });
            }
            Stored::Raw => {
                raw += 1;
                stored_bytes += chunks[index].len() as u64;
            }
        }
    }
    let mut mismatches = 0u64;
    let decompress = run_phase(engine, device, cfg, &djobs, |job, done| {
        if !decoded_matches(done, chunks[job.index]) {
            mismatches += 1;
        }
        Ok(())
    })?;
    Ok(OffloadRow {
        size,
        provider: provider.label(),
        simulated: device.is_some(),
        requests: chunks.len() as u64,
        bytes: total as u64,
        compress,
        decompress,
        raw,
        stored_bytes,
        ratio: ratio(total as u64, stored_bytes),
        mismatches,
        mbps_vs_cpu: None,
        p50_vs_cpu: None,
    })
}

fn engine_algorithm(spec: CompressSpec) -> Result<wring_engine::Algorithm, BenchError> {
    spec.algorithm
        .ok_or_else(|| BenchError::Spec("'no' compresses nothing to measure".into()))
}

/// Whether a decompression completed with exactly `original`'s bytes.
pub fn decoded_matches(done: &Done, original: &[u8]) -> bool {
    match done.result {
        Ok(Completed::Decompressed(n)) => {
            n == original.len() && done.output.get(..n).is_some_and(|out| out == original)
        }
        _ => false,
    }
}

/// Submit every job through a completion queue of a fresh offload, at most `cfg.window` in
/// flight, calling `check` on each completion; the phase's figures.
fn run_phase(
    engine: &Arc<Engine>,
    device: Option<&Arc<SimDevice>>,
    cfg: &OffloadBenchConfig,
    jobs: &[Job<'_>],
    mut check: impl FnMut(&Job<'_>, &Done) -> Result<(), BenchError>,
) -> Result<PhaseFigures, BenchError> {
    let window = cfg.window.max(1);
    let offload = Offload::new(
        Arc::clone(engine),
        OffloadConfig {
            depth: window,
            workers: cfg.streams.max(1),
            device: device.map(|d| Arc::clone(d) as Arc<dyn Device>),
        },
    )
    .map_err(|e| BenchError::Spec(format!("starting the offload: {e}")))?;
    let queue = offload.completion_queue();
    let mut pool: Vec<(Vec<u8>, Vec<u8>)> = (0..window.min(jobs.len()))
        .map(|_| (Vec::new(), Vec::new()))
        .collect();
    let mut started = vec![Instant::now(); jobs.len()];
    let mut latencies: Vec<Duration> = Vec::with_capacity(jobs.len());
    let mut fig = PhaseFigures {
        requests: jobs.len() as u64,
        input_bytes: jobs.iter().map(|j| j.input.len() as u64).sum(),
        ..PhaseFigures::default()
    };
    let t0 = Instant::now();
    let mut next = 0;
    while latencies.len() < jobs.len() {
        while next < jobs.len() && queue.outstanding() < window {
            let Some((mut input, mut output)) = pool.pop() else {
                break;
            };
            let job = &jobs[next];
            input.clear();
            input.extend_from_slice(job.input);
            output.clear();
            output.resize(job.out_len, 0);
            started[next] = Instant::now();
            let request = Request {
                op: job.op,
                input: input.into(),
                output,
                tag: next as u64,
            };
            match queue.submit(request) {
                Ok(()) => next += 1,
                Err(SubmitError::Full { request, .. }) => {
                    pool.push((request.input.into_vec(), request.output));
                    break;
                }
                Err(e) => {
                    return Err(BenchError::Spec(format!(
                        "the offload refused a request while the benchmark was submitting: {e}"
                    )))
                }
            }
        }
        let Some(done) = queue.wait(None) else {
            return Err(BenchError::Spec(format!(
                "the completion queue returned nothing with {} of {} requests outstanding",
                next - latencies.len(),
                jobs.len()
            )));
        };
        let i = done.tag as usize;
        let job = jobs.get(i).ok_or_else(|| {
            BenchError::Spec(format!("a completion came back with unknown tag {i}"))
        })?;
        latencies.push(started[i].elapsed());
        match done.ran {
            Ran::Device => fig.device += 1,
            Ran::Cpu(why) => {
                fig.cpu += 1;
                if let Some(why) = why {
                    fig.fallbacks.add(why);
                }
            }
        }
        check(job, &done)?;
        pool.push((done.input.into_vec(), done.output));
    }
    fig.secs = t0.elapsed().as_secs_f64();
    let stats = offload.stats();
    fig.stats_cpu_completed = stats.cpu.completed;
    fig.stats_device_completed = stats.device.map(|d| d.completed).unwrap_or(0);
    let original: u64 = jobs.iter().map(|j| j.original as u64).sum();
    fig.mbps = mb_per_s(original, fig.secs);
    fig.requests_per_s = if fig.secs > 0.0 {
        jobs.len() as f64 / fig.secs
    } else {
        0.0
    };
    latencies.sort_unstable();
    fig.p50_us = percentile_us(&latencies, 50.0);
    fig.p99_us = percentile_us(&latencies, 99.0);
    Ok(fig)
}
