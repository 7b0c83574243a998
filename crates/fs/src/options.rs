//! Mount options spelled as btrfs's (`compress=zstd:3`, `compress-force=lzo`, `compress=no`)
//! plus wring's own (`max_extent`, `streams`, `reclaim`, `workspace_mem`, `page_pool`,
//! `threads`, `uring` (FUSE over io_uring), `metrics` (Prometheus), `dict` (trained dictionaries for small extents),
//! and for a store whose extents are in a bucket
//! `compact` and `compact_threshold`, which play the part of btrfs's `btrfs balance -dusage=`).
//!
//! Mirrors btrfs_parse_options() in fs/btrfs/super.c and its /proc/mounts output
//! (btrfs_show_options); an invalid value is an error naming the option and what is accepted.

use std::fmt;
use std::time::Duration;

use wring_engine::{size, Algorithm, CompressSpec};

/// Largest extent wring accepts (users asked btrfs for more than 128 KiB: btrfs-progs#786).
pub const MAX_MAX_EXTENT: usize = 4 << 20;
/// Most FUSE request threads `threads=` takes.
pub const MAX_THREADS: usize = 64;
/// btrfs's extent size, the default.
pub const DEFAULT_MAX_EXTENT: usize = 128 << 10;
/// The compactor rewrites segments whose live bytes are under this percentage by default.
pub const DEFAULT_COMPACT_THRESHOLD: u8 = 50;
/// Bytes of small extents collected before the first dictionary is trained: 4 MiB, about 36
/// times the dictionary's size (zstd's guide asks for some 100 times; measured on header files
/// and Perl and Python modules, 4 MiB of samples gives within 2% of what 16 MiB gives, and
/// leaves fewer extents written before there is a dictionary).
pub const DEFAULT_DICT_TRAIN_BYTES: usize = 4 << 20;
/// The smallest `dict_train=`: zstd wants a few dozen samples.
pub const MIN_DICT_TRAIN: usize = 64 << 10;
/// The largest `dict_train=`: the reservoir keeps at most 2,048 samples anyway.
pub const MAX_DICT_TRAIN: usize = 1 << 30;
/// The highest threshold accepted: a fresh segment (its extents, a 12-byte index entry each
/// and a 32-byte trailer) is never under it, so compaction cannot rewrite its own output.
pub const MAX_COMPACT_THRESHOLD: u8 = 95;

const ACCEPTED: &str = "compress[=ALG[:LEVEL]], compress-force[=ALG[:LEVEL]], max_extent=SIZE, \
streams=N, reclaim=SECONDS, workspace_mem=BYTES, page_pool=PAGES, threads=N, uring=auto|0|1, \
metrics=ADDR, dict=auto|off, dict_train=SIZE, compact=0|1, compact_threshold=PERCENT, allow_other, ro, rw, suid, nosuid, dev, nodev, exec, \
noexec, relatime, strictatime, noatime, diratime, nodiratime, lazytime, nolazytime";

/// Where `metrics=` serves the Prometheus exposition (the rules are wring-metrics', shared
/// with a blk device's).
pub use wring_metrics::Addr as MetricsAddr;

/// When a read updates a file's access time (mount(8)'s atime options; btrfs's default is
/// relatime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Atime {
    /// When the access time is not after the last change, or is a day old.
    #[default]
    Relatime,
    /// On every read.
    Strict,
    /// Never.
    No,
}

/// How the mount's requests reach the daemon (`uring=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Uring {
    /// FUSE over io_uring when the kernel offers it (its `enable_uring` switch is Y), else
    /// `/dev/fuse`; the default.
    #[default]
    Auto,
    /// `/dev/fuse` only (`uring=0`).
    Off,
    /// FUSE over io_uring, or no mount (`uring=1`).
    On,
}

impl Uring {
    fn parse(option: &str, value: &str) -> Result<Uring, OptionError> {
        match value {
            "auto" => Ok(Uring::Auto),
            "1" | "on" => Ok(Uring::On),
            "0" | "off" => Ok(Uring::Off),
            _ => Err(invalid(
                option,
                value,
                "auto (the default), 1 (on) or 0 (off)",
            )),
        }
    }
}

