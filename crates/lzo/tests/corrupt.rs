//! Damaged and hand-made streams: truncation, bit flips, and each error the
//! kernel's `lzo1x_decompress_safe` distinguishes.

mod common;

use wring_lzo::{btrfs, compress, decompress, worst_compress, CompressState, Error};

fn packed(src: &[u8]) -> Vec<u8> {
    let mut dst = vec![0; worst_compress(src.len())];
    let n = compress(src, &mut dst, &mut CompressState::new()).unwrap();
    dst.truncate(n);
    dst
}

#[test]
fn every_truncation_of_our_streams_fails() {
    for (name, gen) in common::kinds() {
        let src = gen(9000, 21);
        let p = packed(&src);
        let mut out = vec![0; src.len()];
        for cut in 0..p.len() {
            assert!(decompress(&p[..cut], &mut out).is_err(), "{name} cut {cut}");
        }
        assert_eq!(decompress(&p, &mut out), Ok(src.len()));
    }
}

#[test]
fn every_single_bit_flip_is_bounded() {
    let src = common::mixed(3000, 8);
    let p = packed(&src);
    let mut out = vec![0; src.len()];
    let mut errors = 0;
    for i in 0..p.len() {
        for bit in 0..8 {
            let mut bad = p.clone();
            bad[i] ^= 1 << bit;
            match decompress(&bad, &mut out) {
                Ok(n) => assert!(n <= out.len()),
                Err(_) => errors += 1,
            }
        }
    }
    assert!(errors > 0);
}

#[test]
fn truncated_and_flipped_extents_are_bounded() {
    let src = common::text(3 * 4096 + 77, 5);
    let mut dst = vec![0; 20_000];
    let n = btrfs::compress_extent(&src, &mut dst, 4096, &mut CompressState::new())
        .unwrap()
        .unwrap();
    let framed = &dst[..n];
    let mut out = vec![0; src.len()];
    for cut in 0..n {
        // A cut extent is shorter than its header says: always an error.
        assert!(
            btrfs::decompress_extent(&framed[..cut], &mut out, 4096).is_err(),
            "cut {cut}"
        );
    }
    for i in (0..n).step_by(3) {
        for bit in 0..8 {
            let mut bad = framed.to_vec();
            bad[i] ^= 1 << bit;
            if let Ok(got) = btrfs::decompress_extent(&bad, &mut out, 4096) {
                assert!(got <= out.len());
            }
        }
    }
}

#[test]
fn empty_and_tiny_inputs() {
    let mut out = [0u8; 16];
    assert_eq!(decompress(&[], &mut out), Err(Error::InputOverrun));
    assert_eq!(decompress(&[0x11, 0], &mut out), Err(Error::InputOverrun));
    assert_eq!(decompress(&[0x11, 0, 0], &mut out), Ok(0));
    assert_eq!(packed(&[]), [0x11, 0, 0]);
}

#[test]
fn data_after_the_end_marker() {
    let mut out = [0u8; 16];
    assert_eq!(
        decompress(&[0x11, 0, 0, 0], &mut out),
        Err(Error::InputNotConsumed)
    );
    let mut p = packed(b"abc");
    p.push(0);
    assert_eq!(decompress(&p, &mut out), Err(Error::InputNotConsumed));
}

#[test]
fn end_marker_must_have_length_three() {
    let mut out = [0u8; 16];
    // One literal, then 0x12: M4 length 4 at distance 16384 + 0, an end
    // marker the kernel refuses (liblzo2 accepts it).
    assert!(matches!(
        decompress(&[18, b'a', 0x12, 0, 0], &mut out),
        Err(Error::Corrupt(_))
    ));
    assert_eq!(decompress(&[18, b'a', 0x11, 0, 0], &mut out), Ok(1));
}

#[test]
fn lookbehind_and_output_overruns() {
    let mut out = [0u8; 16];
    // Two literals, then an M2 match (3 bytes, distance 3) reaching before the start.
    let s = [17 + 2, b'a', b'b', 0x48, 0x00, 0x11, 0, 0];
    assert_eq!(decompress(&s, &mut out), Err(Error::LookbehindOverrun));
    // The same match at distance 2 is fine: "ab" + "aba".
    let s = [17 + 2, b'a', b'b', 0x44, 0x00, 0x11, 0, 0];
    assert_eq!(decompress(&s, &mut out), Ok(5));
    assert_eq!(&out[..5], b"ababa");
    let mut small = [0u8; 4];
    assert_eq!(decompress(&s, &mut small), Err(Error::OutputOverrun));
}

#[test]
fn long_literal_run_and_long_match_lengths() {
    // Literal run with extension bytes, then an M3 match with extension bytes.
    let mut src = common::random(300, 1);
    let tail = src[..100].repeat(40);
    src.extend_from_slice(&tail);
    let p = packed(&src);
    let mut out = vec![0; src.len()];
    assert_eq!(decompress(&p, &mut out), Ok(src.len()));
    assert_eq!(out, src);
}

#[test]
fn lzo_rle_zero_runs_are_understood_like_the_kernel() {
    // Version 1 stream: "17 1", 4 literals, a zero run of 8 + 4 = 12 bytes
    // (0001 1LLL, LE16 0xfffc | S, X), then the end marker.
    let s = [
        17,
        1,
        17 + 4,
        b'w',
        b'x',
        b'y',
        b'z',
        0x18,
        0xfc,
        0xff,
        1,
        0x11,
        0,
        0,
    ];
    let mut out = [0xeeu8; 32];
    assert_eq!(decompress(&s, &mut out), Ok(16));
    assert_eq!(&out[..4], b"wxyz");
    assert!(out[4..16].iter().all(|&b| b == 0));
    // In a version 0 stream the same bytes are an M4 match that reaches back
    // too far.
    let s0 = &s[2..];
    assert_eq!(decompress(s0, &mut out), Err(Error::LookbehindOverrun));
}

#[test]
fn long_zero_extension_does_not_hang_or_overflow() {
    // A literal run whose extended length is zeros all the way.
    let mut s = vec![0u8; 100_000];
    let mut out = [0u8; 16];
    assert_eq!(decompress(&s, &mut out), Err(Error::InputOverrun));
    s.extend_from_slice(&[1, 0, 0, 0x11, 0, 0]);
    assert!(decompress(&s, &mut out).is_err());
}

#[test]
fn damaged_streams_fail_as_before() {
    for (name, gen) in common::kinds() {
        let src = gen(2500, 77);
        let p = packed(&src);
        let n = src.len();
        let caps = [n, n + 1, n + 40, n - n / 3, 100, 0];
        for cut in 0..p.len() {
            common::agrees_with_previous_decoder(&format!("{name} cut {cut}"), &p[..cut], &caps);
        }
        for i in 0..p.len() {
            for bit in 0..8 {
                let mut bad = p.clone();
                bad[i] ^= 1 << bit;
                common::agrees_with_previous_decoder(
                    &format!("{name} flip {i}.{bit}"),
                    &bad,
                    &caps,
                );
            }
            // The byte replaced by one of each kind of instruction byte.
            for b in [0, 0x10, 0x11, 0x18, 0x20, 0x3f, 0x40, 0xff] {
                let mut bad = p.clone();
                bad[i] = b;
                common::agrees_with_previous_decoder(
                    &format!("{name} byte {i} = {b}"),
                    &bad,
                    &caps,
                );
            }
        }
    }
}
