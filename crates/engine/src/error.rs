//! Error types of the engine: one for option text, one for extents.

use crate::spec::Algorithm;

/// A compression spec (`zstd:3`) that cannot be understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    /// The algorithm name is not one wring knows.
    #[error(
        "unknown compression algorithm '{0}': accepted are {names}, no, none",
        names = Algorithm::names()
    )]
    UnknownAlgorithm(String),
    /// The text after the colon is not an integer.
    #[error("invalid level '{level}' for {algorithm}: accepted are whole numbers {min}..={max} (0 means the default, {default})")]
    BadLevel {
        /// The algorithm named before the colon.
        algorithm: Algorithm,
        /// The text that was not a number.
        level: String,
        /// Lowest accepted level.
        min: i32,
        /// Highest accepted level.
        max: i32,
        /// The default level.
        default: i32,
    },
    /// A level outside the algorithm's range, where the caller asked not to clamp it
    /// ([`crate::CompressSpec::parse_strict`]).
    #[error("invalid level {level} for {algorithm}: accepted are {min}..={max} (0 means the default, {default})")]
    LevelOutOfRange {
        /// The algorithm named before the colon.
        algorithm: Algorithm,
        /// The level asked for.
        level: i32,
        /// Lowest accepted level.
        min: i32,
        /// Highest accepted level.
        max: i32,
        /// The default level.
        default: i32,
    },
    /// `lzo:5`, `no:3`: a level where the algorithm takes none.
    #[error("{0} takes no level")]
    NoLevels(String),
}

/// Why an extent could not be compressed or decompressed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The compressed data is damaged or not of this algorithm.
    #[error("corrupt {algorithm} extent: {reason}")]
    Corrupt {
        /// Which decoder rejected it.
        algorithm: Algorithm,
        /// What was wrong, in plain words.
        reason: String,
    },
    /// Decoding would produce more bytes than the extent declares.
    #[error("{algorithm} extent decodes to more than the {limit} bytes it may hold")]
    Oversized {
        /// Which decoder.
        algorithm: Algorithm,
        /// The declared size of the extent.
        limit: usize,
    },
    /// An extent larger than the engine's `max_extent` was passed in.
    #[error("extent of {len} bytes is larger than max_extent ({max} bytes)")]
    ExtentTooLarge {
        /// Bytes passed in.
        len: usize,
        /// The engine's limit.
        max: usize,
    },
    /// The destination buffer is smaller than the input extent.
    #[error("destination buffer of {got} bytes is smaller than the {need} bytes required")]
    ShortBuffer {
        /// Bytes available.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The compression library failed for a reason that is not the data's fault.
    #[error("{algorithm} library error: {reason}")]
    Library {
        /// Which library.
        algorithm: Algorithm,
        /// Its message.
        reason: String,
    },
    /// A dictionary was given to an algorithm that takes none (only zstd does).
    #[error("{0} takes no dictionary; only zstd does")]
    NoDictionary(Algorithm),
    /// A dictionary could not be made or trained.
    #[error("zstd dictionary: {0}")]
    Dictionary(String),
    /// The offload API is shutting down and takes no more requests.
    #[error("the engine's offload queue is shut down")]
    ShutDown,
    /// A codec panicked while running this request (a bug, reported instead of unwinding
    /// into the caller).
    #[error("a compression worker panicked while running this request")]
    Panicked,
    /// A thread the engine needs could not be started.
    #[error("could not start {what}: {reason}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// The system's reason.
        reason: String,
    },
}

impl Error {
    pub(crate) fn corrupt(algorithm: Algorithm, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            algorithm,
            reason: reason.into(),
        }
    }
}
