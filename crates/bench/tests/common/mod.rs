//! A tiny generated corpus: text, a random-bytes file, zeros, and sizes around the 128 KiB
//! extent boundary. Deterministic, so tests never depend on the machine's files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use wring_bench::corpus::{Corpus, CorpusFile};

pub const KIB: usize = 1024;

/// xorshift bytes from `seed`.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Compressible text of `len` bytes from a small vocabulary.
pub fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "extent",
        "workspace",
        "level",
        "btrfs",
        "zram",
        "stream",
        "page",
        "ratio",
        "kernel",
        "compress",
        "the",
        "of",
        "and",
        "block",
        "wring",
        "sector",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
        out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// The files of the tiny corpus: (name, bytes).
pub fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("a/small.txt", text(1, 1000)),
        ("a/exact.txt", text(2, 128 * KIB)),
        ("b/over.txt", text(3, 128 * KIB + 1)),
        ("b/big.txt", text(4, 300 * KIB)),
        ("c/random.bin", random_bytes(5, 200 * KIB)),
        ("c/zeros.bin", vec![0; 64 * KIB]),
    ]
}

/// The tiny corpus in memory.
pub fn corpus() -> Corpus {
    Corpus::from_files(
        "tiny generated corpus",
        files()
            .into_iter()
            .map(|(name, data)| CorpusFile {
                name: name.to_string(),
                data,
            })
            .collect(),
    )
}

/// A fresh empty directory under the system temp dir, removed by the returned guard.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "wring-bench-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tiny corpus written under `dir`.
pub fn write_corpus(dir: &Path) {
    for (name, data) in files() {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, data).expect("write");
    }
}

/// What btrfs would store for the tiny corpus at `spec`, worked out here without the bench:
/// each file cut into 128 KiB pieces, each piece compressed alone with the engine
/// (compress-force), a piece that compresses taking its frame rounded up to 4 KiB blocks and
/// any other piece its own size rounded up. Returns (stored bytes, pieces stored raw).
pub fn stored_by_hand(spec: wring_engine::CompressSpec) -> (u64, u64) {
    let engine = wring_engine::Engine::new(wring_engine::EngineConfig::default());
    let mut dst = vec![0u8; 128 * KIB];
    let (mut stored, mut raw) = (0u64, 0u64);
    for (_, data) in files() {
        for piece in data.chunks(128 * KIB) {
            let outcome = engine.compress(spec, piece, &mut dst).expect("compress");
            let bytes = match outcome {
                wring_engine::Outcome::Compressed(n) => n,
                _ => {
                    raw += 1;
                    piece.len()
                }
            };
            stored += bytes.next_multiple_of(4096) as u64;
        }
    }
    (stored, raw)
}
