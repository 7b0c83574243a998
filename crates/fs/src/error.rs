//! The filesystem's error type; every variant maps to the errno FUSE returns.

/// Why a filesystem operation failed.
#[derive(Debug, thiserror::Error)]
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
}

impl FsError {
    /// The errno to hand back to the kernel.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::Errno(e) => *e,
            FsError::Option(_) => libc::EINVAL,
            _ => libc::EIO,
        }
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

/// Shorthand for an errno error.
pub fn errno(e: i32) -> FsError {
    FsError::Errno(e)
}
