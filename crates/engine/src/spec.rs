//! Compression specs as btrfs spells them: `zlib`, `zlib:9`, `lzo`, `zstd:-5`, `lz4hc:9`, `no`,
//! and zram's algorithm names for the ones btrfs lacks: `lz4`, `lz4hc`, `lzo-rle`, `deflate:6`.
//!
//! Mirrors btrfs_compress_str2level()/btrfs_compress_set_level() in fs/btrfs/compression.c:
//! level 0 means the type's default and an out-of-range level is clamped (with a warning).
//! Differs in rejecting an unparsable level instead of silently using the default.
//!
//! [`Algorithm`] is the engine's codec table (zram's `backends[]` in
//! drivers/block/zram/zcomp.c, btrfs's `btrfs_compress_op[]`): every algorithm any front end
//! uses is one entry, with its name, its levels and whether btrfs has a type for it
//! ([`CompressSpec::btrfs_option`] is the one place that answers that).

use std::fmt;
use std::str::FromStr;

use crate::error::SpecError;

/// A compression algorithm wring can write: btrfs's three, plus zram's lz4, lz4hc, lzo-rle and
/// deflate, which btrfs has no type for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// zlib (deflate with a zlib header), btrfs type 1.
    Zlib,
    /// LZO1X-1 in btrfs's segment framing, btrfs type 2.
    Lzo,
    /// Zstandard frames, btrfs type 3.
    Zstd,
    /// LZ4 block format (zram's backend).
    Lz4,
    /// LZ4 high compression, same block format as lz4.
    Lz4hc,
    /// `lzo-rle`, zram's default: one raw LZO1X-1 stream with the kernel's run-length coding
    /// of zeros (lib/lzo/lzo1x_compress.c's `lzorle1x_1_compress`), no btrfs framing.
    LzoRle,
    /// `deflate`, zram's raw deflate (crypto/deflate.c, zram's backend_deflate.c): no zlib
    /// header or checksum, levels 1 to 9, 6 by default as zram's.
    Deflate,
}

impl Algorithm {
    /// Every algorithm, in the order reports list them.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Zstd,
        Algorithm::Zlib,
        Algorithm::Lzo,
        Algorithm::Lz4,
        Algorithm::Lz4hc,
        Algorithm::LzoRle,
        Algorithm::Deflate,
    ];

    /// The name used in options and reports.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Zlib => "zlib",
            Algorithm::Lzo => "lzo",
            Algorithm::Zstd => "zstd",
            Algorithm::Lz4 => "lz4",
            Algorithm::Lz4hc => "lz4hc",
            Algorithm::LzoRle => "lzo-rle",
            Algorithm::Deflate => "deflate",
        }
    }

    /// Every algorithm's name, comma-separated, in report order (for error messages).
    pub fn names() -> String {
        Algorithm::ALL.map(Algorithm::name).join(", ")
    }

    /// Lowest level accepted (btrfs: zstd goes down to -15).
    pub fn min_level(self) -> i32 {
        match self {
            Algorithm::Zlib | Algorithm::Lz4hc | Algorithm::Deflate => 1,
            Algorithm::Zstd => -15,
            Algorithm::Lzo | Algorithm::Lz4 | Algorithm::LzoRle => 0,
        }
    }

    /// Highest level accepted (zstd: 15 in btrfs, 22 in wring).
    pub fn max_level(self) -> i32 {
        match self {
            Algorithm::Zlib | Algorithm::Deflate => 9,
            Algorithm::Zstd => 22,
            Algorithm::Lz4hc => 12,
            Algorithm::Lzo | Algorithm::Lz4 | Algorithm::LzoRle => 0,
        }
    }

    /// Highest level the kernel's btrfs accepts for this algorithm, when btrfs has it (the
    /// table behind [`CompressSpec::btrfs_option`], which is where "can btrfs take this" is
    /// decided).
    pub fn max_btrfs_level(self) -> Option<i32> {
        match self {
            Algorithm::Zlib => Some(9),
            Algorithm::Zstd => Some(15),
            Algorithm::Lzo => Some(0),
            Algorithm::Lz4 | Algorithm::Lz4hc | Algorithm::LzoRle | Algorithm::Deflate => None,
        }
    }

    /// The level `0` (or no level) stands for.
    pub fn default_level(self) -> i32 {
        match self {
            Algorithm::Zlib | Algorithm::Zstd => 3,
            Algorithm::Lz4hc => 9,
            // zlib's Z_DEFAULT_COMPRESSION, what zram's deflate uses unless told otherwise.
            Algorithm::Deflate => 6,
            Algorithm::Lzo | Algorithm::Lz4 | Algorithm::LzoRle => 0,
        }
    }

    /// Whether the algorithm compresses with a [`Dictionary`](crate::dict::Dictionary): zstd
    /// only (zram's `algorithm_params dict=`).
    pub fn takes_dictionary(self) -> bool {
        self == Algorithm::Zstd
    }

    /// Whether the algorithm takes a level at all.
    pub fn has_levels(self) -> bool {
        self.max_level() != 0
    }

    /// Every valid level, lowest first (a single 0 for level-less algorithms).
    pub fn levels(self) -> impl Iterator<Item = i32> {
        let (min, max) = (self.min_level(), self.max_level());
        (min..=max).filter(move |&l| l != 0 || min == max)
    }

    /// Clamp a level into range; 0 becomes the default. Returns the level and whether it moved.
    pub fn clamp_level(self, level: i32) -> (i32, bool) {
        if !self.has_levels() || level == 0 {
            return (self.default_level(), false);
        }
        let clamped = level.clamp(self.min_level(), self.max_level());
        (clamped, clamped != level)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| SpecError::UnknownAlgorithm(s.to_string()))
    }
}

