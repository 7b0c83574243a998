//! The kernel is the oracle: wring-difftest's three passes against tmpfs (and the random
//! one against btrfs too), on the transport
//! the suite runs with (`scripts/test.sh` runs this file with `uring=0` and again with
//! `uring=1`). Each pass prints how many operations and trees it compared; a divergence
//! fails with the shrunk sequence as a shell script.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use common::require_root;
use wring_difftest::{crash, exhaustive, random, Daemon, Mount, Oracle, OracleKind, Report};

/// A store mounted with the suite's options, and a tmpfs, under a fresh base directory.
fn sides(name: &str) -> (PathBuf, Mount, Oracle) {
    sides_with(name, &OracleKind::Tmpfs)
}

/// The same with `kind` as the oracle.
fn sides_with(name: &str, kind: &OracleKind) -> (PathBuf, Mount, Oracle) {
    let base = PathBuf::from(format!("/tmp/wring-difftest-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let opts = std::env::var(common::SUITE_OPTIONS).unwrap_or_default();
    let daemon = Daemon::Fsd(env!("CARGO_BIN_EXE_wring-fsd").into());
    let mount = Mount::new(&base, daemon, &opts).expect("mount");
    let oracle = Oracle::new(&base, kind).expect("the oracle");
    (base, mount, oracle)
}

fn done(base: PathBuf, mount: Mount, oracle: Oracle, what: &str, r: &Report, t: Instant) {
    drop(mount);
    drop(oracle);
    let _ = std::fs::remove_dir_all(&base);
    eprintln!(
        "{what}: {} operations, {} trees compared, {} failures, {:.1} s",
        r.ops,
        r.trees,
        r.failures.len(),
        t.elapsed().as_secs_f64()
    );
    for f in &r.failures {
        eprintln!("{f}\n");
    }
    assert!(
        r.failures.is_empty(),
        "{what}: wring diverged from the kernel"
    );
}

/// Seeded random operations on 3 threads (each its own directory, plus a shared one) agree
/// with tmpfs in every answer and every tree, and after a durable commit, an unmount, a
/// clean fsck and a new mount.
#[test]
fn random_operations_agree_with_the_kernel() {
    if !require_root("random_operations_agree_with_the_kernel") {
        return;
    }
    let t = Instant::now();
    let (base, mut mount, oracle) = sides("random");
    let mut report = Report::default();
    for seed in 1..=4 {
        let cfg = random::Config {
            seed,
            ops: 1500,
            ..random::Config::default()
        };
        report.absorb(random::run(&mut mount, &oracle, &cfg).expect("the random pass"));
    }
    done(base, mount, oracle, "random", &report, t);
}

/// The same against btrfs, which adds what tmpfs cannot answer: FALLOC_FL_ZERO_RANGE and
/// BTRFS_IOC_DEFRAG_RANGE (`btrfs filesystem defragment -c`: its answers, refusals included,
/// and the bytes unchanged after it).
#[test]
fn random_operations_agree_with_btrfs() {
    if !require_root("random_operations_agree_with_btrfs") {
        return;
    }
    let t = Instant::now();
    let (base, mut mount, oracle) = sides_with("random-btrfs", &OracleKind::Btrfs);
    let cfg = random::Config {
        seed: 101,
        ops: 6000,
        ..random::Config::default()
    };
    let report = random::run(&mut mount, &oracle, &cfg).expect("the random pass");
    done(base, mount, oracle, "random against btrfs", &report, t);
}

/// Every sequence of up to two namespace operations over two names in two directories,
/// warm and cold, and of up to three over two names in one, cold, agrees with tmpfs; the
/// store is clean after.
#[test]
fn every_short_namespace_sequence_agrees_with_the_kernel() {
    if !require_root("every_short_namespace_sequence_agrees_with_the_kernel") {
        return;
    }
    let t = Instant::now();
    let (base, mut mount, oracle) = sides("exhaustive");
    let plans = exhaustive::Plan::ci();
    let report = exhaustive::run(&mut mount, &oracle, &plans, 2, &|_, _| {}).expect("the pass");
    done(base, mount, oracle, "exhaustive", &report, t);
}

/// kill -9 of the daemon at random points: fsck is clean and the tree is the kernel's at a
/// step between the last durable point and the kill.
#[test]
fn a_kill_leaves_a_clean_store_at_a_step_after_the_last_durable_point() {
    if !require_root("a_kill_leaves_a_clean_store_at_a_step_after_the_last_durable_point") {
        return;
    }
    let t = Instant::now();
    let (base, mut mount, oracle) = sides("crash");
    let cfg = crash::Config {
        rounds: 25,
        ..crash::Config::default()
    };
    let report = crash::run(&mut mount, &oracle, &cfg).expect("the crash pass");
    done(base, mount, oracle, "crash", &report, t);
}
