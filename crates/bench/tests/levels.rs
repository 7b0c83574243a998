//! A levels run on the tiny corpus: rows, their stored sizes against each extent compressed
//! alone, and the level-list parser.
//! Speeds are only checked for being positive; no timing is asserted.

mod common;

use wring_bench::levels::{self, parse_range, parse_specs, LevelsConfig, MAX_PASSES};
use wring_bench::progress::Progress;
use wring_engine::{Algorithm, CompressSpec};

fn specs(list: &str) -> Vec<String> {
    parse_specs(&[], Some(list))
        .expect(list)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn level_lists() {
    assert_eq!(parse_range("3").unwrap(), vec![3]);
    assert_eq!(parse_range("-5").unwrap(), vec![-5]);
    assert_eq!(parse_range("1..3").unwrap(), vec![1, 2, 3]);
    assert_eq!(parse_range("1-3").unwrap(), vec![1, 2, 3]);
    assert_eq!(parse_range("-3..-1").unwrap(), vec![-3, -2, -1]);
    assert!(parse_range("3..1").is_err());
    assert!(parse_range("fast").is_err());

    assert_eq!(
        specs("zstd:-5,zstd:1..3,zlib:9,lzo,lz4,lz4hc:9"),
        vec!["zstd:-5", "zstd:1", "zstd:2", "zstd:3", "zlib:9", "lzo", "lz4", "lz4hc:9"]
    );
    // A bare level applies to every algorithm that has it; level-less ones appear once.
    let only = parse_specs(&[Algorithm::Zlib, Algorithm::Lzo], Some("-5,1,12")).unwrap();
    let only: Vec<String> = only.iter().map(ToString::to_string).collect();
    assert_eq!(only, vec!["lzo", "zlib:1"]);
    // Duplicates go.
    assert_eq!(specs("zstd:3,zstd:3,zstd:2..3"), vec!["zstd:3", "zstd:2"]);
    // An explicit out-of-range level is an error, not a silent clamp.
    assert!(parse_specs(&[], Some("zlib:12")).is_err());
    assert!(parse_specs(&[], Some("brotli:3")).is_err());
    // The default list, filtered by algorithm.
    let default = parse_specs(&[Algorithm::Zstd], None).unwrap();
    assert_eq!(default.len(), 17);
    assert_eq!(default[0], CompressSpec::new(Algorithm::Zstd, -5));
    assert_eq!(default[16], CompressSpec::new(Algorithm::Zstd, 19));
    assert_eq!(parse_specs(&[], None).unwrap().len(), 17 + 9 + 3);
}

#[test]
fn rows_on_the_tiny_corpus() {
    let corpus = common::corpus();
    let specs = parse_specs(&[], Some("zstd:1,zstd:19,zlib:6,lzo,lz4,lz4hc:9")).unwrap();
    let mut cfg = LevelsConfig::new(specs.clone(), 2);
    cfg.passes = 2;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("levels run");
    assert_eq!(rows.len(), specs.len());
    for (row, spec) in rows.iter().zip(&specs) {
        assert_eq!(row.spec, spec.to_string());
        assert_eq!(row.stored.input, corpus.bytes());
        assert_eq!(row.stored.extents, 10);
        // The 1000-byte file and the random one never save a block.
        assert!(row.stored.incompressible >= 3, "{row:?}");
        assert_eq!(row.stored.stored % 4096, 0);
        assert!(row.stored.stored >= row.stored.stored_unrounded);
        assert!(
            row.ratio > 1.0 && row.ratio <= row.ratio_unrounded,
            "{row:?}"
        );
        // The stored size and ratio match what each extent compressed alone gives.
        let (stored, raw) = common::stored_by_hand(*spec);
        assert_eq!(
            (row.stored.stored, row.stored.incompressible),
            (stored, raw),
            "{spec}"
        );
        assert_eq!(row.ratio, corpus.bytes() as f64 / stored as f64, "{spec}");
        assert!(row.compress_mbps > 0.0 && row.decompress_mbps > 0.0);
        assert!(row.workspace_kb > row.codec_kb && row.codec_kb > 0);
        let bare = row.bare.expect("bare timing");
        assert!(bare.compress_mbps > 0.0 && bare.decompress_mbps > 0.0);
        assert!(bare.compress_overhead > 0.0 && bare.compress_overhead.is_finite());
        assert!(bare.decompress_overhead > 0.0 && bare.decompress_overhead.is_finite());
        // Exactly the passes asked for (no budget), and spreads that are figures.
        assert_eq!(row.passes, 2);
        for s in [
            row.compress_spread,
            row.decompress_spread,
            bare.compress_overhead_spread,
            bare.decompress_overhead_spread,
        ] {
            assert!(s.is_finite() && s >= 0.0, "{row:?}");
        }
    }
    let by = |s: &str| rows.iter().find(|r| r.spec == s).expect(s);
    assert!(by("zstd:19").ratio >= by("zstd:1").ratio);
    assert!(by("zstd:19").workspace_kb >= by("zstd:1").workspace_kb);
    assert!(by("lzo").in_btrfs && !by("lz4").in_btrfs && !by("zstd:19").in_btrfs);
}

#[test]
fn without_bare_timing_there_are_no_bare_figures() {
    let corpus = common::corpus().truncated(256 * 1024);
    let mut cfg = LevelsConfig::new(vec![CompressSpec::new(Algorithm::Zstd, 3)], 1);
    cfg.bare = false;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("run");
    assert!(rows[0].bare.is_none());
    assert_eq!(rows[0].streams, 1);
}

#[test]
fn a_pass_budget_gives_fast_levels_more_passes_up_to_the_cap() {
    let corpus = common::corpus().truncated(256 * 1024);
    let mut cfg = LevelsConfig::new(vec![CompressSpec::default_for(Algorithm::Lz4)], 1);
    cfg.passes = 2;
    // Far more time than 256 KiB of lz4 takes: the cap ends it, not the budget.
    cfg.pass_budget = 60.0;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("run");
    assert_eq!(rows[0].passes, MAX_PASSES);
    assert!(rows[0].compress_mbps > 0.0);
}

/// Engine and bare alternate which goes first, so a repeated level's passes come in pairs;
/// without bare timing the count is what was asked.
#[test]
fn with_bare_timing_passes_come_in_pairs() {
    let corpus = common::corpus().truncated(256 * 1024);
    let mut cfg = LevelsConfig::new(vec![CompressSpec::new(Algorithm::Zstd, 1)], 1);
    cfg.passes = 3;
    cfg.pass_budget = 0.0;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("run");
    assert_eq!(rows[0].passes, 4);
    assert!(rows[0].bare.is_some_and(|b| b.compress_overhead > 0.0));
    cfg.bare = false;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("run");
    assert_eq!(rows[0].passes, 3);
}

#[test]
fn a_slow_level_stops_at_two_passes_and_short_decompressions_repeat() {
    let corpus = common::corpus().truncated(256 * 1024);
    let mut cfg = LevelsConfig::new(vec![CompressSpec::new(Algorithm::Zstd, 3)], 1);
    cfg.passes = 3;
    // Every pass is "slow" here: the third is skipped, never the second.
    cfg.slow_after = 1e-9;
    cfg.min_phase = 0.05;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("run");
    assert_eq!(rows[0].passes, 2);
    assert!(rows[0].decompress_mbps > 0.0);
    assert!(rows[0]
        .bare
        .as_ref()
        .is_some_and(|b| b.decompress_mbps > 0.0));
    // Without the stop, every pass the config asks for, made even (engine and bare take
    // turns going first).
    cfg.slow_after = 0.0;
    let rows = levels::run(&corpus, &cfg, &Progress::hidden(), None).expect("run");
    assert_eq!(rows[0].passes, 4);
}

#[test]
fn zrams_algorithms_are_levels_like_every_other() {
    // In the engine's codec table, lzo-rle and raw deflate are measured like the others when
    // named (the default list stays as it was) and by a bare level or range.
    assert_eq!(
        specs("lzo-rle,deflate:1..2"),
        vec!["lzo-rle", "deflate:1", "deflate:2"]
    );
    let only = parse_specs(&[Algorithm::LzoRle, Algorithm::Deflate], Some("1,9")).unwrap();
    let only: Vec<String> = only.iter().map(ToString::to_string).collect();
    assert_eq!(only, vec!["lzo-rle", "deflate:1", "deflate:9"]);
    assert!(parse_specs(&[], Some("deflate:12")).is_err());
    let corpus = common::corpus().truncated(512 * 1024);
    let specs = parse_specs(&[], Some("lzo-rle,deflate:6")).unwrap();
    let rows = levels::run(
        &corpus,
        &LevelsConfig::new(specs, 1),
        &Progress::hidden(),
        None,
    )
    .expect("levels run");
    for row in &rows {
        assert!(row.ratio > 1.0 && !row.in_btrfs, "{row:?}");
        assert!(
            row.workspace_kb > row.codec_kb && row.codec_kb > 0,
            "{row:?}"
        );
        assert!(row.bare.is_some(), "{row:?}");
    }
}
