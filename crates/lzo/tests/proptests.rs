//! Property tests: raw and framed round trips, and decoders that never panic
//! and never claim more output than the buffer holds, on arbitrary or
//! damaged input.

use proptest::prelude::*;
use wring_lzo::{btrfs, compress, decompress, worst_compress, CompressState};

const SECTOR: usize = 4096;

/// Inputs that compress well (small alphabet, repeats) or not at all.
fn input(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..max),
        prop::collection::vec(0u8..4, 0..max),
        (prop::collection::vec(any::<u8>(), 1..64), 0..max)
            .prop_map(|(pat, n)| { pat.iter().copied().cycle().take(n).collect() }),
    ]
}

fn packed(src: &[u8]) -> Vec<u8> {
    let mut dst = vec![0; worst_compress(src.len())];
    let n = compress(src, &mut dst, &mut CompressState::new()).unwrap();
    dst.truncate(n);
    dst
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn raw_round_trip(src in input(20_000)) {
        let p = packed(&src);
        prop_assert!(p.len() <= worst_compress(src.len()));
        let mut out = vec![0; src.len()];
        prop_assert_eq!(decompress(&p, &mut out), Ok(src.len()));
        prop_assert_eq!(out, src);
    }

    #[test]
    fn small_dst_is_an_error_not_a_panic(src in input(3000), cut in 0usize..3000) {
        let p = packed(&src);
        let mut dst = vec![0; cut.min(p.len())];
        let r = compress(&src, &mut dst, &mut CompressState::new());
        if dst.len() < p.len() {
            prop_assert_eq!(r, Err(wring_lzo::Error::OutputOverrun));
        } else {
            prop_assert_eq!(r, Ok(p.len()));
        }
    }

    #[test]
    fn framed_round_trip(src in input(40_000)) {
        let mut dst = vec![0; worst_compress(src.len()) + 4 * (src.len() / SECTOR + 2)];
        let r = btrfs::compress_extent(&src, &mut dst, SECTOR, &mut CompressState::new());
        if let Some(n) = r.unwrap() {
            let mut out = vec![0; src.len()];
            prop_assert_eq!(btrfs::decompress_extent(&dst[..n], &mut out, SECTOR), Ok(src.len()));
            prop_assert_eq!(out, src);
        } else {
            // Only the kernel's "growing" bail-out may refuse with this much room.
            prop_assert!(src.len() > 2 * SECTOR);
        }
    }

    #[test]
    fn decompress_arbitrary_bytes_is_bounded(src in prop::collection::vec(any::<u8>(), 0..2000), cap in 0usize..5000) {
        let mut dst = vec![0; cap];
        if let Ok(n) = decompress(&src, &mut dst) {
            prop_assert!(n <= cap);
        }
    }

    #[test]
    fn decompress_extent_arbitrary_bytes_is_bounded(src in prop::collection::vec(any::<u8>(), 0..9000), cap in 0usize..20_000) {
        let mut dst = vec![0; cap];
        if let Ok(n) = btrfs::decompress_extent(&src, &mut dst, SECTOR) {
            prop_assert!(n <= cap);
        }
        let _ = btrfs::decompress_inline(&src, &mut dst, SECTOR);
    }

    #[test]
    fn damaged_streams_are_bounded(src in input(8000), flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6), cut in any::<prop::sample::Index>()) {
        let mut p = packed(&src);
        for (i, bit) in flips {
            let i = i.index(p.len());
            p[i] ^= 1 << bit;
        }
        let cut = cut.index(p.len() + 1);
        let mut dst = vec![0; src.len() + 64];
        if let Ok(n) = decompress(&p[..cut], &mut dst) {
            prop_assert!(n <= dst.len());
        }
    }

    #[test]
    fn damaged_extents_are_bounded(src in input(20_000), flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6)) {
        let mut dst = vec![0; worst_compress(src.len()) + 4 * (src.len() / SECTOR + 2)];
        let Some(n) = btrfs::compress_extent(&src, &mut dst, SECTOR, &mut CompressState::new()).unwrap() else {
            return Ok(());
        };
        let mut framed = dst[..n].to_vec();
        for (i, bit) in flips {
            let i = i.index(framed.len());
            framed[i] ^= 1 << bit;
        }
        let mut out = vec![0; src.len()];
        if let Ok(got) = btrfs::decompress_extent(&framed, &mut out, SECTOR) {
            prop_assert!(got <= src.len());
        }
    }
}
