//! Cross tests against liblzo2: our compressor's streams must decode with
//! `lzo1x_decompress_safe`, liblzo2's `lzo1x_1_compress` streams must decode
//! with ours, on random, repetitive, text-like and mixed data of many sizes.

mod common;

use common::{kinds, lzo2_compress, lzo2_decompress, Rng};
use wring_lzo::{btrfs, compress, decompress, worst_compress, CompressState};

/// Sizes 0..=131072: every size up to 300, powers of two and their
/// neighbours, and pseudo-random (mostly odd) sizes.
fn sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=300).collect();
    for p in 9..=17 {
        let n = 1usize << p;
        v.extend([n - 1, n, n + 1]);
    }
    let mut rng = Rng::new(42);
    v.extend((0..40).map(|_| rng.below(131_072) | 1));
    v.extend([4095, 4097, 12_345, 65_537, 99_999, 131_071, 131_072]);
    v.retain(|&n| n <= 131_072);
    v
}

fn ours(src: &[u8], state: &mut CompressState) -> Vec<u8> {
    let mut dst = vec![0; worst_compress(src.len())];
    let n = compress(src, &mut dst, state).unwrap();
    dst.truncate(n);
    dst
}

#[test]
fn our_streams_decode_with_liblzo2() {
    let mut state = CompressState::new();
    for (name, gen) in kinds() {
        for n in sizes() {
            let src = gen(n, n as u64);
            let packed = ours(&src, &mut state);
            assert!(
                packed.len() <= worst_compress(n),
                "{name} {n}: over worst case"
            );
            assert_eq!(
                &packed[packed.len() - 3..],
                &[0x11, 0, 0],
                "{name} {n}: end marker"
            );
            let back =
                lzo2_decompress(&packed, n).unwrap_or_else(|e| panic!("{name} {n}: lzo2 {e}"));
            assert!(back == src, "{name} {n}: lzo2 output differs");
        }
    }
}

#[test]
fn liblzo2_streams_decode_with_ours() {
    for (name, gen) in kinds() {
        for n in sizes() {
            let src = gen(n, n as u64 + 1);
            let packed = lzo2_compress(&src);
            let mut out = vec![0; n];
            let got = decompress(&packed, &mut out).unwrap_or_else(|e| panic!("{name} {n}: {e}"));
            assert_eq!(got, n, "{name} {n}");
            assert!(out == src, "{name} {n}: output differs");
            if n > 0 {
                // One byte short of room must be an error, not a panic.
                let mut short = vec![0; n - 1];
                assert!(
                    decompress(&packed, &mut short).is_err(),
                    "{name} {n}: short dst"
                );
            }
        }
    }
}

/// Our ratio should be in liblzo2's league (both are LZO1X-1).
#[test]
fn ratio_close_to_liblzo2() {
    let mut state = CompressState::new();
    for (name, gen) in kinds() {
        let src = gen(131_072, 9);
        let a = ours(&src, &mut state).len();
        let b = lzo2_compress(&src).len();
        assert!(a * 100 <= b * 110, "{name}: ours {a} vs liblzo2 {b}");
    }
}

/// Our decoder agrees with liblzo2 on every prefix of a valid stream: all are
/// errors (a strict prefix never ends in the end marker).
#[test]
fn truncated_liblzo2_streams_fail_in_both() {
    let src = common::mixed(20_000, 3);
    let packed = lzo2_compress(&src);
    let mut out = vec![0; src.len()];
    for cut in 0..packed.len() {
        assert!(decompress(&packed[..cut], &mut out).is_err(), "cut {cut}");
        assert!(
            lzo2_decompress(&packed[..cut], src.len()).is_err(),
            "lzo2 cut {cut}"
        );
    }
}