/// What to do with an extent: an algorithm at a resolved level, or nothing (`no`/`none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompressSpec {
    /// `None` for `no`/`none`.
    pub algorithm: Option<Algorithm>,
    /// The resolved level: never 0 for an algorithm with levels.
    pub level: i32,
}

/// Why the kernel's btrfs cannot take a spec: the typed answer of
/// [`CompressSpec::btrfs_option`]. The messages are the "n/a" notes benchmark tables print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotInBtrfs {
    /// `no`/`none`: nothing to compress with.
    #[error("no compression")]
    NoCompression,
    /// btrfs has no extent type for this algorithm (lz4, lz4hc, lzo-rle, deflate).
    #[error("btrfs has no {0}")]
    NoSuchAlgorithm(Algorithm),
    /// btrfs has the algorithm but its mount option stops below this level (zstd above 15).
    #[error("btrfs stops at {algorithm}:{max}")]
    LevelAbove {
        /// The algorithm.
        algorithm: Algorithm,
        /// The highest level btrfs's mount option takes.
        max: i32,
    },
}

/// A level that was out of range and has been clamped, as btrfs does with a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecWarning {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The level asked for.
    pub requested: i32,
    /// The level used.
    pub used: i32,
}

impl fmt::Display for SpecWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} level {} is out of range {}..={}; using {}",
            self.algorithm,
            self.requested,
            self.algorithm.min_level(),
            self.algorithm.max_level(),
            self.used
        )
    }
}

impl CompressSpec {
    /// No compression.
    pub const NONE: CompressSpec = CompressSpec {
        algorithm: None,
        level: 0,
    };

    /// An algorithm at a level (0 = default), clamped into range.
    pub fn new(algorithm: Algorithm, level: i32) -> CompressSpec {
        CompressSpec {
            algorithm: Some(algorithm),
            level: algorithm.clamp_level(level).0,
        }
    }

    /// The algorithm at its default level.
    pub fn default_for(algorithm: Algorithm) -> CompressSpec {
        CompressSpec::new(algorithm, 0)
    }

