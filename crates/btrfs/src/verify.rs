//! Check that wring decodes every extent of a file to what the kernel reads.
//!
//! For each extent from [`crate::extents`], decode it with the engine (the work of
//! fs/btrfs/compression.c's btrfs_decompress_bio() on the read path) and compare with a normal
//! read of the same file range. A compressed extent decodes to `unencoded_len` bytes, of which
//! the file range is `[unencoded_offset, unencoded_offset + len)`; short output is zero-filled,
//! as the kernel does. The whole extent is decoded into pages of the engine's page pool
//! (EROFS's reserved decompression pages; the allocator's when the pool is off or empty), and
//! only the file range is copied out.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use wring_engine::Engine;

use crate::error::{BtrfsError, Op};
use crate::extents::{open_for_encoded_read, Extent, Extents};
use crate::ioctl::{Compression, MAX_UNCOMPRESSED};

/// Largest `unencoded_len` believed before decoding (btrfs's own limit is 128 KiB).
const MAX_DECODED: u64 = 16 * MAX_UNCOMPRESSED as u64;

/// How one extent fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// wring's bytes equal the kernel's.
    Match,
    /// They differ, first at file offset `at`.
    Mismatch {
        /// First differing file offset.
        at: u64,
    },
    /// The engine refused the extent.
    DecodeFailed(wring_engine::Error),
    /// An encoding wring has no decoder for (LZO for other sector sizes, encryption, unknown).
    Unsupported,
    /// The kernel's numbers do not fit together (range past the decoded data, or a huge size).
    BadGeometry,
    /// The normal read ended after `got` bytes (the file shrank during the check).
    ShortRead {
        /// Bytes the normal read returned.
        got: usize,
    },
}

impl Verdict {
    /// Whether this is a pass.
    pub fn is_match(&self) -> bool {
        *self == Verdict::Match
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Match => f.write_str("match"),
            Verdict::Mismatch { at } => {
                write!(f, "differs from the kernel's read at file offset {at}")
            }
            Verdict::DecodeFailed(e) => write!(f, "wring could not decode it: {e}"),
            Verdict::Unsupported => f.write_str("encoding not supported by wring"),
            Verdict::BadGeometry => f.write_str("the kernel's lengths do not fit together"),
            Verdict::ShortRead { got } => write!(f, "the normal read stopped after {got} bytes"),
        }
    }
}

/// The result for one extent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentCheck {
    /// File offset of the extent's range.
    pub offset: u64,
    /// Length of the file range.
    pub len: u64,
    /// Its encoding.
    pub compression: Compression,
    /// Bytes the encoded read returned.
    pub encoded_bytes: usize,
    /// Decoded size.
    pub unencoded_len: u64,
    /// Start of the file range in the decoded data.
    pub unencoded_offset: u64,
    /// The outcome.
    pub verdict: Verdict,
}

impl fmt::Display for ExtentCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "extent at {} (+{}, {}, {} encoded bytes, unencoded {}@{}): {}",
            self.offset,
            self.len,
            self.compression,
            self.encoded_bytes,
            self.unencoded_len,
            self.unencoded_offset,
            self.verdict
        )
    }
}

/// Counts for one encoding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Extents checked.
    pub extents: usize,
    /// Of which did not match.
    pub failed: usize,
    /// Bytes as stored.
    pub encoded_bytes: u64,
    /// File bytes they cover.
    pub file_bytes: u64,
}

/// Results of checking one or more files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every extent checked, in order.
    pub checks: Vec<ExtentCheck>,
    /// Counts per encoding.
    pub tally: BTreeMap<Compression, Tally>,
}

impl Report {
    fn push(&mut self, check: ExtentCheck) {
        let t = self.tally.entry(check.compression).or_default();
        t.extents += 1;
        t.failed += usize::from(!check.verdict.is_match());
        t.encoded_bytes += check.encoded_bytes as u64;
        t.file_bytes += check.len;
        self.checks.push(check);
    }

    /// Add another report's results to this one.
    pub fn merge(&mut self, other: Report) {
        for check in other.checks {
            self.push(check);
        }
    }

    /// Extents that did not match.
    pub fn failures(&self) -> impl Iterator<Item = &ExtentCheck> {
        self.checks.iter().filter(|c| !c.verdict.is_match())
    }

    /// Whether every extent matched.
    pub fn is_ok(&self) -> bool {
        self.failures().next().is_none()
    }

    /// Extents checked.
    pub fn extents(&self) -> usize {
        self.checks.len()
    }

    /// Extents of one encoding.
    pub fn extents_of(&self, compression: Compression) -> usize {
        self.tally.get(&compression).map_or(0, |t| t.extents)
    }

