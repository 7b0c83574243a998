//! The data every benchmark compresses: a directory given with `--corpus`, or a deterministic
//! sample of files any Linux machine has. Files are held in memory, in sorted order, and cut
//! into independent extents of at most 128 KiB each — per file, as btrfs cuts them, so the last
//! extent of every file is shorter.
//!
//! A corpus is identified by its byte count and the sha256 of its sorted file list (name and
//! size of every file); the sha256 of the contents is given too.
//!
//! This is every benchmark's one corpus loader: `levels`, `streams`, `kernel`, `offload`,
//! `recompress` load a [`Corpus`]; `fs` copies the directory itself and lists it with [`list`].

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::BenchError;

/// One file of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusFile {
    /// Path relative to the corpus root, with `/` separators (for the default sample: the
    /// absolute path without its leading `/`).
    pub name: String,
    /// Its bytes (for a sampled file, possibly only its start).
    pub data: Vec<u8>,
}

/// The files a benchmark runs on, sorted by name.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Where it came from, for the report.
    pub source: String,
    /// The files, sorted by name.
    pub files: Vec<CorpusFile>,
}

/// How the report names a corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorpusInfo {
    /// Directory, or a description of the default sample.
    pub source: String,
    /// Number of files.
    pub files: usize,
    /// Total bytes.
    pub bytes: u64,
    /// sha256 of the sorted list of `name\tsize\n` lines.
    pub list_sha256: String,
    /// sha256 of the files' contents concatenated in that order.
    pub content_sha256: String,
}

impl CorpusInfo {
    /// One line for a report's header: source, size and both hashes.
    pub fn summary(&self) -> String {
        format!(
            "{} — {} files, {} bytes; sha256 of the file list {}; of the contents {}",
            self.source, self.files, self.bytes, self.list_sha256, self.content_sha256
        )
    }
}

/// One kind of system file the default sample takes, and how much of it.
#[derive(Debug, Clone, Copy)]
pub struct SampleSource {
    /// What this part stands for.
    pub label: &'static str,
    /// Directories searched recursively (relative to the sample root; the last component may
    /// hold one `*`).
    pub dirs: &'static [&'static str],
    /// Which file names qualify.
    pub accept: fn(&str) -> bool,
    /// Most bytes taken from this part.
    pub cap: u64,
    /// Most bytes taken from one file (its start).
    pub file_cap: u64,
    /// Smaller files are passed over (a file of a few bytes can never save a 4 KiB block and
    /// would measure only btrfs's block rounding).
    pub min_size: u64,
}

fn is_plain_doc(name: &str) -> bool {
    !is_compressed_name(name)
}

