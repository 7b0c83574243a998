//! Deterministic test data: slices of the shared corpus when `WRING_CORPUS` names it, else a
//! mix of files every Debian machine has, plus a zero block and a random block. Every sample
//! has an odd size, so no file ends on a sector boundary.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Environment variable naming the shared corpus directory (built by shared/corpus/build.sh).
pub const CORPUS_ENV: &str = "WRING_CORPUS";

/// The corpus files, in the order samples are taken from them.
pub const CORPUS_FILES: [&str; 8] = [
    "prose.txt",
    "dictionary.txt",
    "source.tar",
    "executables.tar",
    "library.so",
    "packages.txt",
    "packages.sqlite",
    "packages.xml",
];

/// Largest piece taken from one system file, so a sample mixes many of them.
const MAX_PIECE: usize = 192 * 1024;

/// One named piece of test data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// A file name for it (no directories).
    pub name: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// About `total` bytes of samples: ~85% real data (corpus or system files), then a zero-filled
/// and a random sample. Deterministic on a given machine and corpus. Panics when `WRING_CORPUS`
/// is set but holds none of [`CORPUS_FILES`].
pub fn samples(total: usize) -> Vec<Sample> {
    let real = total / 100 * 85;
    let mut out = match std::env::var_os(CORPUS_ENV) {
        Some(dir) => from_corpus(Path::new(&dir), real),
        None => Vec::new(),
    };
    if out.is_empty() {
        out = from_system(real);
    }
    out.push(Sample {
        name: "zeros.bin".into(),
        data: vec![0; odd(total / 100 * 7, 1)],
    });
    out.push(Sample {
        name: "random.bin".into(),
        data: random_bytes(0x5eed, odd(total / 100 * 8, 2)),
    });
    out
}

/// Blocks of `block` bytes taken round-robin from the samples until `total` bytes, so every
/// stretch of the result mixes kinds of data.
pub fn interleave(samples: &[Sample], block: usize, total: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(total);
    let mut pos = 0;
    while out.len() < total && block > 0 {
        let before = out.len();
        for s in samples {
            let piece = s
                .data
                .get(pos..(pos + block).min(s.data.len()))
                .unwrap_or(&[]);
            let room = total - out.len();
            out.extend_from_slice(&piece[..piece.len().min(room)]);
        }
        if out.len() == before {
            break;
        }
        pos += block;
    }
    out
}

/// `len` pseudo-random bytes from `seed` (splitmix64): incompressible and reproducible.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `n` made odd (so never a multiple of the sector size), shifted a little by `salt`.
fn odd(n: usize, salt: usize) -> usize {
    let n = n.saturating_sub(2 * ((salt * 389) % 1000)).max(1);
    n - (1 - n % 2)
}

fn from_corpus(dir: &Path, budget: usize) -> Vec<Sample> {
    let present: Vec<PathBuf> = CORPUS_FILES
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    // A corpus that was asked for and is not there is an error, not a quiet switch to other
    // data.
    assert!(
        !present.is_empty(),
        "{CORPUS_ENV}={} holds none of {}: build it with ../shared/corpus/build.sh DIR, or unset \
         {CORPUS_ENV}",
        dir.display(),
        CORPUS_FILES.join(", ")
    );
    let per_file = budget / present.len();
    present
        .iter()
        .enumerate()
        .filter_map(|(i, path)| {
            let mut data = read_prefix(path, per_file)?;
            data.truncate(odd(data.len(), i));
            let name = path.file_name()?.to_string_lossy().into_owned();
            Some(Sample { name, data })
        })
        .collect()
}

fn from_system(budget: usize) -> Vec<Sample> {
    let libdir = PathBuf::from(format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH));
    let sources: [(&str, Vec<PathBuf>, usize); 4] = [
        (
            "licenses.txt",
            files_in(Path::new("/usr/share/common-licenses"), |_| true),
            25,
        ),
        ("python.txt", python_stdlib(), 25),
        (
            "libraries.bin",
            files_in(&libdir, |n| n.contains(".so")),
            30,
        ),
        ("docs.bin", doc_files(), 20),
    ];
    sources
        .into_iter()
        .enumerate()
        .map(|(i, (name, files, percent))| {
            let want = odd(budget / 100 * percent, i + 3);
            let mut data = concat_files(&files, want);
            if data.len() < want {
                data.extend(synthetic_text(i as u64, want - data.len()));
            }
            Sample {
                name: name.to_string(),
                data,
            }
        })
        .collect()
}

