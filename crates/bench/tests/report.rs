//! The shapes of the markdown, JSON and CSV renderings, and the PNG plot, on the tiny corpus.

mod common;

use wring_bench::kernel::{KernelFigures, KernelRow, ReadMethod};
use wring_bench::levels::{self, parse_specs, LevelRow, LevelsConfig};
use wring_bench::machine::Machine;
use wring_bench::metrics::{Stored, Versus};
use wring_bench::plot;
use wring_bench::progress::Progress;
use wring_bench::report::{Report, CSV_HEADER};
use wring_bench::zram::{ZramFigures, ZramRow};

fn level_rows() -> Vec<LevelRow> {
    let corpus = common::corpus();
    let specs = parse_specs(&[], Some("zstd:1,zstd:3,zlib:1,lzo,lz4")).unwrap();
    levels::run(
        &corpus,
        &LevelsConfig::new(specs, 2),
        &Progress::hidden(),
        None,
    )
    .expect("run")
}

fn zram_figures(ratio: f64, mbps: f64) -> ZramFigures {
    ZramFigures {
        pages: 10,
        orig_bytes: 40960,
        compr_bytes: (40960.0 / ratio) as u64,
        mem_used_bytes: None,
        same_pages: 1,
        huge_pages: 2,
        ratio,
        write_secs: 1.0,
        read_secs: 0.5,
        write_mbps: mbps,
        read_mbps: 2.0 * mbps,
        threads: 2,
    }
}

/// A report with every kind of row: engine levels, btrfs (one method the kernel lacks) and zram.
fn full_report() -> Report {
    let rows = level_rows();
    let corpus = common::corpus();
    let mut r = Report::new("kernel", Machine::detect(), corpus.info(), 2);
    let mut stored = Stored::default();
    stored.add(128 * 1024, Some(40_000));
    let kernel = KernelFigures {
        options: "compress-force=zstd:1".into(),
        copies: 1,
        stored,
        ratio: stored.ratio(),
        ratio_unrounded: stored.ratio_unrounded(),
        write_secs: 1.0,
        read_secs: 0.5,
        compress_mbps: 100.0,
        decompress_mbps: 300.0,
        read_method: ReadMethod::Tar,
    };
    let zstd = rows.iter().find(|r| r.spec == "zstd:1").unwrap().clone();
    let lz4 = rows.iter().find(|r| r.spec == "lz4").unwrap().clone();
    r.btrfs = vec![
        KernelRow {
            spec: "zstd:1".into(),
            wring_over_kernel: Some(Versus::of(
                [zstd.ratio, zstd.compress_mbps, zstd.decompress_mbps],
                [kernel.ratio, kernel.compress_mbps, kernel.decompress_mbps],
            )),
            wring: zstd,
            kernel: Some(kernel),
            kernel_note: None,
        },
        KernelRow {
            spec: "lz4".into(),
            wring: lz4,
            kernel: None,
            kernel_note: Some("btrfs has no lz4".into()),
            wring_over_kernel: None,
        },
    ];
    r.zram = vec![ZramRow {
        algorithm: "lzo-rle".into(),
        wring_codec: Some("wring-lzo".into()),
        kernel: Some(zram_figures(2.0, 150.0)),
        kernel_note: None,
        wring: Some(zram_figures(2.1, 200.0)),
        wring_over_kernel: Some(Versus::of([2.1, 200.0, 400.0], [2.0, 150.0, 300.0])),
    }];
    r.levels = rows;
    r
}

#[test]
fn markdown_names_machine_corpus_and_every_row() {
    let r = full_report();
    let md = r.markdown();
    assert!(md.contains("machine: "), "{md}");
    assert!(md.contains(&r.corpus.list_sha256));
    assert!(md.contains(&format!("{} bytes", r.corpus.bytes)));
    for spec in ["zstd:1", "zstd:3", "zlib:1", "lzo", "lz4"] {
        assert!(md.contains(&format!("| {spec} |")), "{spec} missing:\n{md}");
    }
    assert!(md.contains("n/a (btrfs has no lz4)"));
    assert!(md.contains("| lzo-rle | wring-lzo |"));
    // Every table line of a table has as many cells as its header.
    for table in md.split("\n\n").filter(|t| t.starts_with('|')) {
        let counts: Vec<usize> = table.lines().map(|l| l.matches('|').count()).collect();
        assert!(counts.windows(2).all(|w| w[0] == w[1]), "{table}");
    }
}

