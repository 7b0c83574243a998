//! The extents writeback stored since the mount, by how they are stored (raw, or an
//! algorithm and level): how many, their bytes in and the bytes they take. One relaxed add
//! per counter and extent into a fixed table, so the write path takes no lock for them.
//!
//! Mirrors compsize's per-type breakdown, as a flow (what was written) rather than a scan
//! of what is there (`wring stat`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use wring_engine::Algorithm;

/// The lowest level counted apart (zstd's fastest that wring takes); lower ones count here.
const LEVEL_MIN: i32 = -15;
/// Levels counted apart per algorithm, from [`LEVEL_MIN`] (to zstd's 22); higher ones count
/// at the top.
const LEVELS: usize = 38;
/// Slots: raw, then each algorithm's levels.
const SLOTS: usize = 1 + Algorithm::ALL.len() * LEVELS;

/// One encoding's extents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EncodingFigure {
    /// The algorithm, or `none` for extents stored raw.
    pub algorithm: String,
    /// Its level (absent for raw extents).
    pub level: Option<i32>,
    /// Extents written back.
    pub extents: u64,
    /// Their bytes before compression.
    pub bytes: u64,
    /// The bytes they take in the store.
    pub stored_bytes: u64,
}

/// Counters of one mount's writeback, by encoding.
pub(crate) struct EncodingCounts {
    /// Per slot: extents, bytes in, bytes stored.
    slots: Box<[[AtomicU64; 3]]>,
}

impl Default for EncodingCounts {
    fn default() -> EncodingCounts {
        EncodingCounts {
            slots: (0..SLOTS).map(|_| Default::default()).collect(),
        }
    }
}

impl std::fmt::Debug for EncodingCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.figures()).finish()
    }
}

/// The slot of `encoding` (`None`: raw).
fn slot(encoding: Option<(Algorithm, i32)>) -> usize {
    let Some((alg, level)) = encoding else {
        return 0;
    };
    let a = Algorithm::ALL.iter().position(|&x| x == alg).unwrap_or(0);
    let l = (level - LEVEL_MIN).clamp(0, LEVELS as i32 - 1) as usize;
    1 + a * LEVELS + l
}

/// The encoding of slot `i`.
fn encoding(i: usize) -> Option<(Algorithm, i32)> {
    let i = i.checked_sub(1)?;
    let alg = *Algorithm::ALL.get(i / LEVELS)?;
    Some((alg, (i % LEVELS) as i32 + LEVEL_MIN))
}

impl EncodingCounts {
    /// Count an extent of `bytes` stored as `encoding` (`None`: raw) in `stored` bytes.
    pub(crate) fn record(&self, encoding: Option<(Algorithm, i32)>, bytes: usize, stored: usize) {
        if let Some(s) = self.slots.get(slot(encoding)) {
            s[0].fetch_add(1, Ordering::Relaxed);
            s[1].fetch_add(bytes as u64, Ordering::Relaxed);
            s[2].fetch_add(stored as u64, Ordering::Relaxed);
        }
    }

    /// Every encoding with extents: raw first, then by algorithm (in [`Algorithm::ALL`]'s
    /// order) and level.
    pub(crate) fn figures(&self) -> Vec<EncodingFigure> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let extents = s[0].load(Ordering::Relaxed);
            if extents == 0 {
                continue;
            }
            let e = encoding(i);
            out.push(EncodingFigure {
                algorithm: e.map_or("none".into(), |(a, _)| a.to_string()),
                level: e.map(|(_, l)| l),
                extents,
                bytes: s[1].load(Ordering::Relaxed),
                stored_bytes: s[2].load(Ordering::Relaxed),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_counts_in_its_own_slot() {
        let c = EncodingCounts::default();
        c.record(Some((Algorithm::Zstd, 3)), 131072, 40000);
        c.record(Some((Algorithm::Zstd, 3)), 4096, 1000);
        c.record(Some((Algorithm::Zstd, -15)), 10, 5);
        c.record(Some((Algorithm::Zstd, 22)), 10, 6);
        c.record(Some((Algorithm::Lzo, 0)), 100, 50);
        c.record(None, 7, 7);
        let f = c.figures();
        let got: Vec<_> = f
            .iter()
            .map(|e| {
                (
                    e.algorithm.as_str(),
                    e.level,
                    e.extents,
                    e.bytes,
                    e.stored_bytes,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("none", None, 1, 7, 7),
                ("zstd", Some(-15), 1, 10, 5),
                ("zstd", Some(3), 2, 135168, 41000),
                ("zstd", Some(22), 1, 10, 6),
                ("lzo", Some(0), 1, 100, 50),
            ]
        );
        for i in 0..SLOTS {
            assert_eq!(slot(encoding(i)), i, "slot {i}");
        }
    }
}
