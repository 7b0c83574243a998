//! `lzo-rle`, zram's default algorithm, on the calling thread: wring-lzo's port of the
//! kernel's `lzorle1x_1_compress` (the same stream the kernel writes) and its
//! `lzo1x_decompress_safe`. The engine's codecs have no lzo-rle (btrfs never writes it), so
//! these streams sit beside the offload's: a pool of 16 KiB dictionaries, one per stream in
//! use, as zram's per-CPU `zcomp_strm` workspaces.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use wring_lzo::CompressState;

use crate::error::BlkError;
use crate::stats::StreamStat;
use crate::streams::{Figures, PageJob, Streams};

/// lzo-rle streams.
#[derive(Debug, Default)]
pub struct LzoRleStreams {
    states: Mutex<Vec<CompressState>>,
    streams: AtomicUsize,
    figures: Figures,
}

impl LzoRleStreams {
    /// Streams for `streams` callers at once (workspaces are made as they are needed).
    pub fn new(streams: usize) -> LzoRleStreams {
        let s = LzoRleStreams::default();
        s.streams.store(streams.max(1), Ordering::Release);
        s
    }

    fn compress_one(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        let taken = self.states.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut state = match taken {
            Some(s) => s,
            None => CompressState::try_new().ok_or_else(|| BlkError::Compress {
                algorithm: "lzo-rle".into(),
                message: "could not allocate a 16 KiB dictionary".into(),
            })?,
        };
        let r = wring_lzo::compress_rle(input, out, &mut state);
        // Keep at most `streams` dictionaries between calls (more callers at once borrow
        // extra ones, freed on return).
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if states.len() < self.streams() {
            states.push(state);
        }
        match r {
            Ok(n) => Ok(Some(n)),
            Err(wring_lzo::Error::OutputOverrun) => Ok(None),
            Err(e) => Err(BlkError::Compress {
                algorithm: "lzo-rle".into(),
                message: e.to_string(),
            }),
        }
    }
}

impl Streams for LzoRleStreams {
    fn compress(&self, jobs: &mut [PageJob<'_>]) {
        for job in jobs {
            let r = self.compress_one(job.input, job.output);
            self.figures.compressed(job.input.len(), &r);
            job.result = Some(r);
        }
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        for job in jobs {
            let want = job.output.len();
            let r = match wring_lzo::decompress(job.input, job.output) {
                Ok(n) if n == want => Ok(Some(n)),
                Ok(n) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("lzo-rle decompressed to {n} bytes, not a page"),
                }),
                Err(e) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("lzo-rle: {e}"),
                }),
            };
            self.figures.decompressed(&r);
            job.result = Some(r);
        }
    }

    fn streams(&self) -> usize {
        self.streams.load(Ordering::Acquire)
    }

    fn set_streams(&self, n: usize) -> Result<(), BlkError> {
        self.streams.store(n.max(1), Ordering::Release);
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        states.truncate(n.max(1));
        Ok(())
    }

    fn algorithm(&self) -> String {
        "lzo-rle".into()
    }

    fn figures(&self) -> StreamStat {
        self.figures.stat(StreamStat {
            algorithm: self.algorithm(),
            streams: self.streams(),
            workspaces: self.states.lock().map_or(0, |v| v.len()),
            ..StreamStat::default()
        })
    }
}
