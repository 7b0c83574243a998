//! What each algorithm and level costs in workspace memory: the "Memory (KB)" column of the
//! btrfs zstd-levels patch (seed 000), computed from each library's own estimate.

use crate::codec::ZstdParams;
use crate::engine::Engine;
use crate::spec::{Algorithm, CompressSpec};

/// One row of `wring levels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelRow {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The level (0 for level-less algorithms).
    pub level: i32,
    /// Whether this is the algorithm's default level.
    pub default: bool,
    /// Whether the kernel's btrfs accepts this level.
    pub in_btrfs: bool,
    /// Codec memory of a workspace serving this level, made monotonic.
    pub workspace_bytes: usize,
    /// The same plus the workspace's extent buffer.
    pub total_bytes: usize,
    /// zstd only: the kernel's figure, max(cstream, dstream) for 128 KiB, made monotonic.
    pub kernel_bytes: Option<usize>,
}

/// Every level of every algorithm (or only `only`), in report order.
pub fn level_table(engine: &Engine, only: &[Algorithm]) -> Vec<LevelRow> {
    let algorithms: Vec<Algorithm> = if only.is_empty() {
        Algorithm::ALL.to_vec()
    } else {
        only.to_vec()
    };
    let mut rows = Vec::new();
    for algorithm in algorithms {
        let manager = engine.manager(algorithm);
        let mut kernel_max = 0;
        for level in algorithm.levels() {
            let kernel_bytes = (algorithm == Algorithm::Zstd).then(|| {
                let own = ZstdParams::for_level(level.max(1), engine.max_extent()).kernel_bytes();
                kernel_max = kernel_max.max(own);
                kernel_max
            });
            rows.push(LevelRow {
                algorithm,
                level,
                default: level == algorithm.default_level(),
                in_btrfs: CompressSpec::new(algorithm, level).in_btrfs(),
                workspace_bytes: manager.level_bytes(level),
                total_bytes: manager.workspace_bytes(level),
                kernel_bytes,
            });
        }
    }
    rows
}