    /// The algorithm btrfs stores this spec's extents as, at any level (btrfs reads a zstd
    /// frame of any level, so an encoded write of zstd:19 is fine), or why btrfs has none.
    pub fn btrfs_algorithm(&self) -> Result<Algorithm, NotInBtrfs> {
        let algorithm = self.algorithm.ok_or(NotInBtrfs::NoCompression)?;
        match algorithm.max_btrfs_level() {
            Some(_) => Ok(algorithm),
            None => Err(NotInBtrfs::NoSuchAlgorithm(algorithm)),
        }
    }

    /// The value of btrfs's `compress`/`compress-force` mount option for this spec (`zstd:3`,
    /// `zlib:9`, `lzo`), or why the kernel's btrfs cannot compress this way. The one place that
    /// decides "can btrfs take this spec": benchmarks' kernel runs, the level tables' "in btrfs"
    /// column and recompress (through [`CompressSpec::btrfs_algorithm`]) all ask here.
    pub fn btrfs_option(&self) -> Result<String, NotInBtrfs> {
        let algorithm = self.btrfs_algorithm()?;
        match algorithm.max_btrfs_level() {
            Some(max) if self.level > max => Err(NotInBtrfs::LevelAbove { algorithm, max }),
            _ if !algorithm.has_levels() => Ok(algorithm.name().to_string()),
            _ => Ok(format!("{}:{}", algorithm.name(), self.level)),
        }
    }

    /// Whether the kernel's btrfs can compress this way ([`CompressSpec::btrfs_option`] is Ok).
    pub fn in_btrfs(&self) -> bool {
        self.btrfs_option().is_ok()
    }

    /// As [`CompressSpec::parse`], for libraries: a level out of range is an error
    /// ([`SpecError::LevelOutOfRange`]) instead of a warning and a clamp, as mount options have.
    pub fn parse_strict(text: &str) -> Result<CompressSpec, SpecError> {
        match CompressSpec::parse(text)? {
            (spec, None) => Ok(spec),
            (_, Some(w)) => Err(SpecError::LevelOutOfRange {
                algorithm: w.algorithm,
                level: w.requested,
                min: w.algorithm.min_level(),
                max: w.algorithm.max_level(),
                default: w.algorithm.default_level(),
            }),
        }
    }

    /// Parse btrfs's syntax, returning a warning when the level had to be clamped.
    pub fn parse(text: &str) -> Result<(CompressSpec, Option<SpecWarning>), SpecError> {
        let text = text.trim();
        let (name, level_text) = match text.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (text, None),
        };
        if name == "no" || name == "none" {
            return match level_text {
                Some(_) => Err(SpecError::NoLevels(name.to_string())),
                None => Ok((CompressSpec::NONE, None)),
            };
        }
        let algorithm: Algorithm = name.parse()?;
        let Some(level_text) = level_text else {
            return Ok((CompressSpec::default_for(algorithm), None));
        };
        if !algorithm.has_levels() {
            return Err(SpecError::NoLevels(algorithm.name().to_string()));
        }
        let requested: i32 = level_text.parse().map_err(|_| SpecError::BadLevel {
            algorithm,
            level: level_text.to_string(),
            min: algorithm.min_level(),
            max: algorithm.max_level(),
            default: algorithm.default_level(),
        })?;
        let (used, moved) = algorithm.clamp_level(requested);
        let warning = moved.then_some(SpecWarning {
            algorithm,
            requested,
            used,
        });
        Ok((
            CompressSpec {
                algorithm: Some(algorithm),
                level: used,
            },
            warning,
        ))
    }
}

impl FromStr for CompressSpec {
    type Err = SpecError;

    /// Parse, logging a clamp warning the way btrfs prints one to the kernel log.
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let (spec, warning) = CompressSpec::parse(s)?;
        if let Some(w) = warning {
            log::warn!("{w}");
        }
        Ok(spec)
    }
}

