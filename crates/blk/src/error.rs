//! The errors of a block store, each with the errno an NBD server returns for it.

use crate::arena::ArenaError;

/// Why a request or a setting failed.
#[derive(Debug, thiserror::Error)]
pub enum BlkError {
    /// A request reaching past the end of the device (zram's `invalid_io`).
    #[error(
        "a request of {len} bytes at offset {offset} reaches past the device's end ({size} bytes)"
    )]
    OutOfRange {
        /// Request offset.
        offset: u64,
        /// Request length.
        len: u64,
        /// Device size.
        size: u64,
    },
    /// The store is at `mem_limit` (or the heap refused memory); nothing was changed on the
    /// page that failed.
    #[error("no space: {0}; raise mem_limit, compact, or discard data")]
    NoSpace(ArenaError),
    /// Writeback found no room on the backing file; the page it was on stays in RAM.
    #[error(
        "the backing file {path} is full ({why}; it offers {blocks} blocks of 4 KiB): {written} \
         pages were written back, the rest stay in RAM; use a larger backing file"
    )]
    BackingFull {
        /// The file.
        path: String,
        /// Its blocks.
        blocks: u64,
        /// Pages written back before it filled.
        written: u64,
        /// What failed.
        why: String,
    },
    /// The compressor failed.
    #[error("compression with {algorithm} failed: {message}")]
    Compress {
        /// The algorithm.
        algorithm: String,
        /// Why.
        message: String,
    },
    /// A stored page did not decompress to a whole page.
    #[error("page {page} is corrupt: {message}")]
    Corrupt {
        /// The page index.
        page: u64,
        /// What was wrong.
        message: String,
    },
    /// An option that is unknown or has a bad value.
    #[error("{0}")]
    Option(String),
    /// The control channel failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl BlkError {
    /// The errno an NBD reply carries for this error.
    pub fn errno(&self) -> i32 {
        match self {
            BlkError::OutOfRange { .. } | BlkError::Option(_) => libc::EINVAL,
            BlkError::NoSpace(ArenaError::OutOfMemory { .. }) => libc::ENOMEM,
            BlkError::NoSpace(_) | BlkError::BackingFull { .. } => libc::ENOSPC,
            BlkError::Compress { .. } | BlkError::Corrupt { .. } | BlkError::Io { .. } => libc::EIO,
        }
    }
}
