//! The engine's public face: compress and decompress extents through the workspace managers,
//! read statistics. Mirrors btrfs_compress_folios()/btrfs_decompress() in fs/btrfs/compression.c
//! including the rule that compression must save at least one block ([`Saving::Block`]); a
//! store that packs extents without rounding them to blocks asks for [`Saving::Bytes`] instead.

use std::sync::OnceLock;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::codec::codec_for;
use crate::dict::Dictionary;
use crate::error::Error;
use crate::heuristic::{heuristic, HeuristicWorkspace};
use crate::pool::{PageBuf, PagePool, PoolStats};
use crate::spec::{Algorithm, CompressSpec};
use crate::sync::{lock, Arc, Mutex};
use crate::workspace::{
    default_streams, Manager, ManagerConfig, ManagerStats, Workspace, DEFAULT_RECLAIM,
};
use crate::{BLOCK_SIZE, MAX_EXTENT};

/// What compression must save for an extent to be stored compressed: the one place that
/// decides how many output bytes a compressed extent may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Saving {
    /// btrfs's rule: one 4 KiB block once both sizes are rounded up to blocks
    /// (`round_up(compressed) + blocksize <= round_up(input)`), since the kernel stores extents
    /// in whole blocks. An extent of one block or less is not tried.
    #[default]
    Block,
    /// A packed store's rule (wring's filesystem, which stores extents without rounding): at
    /// least 1/32 of the input and one byte, so a 3 KiB header file that compresses to 1 KiB is
    /// stored compressed, where btrfs's rule would not even try it. 1/32 is what btrfs's rule
    /// asks of a 128 KiB extent; below it the decoding on every read buys too little.
    Bytes,
}

impl Saving {
    /// Most bytes a compressed extent of `len` input bytes may take under this rule (0: it
    /// cannot save enough, and is not tried).
    pub fn limit(self, len: usize) -> usize {
        match self {
            Saving::Block => len.next_multiple_of(BLOCK_SIZE).saturating_sub(BLOCK_SIZE),
            Saving::Bytes => len.saturating_sub(len / 32 + 1),
        }
    }
}

/// How the engine decides whether to try compressing an extent at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Always compress (btrfs's `compress-force`).
    #[default]
    Force,
    /// Run btrfs's heuristic first and skip data it judges incompressible (`compress`).
    Heuristic,
    /// OpenZFS-style early abort: before an expensive level, try lz4 and then zstd:1, and give
    /// up if neither saves a block.
    EarlyAbort,
}

/// What became of an extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Compressed into this many bytes at the start of the destination.
    Compressed(usize),
    /// Compression was tried and did not save a block: store the extent raw (and, under
    /// `compress`, btrfs marks the inode NOCOMPRESS).
    Incompressible,
    /// Not tried (the policy said no, or the extent is too small to save a block): store raw,
    /// without judging the inode.
    Skipped,
}

/// Engine settings; the defaults are btrfs's.
#[derive(Clone)]
pub struct EngineConfig {
    /// Largest extent, 128 KiB as btrfs.
    pub max_extent: usize,
    /// Workspaces lent at once per algorithm (zram's max_comp_streams).
    pub streams: usize,
    /// Memory budget per algorithm beyond its preallocated workspace; `None` = unlimited.
    pub workspace_mem: Option<usize>,
    /// Reclaim interval of idle workspaces.
    pub reclaim: Duration,
    /// Pages in the decompression page pool; 0 = off.
    pub page_pool: usize,
    /// The clock the reclaim timers read.
    pub clock: Arc<dyn Clock>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_extent: MAX_EXTENT,
            streams: default_streams(),
            workspace_mem: None,
            reclaim: DEFAULT_RECLAIM,
            page_pool: 0,
            clock: Arc::new(SystemClock::default()),
        }
    }
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("max_extent", &self.max_extent)
            .field("streams", &self.streams)
            .field("workspace_mem", &self.workspace_mem)
            .field("reclaim", &self.reclaim)
            .field("page_pool", &self.page_pool)
            .finish()
    }
}

/// Statistics of every manager created so far and of the page pool.
#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    /// One entry per algorithm used so far.
    pub managers: Vec<(Algorithm, ManagerStats)>,
    /// The decompression page pool.
    pub pool: PoolStats,
}

/// Compresses and decompresses extents; cheap to share between threads (`&Engine` is enough).
pub struct Engine {
    max_extent: usize,
    config: Mutex<EngineConfig>,
    managers: [OnceLock<Manager>; Algorithm::ALL.len()],
    pool: std::sync::Arc<PagePool>,
    heuristics: Mutex<Vec<HeuristicWorkspace>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &*lock(&self.config))
            .finish()
    }
}