impl fmt::Display for CompressSpec {
    /// Formats as /proc/mounts shows btrfs's option: `zstd:3`, `lzo`, `no`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.algorithm {
            None => f.write_str("no"),
            Some(a) if a.has_levels() => write!(f, "{}:{}", a, self.level),
            Some(a) => f.write_str(a.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn strict_parsing_refuses_what_mount_options_clamp() {
        assert_eq!(CompressSpec::parse_strict("zstd:3").unwrap().level, 3);
        let err = CompressSpec::parse_strict("zstd:99").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid level 99 for zstd: accepted are -15..=22 (0 means the default, 3)"
        );
        assert!(CompressSpec::parse("zstd:99").unwrap().1.is_some());
    }

    use super::*;

    fn parse(s: &str) -> (CompressSpec, Option<SpecWarning>) {
        CompressSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn btrfs_spellings() {
        assert_eq!(parse("zlib").0, CompressSpec::new(Algorithm::Zlib, 3));
        assert_eq!(parse("zlib:9").0.level, 9);
        assert_eq!(parse("zlib:0").0.level, 3);
        assert_eq!(parse("lzo").0.algorithm, Some(Algorithm::Lzo));
        assert_eq!(parse("zstd").0.level, 3);
        assert_eq!(parse("zstd:-5").0.level, -5);
        assert_eq!(parse("zstd:19").0.level, 19);
        assert_eq!(parse("lz4").0.algorithm, Some(Algorithm::Lz4));
        assert_eq!(parse("lz4hc:9").0.level, 9);
        assert_eq!(parse("lz4hc").0.level, 9);
        assert_eq!(parse("no").0, CompressSpec::NONE);
        assert_eq!(parse("none").0, CompressSpec::NONE);
    }

    #[test]
    fn zram_names_for_what_btrfs_lacks() {
        assert_eq!(parse("lzo-rle").0, CompressSpec::new(Algorithm::LzoRle, 0));
        assert_eq!(parse("deflate").0.level, 6);
        assert_eq!(parse("deflate:9").0.level, 9);
        assert_eq!(parse("deflate:0").0.level, 6);
        assert!(CompressSpec::parse("lzo-rle:1").is_err());
        assert_eq!(parse("deflate:12").1.map(|w| w.used), Some(9));
        for s in ["lzo-rle", "deflate:1", "deflate:6"] {
            assert_eq!(parse(s).0.to_string(), s);
        }
        assert_eq!(
            parse("lzo-rle").0.btrfs_option(),
            Err(NotInBtrfs::NoSuchAlgorithm(Algorithm::LzoRle))
        );
        assert_eq!(
            parse("deflate").0.btrfs_option().unwrap_err().to_string(),
            "btrfs has no deflate"
        );
        assert!(Algorithm::Zstd.takes_dictionary() && !Algorithm::Deflate.takes_dictionary());
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "zlib:9", "lzo", "zstd:-5", "zstd:3", "lz4", "lz4hc:12", "no",
        ] {
            assert_eq!(parse(s).0.to_string(), s);
        }
    }

    #[test]
    fn out_of_range_clamps_with_warning() {
        let (spec, w) = parse("zlib:12");
        assert_eq!(spec.level, 9);
        let w = w.expect("a warning");
        assert_eq!((w.requested, w.used), (12, 9));
        assert!(w.to_string().contains("1..=9"));
        assert_eq!(parse("zstd:-100").0.level, -15);
        assert_eq!(parse("zstd:40").0.level, 22);
        assert_eq!(parse("lz4hc:99").0.level, 12);
        assert!(parse("zstd:15").1.is_none());
    }

