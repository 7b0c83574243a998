//! The arithmetic every table rests on; nothing here is timed.

use wring_bench::metrics::{
    mb_per_s, median, overhead, quotient, ratio, round_up_block, speedup, spread, Stored, Versus,
};

#[test]
fn block_rounding() {
    assert_eq!(round_up_block(0), 0);
    assert_eq!(round_up_block(1), 4096);
    assert_eq!(round_up_block(4096), 4096);
    assert_eq!(round_up_block(4097), 8192);
    assert_eq!(round_up_block(128 * 1024), 128 * 1024);
}

#[test]
fn ratios() {
    assert_eq!(ratio(0, 0), 0.0);
    assert_eq!(ratio(100, 0), f64::INFINITY);
    assert_eq!(ratio(300, 100), 3.0);
    assert!((ratio(1000, 3000) - 1.0 / 3.0).abs() < 1e-12);
}

#[test]
fn throughput_is_decimal_megabytes_per_second() {
    assert_eq!(mb_per_s(2_000_000, 1.0), 2.0);
    assert_eq!(mb_per_s(500_000_000, 2.5), 200.0);
    assert_eq!(mb_per_s(1, 0.0), 0.0);
}

#[test]
fn overhead_and_speedup() {
    assert_eq!(overhead(1.1, 1.0), 1.1);
    assert_eq!(overhead(0.5, 1.0), 0.5);
    assert_eq!(overhead(1.0, 0.0), 0.0);
    assert_eq!(speedup(300.0, 150.0), 2.0);
    assert_eq!(speedup(300.0, 0.0), 0.0);
    assert_eq!(quotient(3.0, 2.0), Some(1.5));
    assert_eq!(quotient(3.0, 0.0), None);
    assert_eq!(quotient(f64::INFINITY, 2.0), None);
    let v = Versus::of([2.0, 100.0, 50.0], [1.0, 200.0, 0.0]);
    assert_eq!(v.ratio, Some(2.0));
    assert_eq!(v.compress, Some(0.5));
    assert_eq!(v.decompress, None);
}

#[test]
fn stored_rounds_each_extent_and_counts_raw_ones_at_their_size() {
    let mut s = Stored::default();
    // A 128 KiB extent compressed to 10000 bytes takes 3 blocks.
    s.add(128 * 1024, Some(10_000));
    // An incompressible 5000-byte extent is stored raw: 2 blocks, 5000 bytes unrounded.
    s.add(5000, None);
    assert_eq!(s.extents, 2);
    assert_eq!(s.incompressible, 1);
    assert_eq!(s.input, 128 * 1024 + 5000);
    assert_eq!(s.stored, 3 * 4096 + 2 * 4096);
    assert_eq!(s.stored_unrounded, 15_000);
    assert!((s.ratio() - (136_072.0 / 20_480.0)).abs() < 1e-9);
    assert!((s.ratio_unrounded() - (136_072.0 / 15_000.0)).abs() < 1e-9);

    let mut t = Stored::default();
    t.add(4096, Some(100));
    t.merge(&s);
    assert_eq!(t.extents, 3);
    assert_eq!(t.stored, s.stored + 4096);
    assert_eq!(t.stored_unrounded, s.stored_unrounded + 100);
}

#[test]
fn median_of_odd_even_and_empty() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    assert!(median(&[]).is_nan());
}

#[test]
fn spread_is_half_the_range_over_the_median() {
    // Median 100, range 96..104: ±4%.
    assert!((spread(&[104.0, 100.0, 96.0]) - 0.04).abs() < 1e-12);
    assert_eq!(spread(&[5.0, 5.0, 5.0]), 0.0);
    // One pass says nothing about spread; nor do nonsense figures.
    assert_eq!(spread(&[7.0]), 0.0);
    assert_eq!(spread(&[]), 0.0);
    assert_eq!(spread(&[0.0, 0.0, 1.0]), 0.0);
}