fn is_compressed_name(name: &str) -> bool {
    [".gz", ".xz", ".bz2", ".zst", ".lz4", ".zip"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

fn is_python(name: &str) -> bool {
    name.ends_with(".py")
}

fn is_shared_object(name: &str) -> bool {
    name.contains(".so")
}

fn any_file(_: &str) -> bool {
    true
}

/// The default sample: ~80 MB on a Debian machine, mixing text, source code, executables,
/// structured data and already-compressed files of at least 8 KiB, always taken in sorted
/// path order.
pub const DEFAULT_SAMPLE: [SampleSource; 5] = [
    SampleSource {
        label: "text",
        dirs: &["usr/share/common-licenses", "usr/share/doc"],
        accept: is_plain_doc,
        cap: 12 << 20,
        file_cap: 1 << 20,
        min_size: 8 << 10,
    },
    SampleSource {
        label: "source",
        dirs: &["usr/lib/python3*"],
        accept: is_python,
        cap: 24 << 20,
        file_cap: 1 << 20,
        min_size: 8 << 10,
    },
    SampleSource {
        label: "executables",
        dirs: &["usr/lib/*-linux-gnu", "usr/lib64"],
        accept: is_shared_object,
        cap: 32 << 20,
        file_cap: 4 << 20,
        min_size: 64 << 10,
    },
    SampleSource {
        label: "data",
        dirs: &[
            "usr/share/i18n",
            "usr/share/mime",
            "usr/share/zoneinfo",
            "usr/share/perl",
        ],
        accept: any_file,
        cap: 10 << 20,
        file_cap: 1 << 20,
        min_size: 8 << 10,
    },
    SampleSource {
        label: "compressed",
        dirs: &["usr/share/man"],
        accept: is_compressed_name,
        cap: 4 << 20,
        file_cap: 1 << 20,
        min_size: 8 << 10,
    },
];

impl Corpus {
    /// A corpus of the given files (sorted here by name).
    pub fn from_files(source: impl Into<String>, mut files: Vec<CorpusFile>) -> Corpus {
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Corpus {
            source: source.into(),
            files,
        }
    }

    /// Every regular, non-empty file under `dir`, recursively (symbolic links are not
    /// followed), except the shared corpus builder's [`MANIFEST`] at the top (a list of the
    /// files, not data).
    pub fn load(dir: &Path) -> Result<Corpus, BenchError> {
        let listed = list(dir)?;
        let mut files = Vec::with_capacity(listed.len());
        for (rel, _) in listed {
            if rel.as_os_str() == MANIFEST {
                continue;
            }
            let path = dir.join(&rel);
            let data = fs::read(&path)
                .map_err(|e| BenchError::io(format!("reading {}", path.display()), e))?;
            if data.is_empty() {
                continue;
            }
            files.push(CorpusFile {
                name: relative_name(dir, &path),
                data,
            });
        }
        if files.is_empty() {
            return Err(BenchError::EmptyCorpus(dir.to_path_buf()));
        }
        Ok(Corpus::from_files(dir.display().to_string(), files))
    }

    /// The default sample from this machine's `/` (see [`DEFAULT_SAMPLE`]).
    pub fn default_sample() -> Result<Corpus, BenchError> {
        Corpus::sample(Path::new("/"), &DEFAULT_SAMPLE)
    }

    /// A sample of the files under `root` according to `plan`: for each part, the qualifying
    /// files in sorted path order, each cut to `file_cap`, until the part's `cap`. Unreadable
    /// files are passed over.
    pub fn sample(root: &Path, plan: &[SampleSource]) -> Result<Corpus, BenchError> {
        let mut files: Vec<CorpusFile> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for part in plan {
            let mut paths = Vec::new();
            for dir in part.dirs {
                for d in expand(root, dir) {
                    // A missing or unreadable directory just contributes nothing.
                    let _ = walk(&d, &mut paths);
                }
            }
            paths.sort();
            paths.dedup();
            let mut taken = 0u64;
            for path in paths {
                if taken >= part.cap {
                    break;
                }
                let name = relative_name(root, &path);
                let file_name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !(part.accept)(&file_name) || seen.contains(&name) {
                    continue;
                }
                let size = fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0);
                if size < part.min_size.max(1) {
                    continue;
                }
                let want = part.file_cap.min(part.cap - taken);
                let Ok(data) = read_start(&path, want) else {
                    continue;
                };
                if data.is_empty() {
                    continue;
                }
                taken += data.len() as u64;
                seen.insert(name.clone());
                files.push(CorpusFile { name, data });
            }
        }
        if files.is_empty() {
            return Err(BenchError::EmptyCorpus(root.to_path_buf()));
        }
        let labels: Vec<&str> = plan.iter().map(|p| p.label).collect();
        Ok(Corpus::from_files(
            format!(
                "default sample of {} ({})",
                root.display(),
                labels.join(", ")
            ),
            files,
        ))
    }

    /// Only the first `max_bytes` bytes, files in order, the last one cut (for small runs).
    pub fn truncated(&self, max_bytes: u64) -> Corpus {
        let mut left = max_bytes;
        let mut files = Vec::new();
        for f in &self.files {
            if left == 0 {
                break;
            }
            let n = (f.data.len() as u64).min(left) as usize;
            files.push(CorpusFile {
                name: f.name.clone(),
                data: f.data[..n].to_vec(),
            });
            left -= n as u64;
        }
        Corpus {
            source: format!("{} (first {max_bytes} bytes)", self.source),
            files,
        }
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.data.len() as u64).sum()
    }

    /// sha256 (hex) of the sorted `name\tsize\n` list.
    pub fn list_sha256(&self) -> String {
        let mut h = Sha256::new();
        for f in &self.files {
            h.update(format!("{}\t{}\n", f.name, f.data.len()).as_bytes());
        }
        hex(&h.finalize())
    }

    /// sha256 (hex) of the contents, concatenated in order.
    pub fn content_sha256(&self) -> String {
        let mut h = Sha256::new();
        for f in &self.files {
            h.update(&f.data);
        }
        hex(&h.finalize())
    }

    /// What the report says about this corpus.
    pub fn info(&self) -> CorpusInfo {
        CorpusInfo {
            source: self.source.clone(),
            files: self.files.len(),
            bytes: self.bytes(),
            list_sha256: self.list_sha256(),
            content_sha256: self.content_sha256(),
        }
    }

    /// Every file cut into extents of at most `max_extent` bytes, in order.
    pub fn extents(&self, max_extent: usize) -> Vec<&[u8]> {
        self.files
            .iter()
            .flat_map(|f| split_extents(&f.data, max_extent))
            .collect()
    }

    /// The files concatenated and zero-padded to a whole number of `page` bytes (what is
    /// written to zram).
    pub fn concatenated(&self, page: usize) -> Vec<u8> {
        let len = (self.bytes() as usize).next_multiple_of(page.max(1));
        let mut out = Vec::with_capacity(len);
        for f in &self.files {
            out.extend_from_slice(&f.data);
        }
        out.resize(len, 0);
        out
    }
}

