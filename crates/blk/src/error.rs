//! The errors of a block store, each with the errno an NBD server returns for it. What the
//! engine refused (a page it could not compress or decode, a spec, a size, a dictionary) is
//! carried as the engine's own error, its `source()`. [`ArenaError`] is the arena's (zsmalloc's
//! allocation failures), here so that this leaf names no layer.

use wring_engine::size::SizeError;
use wring_engine::SpecError;

/// Why a request or a setting failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The engine could not compress a page, or start or resize the streams.
    #[error("compression with {algorithm} failed: {source}")]
    Compress {
        /// The algorithm (the streams' name: `zstd:3+dict`).
        algorithm: String,
        /// The engine's error.
        #[source]
        source: wring_engine::Error,
    },
    /// A stored page that the engine's decoder refused.
    #[error("page {page} is corrupt: {source}")]
    Decompress {
        /// The page index.
        page: u64,
        /// The algorithm (the streams' name).
        algorithm: String,
        /// The engine's error.
        #[source]
        source: wring_engine::Error,
    },
    /// A stored page that is not what it should be: it decoded to other than a whole page, or
    /// its staging could not be had.
    #[error("page {page} is corrupt: {message}")]
    Corrupt {
        /// The page index.
        page: u64,
        /// What was wrong.
        message: String,
    },
    /// The offload answered a page with something other than its result (a bug).
    #[error("the {algorithm} streams answered a page with {message}")]
    Offload {
        /// The algorithm.
        algorithm: String,
        /// What came back instead.
        message: String,
    },
    /// An option that is unknown or has a bad value.
    #[error("{0}")]
    Option(String),
    /// An option whose compression spec the engine refused.
    #[error("{option}: {source}")]
    Spec {
        /// The option and its value (`comp_algorithm=zstd:x`).
        option: String,
        /// The engine's error.
        #[source]
        source: SpecError,
    },
    /// An option whose size the engine's size parser refused.
    #[error("{option}: {source}")]
    Size {
        /// The option.
        option: String,
        /// The parser's error.
        #[source]
        source: SizeError,
    },
    /// A zstd dictionary the engine refused or could not train.
    #[error("{what}: {source}")]
    Dictionary {
        /// What was being done (`train_dict`, the dictionary file).
        what: String,
        /// The engine's error.
        #[source]
        source: wring_engine::Error,
    },
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
            BlkError::OutOfRange { .. }
            | BlkError::Option(_)
            | BlkError::Spec { .. }
            | BlkError::Size { .. }
            | BlkError::Dictionary { .. } => libc::EINVAL,
            BlkError::NoSpace(ArenaError::OutOfMemory { .. }) => libc::ENOMEM,
            BlkError::NoSpace(_) | BlkError::BackingFull { .. } => libc::ENOSPC,
            BlkError::Compress { .. }
            | BlkError::Decompress { .. }
            | BlkError::Corrupt { .. }
            | BlkError::Offload { .. }
            | BlkError::Io { .. } => libc::EIO,
        }
    }
}

/// Why an allocation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArenaError {
    /// A new zspage would take the arena past its limit.
    #[error("the memory limit of {limit_pages} pages is reached ({used_pages} in use)")]
    Limit {
        /// The limit, in pages.
        limit_pages: u64,
        /// Pages in use.
        used_pages: u64,
    },
    /// The heap refused a new zspage.
    #[error("could not allocate a zspage of {bytes} bytes")]
    OutOfMemory {
        /// Bytes asked for.
        bytes: usize,
    },
    /// An object larger than the arena's largest class.
    #[error("an object of {0} bytes is larger than the arena's largest class")]
    TooLarge(usize),
}