impl fmt::Display for Uring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Uring::Auto => "auto",
            Uring::Off => "0",
            Uring::On => "1",
        })
    }
}

/// The mount's compression mode (btrfs's `compress`, `compress-force`, `compress=no`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compress {
    /// No compression unless a property asks for it.
    No,
    /// `compress=`: run the heuristic, mark inodes NOCOMPRESS when an extent does not shrink.
    Heuristic(CompressSpec),
    /// `compress-force=`: always try.
    Force(CompressSpec),
}

/// Why option text was rejected.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionError {
    /// An option wring does not know.
    #[error("unknown option '{0}': accepted are {ACCEPTED}")]
    Unknown(String),
    /// An option only a mount can set, given to a remount.
    #[error("{0} can only be set when mounting, not by a remount")]
    MountOnly(String),
    /// A known option with a value it does not accept.
    #[error("invalid value '{value}' for {option}: {accepted}")]
    Invalid {
        /// The option.
        option: String,
        /// The value given.
        value: String,
        /// What is accepted.
        accepted: String,
    },
}

/// Live mount options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Compression mode and spec.
    pub compress: Compress,
    /// Largest extent for files created (first written) from now on.
    pub max_extent: usize,
    /// Engine streams: extents compressed at once.
    pub streams: usize,
    /// Reclaim interval of idle workspaces.
    pub reclaim: Duration,
    /// Workspace memory budget per algorithm (`None` = unlimited).
    pub workspace_mem: Option<usize>,
    /// Pages in the decompression page pool.
    pub page_pool: usize,
    /// Let other users than the mounter in.
    pub allow_other: bool,
    /// FUSE request threads (`None`: [`Options::request_threads`]'s default); set at mount.
    pub threads: Option<usize>,
    /// Serve requests through FUSE over io_uring instead of reading `/dev/fuse` (by default
    /// when the kernel offers it); set at mount.
    pub uring: Uring,
    /// Serve Prometheus metrics there (`metrics=`); set at mount.
    pub metrics: Option<MetricsAddr>,
    /// `dict=auto` (the default): small extents compressed with zstd use a dictionary the
    /// filesystem trains on its own small extents; `dict=off`: none is trained or used for
    /// new data (extents written with one still read).
    pub dict: bool,
    /// `dict_train=`: bytes of small extents collected before the first dictionary is
    /// trained (and, four times over, before a candidate replaces it).
    pub dict_train_bytes: usize,
    /// Compact a store in a bucket (no effect on a local store).
    pub compact: bool,
    /// Segments with fewer live bytes than this percentage of their size are compacted.
    pub compact_threshold: u8,
    /// `ro`: nothing is written to the store (at mount: not even opened for writing).
    pub read_only: bool,
    /// `suid`: set-user-ID and set-group-ID bits take effect on exec (root mounting a store
    /// root owns only; FUSE's default, as libfuse's, is nosuid).
    pub suid: bool,
    /// `dev`: device nodes on the mount can be opened (the same condition as `suid`).
    pub dev: bool,
    /// `exec` (the default) or `noexec`.
    pub exec: bool,
    /// relatime (the default), strictatime or noatime.
    pub atime: Atime,
    /// `diratime` (the default) or `nodiratime`: whether listing a directory updates its
    /// access time (under the atime option; `noatime` covers directories too).
    pub diratime: bool,
    /// `lazytime`: shown and kept; access times are delayed inode items whatever it says.
    pub lazytime: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            compress: Compress::No,
            max_extent: DEFAULT_MAX_EXTENT,
            streams: wring_engine::workspace::default_streams(),
            reclaim: wring_engine::workspace::DEFAULT_RECLAIM,
            workspace_mem: None,
            page_pool: 0,
            allow_other: false,
            threads: None,
            uring: Uring::Auto,
            metrics: None,
            dict: true,
            dict_train_bytes: DEFAULT_DICT_TRAIN_BYTES,
            compact: true,
            compact_threshold: DEFAULT_COMPACT_THRESHOLD,
            read_only: false,
            suid: false,
            dev: false,
            exec: true,
            atime: Atime::Relatime,
            diratime: true,
            lazytime: false,
        }
    }
}

