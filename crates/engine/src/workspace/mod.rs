//! The level-aware workspace manager, mirroring fs/btrfs/compression.c's generic manager and
//! fs/btrfs/zstd.c's level-aware one in a single implementation: per-class idle lists with a
//! bitmap of populated classes scanned upward, a global LRU with a reclaim timer, a preallocated
//! max-level workspace for forward progress, and zram's limit on concurrent streams.
//!
//! Where the kernel sleeps only on allocation failure, wring also treats a configurable memory
//! budget as pressure, and it applies zram's stream limit to every algorithm.

mod manager;
mod reclaim;
mod state;

use std::time::Duration;

use crate::codec::CodecState;
use crate::dict::Dictionary;
use crate::error::Error;

pub use manager::Manager;

/// The kernel's reclaim interval (ZSTD_BTRFS_RECLAIM_JIFFIES): 307 s, to stay clear of the
/// 30 s transaction commit.
pub const DEFAULT_RECLAIM: Duration = Duration::from_secs(307);

/// How a manager is tuned; every field can be changed on a live manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagerConfig {
    /// Most workspaces lent at once (zram's max_comp_streams); at least 1.
    pub streams: usize,
    /// Bytes workspaces may hold beyond the preallocated max-level one; `None` = no limit.
    pub budget: Option<usize>,
    /// Idle time after which the reclaim timer frees a workspace.
    pub reclaim: Duration,
    /// Largest extent a workspace must handle.
    pub max_extent: usize,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            streams: default_streams(),
            budget: None,
            reclaim: DEFAULT_RECLAIM,
            max_extent: crate::MAX_EXTENT,
        }
    }
}

/// The default stream count: the machine's available parallelism.
pub fn default_streams() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Counters of one manager, readable at any time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManagerStats {
    /// `get` served by an idle workspace of exactly the requested class.
    pub hits: u64,
    /// `get` served by an idle workspace of a larger class (the scan went up).
    pub scans_up: u64,
    /// Workspaces allocated (including the preallocated one).
    pub allocations: u64,
    /// Allocations that failed and were treated as memory pressure.
    pub alloc_failures: u64,
    /// Times a caller had to sleep (stream limit or memory pressure).
    pub waits: u64,
    /// Workspaces freed by the reclaim timer.
    pub reclaims: u64,
    /// Workspaces freed for any other reason (stream limit lowered, shutdown).
    pub frees: u64,
    /// Bytes held by all workspaces now.
    pub resident_bytes: usize,
    /// Most bytes ever held at once.
    pub peak_bytes: usize,
    /// Workspaces that exist now.
    pub workspaces: usize,
    /// Workspaces lent out now.
    pub busy: usize,
    /// The current stream limit.
    pub streams: usize,
}

/// A number for the calling thread, unique in the process (never 0): which thread returned a
/// workspace last, so that it gets the same one back.
pub(crate) fn thread_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    crate::sync::thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// A workspace lent by a [`Manager`]: the codec's state plus a buffer of one extent,
/// so that compressing and decompressing allocate nothing.
pub struct Workspace {
    pub(crate) id: u64,
    pub(crate) class: usize,
    /// The level this workspace is sized for (the kernel's `workspace->level`).
    pub(crate) level: i32,
    /// The level the borrower asked for (the kernel's `workspace->req_level`); 0 = any.
    pub(crate) req_level: i32,
    pub(crate) bytes: usize,
    /// Key of this workspace's place on the LRU, if it has one.
    pub(crate) lru_key: Option<reclaim::LruKey>,
    /// The [`thread_token`] of the thread that returned it last (0: none yet).
    pub(crate) home: u64,
    pub(crate) state: Box<dyn CodecState>,
    /// The extent buffer: its capacity (max_extent) is reserved when the workspace is
    /// allocated, its bytes are touched only as far as a use needs ([`Workspace::buffer`]).
    buf: Vec<u8>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("id", &self.id)
            .field("level", &self.level)
            .field("req_level", &self.req_level)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Workspace {
    /// The level the workspace was sized for.
    pub fn level(&self) -> i32 {
        self.level
    }

    /// The level it compresses at for its current borrower.
    pub fn req_level(&self) -> i32 {
        self.req_level
    }

    /// Bytes of memory the workspace accounts for.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Compress `src` at the requested level into `dst`; `Ok(None)` when it does not fit.
    pub fn compress(
        &mut self,
        level: i32,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        self.state.compress(level, src, dst)
    }

    /// Decompress `src` into `dst`, returning the bytes produced.
    pub fn decompress(&mut self, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        self.state.decompress(src, dst)
    }

    /// Compress with `dict`; `None` when the algorithm takes no dictionary.
    pub fn compress_dict(
        &mut self,
        level: i32,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<Option<usize>, Error>> {
        self.state.compress_dict(level, dict, src, dst)
    }

    /// Decompress with `dict`; `None` when the algorithm takes no dictionary.
    pub fn decompress_dict(
        &mut self,
        dict: &Dictionary,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<usize, Error>> {
        self.state.decompress_dict(dict, src, dst)
    }

    /// Decompress an extent of declared size `len` into the workspace's own buffer; the tail the
    /// stream does not cover reads as zeros. Returns the `len` bytes.
    pub fn decompress_to_buf(&mut self, src: &[u8], len: usize) -> Result<&[u8], Error> {
        self.buffer(len);
        let len = len.min(self.buf.len());
        let n = self.state.decompress(src, &mut self.buf[..len])?;
        self.buf[n..len].fill(0);
        Ok(&self.buf[..len])
    }

    /// The first `len` bytes of the extent buffer (at most max_extent). The capacity was
    /// reserved with the workspace, so this never allocates (forward progress holds); it only
    /// zero-fills what no use has touched yet, so a mount built for 4 MiB extents that writes
    /// 128 KiB ones keeps 128 KiB of it resident.
    pub(crate) fn buffer(&mut self, len: usize) -> &mut [u8] {
        let len = len.min(self.buf.capacity());
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        &mut self.buf[..len]
    }

    /// The codec state and the first `len` bytes of the extent buffer, borrowed together.
    pub(crate) fn state_and_buffer(&mut self, len: usize) -> (&mut dyn CodecState, &mut [u8]) {
        self.buffer(len);
        let len = len.min(self.buf.len());
        (&mut *self.state, &mut self.buf[..len])
    }
}
