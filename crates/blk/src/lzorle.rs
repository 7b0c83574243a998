//! `lzo-rle`, zram's default algorithm, on the calling thread: wring-lzo's port of the
//! kernel's `lzorle1x_1_compress` (the same stream the kernel writes) and its
//! `lzo1x_decompress_safe`. The engine's codecs have no lzo-rle (btrfs never writes it), so
//! these streams sit beside the offload's: a pool of 16 KiB dictionaries, one per stream in
//! use, as zram's per-CPU `zcomp_strm` workspaces.

use std::sync::atomic::{AtomicUsize, Ordering};

use wring_lzo::CompressState;

use crate::error::BlkError;
use crate::stats::StreamStat;
use crate::streams::{compress_each, decompress_each, Figures, PageJob, Streams, Workspaces};

/// lzo-rle streams.
#[derive(Debug, Default)]
pub struct LzoRleStreams {
    states: Workspaces<CompressState>,
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
        let mut state = match self.states.take() {
            Some(s) => s,
            None => CompressState::try_new().ok_or_else(|| BlkError::Compress {
                algorithm: "lzo-rle".into(),
                message: "could not allocate a 16 KiB dictionary".into(),
            })?,
        };
        let r = wring_lzo::compress_rle(input, out, &mut state);
        self.states.give(state, self.streams());
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
        compress_each(&self.figures, jobs, |i, o| self.compress_one(i, o));
    }

    fn decompress(&self, jobs: &mut [PageJob<'_>]) {
        decompress_each(&self.figures, jobs, |input, output| {
            let want = output.len();
            match wring_lzo::decompress(input, output) {
                Ok(n) if n == want => Ok(Some(n)),
                Ok(n) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("lzo-rle decompressed to {n} bytes, not a page"),
                }),
                Err(e) => Err(BlkError::Corrupt {
                    page: 0,
                    message: format!("lzo-rle: {e}"),
                }),
            }
        });
    }

    fn streams(&self) -> usize {
        self.streams.load(Ordering::Acquire)
    }

    fn set_streams(&self, n: usize) -> Result<(), BlkError> {
        self.streams.store(n.max(1), Ordering::Release);
        self.states.truncate(n.max(1));
        Ok(())
    }

    fn algorithm(&self) -> String {
        "lzo-rle".into()
    }

    fn figures(&self) -> StreamStat {
        self.figures.stat(StreamStat {
            algorithm: self.algorithm(),
            streams: self.streams(),
            workspaces: self.states.len(),
            ..StreamStat::default()
        })
    }
}