/// A size option's value in bytes (engine's one size parser), None when it is not a size or
/// does not fit in memory.
fn parse_size(text: &str) -> Option<usize> {
    size::parse_size(text)
        .ok()
        .and_then(|n| usize::try_from(n).ok())
}

/// A size as the options take it (`128K`, `1M`, `4096`).
fn format_size(n: usize) -> String {
    size::format_size(n as u64)
}

fn invalid(option: &str, value: &str, accepted: impl Into<String>) -> OptionError {
    OptionError::Invalid {
        option: option.into(),
        value: value.into(),
        accepted: accepted.into(),
    }
}

/// A switch: `1`/`on` or `0`/`off`.
fn on_off(option: &str, value: &str) -> Result<bool, OptionError> {
    match value {
        "1" | "on" => Ok(true),
        "0" | "off" => Ok(false),
        _ => Err(invalid(option, value, "1 (on) or 0 (off)")),
    }
}

/// Parse a compression spec for an option or property; warnings (clamped levels) go to the log.
pub fn parse_spec(option: &str, value: &str) -> Result<CompressSpec, OptionError> {
    match CompressSpec::parse(value) {
        // zram's algorithms would need new type bytes in the extent records (records.rs
        // reserves 6 and 7): refused until the store's format takes them.
        Ok((spec, _)) if matches!(spec.algorithm, Some(Algorithm::LzoRle | Algorithm::Deflate)) => {
            Err(invalid(
                option,
                value,
                "lzo-rle and deflate are the block device's algorithms, \
                 which the filesystem does not store; accepted are zstd, zlib, lzo, lz4, lz4hc \
                 (a level as zstd:3) and no",
            ))
        }
        Ok((spec, warning)) => {
            if let Some(w) = warning {
                log::warn!("{option}: {w}");
            }
            Ok(spec)
        }
        Err(e) => Err(invalid(option, value, e.to_string())),
    }
}

/// Options that belong to mount(8), fstab or systemd rather than to wring, which mount(8)
/// hands on to a mount helper too: accepted and ignored (`remount` is the helper's to act
/// on; `async` is what every wring mount is).
fn mount8_option(key: &str) -> bool {
    matches!(
        key,
        "defaults"
            | "auto"
            | "noauto"
            | "nofail"
            | "_netdev"
            | "user"
            | "users"
            | "nouser"
            | "owner"
            | "group"
            | "comment"
            | "remount"
            | "async"
    ) || key.starts_with("x-")
        || key.starts_with("X-")
}

/// The VFS flags mount(8) spells as options (as it means them); false when `key` is none.
fn vfs_flag(o: &mut Options, key: &str) -> bool {
    match key {
        "ro" => o.read_only = true,
        "rw" => o.read_only = false,
        "suid" => o.suid = true,
        "nosuid" => o.suid = false,
        "dev" => o.dev = true,
        "nodev" => o.dev = false,
        "exec" => o.exec = true,
        "noexec" => o.exec = false,
        "relatime" => o.atime = Atime::Relatime,
        "strictatime" => o.atime = Atime::Strict,
        "noatime" => o.atime = Atime::No,
        "diratime" => o.diratime = true,
        "nodiratime" => o.diratime = false,
        "lazytime" => o.lazytime = true,
        "nolazytime" => o.lazytime = false,
        _ => return false,
    }
    true
}