#[test]
fn json_holds_everything_with_derived_figures() {
    let r = full_report();
    let v: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
    for key in [
        "tool", "command", "machine", "corpus", "levels", "btrfs", "zram", "notes",
    ] {
        assert!(v.get(key).is_some(), "{key}");
    }
    assert!(v["machine"]["cpu_model"].is_string());
    assert_eq!(v["corpus"]["bytes"].as_u64(), Some(r.corpus.bytes));
    let first = &v["levels"][0];
    for key in [
        "spec",
        "algorithm",
        "level",
        "ratio",
        "ratio_unrounded",
        "compress_mbps",
        "decompress_mbps",
        "workspace_kb",
        "stored",
        "bare",
    ] {
        assert!(first.get(key).is_some(), "levels[0].{key}");
    }
    assert!(first["bare"]["compress_overhead"].is_number());
    assert_eq!(v["levels"].as_array().unwrap().len(), 5);
    assert!(v["btrfs"][0]["kernel"]["ratio"].is_number());
    assert!(v["btrfs"][1]["kernel"].is_null());
    assert_eq!(v["btrfs"][0]["kernel"]["read_method"], "tar");
    assert!(v["zram"][0]["wring_over_kernel"]["compress"].is_number());
}

#[test]
fn csv_is_one_long_table() {
    let r = full_report();
    let csv = r.csv().expect("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], CSV_HEADER);
    let columns = CSV_HEADER.split(',').count();
    assert!(
        lines.iter().all(|l| l.split(',').count() == columns),
        "{csv}"
    );
    let count = |table: &str, source: &str| {
        lines
            .iter()
            .filter(|l| l.starts_with(&format!("{table},{source},")))
            .count()
    };
    // Five level rows, each with its bare twin.
    assert_eq!(count("levels", "wring"), 5);
    assert_eq!(count("levels", "wring-bare"), 5);
    // btrfs: two wring rows (bare timing included), one kernel row.
    assert_eq!(count("btrfs", "wring"), 2);
    assert_eq!(count("btrfs", "kernel"), 1);
    assert_eq!(count("zram", "kernel"), 1);
    assert_eq!(count("zram", "wring"), 1);
    let zstd = lines
        .iter()
        .find(|l| l.starts_with("levels,wring,zstd:1,"))
        .unwrap();
    let cells: Vec<&str> = zstd.split(',').collect();
    assert_eq!(cells[3], "1");
    let ratio: f64 = cells[9].parse().unwrap();
    assert!(ratio > 1.0);
}

#[test]
fn the_plot_is_a_png() {
    let dir = common::TempDir::new("plot");
    let r = full_report();
    for (labels, name) in [(true, "with.png"), (false, "without.png")] {
        let path = dir.path().join(name);
        let outcome = plot::draw(&r, &path, labels && plot::find_font().is_some()).expect("plot");
        assert_eq!(outcome.path, path);
        let bytes = std::fs::read(&path).expect("png written");
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(bytes.len() > 5_000, "{} bytes", bytes.len());
    }
    // One line per algorithm, kernel and zram points beside them.
    let series = plot::series(&r);
    let engine_lines = series
        .iter()
        .filter(|s| s.kind == plot::SeriesKind::EngineLine)
        .count();
    assert_eq!(engine_lines, 4);
    let zstd = series.iter().find(|s| s.label == "wring zstd").unwrap();
    assert_eq!(zstd.points.len(), 2);
    assert!(series
        .iter()
        .any(|s| s.kind == plot::SeriesKind::KernelBtrfs));
    assert!(series
        .iter()
        .any(|s| s.kind == plot::SeriesKind::KernelZram));
    assert!(series
        .iter()
        .any(|s| s.kind == plot::SeriesKind::WringPages));
}
