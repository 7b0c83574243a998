//! The filesystem's error type; every variant maps to the errno FUSE returns.

/// Why a filesystem operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// A POSIX error for the caller (ENOENT, EEXIST, ENOTEMPTY, …).
    #[error("{}", std::io::Error::from_raw_os_error(*.0))]
    Errno(i32),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] redb::Error),
    /// An extent's checksum or decoding failed, or an item read from the store is damaged
    /// (offset 0 for the inode item itself): EIO, as btrfs answers a bad checksum.
    #[error("inode {ino} is damaged at offset {offset}: {reason} (`wring fsck STORE` lists what is damaged)")]
    Corrupt {
        /// The inode.
        ino: u64,
        /// File offset of the extent.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// The engine failed to compress.
    #[error("engine: {0}")]
    Engine(#[from] wring_engine::Error),
    /// I/O on the store directory.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A bad option or property value.
    #[error(transparent)]
    Option(#[from] crate::options::OptionError),
    /// The object store holding a store's extents failed (see `wring_objstore::Error`: each
    /// names the object and what to do).
    #[error("object store: {0}")]
    Objects(#[from] wring_objstore::Error),
    /// The bucket's lease is held by another writer: a mount elsewhere, or one that crashed.
    #[error(
        "{object} is held by {holder} since {since} (unix time){hint}: another mount has \
         this filesystem. Unmount it there first; only if that holder is gone for good (its \
         machine crashed or is lost, its daemon was killed), take the lease with --break-lease"
    )]
    LeaseHeld {
        /// The lease object.
        object: String,
        /// Who holds it.
        holder: String,
        /// Since when (seconds since the epoch).
        since: u64,
        /// What is known about the holder (empty, or a parenthesis starting with a space).
        hint: String,
    },
    /// A store's data setting or its bucket refuses what was asked (a prefix already in use,
    /// a stale copy of the metadata, a malformed config table), with the errno to answer.
    #[error("{why}")]
    Refused {
        /// What is wrong and how to fix it.
        why: String,
        /// The errno it maps to.
        errno: i32,
    },
}

impl FsError {
    /// The errno to hand back to the kernel. An I/O error of the store is EIO, except those
    /// the caller must see as they are: no room (ENOSPC, EDQUOT) and a read-only store, and
    /// a bucket that refuses writes (ENOSPC, or EDQUOT when its answer names a quota).
    pub fn errno(&self) -> i32 {
        match self {
            FsError::Errno(e) => *e,
            FsError::Option(_) => libc::EINVAL,
            FsError::LeaseHeld { .. } => libc::EBUSY,
            FsError::Refused { errno, .. } => *errno,
            FsError::Io { source, .. } => passed_on(source),
            FsError::Store(redb::Error::Io(source)) => passed_on(source),
            FsError::Objects(e) => e.errno(),
            _ => libc::EIO,
        }
    }
}

/// The errno of an I/O error of the store's files: ENOSPC, EDQUOT and EROFS as they are,
/// anything else EIO.
fn passed_on(e: &std::io::Error) -> i32 {
    match e.raw_os_error() {
        Some(n @ (libc::ENOSPC | libc::EDQUOT | libc::EROFS)) => n,
        _ => libc::EIO,
    }
}

macro_rules! store_err {
    ($($t:ty),*) => {$(
        impl From<$t> for FsError {
            fn from(e: $t) -> Self {
                FsError::Store(e.into())
            }
        }
    )*};
}
store_err!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// An object store error, with its lease refusal in the filesystem's words.
pub(crate) fn objects_err(e: wring_objstore::Error) -> FsError {
    match e {
        wring_objstore::Error::LeaseHeld {
            object,
            holder,
            since,
        } => FsError::LeaseHeld {
            object,
            holder,
            since,
            hint: String::new(),
        },
        e => FsError::Objects(e),
    }
}

/// `e` for a log line: its message, then each cause's that the message does not already
/// hold (an I/O error's, a library's), so nothing is lost where an error is reduced to an
/// errno for the kernel.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// Shorthand for an errno error.
pub(crate) fn errno(e: i32) -> FsError {
    FsError::Errno(e)
}

/// An I/O error met while doing `what`, for `map_err`: `.map_err(io("opening the log"))`.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> FsError {
    let what = what.into();
    move |source| FsError::Io { what, source }
}
