//! The crate's errors: each says what failed, on which object, and what to do about it.

use std::time::Duration;

/// A malformed segment trailer, index, lease record or credentials file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct FormatError(pub String);

/// What can go wrong in the object store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work (bad URL, http to a remote endpoint, zero sizes).
    #[error("object store configuration: {0}")]
    Config(String),
    /// No credentials, or a credentials file that is unsafe or unreadable.
    #[error("credentials: {0}")]
    Credentials(String),
    /// A request to the bucket failed.
    #[error("{what}: {source}")]
    Request {
        /// What was being done, naming the object.
        what: String,
        /// The object_store error.
        #[source]
        source: object_store::Error,
    },
    /// Writes waited for the bucket longer than the configured wait.
    #[error(
        "{what}: the bucket did not take the data within {waited:?} ({pending} segments wait \
         for upload; last error: {last_error}); the data stays queued and a later sync retries"
    )]
    Unavailable {
        /// What was waiting.
        what: String,
        /// How long it waited.
        waited: Duration,
        /// Segments not in the bucket yet.
        pending: usize,
        /// The last upload error seen.
        last_error: String,
    },
    /// An object's bytes are not what was written.
    #[error("{object} is corrupt: {why}")]
    Corrupt {
        /// The object's key.
        object: String,
        /// What is wrong.
        why: String,
    },
    /// A segment that an address names is not in the bucket.
    #[error("{object} (segment {segment}) is not in the bucket")]
    MissingSegment {
        /// The segment number.
        segment: u32,
        /// Its object key.
        object: String,
    },
    /// No extent of that length starts at that address.
    #[error("no extent of {len} bytes at {addr} ({object})")]
    NoExtent {
        /// The address asked for.
        addr: crate::Addr,
        /// The length asked for.
        len: u64,
        /// The segment's object key.
        object: String,
    },
    /// The lease is held by someone else.
    #[error(
        "{object} is held by {holder} since {since} (unix time); stop that writer first, or \
         break the lease explicitly if it is stale"
    )]
    LeaseHeld {
        /// The lease object's key.
        object: String,
        /// Who holds it.
        holder: String,
        /// Since when (seconds since the epoch).
        since: u64,
    },
    /// A segment to delete still has live extents.
    #[error(
        "segment {segment} still holds {live} live bytes; delete it only after the metadata no \
         longer points at it (free or rewrite its extents first)"
    )]
    InUse {
        /// The segment number.
        segment: u32,
        /// Its live bytes.
        live: u64,
    },
    /// A segment object under one of our numbers was written by someone else.
    #[error(
        "segment {segment} exists: another writer holds {prefix}; this store stopped writing \
         (nothing appended since the last sync is in the bucket). Stop the other writer, or \
         take the lease before writing"
    )]
    AnotherWriter {
        /// The segment number.
        segment: u32,
        /// The filesystem's s3://BUCKET/PREFIX.
        prefix: String,
    },
    /// The bucket answers uploads and refuses them: over quota, out of space, read-only,
    /// writes denied (see `refusal`). The segments stay queued and their uploads are
    /// retried, so a sync after the bucket takes writes again succeeds.
    #[error(
        "{what}: {bucket} refuses writes ({pending} segments wait for upload); its last \
         answer: {answer}. The data stays queued and a later sync retries"
    )]
    Refused {
        /// What was waiting.
        what: String,
        /// `s3://BUCKET`.
        bucket: String,
        /// ENOSPC, or EDQUOT when the answer names a quota.
        errno: i32,
        /// Segments not in the bucket yet.
        pending: usize,
        /// The bucket's last answer.
        answer: String,
    },
    /// An extent or segment too large for the address format.
    #[error("{0}")]
    TooLarge(String),
    /// The runtime could not be started.
    #[error("starting the object store's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl Error {
    /// The errno a filesystem reports for this error: ENOSPC or EDQUOT when the bucket
    /// refuses writes, EIO for everything else.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Refused { errno, .. } => *errno,
            _ => libc::EIO,
        }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
