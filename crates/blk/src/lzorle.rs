//! `lzo-rle`, zram's default algorithm, on the calling thread: wring-lzo's port of the
//! kernel's `lzorle1x_1_compress` (the same stream the kernel writes) and its
//! `lzo1x_decompress_safe`. The engine's codecs have no lzo-rle (btrfs never writes it), so
//! these streams sit beside the offload's: a pool of 16 KiB dictionaries, one per stream in
//! use, as zram's per-CPU `zcomp_strm` workspaces.

use wring_lzo::CompressState;

use crate::error::BlkError;
use crate::streams::{PageCodec, PerPage, Streams, Workspaces};

/// lzo-rle streams.
#[derive(Debug)]
pub struct LzoRleStreams {
    states: Workspaces<CompressState>,
    per_page: PerPage,
}

impl LzoRleStreams {
    /// Streams for `streams` callers at once (workspaces are made as they are needed).
    pub fn new(streams: usize) -> LzoRleStreams {
        LzoRleStreams {
            states: Workspaces::default(),
            per_page: PerPage::new(streams),
        }
    }

    fn compress_page(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
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

impl PageCodec for LzoRleStreams {
    fn name(&self) -> String {
        "lzo-rle".into()
    }

    fn per_page(&self) -> &PerPage {
        &self.per_page
    }

    fn compress_one(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        self.compress_page(input, out)
    }

    fn decompress_one(&self, input: &[u8], out: &mut [u8]) -> Result<Option<usize>, BlkError> {
        let want = out.len();
        match wring_lzo::decompress(input, out) {
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
    }

    fn workspaces(&self) -> usize {
        self.states.len()
    }

    fn keep(&self, n: usize) {
        self.states.truncate(n);
    }
}
