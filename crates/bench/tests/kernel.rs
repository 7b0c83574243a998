//! `wring bench kernel` against the real kernel on a small corpus slice: one copy, two btrfs
//! methods and zram's lzo. Needs root and zram: fails without them unless `WRING_SKIP_ROOT=1`
//! or `WRING_SKIP_ZRAM=1` opts out (see `wring_testing::require`).
//! Checks that the expected rows come out; never a timing.

mod common;

use wring_bench::corpus::Corpus;
use wring_bench::kernel::{self, parse_methods, KernelConfig, ReadMethod};
use wring_bench::machine::Machine;
use wring_bench::progress::Progress;
use wring_bench::report::Report;
use wring_bench::zram::{self, ZramConfig};
use wring_engine::{Algorithm, CompressSpec};
use wring_testing::{require, require_root, Need};

/// Up to 6 MiB of the shared corpus when WRING_CORPUS names it, else of the default sample:
/// 1 MiB from each of the first six files of at least 512 KiB (small files would be stored
/// inline by btrfs), or the generated tiny corpus when there are none.
fn slice() -> Corpus {
    let corpus = std::env::var_os("WRING_CORPUS")
        .map(|dir| {
            let dir = std::path::Path::new(&dir);
            Corpus::load(dir).unwrap_or_else(|e| panic!("WRING_CORPUS={}: {e}", dir.display()))
        })
        .or_else(|| Corpus::default_sample().ok())
        .unwrap_or_else(common::corpus);
    let files: Vec<_> = corpus
        .files
        .iter()
        .filter(|f| f.data.len() >= 512 * 1024)
        .take(6)
        .map(|f| wring_bench::corpus::CorpusFile {
            name: f.name.clone(),
            data: f.data[..f.data.len().min(1 << 20)].to_vec(),
        })
        .collect();
    if files.is_empty() {
        return common::corpus();
    }
    Corpus::from_files(format!("{} (slice)", corpus.source), files)
}

#[test]
fn kernel_options_and_methods() {
    assert_eq!(
        (CompressSpec::new(Algorithm::Zstd, 3))
            .btrfs_option()
            .unwrap(),
        "zstd:3"
    );
    assert_eq!(
        (CompressSpec::new(Algorithm::Zstd, -5))
            .btrfs_option()
            .unwrap(),
        "zstd:-5"
    );
    assert_eq!(
        (CompressSpec::default_for(Algorithm::Lzo))
            .btrfs_option()
            .unwrap(),
        "lzo"
    );
    assert_eq!(
        (CompressSpec::new(Algorithm::Zlib, 9))
            .btrfs_option()
            .unwrap(),
        "zlib:9"
    );
    assert!((CompressSpec::new(Algorithm::Zstd, 19))
        .btrfs_option()
        .is_err());
    assert!((CompressSpec::default_for(Algorithm::Lz4))
        .btrfs_option()
        .is_err());
    assert_eq!(parse_methods("lzo, zstd:1,lzo").unwrap().len(), 2);
    assert!(parse_methods("zstd:99").is_err());
    assert!(parse_methods("no").is_err());
    assert_eq!(kernel::image_size(1), 2 << 30);
    assert_eq!(kernel::image_size(1 << 30), 3 << 30);
}

#[test]
fn bench_kernel_on_a_small_slice() {
    if !require_root("bench_kernel_on_a_small_slice") {
        return;
    }
    let corpus = slice();
    let cfg = KernelConfig {
        methods: parse_methods("lzo,zstd:1,lz4").unwrap(),
        copies: 1,
        streams: 2,
        read: ReadMethod::Tar,
        bare: false,
        repeat: 1,
    };
    let progress = Progress::hidden();
    let mut report = Report::new("kernel", Machine::detect(), corpus.info(), 2);
    report.btrfs = kernel::run_btrfs(&corpus, &cfg, &progress).expect("btrfs part");
    assert_eq!(report.btrfs.len(), 3);
    for row in &report.btrfs[..2] {
        let k = row
            .kernel
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no kernel row", row.spec));
        assert_eq!(k.stored.input, corpus.bytes());
        assert!(
            k.ratio > 1.0 && k.compress_mbps > 0.0 && k.decompress_mbps > 0.0,
            "{}: {k:?}",
            row.spec
        );
        assert!(row.wring.ratio > 1.0);
        // The same method on the same extents: wring and the kernel store about as much.
        let v = row.wring_over_kernel.expect("comparison");
        let r = v.ratio.expect("ratio");
        assert!(
            (0.9..1.1).contains(&r),
            "{}: wring/kernel ratio {r}",
            row.spec
        );
    }
    assert!(report.btrfs[2].kernel.is_none());

    if require(
        "bench_kernel_on_a_small_slice (its zram part)",
        &[Need::Zram],
    ) {
        let mut zcfg = ZramConfig::new(2);
        zcfg.algorithms = vec!["lzo".into()];
        let (rows, huge) = zram::run(&corpus, &zcfg, &progress).expect("zram part");
        report.zram = rows;
        report.zram_huge_class = Some(huge);
        let z = &report.zram[0];
        let (k, w) = (
            z.kernel.as_ref().expect("kernel"),
            z.wring.as_ref().expect("wring"),
        );
        assert_eq!(k.orig_bytes, w.orig_bytes);
        assert!(k.ratio > 1.0 && w.ratio > 1.0);
        let initstate = std::fs::read_to_string("/sys/block/zram0/initstate").unwrap_or_default();
        assert_eq!(initstate.trim(), "0", "zram0 was not reset");
    }

    let md = report.markdown();
    for expected in ["| lzo |", "| zstd:1 |", "| lz4 |", "n/a (btrfs has no lz4)"] {
        assert!(md.contains(expected), "{expected} missing:\n{md}");
    }
    if !report.zram.is_empty() {
        assert!(md.contains("| lzo | wring-lzo"), "{md}");
    }
}