/// Flip single bits in a valid stream; when ours succeeds liblzo2 must too,
/// with the same bytes (ours is stricter only where the kernel is: an end
/// marker with a wrong length, and a first byte of 17 announcing a version).
#[test]
fn bit_flips_agree_with_liblzo2() {
    let src = common::mixed(6000, 4);
    let packed = lzo2_compress(&src);
    let cap = src.len() + 100;
    let mut out = vec![0; cap];
    let mut both_ok = 0;
    for i in 0..packed.len() {
        for bit in 0..8 {
            let mut bad = packed.clone();
            bad[i] ^= 1 << bit;
            let theirs = lzo2_decompress(&bad, cap);
            match decompress(&bad, &mut out) {
                Ok(n) => {
                    assert!(n <= cap);
                    if bad[0] != 17 {
                        let t = theirs.unwrap_or_else(|e| panic!("byte {i} bit {bit}: lzo2 {e}"));
                        assert!(t == out[..n], "byte {i} bit {bit}: outputs differ");
                        both_ok += 1;
                    }
                }
                Err(_) => {
                    if let Ok(t) = theirs {
                        // Only allowed where the kernel is stricter than liblzo2.
                        let tail = &bad[bad.len() - 3..];
                        assert!(bad[0] == 17 || tail[0] != 0x11, "byte {i} bit {bit}: {t:?}");
                    }
                }
            }
        }
    }
    assert!(both_ok > 0, "no flip decoded: the test would be vacuous");
}

/// Long repeats at near and far distances (M3 up to 16 KiB, M4 up to
/// 48 KiB) are found and decode with liblzo2. A zero run separates the two
/// copies so the literal-run skip does not jump over the repeat.
#[test]
fn every_distance_class_is_used() {
    let mut state = CompressState::new();
    for dist in [100, 2000, 2100, 16_000, 16_500, 30_000, 49_000] {
        let head = common::random(1000.min(dist / 2), dist as u64);
        let mut src = head.clone();
        src.resize(dist, 0);
        let without = ours(&src, &mut state).len();
        src.extend_from_slice(&head);
        let packed = ours(&src, &mut state);
        // The repeat must cost a few bytes, not its length in literals.
        assert!(
            packed.len() < without + 20,
            "dist {dist}: {without} -> {}",
            packed.len()
        );
        assert!(
            lzo2_decompress(&packed, src.len()).unwrap() == src,
            "dist {dist}"
        );
    }
}

/// btrfs framing cross-check: every segment we write decodes with liblzo2,
/// and an extent framed around liblzo2's segments decodes with ours.
#[test]
fn framed_segments_cross_decode() {
    const SECTOR: usize = 4096;
    let mut state = CompressState::new();
    for (name, gen) in kinds() {
        for n in [1, 4095, 4096, 4097, 50_001, 131_072] {
            let src = gen(n, 77);
            let mut dst = vec![0; worst_compress(n) + 4 * (n / SECTOR + 2)];
            let Some(len) = btrfs::compress_extent(&src, &mut dst, SECTOR, &mut state).unwrap()
            else {
                assert_eq!(name, "random", "{name} {n} bailed out");
                continue;
            };
            let mut back = Vec::new();
            let mut cur = 4;
            while cur < len {
                let seg = u32::from_le_bytes(dst[cur..cur + 4].try_into().unwrap()) as usize;
                back.extend(lzo2_decompress(&dst[cur + 4..cur + 4 + seg], SECTOR).unwrap());
                cur += 4 + seg;
                if SECTOR - cur % SECTOR < 4 {
                    cur = cur.next_multiple_of(SECTOR);
                }
            }
            assert!(back == src, "{name} {n}");

            let framed = frame_with_liblzo2(&src, SECTOR);
            let mut out = vec![0; n];
            assert_eq!(
                btrfs::decompress_extent(&framed, &mut out, SECTOR),
                Ok(n),
                "{name} {n}"
            );
            assert!(out == src, "{name} {n}");
        }
    }
}

/// A straightforward re-statement of the kernel's writer (one
/// `lzo1x_1_compress` per sector, 4-byte headers, pad to keep headers inside
/// a sector), with zero padding to a whole sector as on disk.
fn frame_with_liblzo2(src: &[u8], sector: usize) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    for chunk in src.chunks(sector) {
        let seg = lzo2_compress(chunk);
        out.extend_from_slice(&(seg.len() as u32).to_le_bytes());
        out.extend_from_slice(&seg);
        let left = out.len().next_multiple_of(sector) - out.len();
        if left < 4 {
            out.resize(out.len() + left, 0);
        }
    }
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    out.resize(out.len().next_multiple_of(sector), 0);
    out
}