fn slot(algorithm: Algorithm) -> usize {
    match algorithm {
        Algorithm::Zlib => 0,
        Algorithm::Lzo => 1,
        Algorithm::Zstd => 2,
        Algorithm::Lz4 => 3,
        Algorithm::Lz4hc => 4,
        Algorithm::LzoRle => 5,
        Algorithm::Deflate => 6,
    }
}

/// The manager settings an engine's settings give.
fn manager_config(cfg: &EngineConfig) -> ManagerConfig {
    ManagerConfig {
        streams: cfg.streams,
        budget: cfg.workspace_mem,
        reclaim: cfg.reclaim,
        max_extent: cfg.max_extent,
    }
}

impl Engine {
    /// An engine with the given settings. Managers are created on first use of an algorithm.
    pub fn new(config: EngineConfig) -> Engine {
        Engine {
            max_extent: config.max_extent,
            pool: PagePool::new(config.page_pool),
            config: Mutex::new(config),
            managers: Default::default(),
            heuristics: Mutex::new(Vec::new()),
        }
    }

    /// The largest extent this engine accepts (fixed for the engine's life).
    pub fn max_extent(&self) -> usize {
        self.max_extent
    }

    fn check_len(&self, len: usize) -> Result<(), Error> {
        match len > self.max_extent {
            true => Err(Error::ExtentTooLarge {
                len,
                max: self.max_extent,
            }),
            false => Ok(()),
        }
    }

    /// The workspace manager of `algorithm`, created (with its preallocated workspace) on first use.
    pub fn manager(&self, algorithm: Algorithm) -> &Manager {
        let mut created = None;
        let m = self.managers[slot(algorithm)].get_or_init(|| {
            let cfg = lock(&self.config).clone();
            let mcfg = manager_config(&cfg);
            created = Some(mcfg);
            Manager::new(codec_for(algorithm, cfg.max_extent), mcfg, cfg.clock)
        });
        // A setter that ran while the manager was being built did not see it yet: the thread
        // that built it applies what changed since its snapshot.
        if let Some(was) = created {
            let now = manager_config(&lock(&self.config));
            if now.streams != was.streams {
                m.set_streams(now.streams);
            }
            if now.budget != was.budget {
                m.set_budget(now.budget);
            }
            if now.reclaim != was.reclaim {
                m.set_reclaim(now.reclaim);
            }
        }
        m
    }

    fn existing_managers(&self) -> impl Iterator<Item = &Manager> {
        self.managers.iter().filter_map(OnceLock::get)
    }