impl Options {
    /// Apply comma-separated option text on top of `self` (a mount starts from the defaults, a
    /// remount from the live options). Nothing changes on error.
    pub fn apply(&self, text: &str) -> Result<Options, OptionError> {
        let mut o = self.clone();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            match (key, value) {
                ("compress" | "compress-force", v) => {
                    let spec = match v {
                        None => CompressSpec::default_for(Algorithm::Zlib),
                        Some(v) => parse_spec(key, v)?,
                    };
                    o.compress = match (spec.algorithm, key) {
                        (None, _) => Compress::No,
                        (Some(_), "compress") => Compress::Heuristic(spec),
                        _ => Compress::Force(spec),
                    };
                }
                ("max_extent", Some(v)) => {
                    let accepted = "a size from 4K to 4M in whole 4K blocks (e.g. 128K, 1M)";
                    match parse_size(v) {
                        Some(n) if (4096..=MAX_MAX_EXTENT).contains(&n) && n % 4096 == 0 => {
                            o.max_extent = n
                        }
                        _ => return Err(invalid(key, v, accepted)),
                    }
                }
                ("streams", Some(v)) => match v.parse::<usize>() {
                    Ok(n) if (1..=1024).contains(&n) => o.streams = n,
                    _ => return Err(invalid(key, v, "a whole number from 1 to 1024")),
                },
                ("reclaim", Some(v)) => match v.parse::<u64>() {
                    Ok(n) if n >= 1 => o.reclaim = Duration::from_secs(n),
                    _ => return Err(invalid(key, v, "a whole number of seconds, at least 1")),
                },
                ("workspace_mem", Some(v)) => {
                    o.workspace_mem = match v {
                        "unlimited" | "none" => None,
                        _ => Some(parse_size(v).ok_or_else(|| {
                            invalid(key, v, "a size in bytes (K, M, G suffixes) or unlimited")
                        })?),
                    }
                }
                ("page_pool", Some(v)) => match v.parse::<usize>() {
                    // The pool is allocated when set: at most 4 GiB of 4 KiB pages.
                    Ok(n) if n <= 1 << 20 => o.page_pool = n,
                    _ => return Err(invalid(key, v, "a number of pages from 0 to 1048576")),
                },
                ("threads", Some(v)) => match v.parse::<usize>() {
                    Ok(0) => o.threads = None,
                    Ok(n) if n <= MAX_THREADS => o.threads = Some(n),
                    _ => {
                        return Err(invalid(
                            key,
                            v,
                            format!("a whole number from 1 to {MAX_THREADS}, or 0 for the default"),
                        ))
                    }
                },
                ("compact", Some(v)) => o.compact = on_off(key, v)?,
                ("dict", Some("auto")) => o.dict = true,
                ("dict", Some("off")) => o.dict = false,
                ("dict", Some(v)) => return Err(invalid(key, v, "auto (the default) or off")),
                ("dict_train", Some(v)) => match parse_size(v) {
                    Some(n) if (MIN_DICT_TRAIN..=MAX_DICT_TRAIN).contains(&n) => {
                        o.dict_train_bytes = n
                    }
                    _ => return Err(invalid(key, v, "a size from 64K to 1G (default 4M)")),
                },
                ("uring", Some(v)) => o.uring = Uring::parse(key, v)?,
                ("metrics", Some(v)) => {
                    let addr = MetricsAddr::parse(v).map_err(|e| invalid(key, v, e.to_string()))?;
                    o.metrics = Some(addr);
                }
                ("compact_threshold", Some(v)) => match v.parse::<u8>() {
                    Ok(n) if (1..=MAX_COMPACT_THRESHOLD).contains(&n) => o.compact_threshold = n,
                    _ => {
                        let accepted =
                            format!("a percentage of live bytes from 1 to {MAX_COMPACT_THRESHOLD}");
                        return Err(invalid(key, v, accepted));
                    }
                },
                ("allow_other", None) => o.allow_other = true,
                (_, None) if vfs_flag(&mut o, key) => {}
                _ if mount8_option(key) => {}
                (
                    "max_extent" | "streams" | "reclaim" | "workspace_mem" | "page_pool"
                    | "threads" | "uring" | "dict" | "dict_train" | "compact" | "compact_threshold"
                    | "metrics",
                    None,
                ) => return Err(invalid(key, "", "the option needs a value: KEY=VALUE")),
                _ => return Err(OptionError::Unknown(item.to_string())),
            }
        }
        Ok(o)
    }

    /// Parse option text on top of the defaults.
    pub fn parse(text: &str) -> Result<Options, OptionError> {
        Options::default().apply(text)
    }

    /// FUSE request threads: `threads=`, else more than the compression streams (a thread
    /// waiting for a stream must not hold up the lookups, getattrs and reads queued behind
    /// it), 4 to 16.
    pub fn request_threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| (self.streams + 4).clamp(4, 16))
    }

    /// The spec new data is compressed with when no property says otherwise.
    pub fn spec(&self) -> Option<CompressSpec> {
        match self.compress {
            Compress::No => None,
            Compress::Heuristic(s) | Compress::Force(s) => Some(s),
        }
    }
}

