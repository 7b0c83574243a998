//! `wring bench recompress` on real btrfs (loop devices; root): a row per spec, the kernel's
//! figures where btrfs has the level and "n/a" where it has not; a file small enough to be
//! stored inline does not stop the run.
//!
//! Without root the test fails, unless `WRING_SKIP_ROOT=1` opts out (see
//! `wring_testing::require`).

use wring_bench::corpus::{Corpus, CorpusFile};
use wring_bench::recompress::{markdown, run};
use wring_engine::{CompressSpec, Policy};
use wring_testing::{require_root, samples};

#[test]
fn bench_produces_a_row_per_spec() {
    if !require_root("bench_produces_a_row_per_spec") {
        return;
    }
    let mut files: Vec<CorpusFile> = samples(3 << 20)
        .into_iter()
        .map(|s| CorpusFile {
            name: s.name,
            data: s.data,
        })
        .collect();
    // As the cut last file of a truncated sample can be: btrfs keeps it inline.
    files.push(CorpusFile {
        name: "tiny.txt".into(),
        data: b"a file small enough to be stored inline\n".to_vec(),
    });
    let corpus = Corpus::from_files("test samples", files);
    let specs: Vec<CompressSpec> = ["zstd:3", "zstd:19"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let rows = run(&corpus, 1, &specs, Policy::EarlyAbort, &mut |n| {
        println!("{n}")
    })
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows[0].kernel.is_some() && rows[0].kernel_ratio.is_some());
    assert!(rows[1].kernel.is_none(), "btrfs has no zstd:19");
    for r in &rows {
        assert!(
            r.wring_j1 > 0.0 && r.wring_j2 > 0.0 && r.wring_ratio > 1.0,
            "{r:?}"
        );
    }
    let table = markdown(&rows);
    print!("{table}");
    assert!(table.contains("| zstd:3 |") && table.contains("| zstd:19 |"));
}
