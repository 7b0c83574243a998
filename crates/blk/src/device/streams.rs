//! Compression streams: zram's zcomp (drivers/block/zram/zcomp.c), here the engine's one
//! asynchronous API. A [`Streams`] compresses and decompresses a batch of pages;
//! [`OffloadStreams`] runs them through an [`Offload`](wring_engine::offload::Offload) with
//! `streams` workers and workspaces (`max_comp_streams`, resized live with
//! [`Streams::set_streams`]), for every algorithm the device takes: zram's `backends[]` is the
//! engine's codec table ([`wring_engine::Algorithm`]), lzo-rle and raw deflate included, and a
//! zstd dictionary (`algorithm_params dict=FILE`, `train_dict`) is an engine
//! [`Dictionary`](wring_engine::dict::Dictionary) that travels with each page.
//!
//! Each page goes to the offload as a batch of one, which the engine runs on the calling thread
//! under one of its `streams` workspaces — as zram compresses on the CPU that submitted the bio,
//! holding a per-CPU stream. The calling threads are the NBD server's request threads (nbdkit's
//! parallel thread model), so they already spread the work; handing each 4 KiB page to a worker
//! thread and waiting for it cost more in wake-ups than the compression itself. Measured with
//! nbdcopy of 120 MB of the corpus (executables, dictionary, package text) over a Unix socket,
//! lz4, 2 streams, release build, this 2-core machine: 133 MB/s written and 361 MB/s read with
//! whole-request batches on the workers (68% of the time in futex wait/wake), 353-368 and
//! 798-958 with batches of one. The offload's workers stay in place for front ends that submit
//! larger extents and for a device provider.
//!
//! A trait rather than the `Offload` itself so that the shuttle model and the property tests can
//! drive the store with [`ToyStreams`], a deterministic run-length coder with no threads.

use std::sync::Arc;

use wring_engine::dict::Dictionary;
use wring_engine::offload::{BatchJob, Completed, Offload, OffloadConfig, Op};
use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig};

use std::sync::atomic::{AtomicU64, Ordering};

use super::stats::StreamStat;
use crate::error::BlkError;
use crate::options::PAGE_SIZE;

/// One slot's job: compress `input` (one slot) into `output` (its length is the limit), or
/// decompress `input` into `output` (one slot: its length is what the object must give).
#[derive(Debug)]
pub struct PageJob<'a> {
    /// The bytes to work on.
    pub input: &'a [u8],
    /// Where the result goes.
    pub output: &'a mut [u8],
    /// Compression: `Some(n)` bytes written, `None` when the result did not fit.
    /// Decompression: `Some(output.len())`.
    pub result: Option<Result<Option<usize>, BlkError>>,
}

impl<'a> PageJob<'a> {
    /// A job not yet run.
    pub fn new(input: &'a [u8], output: &'a mut [u8]) -> PageJob<'a> {
        PageJob {
            input,
            output,
            result: None,
        }
    }
}

