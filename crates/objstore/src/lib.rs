//! wring's extents in an S3 object store (see docs/objstore.md): compressed extents are packed
//! into immutable segment objects `PREFIX/seg/<16 hex digits>`, read back with ranged GETs
//! through a size-limited local cache, and reclaimed by a compactor; a lease object
//! `PREFIX/lease` keeps a second writer out. The filesystem's metadata stays in its local redb
//! store; an extent item's u64 offset becomes an [`Addr`] (segment << 32 | offset).
//!
//! Mirrors btrfs's data block groups and relocation (see [`store`]), with the bucket as the
//! device.

// Segments, leases and replies come from a bucket others can write: reading must not panic.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
// Modules are private behind the curated `pub use` below: a `pub` item no path can reach
// from outside says `pub(crate)`.
#![warn(unreachable_pub)]

pub mod addr;
pub mod cache;
pub mod config;
pub mod creds;
pub mod error;
pub mod lease;
mod refusal;
pub mod segment;
pub mod store;

pub use addr::Addr;
pub use config::Config;
pub use creds::{Credentials, Secret};
pub use error::{Error, FormatError, Result};
pub use lease::Lease;
pub use store::{ObjStore, SegmentUsage, Stats};