/// Regular files directly in `dir` whose names pass `keep`, sorted.
fn files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
        .collect();
    files.sort();
    files
}

fn python_stdlib() -> Vec<PathBuf> {
    let mut dirs = files_or_dirs(Path::new("/usr/lib"), |n| n.starts_with("python3."));
    dirs.sort();
    dirs.iter()
        .flat_map(|d| files_in(d, |n| n.ends_with(".py")))
        .collect()
}

fn doc_files() -> Vec<PathBuf> {
    let mut dirs = files_or_dirs(Path::new("/usr/share/doc"), |_| true);
    dirs.sort();
    dirs.iter().flat_map(|d| files_in(d, |_| true)).collect()
}

fn files_or_dirs(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
        .collect()
}

/// Pieces of `files`, in order, until `want` bytes.
fn concat_files(files: &[PathBuf], want: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(want);
    for path in files {
        if out.len() >= want {
            break;
        }
        if let Some(piece) = read_prefix(path, MAX_PIECE.min(want - out.len())) {
            out.extend_from_slice(&piece);
        }
    }
    out
}

fn read_prefix(path: &Path, limit: usize) -> Option<Vec<u8>> {
    let file = fs::File::open(path).ok()?;
    let mut data = Vec::new();
    file.take(limit as u64).read_to_end(&mut data).ok()?;
    Some(data)
}

/// Word salad, for machines that lack the usual files.
fn synthetic_text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "extent", "btrfs", "the", "compress", "sector", "of", "zstd", "and", "inode", "level", "a",
        "window", "kernel", "page", "to", "block",
    ];
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        let r = rng.next();
        out.extend_from_slice(WORDS[(r % 16) as usize].as_bytes());
        out.push(if r.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// splitmix64: the tests' one seeded generator.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An index in 0..n (n > 0): [`SplitMix::below`] for lengths.
    pub fn index(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `len` random bytes, one per draw.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Fill `out` with random bytes, eight per draw.
    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    /// A float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_odd_sized_and_deterministic() {
        let a = samples(2 << 20);
        let b = samples(2 << 20);
        assert_eq!(a, b);
        assert!(a.len() >= 3);
        for s in &a {
            assert!(!s.data.is_empty(), "{} is empty", s.name);
            assert_ne!(s.data.len() % 4096, 0, "{} is sector-aligned", s.name);
        }
        let total: usize = a.iter().map(|s| s.data.len()).sum();
        assert!(total > (2 << 20) / 2, "only {total} bytes");
    }

    #[test]
    fn interleave_takes_blocks_round_robin() {
        let s = [
            Sample {
                name: "a".into(),
                data: vec![1; 10],
            },
            Sample {
                name: "b".into(),
                data: vec![2; 3],
            },
        ];
        assert_eq!(
            interleave(&s, 4, 100),
            [1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1]
        );
        assert_eq!(interleave(&s, 4, 6).len(), 6);
    }

    #[test]
    fn every_draw_comes_from_the_same_sequence() {
        let words: Vec<u64> = {
            let mut rng = SplitMix(7);
            (0..3).map(|_| rng.next()).collect()
        };
        let mut rng = SplitMix(7);
        assert_eq!(rng.index(1000), (words[0] % 1000) as usize);
        assert_eq!(rng.below(1000), words[1] % 1000);
        assert_eq!(rng.bytes(1), vec![words[2] as u8]);
        let mut out = [0u8; 9];
        SplitMix(7).fill(&mut out);
        assert_eq!(out[..8], words[0].to_le_bytes());
        assert_eq!(out[8], words[1].to_le_bytes()[0]);
    }

    #[test]
    fn random_bytes_repeat_per_seed() {
        assert_eq!(random_bytes(1, 33), random_bytes(1, 33));
        assert_ne!(random_bytes(1, 33), random_bytes(2, 33));
    }
}
