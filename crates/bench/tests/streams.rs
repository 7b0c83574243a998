//! seed 002's experiment on the tiny corpus: the shape of the rows, never their speed.

mod common;

use wring_bench::progress::Progress;
use wring_bench::streams::{self, default_limits, StreamsConfig};
use wring_engine::{Algorithm, CompressSpec};

#[test]
fn limits_go_up_to_the_parallelism() {
    assert_eq!(default_limits(1), vec![1]);
    assert_eq!(default_limits(2), vec![1, 2]);
    assert_eq!(default_limits(8), (1..=8).collect::<Vec<_>>());
    assert_eq!(default_limits(12), vec![1, 2, 3, 4, 5, 6, 7, 8, 12]);
    assert_eq!(default_limits(64), vec![1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64]);
}

#[test]
fn rows_for_every_writer_count_and_limit() {
    let corpus = common::corpus();
    let cfg = StreamsConfig {
        specs: vec![
            CompressSpec::default_for(Algorithm::Lzo),
            CompressSpec::new(Algorithm::Zstd, 3),
        ],
        writers: vec![1, 3],
        limits: vec![1, 2],
        repeat: 1,
    };
    let rows = streams::run(&corpus, &cfg, &Progress::hidden()).expect("run");
    assert_eq!(rows.len(), 2 * 2 * 2);
    for r in &rows {
        assert_eq!(r.bytes, corpus.bytes() * r.writers as u64);
        assert!(r.mbps > 0.0);
        // The ratio is what each extent compressed alone gives.
        let spec = cfg
            .specs
            .iter()
            .find(|s| s.to_string() == r.spec)
            .expect("spec");
        let (stored, _) = common::stored_by_hand(*spec);
        assert_eq!(r.ratio, corpus.bytes() as f64 / stored as f64, "{r:?}");
        if r.streams == 1 {
            assert_eq!(r.speedup, 1.0);
        }
        // One writer never waits for a stream.
        if r.writers == 1 {
            assert_eq!(r.waits, 0);
        }
    }
    let zstd: Vec<_> = rows.iter().filter(|r| r.spec == "zstd:3").collect();
    assert_eq!(zstd.len(), 4);
    assert!(zstd
        .iter()
        .all(|r| r.speedup > 0.0 && r.speedup.is_finite()));
}
