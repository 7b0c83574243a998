//! wring's test scaffolding, for every crate's tests and never for production code (it is only
//! ever a dev-dependency): what a test needs and the skip log ([`require`], [`Need`]), the
//! tests' one seeded generator ([`SplitMix`]), deterministic test data ([`samples`], slices of
//! the shared corpus or of files every Debian machine has), a real SeaweedFS ([`seaweed`]),
//! the counting allocator ([`alloc`]) and the layering check ([`layers`]: `use` only names a
//! layer below).
//!
//! Mirrors fstests' `_require_*` and `_notrun`, except that not running is an error unless asked
//! for. A test that cannot run never passes: [`require`] fails it, naming what is missing, unless
//! whoever runs the tests opted out of that need explicitly — `WRING_SKIP_ROOT=1` (root),
//! `WRING_SKIP_CORPUS=1` (the shared corpus in `WRING_CORPUS`), `WRING_SKIP_ZRAM=1` (the
//! kernel's zram). An opted-out test prints `wring-test-skipped: <test> (<why>, opted out by
//! <VAR>=1)` to stderr and appends the same line to the file named by `WRING_SKIP_LOG`, which
//! `scripts/test.sh` counts and summarises.
//!
//! Scratch btrfs filesystems on loop devices are production code (the benchmarks' kernel runs
//! use them too): `wring_btrfs::scratch`.

pub mod alloc;
mod corpus;
pub mod layers;
/// The SeaweedFS harness ([`wring_seaweed`]), where the tests have always found it.
pub use wring_seaweed as seaweed;

pub use corpus::{interleave, random_bytes, samples, Sample, SplitMix, CORPUS_ENV, CORPUS_FILES};

/// Whether the tests run as root (loop devices, mounts, encoded I/O). The tests' own check;
/// production code has its own (`wring_bench::kernel::is_root`, `wring_btrfs::fsinfo::has_cap_sys_admin`).
fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What a test needs that a machine may lack. A test that lacks one fails, naming what is
/// missing, unless whoever runs it opted out with the need's variable
/// ([`Need::opt_out_var`]), in which case it is recorded as skipped (see [`require`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Root: loop devices, mount, FUSE mounts, CAP_SYS_ADMIN for encoded I/O. Opt out with
    /// `WRING_SKIP_ROOT=1`.
    Root,
    /// The shared corpus: `WRING_CORPUS` naming a directory that holds at least one of
    /// [`CORPUS_FILES`] (`scripts/test.sh` builds it from `../shared/corpus`). Opt out with
    /// `WRING_SKIP_CORPUS=1`.
    Corpus,
    /// The kernel's zram (`/sys/block/zram0`; `modprobe zram`). Opt out with
    /// `WRING_SKIP_ZRAM=1`.
    Zram,
    /// SeaweedFS's `weed` binary for the object-store tests ([`seaweed::weed_binary`];
    /// `scripts/setup.sh` installs it). Opt out with `WRING_SKIP_S3=1`.
    Seaweed,
}

/// Environment variable naming a file that skip records are appended to, one line each
/// (`scripts/test.sh` sets it and prints a summary at the end).
pub const SKIP_LOG_ENV: &str = "WRING_SKIP_LOG";

/// How every skip record starts, on stderr and in the skip log.
pub const SKIP_PREFIX: &str = "wring-test-skipped: ";

impl Need {
    /// Every need, in the order [`require`] checks them.
    pub const ALL: [Need; 4] = [Need::Root, Need::Corpus, Need::Zram, Need::Seaweed];

    /// The variable that, set to anything but empty or `0`, turns a missing need into a skip.
    pub fn opt_out_var(self) -> &'static str {
        match self {
            Need::Root => "WRING_SKIP_ROOT",
            Need::Corpus => "WRING_SKIP_CORPUS",
            Need::Zram => "WRING_SKIP_ZRAM",
            Need::Seaweed => "WRING_SKIP_S3",
        }
    }

    /// Why the need is not met here, or None when it is.
    pub fn missing(self) -> Option<String> {
        match self {
            Need::Root => (!running_as_root()).then(|| {
                "needs root (loop devices, mount, CAP_SYS_ADMIN for encoded I/O)".to_string()
            }),
            Need::Corpus => corpus_missing(std::env::var_os(CORPUS_ENV)),
            Need::Zram => (!std::path::Path::new("/sys/block/zram0").exists()).then(|| {
                "needs zram (/sys/block/zram0 is missing: modprobe zram, as root)".to_string()
            }),
            Need::Seaweed => seaweed::weed_missing(),
        }
    }
}

/// Why the corpus named by `dir` (the value of `WRING_CORPUS`) cannot be used, or None.
fn corpus_missing(dir: Option<std::ffi::OsString>) -> Option<String> {
    let Some(dir) = dir else {
        return Some(format!(
            "needs the shared corpus ({CORPUS_ENV} is not set: build it with \
             ../shared/corpus/build.sh DIR and set {CORPUS_ENV}=DIR, as scripts/test.sh does)"
        ));
    };
    let dir = std::path::Path::new(&dir);
    if CORPUS_FILES.iter().any(|f| dir.join(f).is_file()) {
        return None;
    }
    Some(format!(
        "needs the shared corpus ({CORPUS_ENV}={} holds none of {})",
        dir.display(),
        CORPUS_FILES.join(", ")
    ))
}