    /// Extents that were compressed (of any algorithm).
    pub fn compressed_extents(&self) -> usize {
        self.tally
            .iter()
            .filter(|(c, _)| c.is_compressed())
            .map(|(_, t)| t.extents)
            .sum()
    }

    /// File bytes covered by all checked extents.
    pub fn file_bytes(&self) -> u64 {
        self.tally.values().map(|t| t.file_bytes).sum()
    }
}

/// Check every extent of the file at `path`.
pub fn verify_path(engine: &Engine, path: &Path) -> Result<Report, BtrfsError> {
    let file = open_for_encoded_read(path)?;
    verify_file(engine, &file)
}

/// Check every extent of `file` (open for reading, on btrfs; needs CAP_SYS_ADMIN).
pub fn verify_file(engine: &Engine, file: &File) -> Result<Report, BtrfsError> {
    let mut report = Report::default();
    for extent in Extents::new(file)? {
        report.push(check_extent(engine, file, &extent?)?);
    }
    Ok(report)
}

/// Decode one extent and compare it with a normal read of its file range.
pub fn check_extent(
    engine: &Engine,
    file: &File,
    extent: &Extent,
) -> Result<ExtentCheck, BtrfsError> {
    let verdict = match decode_range(engine, extent) {
        Ok(decoded) => compare_with_read(file, extent.offset, &decoded)?,
        Err(verdict) => verdict,
    };
    Ok(ExtentCheck {
        offset: extent.offset,
        len: extent.len,
        compression: extent.compression,
        encoded_bytes: extent.data.len(),
        unencoded_len: extent.unencoded_len,
        unencoded_offset: extent.unencoded_offset,
        verdict,
    })
}

/// The file-range bytes of `extent` as wring decodes them.
pub fn decode_range(engine: &Engine, extent: &Extent) -> Result<Vec<u8>, Verdict> {
    let end = extent
        .unencoded_offset
        .checked_add(extent.len)
        .ok_or(Verdict::BadGeometry)?;
    if end > extent.unencoded_len || extent.unencoded_len > MAX_DECODED {
        return Err(Verdict::BadGeometry);
    }
    if extent.encryption != 0 {
        return Err(Verdict::Unsupported);
    }
    let (start, end) = (extent.unencoded_offset as usize, end as usize);
    if !extent.compression.is_compressed() {
        // Plain data, holes and prealloc: the bytes are the file's.
        return extent
            .data
            .get(start..end)
            .map(<[u8]>::to_vec)
            .ok_or(Verdict::BadGeometry);
    }
    let algorithm = extent.compression.algorithm().ok_or(Verdict::Unsupported)?;
    let len = extent.unencoded_len as usize;
    if len > engine.config().max_extent {
        // Beyond the engine's extents (its workspaces' buffers): one buffer for this extent.
        let mut decoded = vec![0u8; len];
        engine
            .decompress(algorithm, &extent.data, &mut decoded)
            .map_err(Verdict::DecodeFailed)?;
        decoded.truncate(end);
        decoded.drain(..start);
        return Ok(decoded);
    }
    // The whole extent into the page pool's pages (given back on return), the file range out.
    let pages = engine
        .decompress_pages(algorithm, &extent.data, len)
        .map_err(Verdict::DecodeFailed)?;
    let mut range = vec![0u8; end - start];
    pages.read_at(start, &mut range);
    Ok(range)
}

fn compare_with_read(file: &File, offset: u64, decoded: &[u8]) -> Result<Verdict, BtrfsError> {
    let mut expected = vec![0u8; decoded.len()];
    let got = read_full_at(file, offset, &mut expected)?;
    if got < expected.len() {
        return Ok(Verdict::ShortRead { got });
    }
    Ok(
        match decoded.iter().zip(&expected).position(|(a, b)| a != b) {
            None => Verdict::Match,
            Some(i) => Verdict::Mismatch {
                at: offset + i as u64,
            },
        },
    )
}