/// What compresses and decompresses pages.
pub trait Streams: Send + Sync {
    /// Compress every job (each fits or reports `None`).
    fn compress(&self, jobs: &mut [PageJob<'_>]);
    /// Decompress every job into a whole page.
    fn decompress(&self, jobs: &mut [PageJob<'_>]);
    /// Streams configured (`max_comp_streams`).
    fn streams(&self) -> usize;
    /// Change the number of streams live.
    fn set_streams(&self, n: usize) -> Result<(), BlkError>;
    /// The algorithm's name for reports.
    fn algorithm(&self) -> String;
    /// Figures for `stat` (priority left 0 for the store to fill in).
    fn figures(&self) -> StreamStat {
        StreamStat {
            algorithm: self.algorithm(),
            streams: self.streams(),
            ..StreamStat::default()
        }
    }
}

/// The counters every set of streams keeps for `stat`'s per-stream figures.
#[derive(Debug, Default)]
pub(crate) struct Figures {
    compressed: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    did_not_fit: AtomicU64,
    decompressed: AtomicU64,
    failures: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Figures {
    /// One page of `input` bytes compressed: `Some(n)` stored bytes, `None` when it did not
    /// fit; an error is a failure.
    pub(crate) fn compressed<E>(&self, input: usize, r: &Result<Option<usize>, E>) {
        match r {
            Ok(n) => {
                bump(&self.compressed, 1);
                bump(&self.bytes_in, input as u64);
                match n {
                    Some(n) => bump(&self.bytes_out, *n as u64),
                    None => bump(&self.did_not_fit, 1),
                }
            }
            Err(_) => bump(&self.failures, 1),
        }
    }

    /// One page decompressed, or a failure.
    pub(crate) fn decompressed<T, E>(&self, r: &Result<T, E>) {
        bump(
            if r.is_ok() {
                &self.decompressed
            } else {
                &self.failures
            },
            1,
        );
    }

    /// `base` (algorithm, streams, workspaces) with these counters.
    pub(crate) fn stat(&self, base: StreamStat) -> StreamStat {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StreamStat {
            compressed: g(&self.compressed),
            bytes_in: g(&self.bytes_in),
            bytes_out: g(&self.bytes_out),
            did_not_fit: g(&self.did_not_fit),
            decompressed: g(&self.decompressed),
            failures: g(&self.failures),
            ..base
        }
    }
}

/// Streams on the engine's offload.
#[derive(Debug)]
pub struct OffloadStreams {
    offload: Offload,
    /// The streams asked for (the workers converge on it: a shrink lets busy ones finish).
    streams: std::sync::atomic::AtomicUsize,
    spec: CompressSpec,
    algorithm: Algorithm,
    /// zstd's dictionary, handed with every page ([`OffloadStreams::with_dictionary`]).
    dictionary: Option<Dictionary>,
    name: String,
    figures: Figures,
}

impl OffloadStreams {
    /// An offload with `streams` CPU workers compressing 4 KiB slots with `spec`; `name` is
    /// zram's name for the algorithm.
    pub fn new(spec: CompressSpec, name: &str, streams: usize) -> Result<OffloadStreams, BlkError> {
        OffloadStreams::for_slots(spec, name, streams, PAGE_SIZE)
    }

    /// As [`OffloadStreams::new`] for slots of `slot_size` bytes (the engine's largest extent).
    pub fn for_slots(
        spec: CompressSpec,
        name: &str,
        streams: usize,
        slot_size: usize,
    ) -> Result<OffloadStreams, BlkError> {
        let Some(algorithm) = spec.algorithm else {
            return Err(BlkError::Option(
                "comp_algorithm must name an algorithm; 'no' is not one".into(),
            ));
        };
        let streams = streams.max(1);
        let engine = Arc::new(Engine::new(EngineConfig {
            max_extent: slot_size.max(wring_engine::BLOCK_SIZE),
            streams,
            ..EngineConfig::default()
        }));
        let config = OffloadConfig::for_engine(&engine);
        let offload = Offload::new(engine, config).map_err(|source| BlkError::Compress {
            algorithm: name.to_string(),
            source,
        })?;
        Ok(OffloadStreams {
            offload,
            streams: std::sync::atomic::AtomicUsize::new(streams),
            spec,
            algorithm,
            dictionary: None,
            name: name.to_string(),
            figures: Figures::default(),
        })
    }

    /// The same streams compressing and decompressing with `dictionary` (zram's
    /// `algorithm_params dict=`): zstd only. Its digested form for the level is made now, not
    /// at the first page.
    pub fn with_dictionary(mut self, dictionary: Dictionary) -> Result<OffloadStreams, BlkError> {
        if !self.algorithm.takes_dictionary() {
            return Err(BlkError::Option(format!(
                "{}: only zstd takes a dictionary",
                self.name
            )));
        }
        dictionary
            .prepare(self.spec.level)
            .map_err(|source| BlkError::Dictionary {
                what: self.name.clone(),
                source,
            })?;
        self.dictionary = Some(dictionary);
        Ok(self)
    }

    fn failed(&self, source: wring_engine::Error) -> BlkError {
        BlkError::Compress {
            algorithm: self.name.clone(),
            source,
        }
    }

    /// A completion that is not the page's result (the offload runs a batch of one to the
    /// end, with the completion of its operation: never seen).
    fn unexpected(&self, what: impl std::fmt::Debug) -> BlkError {
        BlkError::Offload {
            algorithm: self.name.clone(),
            message: format!("{what:?}"),
        }
    }
}

impl OffloadStreams {
    /// Run one page as a batch of one: the engine runs it on the calling thread, under one of
    /// its `streams` workspaces.
    fn run_one(
        &self,
        op: Op,
        job: &mut PageJob<'_>,
    ) -> Option<Result<Completed, wring_engine::Error>> {
        let mut one =
            [BatchJob::new(op, job.input, job.output).with_dictionary(self.dictionary.as_ref())];
        self.offload.run_batch(&mut one);
        let [b] = one;
        b.result
    }
}

impl Streams for OffloadStreams {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        let op = Op::CompressInto { spec: self.spec };
        for job in jobs {
            let result = match self.run_one(op, job) {
                Some(Ok(Completed::CompressedInto(n))) => Ok(n),
                Some(Err(e)) => Err(self.failed(e)),
                other => Err(self.unexpected(other)),
            };
            self.figures.compressed(job.input.len(), &result);
            job.result = Some(result);
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for job in jobs {
            // The output is one whole slot: what the object decompresses to.
            let op = Op::Decompress {
                algorithm: self.algorithm,
                len: job.output.len(),
            };
            let result = match self.run_one(op, job) {
                Some(Ok(Completed::Decompressed(n))) if n == job.output.len() => Ok(Some(n)),
                Some(Ok(Completed::Decompressed(n))) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("decompressed to {n} bytes, not a slot"),
                }),
                Some(Err(source)) => Err(BlkError::Decompress {
                    page: 0,
                    algorithm: self.name.clone(),
                    source,
                }),
                other => Err(self.unexpected(other)),
            };
            self.figures.decompressed(&result);
            job.result = Some(result);
        }
    }

    fn streams(&self) -> usize {
        self.streams.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_streams(&self, n: usize) -> Result<(), BlkError> {
        let n = n.max(1);
        self.offload.set_streams(n).map_err(|e| self.failed(e))?;
        self.streams.store(n, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn algorithm(&self) -> String {
        self.name.clone()
    }

    fn figures(&self) -> StreamStat {
        let ws = self
            .offload
            .engine()
            .stats()
            .managers
            .into_iter()
            .find(|(a, _)| *a == self.algorithm)
            .map(|(_, m)| m)
            .unwrap_or_default();
        self.figures.stat(StreamStat {
            algorithm: self.name.clone(),
            streams: self.streams(),
            workspaces: ws.workspaces,
            busy: ws.busy,
            waits: ws.waits,
            ..StreamStat::default()
        })
    }
}

/// A deterministic run-length coder on the calling thread, for models and property tests:
/// pairs of (run length, byte).
#[derive(Debug, Default)]
pub struct ToyStreams;

impl ToyStreams {
    fn encode(input: &[u8], out: &mut [u8]) -> Option<usize> {
        let mut n = 0;
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            let mut run = 1;
            while i + run < input.len() && input[i + run] == b && run < 255 {
                run += 1;
            }
            if n + 2 > out.len() {
                return None;
            }
            out[n] = run as u8;
            out[n + 1] = b;
            n += 2;
            i += run;
        }
        Some(n)
    }

    fn decode(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
        let mut n = 0;
        for pair in input.chunks(2) {
            let [run, b] = pair else {
                return Err("odd length".into());
            };
            let end = n + *run as usize;
            if end > out.len() {
                return Err("longer than a page".into());
            }
            out[n..end].fill(*b);
            n = end;
        }
        Ok(n)
    }
}

impl Streams for ToyStreams {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        for j in jobs {
            j.result = Some(Ok(ToyStreams::encode(j.input, j.output)));
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for j in jobs {
            let want = j.output.len();
            j.result = Some(match ToyStreams::decode(j.input, j.output) {
                Ok(n) if n == want => Ok(Some(n)),
                Ok(n) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("{n} bytes"),
                }),
                Err(m) => Err(BlkError::Corrupt {
                    page: 0,
                    message: m,
                }),
            });
        }
    }

    fn streams(&self) -> usize {
        1
    }

    fn set_streams(&self, _n: usize) -> Result<(), BlkError> {
        Ok(())
    }

    fn algorithm(&self) -> String {
        "toy-rle".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{CompAlgorithm, ALGORITHMS};

    fn streams(text: &str) -> OffloadStreams {
        let alg = CompAlgorithm::parse(text).unwrap();
        OffloadStreams::new(alg.spec, &alg.text(), 1).unwrap()
    }

    /// Real data page by page under zram's limit (the huge class size), as the store
    /// compresses it, with every algorithm: every page that fits decodes back, none fails.
    /// (Raw deflate panicked here in zlib-rs before abandoned streams were run to their end.)
    #[test]
    fn pages_of_real_data_under_the_huge_limit_all_decode() {
        let limit = crate::device::arena::Arena::new().huge_class_size() - 1;
        let mut data = Vec::new();
        for sample in wring_testing::samples(2 << 20) {
            data.extend_from_slice(&sample.data);
        }
        for alg in ALGORITHMS {
            let s = streams(alg);
            let (mut fit, mut not) = (0, 0);
            let mut out = vec![0u8; limit];
            let mut back = vec![0u8; PAGE_SIZE];
            for page in data.chunks_exact(PAGE_SIZE) {
                let mut jobs = [PageJob::new(page, &mut out)];
                s.compress(&mut jobs);
                match jobs[0].result.take() {
                    Some(Ok(Some(n))) => {
                        fit += 1;
                        let mut jobs = [PageJob::new(&out[..n], &mut back)];
                        s.decompress(&mut jobs);
                        assert!(matches!(jobs[0].result, Some(Ok(Some(_)))), "{alg}");
                        assert!(back == page, "{alg}: page {fit} decoded to other bytes");
                    }
                    Some(Ok(None)) => not += 1,
                    other => panic!("{alg}: page {}: {other:?}", fit + not),
                }
            }
            assert!(fit > 0 && not > 0, "{alg}: {fit} fit, {not} did not");
        }
    }

    #[test]
    fn noise_does_not_fit_and_garbage_is_corrupt_and_counted() {
        let s = streams("deflate");
        let noise = wring_testing::random_bytes(7, PAGE_SIZE);
        let mut out = vec![0u8; PAGE_SIZE - 1];
        for _ in 0..4 {
            let mut jobs = [PageJob::new(&noise, &mut out)];
            s.compress(&mut jobs);
            assert!(
                matches!(jobs[0].result, Some(Ok(None))),
                "{:?}",
                jobs[0].result
            );
        }
        let mut back = vec![0u8; PAGE_SIZE];
        for bad in [&[0xffu8; 40][..], &[][..]] {
            let mut jobs = [PageJob::new(bad, &mut back)];
            s.decompress(&mut jobs);
            assert!(
                matches!(
                    jobs[0].result,
                    Some(Err(BlkError::Decompress {
                        source: wring_engine::Error::Corrupt { .. },
                        ..
                    }))
                ),
                "{:?}",
                jobs[0].result
            );
        }
        let f = s.figures();
        assert_eq!((f.algorithm.as_str(), f.did_not_fit), ("deflate:6", 4));
        assert!(f.failures >= 2, "{f:?}");
    }

    #[test]
    fn a_dictionary_is_zstds_only() {
        let d = Dictionary::new(b"some dictionary content ".repeat(50)).unwrap();
        let e = streams("lz4")
            .with_dictionary(d.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("only zstd"), "{e}");
        assert!(streams("zstd:3").with_dictionary(d).is_ok());
    }
}
