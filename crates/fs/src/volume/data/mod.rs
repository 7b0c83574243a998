//! File data: the extent map and the write, read, truncate and fallocate paths
//! ([`extent`]), delayed allocation and writeback ([`delalloc`]), the one extent encoder
//! ([`encode`]), the read side of an extent ([`decode`]) and the cache of decoded extents
//! ([`cache`]).
//!
//! Mirrors fs/btrfs/inode.c's data half (compress_file_range, cow_file_range_async,
//! btrfs_truncate), compression.c and file-item.c's checksums. What reaches the store is an
//! extent item, written by the store's transaction (`store::extents`).

pub(super) mod cache;
mod decode;
pub(crate) mod defrag;
pub(crate) mod delalloc;
mod dict_rewrite;
pub(crate) mod dicts;
pub(crate) mod encode;
pub(crate) mod extent;
mod recompress;
pub(crate) mod reflink;
