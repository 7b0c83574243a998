//! `wring bench fs` through its library function, mounting with this binary: a tiny corpus
//! and one method must give every row (no timing assertions); the full run is an ignored
//! test taking WRING_CORPUS. Here, not in wring-fs's tests: wring-bench depends on wring-fs.

use std::path::PathBuf;

use wring_bench::fs::{self as bench, Config, Launcher};
use wring_testing::{require_root, samples, Need};

fn config(corpus: PathBuf, work: PathBuf, methods: &[&str]) -> Config {
    Config {
        corpus,
        copies: 1,
        methods: methods.iter().map(|m| m.to_string()).collect(),
        max_extent: 128 << 10,
        extent_method: "zstd:3".into(),
        big_extent: Some(1 << 20),
        random_reads: 2000,
        kernel: true,
        launcher: Launcher::Cli(env!("CARGO_BIN_EXE_wring").into()),
        wring_options: String::new(),
        work,
        repeat: 1,
        objects: None,
    }
}

/// A few MB in `base/corpus`: the tests' samples (slices of the shared corpus, or files
/// every Debian machine has), at most 1 MiB each.
fn tiny_corpus(base: &std::path::Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(base);
    let src = base.join("corpus");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (n, s) in samples(4 << 20).iter().enumerate() {
        let end = s.data.len().min(1 << 20);
        std::fs::write(src.join("sub").join(format!("f{n}")), &s.data[..end]).unwrap();
    }
    src
}

#[test]
fn bench_fs_tiny_corpus() {
    if !require_root("bench_fs_tiny_corpus") {
        return;
    }
    let base = PathBuf::from(format!("/tmp/wring-bench-fs-test-{}", std::process::id()));
    let src = tiny_corpus(&base);
    let mut cfg = config(src, base.join("work"), &["zstd:1"]);
    cfg.extent_method = "zstd:1".into();
    cfg.random_reads = 50;
    let report = bench::run(&cfg);
    let _ = std::fs::remove_dir_all(&base);
    let report = report.unwrap();
    let table = report.render();
    eprintln!("{table}");
    assert_eq!(report.rows.len(), 1);
    let row = &report.rows[0];
    assert_eq!(row.method, "zstd:1");
    let k = row.kernel.as_ref().expect("kernel row");
    for r in [&row.wring, k] {
        assert!(r.bytes > 2 << 20 && r.stored > 0 && r.uncompressed >= r.bytes / 2);
        assert!(r.ratio() > 1.0, "{r:?}");
        assert_eq!(r.latency.map(|l| l.reads), Some(50));
    }
    let e = report.extent.as_ref().expect("extent comparison");
    assert_eq!((e.small.0, e.big.0), (128 << 10, 1 << 20));
    assert!(e.big.1.latency.is_some() && e.big.1.ratio() > 1.0);
    assert!(
        table.contains("| zstd:1 |") && table.contains("| wring | 1M |"),
        "{table}"
    );
}

/// `--data seaweed`: the run on a store in a SeaweedFS started for it gives its row (bytes in
/// the bucket, requests both ways) and its table, and the SeaweedFS is stopped with nothing
/// left (the benchmark checks that itself).
#[test]
fn bench_fs_in_a_bucket() {
    if !wring_testing::require("bench_fs_in_a_bucket", &[Need::Root, Need::Seaweed]) {
        return;
    }
    let base = PathBuf::from(format!("/tmp/wring-bench-fs-s3-{}", std::process::id()));
    let src = tiny_corpus(&base);
    let mut cfg = config(src, base.join("work"), &["zstd:1"]);
    (cfg.kernel, cfg.big_extent) = (false, None);
    cfg.objects = Some(bench::Objects::Seaweed);
    let report = bench::run(&cfg);
    let _ = std::fs::remove_dir_all(&base);
    let report = report.unwrap();
    let table = report.render();
    eprintln!("{table}");
    let row = &report.rows[0];
    let o = row.objects.as_ref().expect("the bucket's run");
    assert_eq!(o.run.bytes, row.wring.bytes);
    assert!(o.run.ratio() > 1.0 && o.bucket_ratio() > 1.0, "{o:?}");
    assert!(o.puts > 0 && o.gets > 0, "{o:?}");
    assert!(o.server_cpu > 0.0 && o.run.write_cpu > 0.0 && row.wring.write_cpu > 0.0);
    assert!(o.run.write > std::time::Duration::ZERO && o.run.read > std::time::Duration::ZERO);
    assert!(
        table.contains("wring with its extents in a bucket"),
        "{table}"
    );
}

/// The full benchmark: `WRING_CORPUS=/tmp/wring-corpus cargo test --release -p wring
/// --test bench_fs -- --ignored --nocapture` (WRING_METHODS, WRING_COPIES optional).
#[test]
#[ignore]
fn bench_fs_full() {
    if !require_root("bench_fs_full") {
        return;
    }
    let corpus = PathBuf::from(std::env::var_os("WRING_CORPUS").expect("set WRING_CORPUS"));
    let methods = std::env::var("WRING_METHODS").unwrap_or("lzo,zstd:1,zstd:3,zlib:3".into());
    let methods: Vec<&str> = methods.split(',').collect();
    let work = PathBuf::from(format!("/tmp/wring-bench-fs-{}", std::process::id()));
    let mut cfg = config(corpus, work.clone(), &methods);
    if let Some(k) = std::env::var("WRING_COPIES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.copies = k;
    }
    let report = bench::run(&cfg);
    let _ = std::fs::remove_dir_all(&work);
    println!("{}", report.unwrap().render());
}
