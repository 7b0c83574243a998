//! Helpers shared by the engine's integration tests (each test binary uses some of them).
#![allow(dead_code)]

/// splitmix64, the tests' one seeded generator (wring-testing's): every input comes back from
/// its seed.
pub use wring_testing::SplitMix;

/// Whether a corpus test can run, by the rule of `wring_testing::require(…, &[Need::Corpus])`
/// (which asks only whether `WRING_CORPUS` is there; these tests also fall back to system
/// files, so whether they found data is their own question). True when `found`;
/// otherwise the test fails naming `why`, unless `WRING_SKIP_CORPUS` is set (not empty, not `0`):
/// then one skip record goes to stderr and to the file named by `WRING_SKIP_LOG`, in the same
/// words, so `scripts/test.sh` counts it, and the caller returns.
pub fn require_corpus(test: &str, found: bool, why: &str) -> bool {
    use std::io::Write;
    if found {
        return true;
    }
    let opted = std::env::var_os("WRING_SKIP_CORPUS").is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        opted,
        "{test} cannot run: it needs the shared corpus ({why}). Provide it, or set \
         WRING_SKIP_CORPUS=1 to skip such tests (they are then reported as skipped, never as passed)"
    );
    let record = format!(
        "wring-test-skipped: {test} (needs the shared corpus ({why}), opted out by WRING_SKIP_CORPUS=1)"
    );
    eprintln!("{record}");
    if let Some(log) = std::env::var_os("WRING_SKIP_LOG") {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(format!("{record}\n").as_bytes()))
            .unwrap_or_else(|e| panic!("could not append the skip record to WRING_SKIP_LOG: {e}"));
    }
    false
}