/// Whether an opt-out variable's value asks to skip: set, not empty, not `0`.
fn opted_out(value: Option<std::ffi::OsString>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// What [`require`] decided for one test.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// Everything is there: run.
    Run,
    /// Something is missing and its opt-out variable is set: this skip record.
    Skip(String),
    /// Something is missing and nobody opted out: fail with this message.
    Fail(String),
}

/// The decision for `test` given what is `missing` (need, reason) and whether each need's
/// opt-out variable is set. Pure, so it is tested without touching the environment.
fn decide(test: &str, missing: &[(Need, String)], opted: impl Fn(Need) -> bool) -> Decision {
    let Some((need, reason)) = missing.first() else {
        return Decision::Run;
    };
    let var = need.opt_out_var();
    if opted(*need) {
        return Decision::Skip(format!(
            "{SKIP_PREFIX}{test} ({reason}, opted out by {var}=1)"
        ));
    }
    Decision::Fail(format!(
        "{test} cannot run: it {reason}. Provide it, or set {var}=1 to skip such tests \
         (they are then reported as skipped, never as passed)"
    ))
}

/// Decide whether a test can run. True when every need is met. When one is missing the test
/// fails (panics) with a message naming it and its opt-out variable — unless that variable is
/// set, in which case this prints one skip record to stderr, appends it to the file named by
/// `WRING_SKIP_LOG` (when set), and returns false: the caller returns at once.
///
/// ```no_run
/// use wring_testing::{require, Need};
/// if !require("my_test", &[Need::Root]) {
///     return;
/// }
/// ```
pub fn require(test: &str, needs: &[Need]) -> bool {
    let missing: Vec<(Need, String)> = needs
        .iter()
        .filter_map(|&n| n.missing().map(|why| (n, why)))
        .collect();
    match decide(test, &missing, |n| {
        opted_out(std::env::var_os(n.opt_out_var()))
    }) {
        Decision::Run => true,
        Decision::Skip(record) => {
            eprintln!("{record}");
            log_skip(&record);
            false
        }
        Decision::Fail(message) => panic!("{message}"),
    }
}

/// Append `record` to the skip log, if there is one. A log that cannot be written fails the
/// test: a skip nobody hears of is the silent pass this module exists to prevent.
fn log_skip(record: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os(SKIP_LOG_ENV) else {
        return;
    };
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{record}\n").as_bytes()));
    if let Err(e) = written {
        panic!(
            "could not append the skip record to {SKIP_LOG_ENV}={}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}

/// [`require`] with [`Need::Root`] only: the form every root-only test uses.
pub fn require_root(test: &str) -> bool {
    require(test, &[Need::Root])
}

/// The block device's nbdkit plugin that cargo built beside the calling test binary
/// (`target/<profile>/deps` or its parent), for tests of crates that list wring-blk-nbdkit as
/// a dependency. Panics with the build command when it is not there.
pub fn blk_plugin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("target/<profile>/deps");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let p = dir.join("libwring_blk_nbdkit.so");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "libwring_blk_nbdkit.so is not beside {}; build it with `cargo build -p wring-blk-nbdkit`",
        exe.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_missing_runs() {
        assert_eq!(decide("t", &[], |_| false), Decision::Run);
        assert_eq!(decide("t", &[], |_| true), Decision::Run);
    }

    #[test]
    fn a_missing_need_fails_naming_its_opt_out() {
        let missing = [(Need::Root, "needs root".to_string())];
        let Decision::Fail(message) = decide("t", &missing, |_| false) else {
            panic!("a missing need without an opt-out did not fail");
        };
        assert!(message.contains("t cannot run: it needs root"), "{message}");
        assert!(message.contains("WRING_SKIP_ROOT=1"), "{message}");
    }

    #[test]
    fn only_the_matching_opt_out_skips() {
        let missing = [(Need::Zram, "needs zram".to_string())];
        // Opting out of root does not excuse missing zram.
        assert!(matches!(
            decide("t", &missing, |n| n == Need::Root),
            Decision::Fail(_)
        ));
        assert_eq!(
            decide("t", &missing, |n| n == Need::Zram),
            Decision::Skip(
                "wring-test-skipped: t (needs zram, opted out by WRING_SKIP_ZRAM=1)".into()
            )
        );
    }

    #[test]
    fn opt_out_values() {
        assert!(!opted_out(None));
        assert!(!opted_out(Some("".into())));
        assert!(!opted_out(Some("0".into())));
        assert!(opted_out(Some("1".into())));
        assert!(opted_out(Some("yes".into())));
    }

    #[test]
    fn the_corpus_must_hold_a_corpus_file() {
        assert!(corpus_missing(None).is_some());
        let dir = std::env::temp_dir().join(format!("wring-need-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = corpus_missing(Some(dir.clone().into_os_string()));
        std::fs::write(dir.join(CORPUS_FILES[0]), b"text").unwrap();
        let full = corpus_missing(Some(dir.clone().into_os_string()));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(empty.is_some_and(|why| why.contains("holds none of")));
        assert_eq!(full, None);
    }

    #[test]
    fn every_need_has_its_own_variable() {
        let vars: std::collections::BTreeSet<&str> =
            Need::ALL.iter().map(|n| n.opt_out_var()).collect();
        assert_eq!(vars.len(), Need::ALL.len());
    }
}