    #[test]
    fn errors_name_what_is_accepted() {
        let e = CompressSpec::parse("brotli").unwrap_err();
        assert!(e.to_string().contains("brotli") && e.to_string().contains("zstd"));
        assert!(e.to_string().contains("lzo-rle, deflate, no, none"), "{e}");
        let e = CompressSpec::parse("zstd:fast").unwrap_err();
        assert!(
            e.to_string().contains("'fast'") && e.to_string().contains("-15..=22"),
            "{e}"
        );
        assert!(CompressSpec::parse("lzo:3").is_err());
        assert!(CompressSpec::parse("none:1").is_err());
        assert!(CompressSpec::parse("zlib9").is_err());
        assert!(CompressSpec::parse("").is_err());
    }

    #[test]
    fn btrfs_takes_its_three_algorithms_up_to_its_levels() {
        let option = |s: &str| parse(s).0.btrfs_option();
        assert_eq!(option("zstd:3"), Ok("zstd:3".into()));
        assert_eq!(option("zstd:-5"), Ok("zstd:-5".into()));
        assert_eq!(option("zstd:15"), Ok("zstd:15".into()));
        assert_eq!(option("zlib"), Ok("zlib:3".into()));
        assert_eq!(option("zlib:9"), Ok("zlib:9".into()));
        assert_eq!(option("lzo"), Ok("lzo".into()));
        assert_eq!(option("no"), Err(NotInBtrfs::NoCompression));
        assert_eq!(
            option("lz4"),
            Err(NotInBtrfs::NoSuchAlgorithm(Algorithm::Lz4))
        );
        assert_eq!(
            option("lz4hc:9"),
            Err(NotInBtrfs::NoSuchAlgorithm(Algorithm::Lz4hc))
        );
        let above = option("zstd:16").unwrap_err();
        assert_eq!(
            above,
            NotInBtrfs::LevelAbove {
                algorithm: Algorithm::Zstd,
                max: 15
            }
        );
        assert_eq!(above.to_string(), "btrfs stops at zstd:15");
        assert_eq!(option("lz4").unwrap_err().to_string(), "btrfs has no lz4");
        assert!(parse("zstd:15").0.in_btrfs() && !parse("zstd:19").0.in_btrfs());
    }

    #[test]
    fn btrfs_stores_any_level_of_its_algorithms() {
        assert_eq!(parse("zstd:19").0.btrfs_algorithm(), Ok(Algorithm::Zstd));
        assert_eq!(parse("lzo").0.btrfs_algorithm(), Ok(Algorithm::Lzo));
        assert_eq!(
            parse("lz4").0.btrfs_algorithm(),
            Err(NotInBtrfs::NoSuchAlgorithm(Algorithm::Lz4))
        );
        assert_eq!(
            parse("no").0.btrfs_algorithm(),
            Err(NotInBtrfs::NoCompression)
        );
    }

    #[test]
    fn every_spec_is_in_btrfs_exactly_when_btrfs_has_its_level() {
        for algorithm in Algorithm::ALL {
            for level in algorithm.levels() {
                let spec = CompressSpec::new(algorithm, level);
                let expected = match algorithm {
                    Algorithm::Zlib | Algorithm::Lzo => true,
                    Algorithm::Zstd => level <= 15,
                    Algorithm::Lz4 | Algorithm::Lz4hc | Algorithm::LzoRle | Algorithm::Deflate => {
                        false
                    }
                };
                assert_eq!(spec.in_btrfs(), expected, "{spec}");
                if let Ok(option) = spec.btrfs_option() {
                    // The mount option reads back as the same spec.
                    assert_eq!(parse(&option).0, spec);
                }
            }
        }
    }

    #[test]
    fn level_lists() {
        assert_eq!(Algorithm::Zstd.levels().count(), 37);
        assert!(!Algorithm::Zstd.levels().any(|l| l == 0));
        assert_eq!(Algorithm::Lzo.levels().collect::<Vec<_>>(), vec![0]);
        assert_eq!(
            Algorithm::Zlib.levels().collect::<Vec<_>>(),
            (1..=9).collect::<Vec<_>>()
        );
    }
}
