//! `wring bench blk` on a tiny input: wring's device (two algorithms), nbdkit's zstd memory disk
//! and the kernel's zram (needs root and zram: fails without them unless `WRING_SKIP_ROOT=1` or
//! `WRING_SKIP_ZRAM=1` opts out). Checks that every row comes out, read back equal, with its
//! comparisons, and that zram is reset afterwards; never a timing.

mod common;

use wring_bench::blk::{self, BlkConfig, BlkReport, Target};
use wring_bench::machine::Machine;
use wring_bench::progress::Progress;
use wring_testing::{require, Need};

use wring_testing::blk_plugin as plugin_path;

#[test]
fn bench_blk_on_a_tiny_input() {
    let zram = require(
        "bench_blk_on_a_tiny_input (its zram rows)",
        &[Need::Root, Need::Zram],
    );
    let corpus = common::corpus();
    let mut cfg = BlkConfig::new(plugin_path(), 2);
    cfg.wring = vec![
        "lz4".into(),
        "zstd:1+dict".into(),
        "zstd:1".into(),
        "zstd:1@16K".into(),
    ];
    cfg.repeat = 2;
    cfg.zram = if zram { vec!["lz4".into()] } else { Vec::new() };
    let rows = blk::run(&corpus, &cfg, &Progress::hidden()).expect("bench blk runs");

    // Four wring rows, the two-client scaling pair, nbdkit's two, and zram's.
    let expect = if zram { 9 } else { 8 };
    assert_eq!(rows.len(), expect, "{rows:#?}");
    let bytes = (corpus.bytes() as usize).next_multiple_of(4096) as u64;
    for r in &rows {
        assert_eq!(r.bytes, bytes, "{r:?}");
        assert!(r.write_mbps > 0.0 && r.read_mbps > 0.0, "{r:?}");
        assert!(r.mem_used_total > 0 && r.ratio > 0.0, "{r:?}");
    }
    let wring: Vec<_> = rows.iter().filter(|r| r.target == Target::Wring).collect();
    assert_eq!(wring.len(), 4);
    // The tiny corpus is mostly text: wring stores it in less than it is. (On a corpus this
    // small the arena's zspages — up to 8 pages per size class — can outweigh the savings of
    // a dictionary's wider spread of object sizes, so only the first row's ratio is checked.)
    assert!(wring[0].ratio > 1.0, "{:?}", wring[0]);
    for w in &wring {
        assert!(
            w.compr_data_size.is_some_and(|c| c > 0 && c < bytes),
            "{w:?}"
        );
        let k = w.vs_nbdkit.expect("wring rows are compared with nbdkit");
        assert!(k.write.is_some() && k.ratio.is_some(), "{k:?}");
        assert_eq!(w.vs_zram.is_some(), zram, "{w:?}");
    }
    assert!(rows.iter().any(|r| r.target == Target::NbdkitZstd));
    assert_eq!(wring[1].method, "zstd:1+dict");
    let pair: Vec<_> = rows
        .iter()
        .filter(|r| r.target == Target::WringClients)
        .collect();
    assert_eq!(pair.len(), 2, "{rows:#?}");
    assert_eq!(
        (pair[0].method.as_str(), pair[1].method.as_str()),
        ("lz4 1×1", "lz4 2×2")
    );
    assert!(
        pair.iter().all(|r| r.ratio > 1.0 && r.vs_zram.is_none()),
        "{pair:?}"
    );
    // A real device with 16 KiB slots: zstd sees four times the context per object, so it
    // holds the same input in fewer compressed bytes than the 4 KiB one.
    assert_eq!(wring[3].method, "zstd:1@16K");
    let (four, sixteen) = (wring[2].compr_data_size, wring[3].compr_data_size);
    assert!(
        sixteen.zip(four).is_some_and(|(s, f)| s < f),
        "{:?} {:?}",
        wring[2],
        wring[3]
    );
    let sparse = rows
        .iter()
        .find(|r| r.target == Target::NbdkitSparse)
        .expect("the sparse row");
    assert!(
        sparse.vs_zram.is_none() && sparse.vs_nbdkit.is_none(),
        "{sparse:?}"
    );
    if zram {
        let z = rows
            .iter()
            .find(|r| r.target == Target::Zram)
            .expect("zram row");
        assert!(z.compr_data_size.is_some_and(|c| c > 0), "{z:?}");
        assert_eq!(wring[0].vs_zram.map(|o| o.method), Some("zram lz4"));
        let initstate = std::fs::read_to_string("/sys/block/zram0/initstate").unwrap_or_default();
        assert_eq!(initstate.trim(), "0", "zram0 was not reset after the run");
    }

    // Every NBD row against the transport's ceiling, with its CPU per GB by phase.
    for r in rows.iter().filter(|r| r.target != Target::Zram) {
        let (w, rd) = r.of_ceiling.expect("NBD rows are set against the ceiling");
        assert!(w > 0.0 && rd > 0.0, "{r:?}");
        // The server's CPU is counted in clock ticks (10 ms): on this tiny input it may be 0.
        let c = r.cpu.expect("NBD rows have their CPU");
        assert!(c.server_write >= 0.0 && c.server_read >= 0.0, "{r:?}");
        assert!(c.client_write > 0.0 && c.client_read > 0.0, "{r:?}");
    }
    // The page path against the bare library, for the devices with zram's 4 KiB slots and no
    // dictionary: lz4 and zstd:1 (not zstd:1+dict nor zstd:1@16K).
    let pages = blk::page_overheads(&corpus, &cfg, 1, &Progress::hidden()).expect("pages");
    let methods: Vec<&str> = pages.iter().map(|p| p.method.as_str()).collect();
    assert_eq!(methods, ["lz4", "zstd:1"]);
    assert!(
        pages.iter().all(|p| p.pages > 0
            && p.compress > 0.0
            && p.decompress > 0.0
            && p.bare_compress_mbps > 0.0),
        "{pages:?}"
    );

    let mut report = BlkReport::new(Machine::detect(), corpus.info(), 2, rows);
    report.pages = pages;
    let scaling = report.scaling().expect("the scaling pair");
    assert!(scaling.0.is_some() && scaling.1.is_some(), "{scaling:?}");
    let md = report.markdown();
    assert!(
        md.contains("two clients on two streams") && md.contains("+dict"),
        "{md}"
    );
    assert!(
        md.contains("| wring | zstd:1@16K |") && md.contains("slot_size=16K"),
        "{md}"
    );
    assert!(
        md.contains("| wring | lz4 |") && md.contains("| nbdkit memory | zstd |"),
        "{md}"
    );
    assert!(
        md.contains("write / ceiling") && md.contains("| lz4 | ") && md.contains("bare compress"),
        "{md}"
    );
    // Three tables (devices, ceiling and CPU, the page path), each line with as many cells as
    // its header.
    let cells = |l: &str| l.matches('|').count();
    let tables: Vec<Vec<&str>> = md
        .split("\n\n")
        .map(|block| block.lines().filter(|l| l.starts_with('|')).collect())
        .filter(|t: &Vec<&str>| !t.is_empty())
        .collect();
    assert_eq!(tables.len(), 3, "{md}");
    for t in &tables {
        assert!(t.iter().all(|l| cells(l) == cells(t[0])), "{md}");
    }
    let csv = report.csv().expect("csv");
    assert_eq!(csv.lines().count(), expect + 1, "{csv}");
    assert!(csv.starts_with(blk::CSV_HEADER));
    let json: serde_json::Value =
        serde_json::from_str(&report.json().expect("json")).expect("parses");
    assert_eq!(json["rows"].as_array().map(Vec::len), Some(expect));
}