/// The file `../shared/corpus/build.sh` writes beside the corpus files: their names, sizes and
/// checksums. [`Corpus::load`] passes over it.
pub const MANIFEST: &str = "MANIFEST";

/// Environment variable naming the shared corpus directory, which `wring bench recompress` and
/// `wring bench fs` take when no `--corpus` is given.
pub const CORPUS_ENV: &str = "WRING_CORPUS";

/// Every regular file under `dir`, recursively (symbolic links are not followed), as its path
/// relative to `dir` and its size, sorted by path.
pub fn list(dir: &Path) -> Result<Vec<(PathBuf, u64)>, BenchError> {
    let mut paths = Vec::new();
    walk(dir, &mut paths).map_err(|e| BenchError::io(format!("listing {}", dir.display()), e))?;
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let len = fs::symlink_metadata(&path)
                .map_err(|e| BenchError::io(format!("reading {}", path.display()), e))?
                .len();
            let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
            Ok((rel, len))
        })
        .collect()
}

/// `data` cut into pieces of at most `max_extent` bytes (the last one shorter); none for an
/// empty file.
pub fn split_extents(data: &[u8], max_extent: usize) -> std::slice::Chunks<'_, u8> {
    data.chunks(max_extent.max(1))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Regular files under `dir`, recursively, appended to `out` (sorted later by the caller).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if meta.is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    if !meta.is_dir() {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            // An unreadable subdirectory is passed over.
            let _ = walk(&path, out);
        } else if meta.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// `root/pattern`, where the last component may hold one `*` (matched against the directory's
/// entries, sorted): `usr/lib/python3*`, `usr/lib/*-linux-gnu`.
fn expand(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let full = root.join(pattern);
    let Some(last) = full.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return vec![full];
    };
    let Some((prefix, suffix)) = last.split_once('*') else {
        return vec![full];
    };
    let Some(parent) = full.parent() else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
        })
        .map(|e| e.path())
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    out.sort();
    out
}

fn relative_name(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|c| c != "/")
        .collect::<Vec<_>>()
        .join("/")
}

fn read_start(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    fs::File::open(path)?.take(max).read_to_end(&mut data)?;
    Ok(data)
}
