//! Helpers for tests that need a real btrfs: scratch filesystems on loop devices and
//! deterministic test data.
//!
//! Mirrors what fstests does for btrfs (a scratch device made with mkfs.btrfs and mounted with
//! the options under test), scaled down to a sparse image file per test. Everything here needs
//! root and the `mkfs.btrfs`, `losetup`, `mount` and `umount` programs (Debian packages
//! `btrfs-progs` and `mount`).

mod corpus;
mod scratch;

pub use corpus::{interleave, random_bytes, samples, Sample, CORPUS_ENV, CORPUS_FILES};
pub use scratch::{ScratchFs, DEFAULT_IMAGE_SIZE};

use std::io;

/// Why a scratch filesystem could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A program could not be started at all.
    #[error("could not run {program}: {source}{hint}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: io::Error,
        /// What to install, when the program is missing.
        hint: &'static str,
    },
    /// A program ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Mounting with the requested options failed (the kernel may not accept them).
    #[error("mounting btrfs with -o {options} failed: {stderr}")]
    Mount {
        /// The options.
        options: String,
        /// What mount printed.
        stderr: String,
    },
    /// A file operation on the scratch area failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
}

/// Whether the process runs as root (needed for loop devices, mounts and encoded I/O).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Decide whether a root-only test can run: true as root; otherwise fail under CI (env `CI`
/// set), so the check can never pass by being skipped, or print a skip note and return false.
pub fn require_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs root (loop devices, mount, CAP_SYS_ADMIN for encoded I/O) and CI is set: run the tests as root"
    );
    eprintln!("skipping {test}: needs root (loop devices, mount and CAP_SYS_ADMIN)");
    false
}
