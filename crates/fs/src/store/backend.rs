//! Where extents' stored bytes live: the local data file ([`DataFile`]) or segment objects in
//! an S3 bucket ([`Objects`]), behind one type. The extent items record the same u64 either
//! way: a data-file offset, or an object address (`wring_objstore::Addr::raw`).
//!
//! Mirrors btrfs's data block groups on different devices: the extent tree does not care which
//! device a block group lives on. Both backends keep btrfs's rule that space a transaction
//! gave up is released only once a durable commit no longer refers to it (pinning), and ours
//! that no read snapshot which could still see it is alive.

use std::fs::File;

use super::data::{DataFile, Range, ReaderGuard};
use super::objects::Objects;
use crate::error::FsError;

/// The data side of a store.
pub enum Backend {
    /// The data file in the store directory.
    Local(DataFile),
    /// Segment objects in a bucket.
    Objects(Objects),
}

impl Backend {
    /// Store an extent's bytes; returns where (offset or address) and how long.
    pub fn put(&self, bytes: &[u8]) -> Result<Range, FsError> {
        match self {
            Backend::Local(d) => {
                let range = (d.allocate(bytes.len() as u64), bytes.len() as u64);
                if let Err(e) = d.write_at(bytes, range.0) {
                    d.release(range);
                    return Err(FsError::Io {
                        what: "writing the data file".into(),
                        source: e,
                    });
                }
                Ok(range)
            }
            Backend::Objects(o) => o.put(bytes),
        }
    }

    /// Give back bytes stored by a transaction that did not commit (nothing refers to them).
    pub fn release(&self, range: Range) {
        match self {
            Backend::Local(d) => d.release(range),
            Backend::Objects(o) => o.release(range),
        }
    }

    /// Bytes a committed transaction stopped referring to: released after a durable commit.
    pub fn pin(&self, ranges: Vec<Range>) {
        match self {
            Backend::Local(d) => d.pin(ranges),
            Backend::Objects(o) => o.pin(ranges),
        }
    }

    /// A durable commit happened: what was pinned before it may go (once old readers end).
    pub fn unpin(&self) {
        match self {
            Backend::Local(d) => d.unpin(),
            Backend::Objects(o) => o.unpin(),
        }
    }

    /// Make every stored byte durable (before a durable commit refers to it): fsync of the
    /// data file, or every segment in the bucket.
    pub fn sync(&self) -> Result<(), FsError> {
        match self {
            Backend::Local(d) => d.sync(),
            Backend::Objects(o) => o.sync(),
        }
    }

    /// Read an extent's stored bytes (its whole length).
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        match self {
            Backend::Local(d) => d.read_at(buf, at),
            Backend::Objects(o) => o.read_at(buf, at),
        }
    }

    /// Register a reader (before opening its snapshot).
    pub fn reader(&self) -> ReaderGuard<'_> {
        match self {
            Backend::Local(d) => d.reader(),
            Backend::Objects(o) => o.reader(),
        }
    }

    /// (bytes no extent uses, bytes held): the data file's free space inside its used part
    /// and that part's length; the bucket's dead bytes and every segment byte (in the bucket
    /// or waiting for upload).
    pub fn usage(&self) -> (u64, u64) {
        match self {
            Backend::Local(d) => d.usage(),
            Backend::Objects(o) => o.usage(),
        }
    }

    /// What the next durable commit gives back to the store's filesystem: the data file's
    /// pinned blocks; nothing for a bucket, whose bytes are not on this filesystem.
    pub fn reclaimable(&self) -> u64 {
        match self {
            Backend::Local(d) => d.reclaimable(),
            Backend::Objects(_) => 0,
        }
    }

    /// The database went back to an older commit (a commit failed), whose extent items
    /// reference `used`: the data file's free space is rebuilt from them. A bucket's live
    /// counts cannot be: its compactor deletes nothing more until the next mount counts them
    /// again.
    pub fn rebuild(&self, used: Vec<Range>) -> Result<(), FsError> {
        match self {
            Backend::Local(d) => d.rebuild(used),
            Backend::Objects(o) => {
                o.freeze();
                Ok(())
            }
        }
    }

    /// Cut the data file after its used part (a mount does); nothing for a bucket.
    pub fn trim(&self) -> Result<(), FsError> {
        match self {
            Backend::Local(d) => d.trim(),
            Backend::Objects(_) => Ok(()),
        }
    }

    /// The data file, for the flusher.
    pub fn file(&self) -> Option<&File> {
        match self {
            Backend::Local(d) => d.file(),
            Backend::Objects(_) => None,
        }
    }

    /// The object store, when the extents are in a bucket.
    pub fn objects(&self) -> Option<&Objects> {
        match self {
            Backend::Local(_) => None,
            Backend::Objects(o) => Some(o),
        }
    }
}
