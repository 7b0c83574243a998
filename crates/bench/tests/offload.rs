//! `wring bench offload` on a tiny generated input (a few requests per size): every request is
//! accounted for, nothing is corrupted, the failing device falls back for every request and the
//! threshold keeps small requests off the device. The shape of the rows, never their speed.

use std::time::Duration;

use wring_bench::corpus::{Corpus, CorpusFile};
use wring_bench::offload::{
    self, OffloadBenchConfig, OffloadRow, PhaseFigures, Provider, SimProvider,
};
use wring_bench::progress::Progress;
use wring_engine::offload::sim::Fault;
use wring_engine::offload::Fallback;
use wring_engine::{Algorithm, CompressSpec};

const KIB: usize = 1024;
const THRESHOLD: usize = 16 * KIB;

/// Compressible words, then random bytes (which do not fit and are stored raw): 192 KiB, a
/// multiple of every size measured, so every request is exactly its row's size.
fn corpus() -> Corpus {
    const WORDS: [&str; 8] = [
        "extent", "offload", "device", "btrfs", "ticket", "queue", "fallback", "the",
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut text = Vec::new();
    while text.len() < 128 * KIB {
        text.extend_from_slice(WORDS[(next() % 8) as usize].as_bytes());
        text.push(b' ');
    }
    text.truncate(128 * KIB);
    let random: Vec<u8> = (0..64 * KIB).map(|_| (next() >> 24) as u8).collect();
    Corpus::from_files(
        "tiny offload corpus",
        vec![
            CorpusFile {
                name: "a.txt".into(),
                data: text,
            },
            CorpusFile {
                name: "b.bin".into(),
                data: random,
            },
        ],
    )
}

fn sim(min_len: usize, fault: Fault) -> Provider {
    Provider::Sim(SimProvider {
        per_submission: Duration::from_micros(5),
        per_byte_ns: 0.1,
        min_len,
        fault,
    })
}

fn run() -> (Corpus, Vec<OffloadRow>) {
    let corpus = corpus();
    let mut cfg = OffloadBenchConfig::defaults(CompressSpec::new(Algorithm::Zstd, 1), 2);
    cfg.sizes = vec![4 * KIB, 16 * KIB, 64 * KIB];
    cfg.providers = vec![
        Provider::Cpu,
        sim(0, Fault::None),
        sim(THRESHOLD, Fault::None),
        sim(0, Fault::Fail),
    ];
    cfg.window = 8;
    // Far beyond any submission here: a loaded machine must not turn into time-outs.
    cfg.timeout = Duration::from_secs(60);
    let rows = offload::run(&corpus, &cfg, &Progress::hidden()).expect("benchmark run");
    (corpus, rows)
}

/// Every request ran somewhere exactly once, by the completions and by the offload's counters.
fn accounted(phase: &PhaseFigures, what: &str) {
    assert_eq!(
        phase.device + phase.cpu,
        phase.requests,
        "{what}: {phase:?}"
    );
    assert_eq!(
        phase.stats_device_completed + phase.stats_cpu_completed,
        phase.requests,
        "{what}: the offload's counters: {phase:?}"
    );
    assert_eq!(phase.stats_device_completed, phase.device, "{what}");
    assert_eq!(phase.stats_cpu_completed, phase.cpu, "{what}");
    assert!(phase.fallbacks.total() <= phase.cpu, "{what}: {phase:?}");
}

#[test]
fn every_request_is_accounted_for_and_decompresses_to_its_input() {
    let (corpus, rows) = run();
    assert_eq!(rows.len(), 3 * 4);
    for r in &rows {
        let what = format!("{} {}", r.size, r.provider);
        assert_eq!(r.requests, corpus.bytes().div_ceil(r.size as u64), "{what}");
        assert_eq!(r.bytes, corpus.bytes(), "{what}");
        assert_eq!(r.compress.requests, r.requests, "{what}");
        assert_eq!(r.mismatches, 0, "{what}: {r:?}");
        // The random tail does not fit: those requests are stored raw, the rest decompressed.
        assert!(r.raw > 0 && r.raw < r.requests, "{what}: {r:?}");
        assert_eq!(r.decompress.requests, r.requests - r.raw, "{what}");
        accounted(&r.compress, &format!("{what} compression"));
        accounted(&r.decompress, &format!("{what} decompression"));
        // The device's outputs are the CPU's: the same bytes stored.
        let cpu = rows
            .iter()
            .find(|c| c.size == r.size && !c.simulated)
            .expect("a cpu row for every size");
        assert_eq!(r.stored_bytes, cpu.stored_bytes, "{what}");
        assert_eq!(r.raw, cpu.raw, "{what}");
        assert!(r.mbps_vs_cpu.is_some(), "{what}");
    }
}

#[test]
fn cpu_rows_never_touch_a_device() {
    let (_, rows) = run();
    for r in rows.iter().filter(|r| r.provider == "cpu") {
        assert!(!r.simulated);
        assert_eq!(r.compress.device, 0);
        assert_eq!(r.compress.fallbacks.total(), 0);
        assert_eq!(r.mbps_vs_cpu, Some(1.0));
    }
}

#[test]
fn a_device_without_threshold_runs_everything_and_a_failing_one_nothing() {
    let (_, rows) = run();
    for r in rows.iter().filter(|r| r.provider == "sim 5 µs") {
        assert_eq!(r.compress.device, r.requests, "{r:?}");
        assert_eq!(r.decompress.device, r.decompress.requests, "{r:?}");
    }
    let failing: Vec<_> = rows
        .iter()
        .filter(|r| r.provider == "sim 5 µs, failing")
        .collect();
    assert_eq!(failing.len(), 3);
    for r in failing {
        assert_eq!(r.compress.device, 0, "{r:?}");
        assert_eq!(
            r.compress.fallbacks.get(Fallback::Failed),
            r.requests,
            "{r:?}"
        );
        assert_eq!(r.compress.fallbacks.total(), r.requests, "{r:?}");
        assert_eq!(
            r.decompress.fallbacks.get(Fallback::Failed),
            r.decompress.requests,
            "{r:?}"
        );
        assert_eq!(r.mismatches, 0, "{r:?}");
    }
}

#[test]
fn the_threshold_keeps_smaller_requests_on_the_cpu() {
    let (_, rows) = run();
    let label = format!("sim 5 µs, min {} KiB", THRESHOLD / KIB);
    let with_threshold: Vec<_> = rows.iter().filter(|r| r.provider == label).collect();
    assert_eq!(with_threshold.len(), 3);
    for r in with_threshold {
        if r.size < THRESHOLD {
            assert_eq!(r.compress.device, 0, "{r:?}");
            assert_eq!(r.compress.device_share(), 0.0, "{r:?}");
            assert_eq!(
                r.compress.fallbacks.get(Fallback::BelowThreshold),
                r.requests,
                "{r:?}"
            );
        } else {
            assert_eq!(r.compress.device, r.requests, "{r:?}");
            assert_eq!(r.compress.fallbacks.total(), 0, "{r:?}");
        }
    }
}

#[test]
fn the_report_says_the_device_is_simulated() {
    let (corpus, rows) = run();
    let cfg = OffloadBenchConfig::defaults(CompressSpec::new(Algorithm::Zstd, 1), 2);
    let report = offload::OffloadReport::new(
        wring_bench::machine::Machine::detect(),
        corpus.info(),
        &cfg,
        rows,
    );
    let md = report.markdown();
    assert!(md.contains("SIMULATED"), "{md}");
    assert!(md.contains("| 16 KiB | sim 5 µs, failing |"), "{md}");
    let csv = report.csv().expect("csv");
    assert_eq!(csv.lines().count(), 1 + report.rows.len());
    // Provider labels hold commas ("sim 5 µs, failing"): quoted, every record has every column
    // and reads back as the label the table shows.
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let columns = offload::CSV_HEADER.split(',').count();
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    assert_eq!(records.len(), report.rows.len());
    assert!(records.iter().all(|r| r.len() == columns), "{csv}");
    assert!(
        records.iter().any(|r| &r[1] == "sim 5 µs, failing"),
        "{csv}"
    );
    assert!(report.json().expect("json").contains("\"mismatches\": 0"));
}