impl fmt::Display for Options {
    /// As /proc/mounts shows btrfs's options: `compress=zstd:3,max_extent=128K,...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.compress {
            Compress::No => {}
            Compress::Heuristic(s) => write!(f, "compress={s},")?,
            Compress::Force(s) => write!(f, "compress-force={s},")?,
        }
        write!(
            f,
            "max_extent={},streams={},reclaim={},workspace_mem={},page_pool={},compact={},\
             compact_threshold={}",
            format_size(self.max_extent),
            self.streams,
            self.reclaim.as_secs(),
            self.workspace_mem
                .map_or_else(|| "unlimited".to_string(), format_size),
            self.page_pool,
            u8::from(self.compact),
            self.compact_threshold
        )?;
        if let Some(n) = self.threads {
            write!(f, ",threads={n}")?;
        }
        if self.uring != Uring::Auto {
            write!(f, ",uring={}", self.uring)?;
        }
        if let Some(m) = &self.metrics {
            write!(f, ",metrics={m}")?;
        }
        if !self.dict {
            f.write_str(",dict=off")?;
        }
        if self.dict_train_bytes != DEFAULT_DICT_TRAIN_BYTES {
            write!(f, ",dict_train={}", format_size(self.dict_train_bytes))?;
        }
        if self.allow_other {
            f.write_str(",allow_other")?;
        }
        // The VFS flags that differ from a plain mount's, as /proc/mounts would show them.
        let flags = [
            (self.read_only, ",ro"),
            (self.suid, ",suid"),
            (self.dev, ",dev"),
            (!self.exec, ",noexec"),
            (self.atime == Atime::Strict, ",strictatime"),
            (self.atime == Atime::No, ",noatime"),
            (!self.diratime, ",nodiratime"),
            (self.lazytime, ",lazytime"),
        ];
        for (on, text) in flags {
            if on {
                f.write_str(text)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btrfs_spelling() {
        let o = Options::parse("compress=zstd:3").unwrap();
        assert!(o.to_string().starts_with("compress=zstd:3,max_extent=128K"));
        let o = Options::parse("compress-force=lzo,max_extent=1M").unwrap();
        assert!(o
            .to_string()
            .starts_with("compress-force=lzo,max_extent=1M"));
        assert_eq!(
            Options::parse("compress")
                .unwrap()
                .spec()
                .unwrap()
                .to_string(),
            "zlib:3"
        );
        assert_eq!(
            Options::parse("compress=zstd,compress=no")
                .unwrap()
                .compress,
            Compress::No
        );
        let round = Options::parse(
            "compress=zlib:9,streams=3,page_pool=64,threads=2,uring=1,compact=0,compact_threshold=70",
        )
        .unwrap();
        assert_eq!((round.compact, round.compact_threshold), (false, 70));
        assert_eq!(Options::parse(&round.to_string()).unwrap(), round);
        // uring=auto is the default and not shown; 0 and 1 are.
        assert_eq!(Options::parse("uring=auto").unwrap(), Options::default());
        assert!(!Options::default().to_string().contains("uring"));
        let off = Options::parse("uring=off").unwrap();
        assert_eq!(off.uring, Uring::Off);
        assert!(off.to_string().ends_with(",uring=0"), "{off}");
        assert_eq!(Options::parse(&off.to_string()).unwrap(), off);
    }

    #[test]
    fn errors_name_option_and_accepted() {
        let cases = [
            ("compress=zstdd", "compress", "accepted are"),
            ("compress-force=zlib:x", "compress-force", "accepted are"),
            (
                "compress=lzo-rle",
                "compress",
                "does not store; accepted are zstd",
            ),
            (
                "compress-force=deflate:9",
                "compress-force",
                "accepted are zstd",
            ),
            ("max_extent=5M", "max_extent", "4K to 4M"),
            ("max_extent=1000", "max_extent", "4K to 4M"),
            ("streams=0", "streams", "1 to 1024"),
            ("reclaim=soon", "reclaim", "seconds"),
            ("workspace_mem=lots", "workspace_mem", "unlimited"),
            ("page_pool=-1", "page_pool", "pages"),
            ("threads=65", "threads", "1 to 64"),
            ("threads=x", "threads", "0 for the default"),
            ("compact=yes", "compact", "1 (on) or 0 (off)"),
            ("compact", "compact", "needs a value"),
            ("uring=2", "uring", "auto (the default), 1 (on) or 0 (off)"),
            ("uring", "uring", "needs a value"),
            ("compact_threshold=0", "compact_threshold", "1 to 95"),
            ("compact_threshold=96", "compact_threshold", "1 to 95"),
            ("frobnicate", "frobnicate", "accepted are compress"),
        ];
        for (text, name, accepted) in cases {
            let e = Options::parse(text).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains(accepted), "{text}: {e}");
        }
    }

    #[test]
    fn mount8_and_systemd_options_are_ignored() {
        let text = "rw,nosuid,nodev,compress=zstd:3,nofail,noauto,_netdev,defaults,\
                    x-systemd.requires=a.service,x-systemd.automount,comment=x";
        assert_eq!(
            Options::parse(text).unwrap(),
            Options::parse("compress=zstd:3").unwrap()
        );
    }

    #[test]
    fn vfs_flags_as_mount8_means_them() {
        let o = Options::parse("ro,suid,dev,noexec,noatime,nodiratime,lazytime").unwrap();
        assert!(o.read_only && o.suid && o.dev && !o.exec && !o.diratime && o.lazytime);
        assert_eq!(o.atime, Atime::No);
        assert_eq!(Options::parse(&o.to_string()).unwrap(), o);
        assert!(o.to_string().contains(",nodiratime"), "{o}");
        let o = o
            .apply("rw,nosuid,nodev,exec,strictatime,diratime,nolazytime")
            .unwrap();
        assert!(!o.read_only && !o.suid && !o.dev && o.exec && o.diratime && !o.lazytime);
        assert!(!o.to_string().contains("diratime"), "{o}");
        assert_eq!(o.atime, Atime::Strict);
        let d = Options::default();
        assert_eq!(
            (d.read_only, d.suid, d.dev, d.exec, d.atime),
            (false, false, false, true, Atime::Relatime)
        );
        assert!(Options::parse("ro=1").is_err());
        assert!(Options::parse("nodiratime=1").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("128K"), Some(128 << 10));
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("17179869184G"), None);
        assert_eq!(format_size(1 << 20), "1M");
        let o = Options::parse("max_extent=1M,workspace_mem=64M").unwrap();
        assert_eq!((o.max_extent, o.workspace_mem), (1 << 20, Some(64 << 20)));
        assert!(o.to_string().contains("max_extent=1M,"), "{o}");
    }

    /// metrics= shows as written, and what /proc/mounts-style text shows parses back (a
    /// remount starts from it).
    #[test]
    fn metrics_addresses_round_trip() {
        for v in [
            "127.0.0.1:9101",
            "[::1]:9101",
            "/run/w.sock",
            "public:0.0.0.0:9101",
        ] {
            let o = Options::parse(&format!("metrics={v}")).unwrap();
            assert!(o.to_string().contains(&format!(",metrics={v}")), "{o}");
            assert_eq!(Options::parse(&o.to_string()).unwrap(), o);
        }
        let e = Options::parse("metrics=10.1.2.3:9101")
            .unwrap_err()
            .to_string();
        assert!(e.contains("metrics=public:10.1.2.3:9101"), "{e}");
    }
}