/// `pread` until `buf` is full or end of file; returns the bytes read.
fn read_full_at(file: &File, offset: u64, buf: &mut [u8]) -> Result<usize, BtrfsError> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(BtrfsError::io(Op::Read, offset + done as u64, e)),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wring_engine::{Algorithm, CompressSpec, EngineConfig, Outcome};

    fn text(len: usize) -> Vec<u8> {
        b"an extent of btrfs text that compresses well; "
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect()
    }

    fn zstd_extent(data: &[u8], unencoded_offset: u64, len: u64) -> Extent {
        let engine = Engine::new(EngineConfig::default());
        let mut dst = vec![0u8; data.len()];
        let Ok(Outcome::Compressed(n)) =
            engine.compress(CompressSpec::new(Algorithm::Zstd, 3), data, &mut dst)
        else {
            panic!("text did not compress")
        };
        dst.truncate(n.next_multiple_of(4096)); // the kernel hands back sector-padded extents
        Extent {
            offset: 0,
            len,
            unencoded_len: data.len() as u64,
            unencoded_offset,
            compression: Compression::Zstd,
            encryption: 0,
            data: dst,
        }
    }

    #[test]
    fn decode_range_takes_the_file_range_of_the_decoded_extent() {
        let engine = Engine::new(EngineConfig::default());
        let data = text(MAX_UNCOMPRESSED);
        let extent = zstd_extent(&data, 8192, 20000);
        assert_eq!(decode_range(&engine, &extent).unwrap(), &data[8192..28192]);
    }

    /// The decoded extent goes into the page pool's pages (EROFS's reserved pages), not a
    /// buffer of its own: with the pool set, every page is a hit.
    #[test]
    fn decode_range_decodes_into_the_page_pool() {
        let engine = Engine::new(EngineConfig {
            page_pool: 64,
            ..EngineConfig::default()
        });
        let data = text(MAX_UNCOMPRESSED);
        let extent = zstd_extent(&data, 4096, 8000);
        for _ in 0..3 {
            assert_eq!(decode_range(&engine, &extent).unwrap(), &data[4096..12096]);
        }
        let pool = engine.stats().pool;
        let pages = (3 * MAX_UNCOMPRESSED / 4096) as u64;
        assert_eq!(
            (pool.hits, pool.misses, pool.free),
            (pages, 0, 64),
            "{pool:?}"
        );
    }

    #[test]
    fn decode_range_rejects_what_it_cannot_do() {
        let engine = Engine::new(EngineConfig::default());
        let data = text(MAX_UNCOMPRESSED);
        let past_end = zstd_extent(&data, 8192, MAX_UNCOMPRESSED as u64);
        assert_eq!(decode_range(&engine, &past_end), Err(Verdict::BadGeometry));
        let lzo64k = Extent {
            compression: Compression::Lzo { sector_size: 65536 },
            ..zstd_extent(&data, 0, 10)
        };
        assert_eq!(decode_range(&engine, &lzo64k), Err(Verdict::Unsupported));
        let encrypted = Extent {
            encryption: 1,
            ..zstd_extent(&data, 0, 10)
        };
        assert_eq!(decode_range(&engine, &encrypted), Err(Verdict::Unsupported));
        let mut corrupt = zstd_extent(&data, 0, 10);
        corrupt.data[..8].fill(0xAA);
        assert!(matches!(
            decode_range(&engine, &corrupt),
            Err(Verdict::DecodeFailed(_))
        ));
    }

    #[test]
    fn check_extent_compares_with_a_normal_read() {
        let engine = Engine::new(EngineConfig::default());
        let data = text(MAX_UNCOMPRESSED);
        let path = std::env::temp_dir().join(format!("wring-verify-{}", std::process::id()));
        std::fs::write(&path, &data[4096..]).unwrap();
        let file = File::open(&path).unwrap();
        let good = zstd_extent(&data, 4096, 50000);
        assert_eq!(
            check_extent(&engine, &file, &good).unwrap().verdict,
            Verdict::Match
        );
        let shifted = zstd_extent(&data, 8192, 50000);
        assert!(matches!(
            check_extent(&engine, &file, &shifted).unwrap().verdict,
            Verdict::Mismatch { .. }
        ));
        let beyond = Extent {
            offset: data.len() as u64,
            ..good
        };
        assert!(matches!(
            check_extent(&engine, &file, &beyond).unwrap().verdict,
            Verdict::ShortRead { got: 0 }
        ));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn report_counts_per_encoding() {
        let check = |compression, verdict| ExtentCheck {
            offset: 0,
            len: 10,
            compression,
            encoded_bytes: 4,
            unencoded_len: 10,
            unencoded_offset: 0,
            verdict,
        };
        let mut report = Report::default();
        report.push(check(Compression::Zstd, Verdict::Match));
        report.push(check(Compression::Zstd, Verdict::Unsupported));
        let mut other = Report::default();
        other.push(check(Compression::None, Verdict::Match));
        report.merge(other);
        assert_eq!(report.extents(), 3);
        assert_eq!(report.extents_of(Compression::Zstd), 2);
        assert_eq!(report.compressed_extents(), 2);
        assert_eq!(report.tally[&Compression::Zstd].failed, 1);
        assert_eq!(report.file_bytes(), 30);
        assert!(!report.is_ok());
        assert_eq!(report.failures().count(), 1);
    }
}