    /// Compress one extent, always trying (compress-force). `dst` must hold at least
    /// `src.len()` bytes minus one block.
    pub fn compress(
        &self,
        spec: CompressSpec,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Outcome, Error> {
        self.compress_with(spec, Policy::Force, src, dst)
    }

    /// Compress one extent under `policy`. The result must save at least one 4 KiB block once
    /// rounded up to blocks, or the extent is [`Outcome::Incompressible`] (btrfs's rule,
    /// [`Saving::Block`]). An extent of one block or less cannot save one and is not tried:
    /// [`Outcome::Skipped`], as compress_file_range bails out uncompressed without judging the
    /// inode.
    pub fn compress_with(
        &self,
        spec: CompressSpec,
        policy: Policy,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Outcome, Error> {
        self.compress_with_dict(spec, policy, Saving::Block, None, src, dst)
    }

    /// As [`Engine::compress_with`], under the storage rule `saving` and with `dictionary` when
    /// one is given (zstd only). `dst` must hold `saving.limit(src.len())` bytes. The policy's
    /// probes (the heuristic, early abort's lz4 and zstd:1) run without the dictionary.
    pub fn compress_with_dict(
        &self,
        spec: CompressSpec,
        policy: Policy,
        saving: Saving,
        dictionary: Option<&Dictionary>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Outcome, Error> {
        self.check_len(src.len())?;
        let Some(algorithm) = spec.algorithm else {
            return Ok(Outcome::Skipped);
        };
        let limit = saving.limit(src.len());
        if limit == 0 {
            return Ok(Outcome::Skipped);
        }
        if dst.len() < limit {
            return Err(Error::ShortBuffer {
                got: dst.len(),
                need: limit,
            });
        }
        if !self.worth_trying(spec, policy, limit, src)? {
            return Ok(Outcome::Skipped);
        }
        let mut ws = self.manager(algorithm).lease(spec.level);
        match compress_in(&mut ws, spec, dictionary, src, &mut dst[..limit])? {
            Some(n) => Ok(Outcome::Compressed(n)),
            None => Ok(Outcome::Incompressible),
        }
    }

    /// Compress one extent into `dst` with no storage rule: `Ok(None)` only when the result does
    /// not fit in `dst`. zram's rule (store compressed when it beats the page) is the caller's.
    pub fn compress_into(
        &self,
        spec: CompressSpec,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        self.compress_into_dict(spec, None, src, dst)
    }

    /// As [`Engine::compress_into`], with `dictionary` when one is given (zstd only; any
    /// other algorithm refuses it with [`Error::NoDictionary`]).
    pub fn compress_into_dict(
        &self,
        spec: CompressSpec,
        dictionary: Option<&Dictionary>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<Option<usize>, Error> {
        self.check_len(src.len())?;
        let Some(algorithm) = spec.algorithm else {
            return Ok(None);
        };
        let mut ws = self.manager(algorithm).lease(spec.level);
        compress_in(&mut ws, spec, dictionary, src, dst)
    }

    fn worth_trying(
        &self,
        spec: CompressSpec,
        policy: Policy,
        limit: usize,
        src: &[u8],
    ) -> Result<bool, Error> {
        match policy {
            Policy::Force => Ok(true),
            Policy::Heuristic => Ok(self.heuristic(src)),
            Policy::EarlyAbort => self.early_abort_passes(spec, limit, src),
        }
    }

    /// btrfs_compress_heuristic() on one extent, with a reused heuristic workspace.
    pub fn heuristic(&self, src: &[u8]) -> bool {
        let mut ws = lock(&self.heuristics).pop().unwrap_or_default();
        let verdict = heuristic(src, &mut ws).worth_compressing();
        lock(&self.heuristics).push(ws);
        verdict
    }

    /// Early abort: only for expensive settings; cheap probes compress into their own
    /// workspace's buffer, so nothing is allocated. A probe passes when it fits in `limit`.
    fn early_abort_passes(
        &self,
        spec: CompressSpec,
        limit: usize,
        src: &[u8],
    ) -> Result<bool, Error> {
        if !is_expensive(spec) {
            return Ok(true);
        }
        for probe in [
            CompressSpec::default_for(Algorithm::Lz4),
            CompressSpec::new(Algorithm::Zstd, 1),
        ] {
            let Some(algorithm) = probe.algorithm else {
                continue;
            };
            let mut ws = self.manager(algorithm).lease(probe.level);
            let (state, dst) = ws.state_and_buffer(limit);
            if state.compress(probe.level, src, dst)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Decompress one extent into `dst` (its declared size); returns the bytes the stream held.
    /// The rest of `dst` is zero-filled, as the kernel fills a short extent's tail.
    pub fn decompress(
        &self,
        algorithm: Algorithm,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<usize, Error> {
        self.decompress_dict(algorithm, None, src, dst)
    }

    /// As [`Engine::decompress`], with the dictionary the extent was compressed with.
    pub fn decompress_dict(
        &self,
        algorithm: Algorithm,
        dictionary: Option<&Dictionary>,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<usize, Error> {
        let manager = self.manager(algorithm);
        if dictionary.is_none() {
            if let Some(r) = manager.decompress_stateless(src, dst) {
                let n = r?;
                dst[n..].fill(0);
                return Ok(n);
            }
        }
        let mut ws = manager.lease(0);
        let n = match dictionary {
            None => ws.decompress(src, dst)?,
            Some(d) => ws
                .decompress_dict(d, src, dst)
                .unwrap_or(Err(Error::NoDictionary(algorithm)))?,
        };
        dst[n..].fill(0);
        Ok(n)
    }

    /// Decompress one extent of declared size `len` into pages from the page pool (or the
    /// allocator when the pool is off or empty), through the workspace's own buffer.
    pub fn decompress_pages(
        &self,
        algorithm: Algorithm,
        src: &[u8],
        len: usize,
    ) -> Result<PageBuf, Error> {
        self.check_len(len)?;
        let mut ws = self.manager(algorithm).lease(0);
        let data = ws.decompress_to_buf(src, len)?;
        let mut pages = self.pool.alloc(len);
        pages.copy_from(data);
        Ok(pages)
    }

    /// Change the stream limit of every algorithm.
    pub fn set_streams(&self, streams: usize) {
        lock(&self.config).streams = streams;
        self.existing_managers()
            .for_each(|m| m.set_streams(streams));
    }

    /// Change the workspace memory budget of every algorithm.
    pub fn set_workspace_mem(&self, budget: Option<usize>) {
        lock(&self.config).workspace_mem = budget;
        self.existing_managers().for_each(|m| m.set_budget(budget));
    }

    /// Change the reclaim interval of every algorithm.
    pub fn set_reclaim(&self, interval: Duration) {
        lock(&self.config).reclaim = interval;
        self.existing_managers()
            .for_each(|m| m.set_reclaim(interval));
    }

    /// The decompression page pool, for front ends that decode into its pages.
    pub fn page_pool(&self) -> &std::sync::Arc<PagePool> {
        &self.pool
    }

    /// Resize the decompression page pool (0 turns it off).
    pub fn set_page_pool(&self, pages: usize) {
        lock(&self.config).page_pool = pages;
        self.pool.set_size(pages);
    }

    /// The live settings.
    pub fn config(&self) -> EngineConfig {
        lock(&self.config).clone()
    }

    /// Counters of every manager in use and of the pool.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            managers: self
                .existing_managers()
                .map(|m| (m.algorithm(), m.stats()))
                .collect(),
            pool: self.pool.stats(),
        }
    }
}

/// Compress in a borrowed workspace, with the dictionary if one is given.
fn compress_in(
    ws: &mut Workspace,
    spec: CompressSpec,
    dictionary: Option<&Dictionary>,
    src: &[u8],
    dst: &mut [u8],
) -> Result<Option<usize>, Error> {
    match (dictionary, spec.algorithm) {
        (None, _) | (_, None) => ws.compress(spec.level, src, dst),
        (Some(d), Some(algorithm)) => ws
            .compress_dict(spec.level, d, src, dst)
            .unwrap_or(Err(Error::NoDictionary(algorithm))),
    }
}

/// Most bytes a compressed extent of `len` input bytes may take and still save a block:
/// btrfs requires round_up(compressed) + blocksize <= round_up(input) ([`Saving::Block`]).
pub fn compressed_limit(len: usize) -> usize {
    Saving::Block.limit(len)
}

/// Levels worth an early-abort probe: those several times slower than the lz4 probe — zstd
/// from 5 (greedy and up), zlib and raw deflate from 5, lz4hc from its default 9. Measured: at zstd:3 the probe
/// costs about as much as the compression itself (compress MB/s halves), at zstd:9 about 7%.
fn is_expensive(spec: CompressSpec) -> bool {
    match spec.algorithm {
        Some(Algorithm::Zstd | Algorithm::Zlib | Algorithm::Deflate) => spec.level >= 5,
        Some(Algorithm::Lz4hc) => spec.level >= 9,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_rule_asks_for_a_block_and_the_byte_rule_for_a_32nd() {
        assert_eq!(Saving::Block.limit(4096), 0, "one block cannot save one");
        assert_eq!(Saving::Block.limit(4097), 4096);
        assert_eq!(Saving::Block.limit(128 << 10), 124 << 10);
        assert_eq!(Saving::Bytes.limit(0), 0);
        assert_eq!(Saving::Bytes.limit(1), 0, "one byte cannot save one");
        assert_eq!(Saving::Bytes.limit(3000), 3000 - 93 - 1);
        assert_eq!(Saving::Bytes.limit(128 << 10), (124 << 10) - 1);
        for len in 1..20_000 {
            let n = Saving::Bytes.limit(len);
            assert!(n < len && len - n > len / 32, "{len} -> {n}");
            assert!(Saving::Block.limit(len) <= len);
        }
    }

    #[test]
    fn a_small_text_is_compressed_under_the_byte_rule_and_skipped_under_the_block_rule() {
        let engine = Engine::new(EngineConfig::default());
        let text = b"#include <stdio.h>\nint main(void) { return 0; }\n".repeat(60);
        assert!(text.len() <= BLOCK_SIZE);
        let spec = CompressSpec::new(Algorithm::Zstd, 3);
        let mut dst = vec![0; text.len()];
        let block = engine.compress(spec, &text, &mut dst).unwrap();
        assert_eq!(block, Outcome::Skipped);
        let bytes = engine
            .compress_with_dict(spec, Policy::Force, Saving::Bytes, None, &text, &mut dst)
            .unwrap();
        let Outcome::Compressed(n) = bytes else {
            panic!("{bytes:?}")
        };
        let mut back = vec![0; text.len()];
        engine
            .decompress(Algorithm::Zstd, &dst[..n], &mut back)
            .unwrap();
        assert_eq!(back, text);
    }
}
