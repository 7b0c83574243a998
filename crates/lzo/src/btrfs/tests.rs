//! Unit tests for the btrfs LZO framing: layout, padding, sizes, bail-outs
//! and the decoder's sanity checks.

use super::*;

const SECTOR: usize = 4096;

/// Deterministic pseudo-random bytes (xorshift64*).
fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// Compressible, text-like bytes.
fn text(n: usize) -> Vec<u8> {
    let words = [
        "the ", "btrfs ", "extent ", "sector ", "lzo ", "data ", "of ", "a\n",
    ];
    let picks = random(n, 7);
    let mut out = Vec::with_capacity(n + 8);
    let mut i = 0;
    while out.len() < n {
        out.extend_from_slice(words[usize::from(picks[i % n.max(1)]) % words.len()].as_bytes());
        i += 1;
    }
    out.truncate(n);
    out
}

fn frame(src: &[u8]) -> Vec<u8> {
    let mut dst = vec![0xaa; worst_compress(src.len()) + 4 * (src.len() / SECTOR + 2)];
    let n = compress_extent(src, &mut dst, SECTOR, &mut CompressState::new())
        .unwrap()
        .expect("fits");
    dst.truncate(n);
    dst
}

fn unframe(framed: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    let n = decompress_extent(framed, &mut out, SECTOR).unwrap();
    out.truncate(n);
    out
}

fn le32(buf: &[u8], at: usize) -> usize {
    read_len(buf, at).unwrap()
}

/// Walks the segments the way the kernel does; returns (offset, length) of
/// each payload.
fn segments(framed: &[u8]) -> Vec<(usize, usize)> {
    let total = le32(framed, 0);
    let mut cur = LZO_LEN;
    let mut segs = Vec::new();
    while cur < total {
        assert_eq!(
            cur / SECTOR,
            (cur + LZO_LEN - 1) / SECTOR,
            "header straddles a sector"
        );
        let len = le32(framed, cur);
        segs.push((cur + LZO_LEN, len));
        cur += LZO_LEN + len;
        if SECTOR - cur % SECTOR < LZO_LEN {
            assert!(framed[cur..cur.next_multiple_of(SECTOR)]
                .iter()
                .all(|&b| b == 0));
            cur = cur.next_multiple_of(SECTOR);
        }
    }
    assert_eq!(cur, total);
    segs
}

#[test]
fn header_layout_small_input() {
    let src = b"hello, hello, hello, hello btrfs!";
    let framed = frame(src);
    assert_eq!(le32(&framed, 0), framed.len());
    let seg = le32(&framed, 4);
    assert_eq!(framed.len(), 8 + seg);
    assert_eq!(&framed[framed.len() - 3..], &[0x11, 0, 0]);
    let mut raw = [0u8; 64];
    let n = decompress(&framed[8..], &mut raw).unwrap();
    assert_eq!(&raw[..n], src);
    assert_eq!(unframe(&framed, src.len()), src);
}

#[test]
fn empty_input_is_header_only() {
    let framed = frame(&[]);
    assert_eq!(framed, [4, 0, 0, 0]);
    assert_eq!(unframe(&framed, 100), Vec::<u8>::new());
}

#[test]
fn edge_sizes_round_trip_with_one_segment_per_sector() {
    for n in [
        1,
        2,
        3,
        4095,
        4096,
        4097,
        8191,
        8193,
        65536 + 17,
        MAX_EXTENT,
    ] {
        let src = text(n);
        let framed = frame(&src);
        let segs = segments(&framed);
        assert_eq!(segs.len(), n.div_ceil(SECTOR), "size {n}");
        for (i, &(off, len)) in segs.iter().enumerate() {
            let mut raw = vec![0; SECTOR];
            let got = decompress(&framed[off..off + len], &mut raw).unwrap();
            let want = &src[i * SECTOR..((i + 1) * SECTOR).min(n)];
            assert_eq!(&raw[..got], want, "size {n} segment {i}");
        }
        assert_eq!(unframe(&framed, n), src, "size {n}");
    }
}

/// One sector of zeros followed by `r` random bytes, whose payload length
/// grows by one byte per byte of `r` (mostly), so padding can be steered.
fn steered_sector(r: usize, seed: u64) -> Vec<u8> {
    let mut src = vec![0; SECTOR - r];
    src.extend_from_slice(&random(r, seed));
    src
}

/// First sector steered, second sector text.
fn steered(r: usize) -> Vec<u8> {
    let mut src = steered_sector(r, 99);
    src.extend_from_slice(&text(SECTOR));
    src
}

#[test]
fn segment_header_never_straddles_a_sector() {
    let mut padded = 0;
    for r in 3900..SECTOR {
        let src = steered(r);
        let framed = frame(&src);
        let first_end = 8 + le32(&framed, 4);
        let left = first_end.next_multiple_of(SECTOR) - first_end;
        if left == 0 || left >= LZO_LEN {
            continue;
        }
        padded += 1;
        assert!(framed[first_end..SECTOR].iter().all(|&b| b == 0), "r={r}");
        // The second header starts exactly at the sector boundary.
        let second = le32(&framed, SECTOR);
        assert_eq!(
            framed.len(),
            SECTOR + LZO_LEN + second + trailing_pad(SECTOR + 4 + second)
        );
        assert_eq!(unframe(&framed, src.len()), src);
    }
    assert!(padded >= 3, "no input triggered padding ({padded})");
}

fn trailing_pad(end: usize) -> usize {
    match end.next_multiple_of(SECTOR) - end {
        left @ 1..=3 => left,
        _ => 0,
    }
}

#[test]
fn padding_after_the_last_segment_is_counted_in_the_total() {
    let mut seen = false;
    for r in 3900..SECTOR {
        let src = steered_sector(r, 5);
        let framed = frame(&src);
        let end = 8 + le32(&framed, 4);
        if trailing_pad(end) == 0 {
            continue;
        }
        seen = true;
        assert_eq!(framed.len(), SECTOR, "r={r}");
        assert_eq!(le32(&framed, 0), SECTOR);
        assert!(framed[end..].iter().all(|&b| b == 0));
        assert_eq!(unframe(&framed, SECTOR), src);
    }
    assert!(seen);
}

#[test]
fn payload_may_cross_a_sector_boundary() {
    let src = random(2 * SECTOR, 3);
    let framed = frame(&src);
    let segs = segments(&framed);
    assert!(segs[0].0 + segs[0].1 > SECTOR, "first payload should cross");
    assert_eq!(unframe(&framed, src.len()), src);
}

#[test]
fn incompressible_input_bails_out() {
    let src = random(MAX_EXTENT, 11);
    let mut dst = vec![0; worst_compress(src.len()) + 4096];
    let got = compress_extent(&src, &mut dst, SECTOR, &mut CompressState::new()).unwrap();
    assert_eq!(got, None);
    // Two sectors are not enough for the kernel's bail-out: a valid extent.
    let src = random(2 * SECTOR, 12);
    let framed = frame(&src);
    assert!(framed.len() > src.len());
    assert_eq!(unframe(&framed, src.len()), src);
}

#[test]
fn too_small_dst_is_none_not_error() {
    let src = text(20_000);
    let full = frame(&src).len();
    let mut state = CompressState::new();
    for cap in [0, 3, 4, 8, 100, full - 1] {
        let mut dst = vec![0; cap];
        assert_eq!(
            compress_extent(&src, &mut dst, SECTOR, &mut state),
            Ok(None),
            "cap {cap}"
        );
    }
    let mut dst = vec![0; full];
    assert_eq!(
        compress_extent(&src, &mut dst, SECTOR, &mut state),
        Ok(Some(full))
    );
}

#[test]
fn rejects_bad_parameters() {
    let mut dst = vec![0; 1 << 18];
    let mut state = CompressState::new();
    let big = vec![0; MAX_EXTENT + 1];
    assert!(matches!(
        compress_extent(&big, &mut dst, SECTOR, &mut state),
        Err(Error::BadParameter(_))
    ));
    for sector in [0, 100, 4095, 1 << 17] {
        assert!(matches!(
            compress_extent(b"x", &mut dst, sector, &mut state),
            Err(Error::BadParameter(_))
        ));
        assert!(matches!(
            decompress_extent(&[4, 0, 0, 0], &mut dst, sector),
            Err(Error::BadParameter(_))
        ));
    }
}

#[test]
fn other_sector_sizes_round_trip() {
    let src = text(50_000);
    for sector in [MIN_SECTOR, 16384, MAX_SECTOR] {
        let mut dst = vec![0; worst_compress(src.len()) + 1024];
        let n = compress_extent(&src, &mut dst, sector, &mut CompressState::new())
            .unwrap()
            .unwrap();
        let mut out = vec![0; src.len()];
        assert_eq!(
            decompress_extent(&dst[..n], &mut out, sector),
            Ok(src.len())
        );
        assert_eq!(out, src);
    }
}

#[test]
fn accepts_sector_padding_and_rejects_more() {
    let src = text(10_000);
    let framed = frame(&src);
    let mut padded = framed.clone();
    padded.resize(framed.len().next_multiple_of(SECTOR), 0);
    assert_eq!(unframe(&padded, src.len()), src);
    padded.resize(padded.len() + SECTOR, 0);
    let mut out = vec![0; src.len()];
    assert!(matches!(
        decompress_extent(&padded, &mut out, SECTOR),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn rejects_header_longer_than_the_extent() {
    let src = text(10_000);
    let mut framed = frame(&src);
    let n = framed.len();
    framed[..4].copy_from_slice(&(n as u32 + 1).to_le_bytes());
    let mut out = vec![0; src.len()];
    assert!(matches!(
        decompress_extent(&framed, &mut out, SECTOR),
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        decompress_extent(&framed[..3], &mut out, SECTOR),
        Err(Error::Corrupt(_))
    ));
}

#[test]
fn rejects_oversized_segment() {
    let mut framed = vec![0u8; 8 + 4500];
    let total = framed.len() as u32;
    framed[..4].copy_from_slice(&total.to_le_bytes());
    framed[4..8].copy_from_slice(&((worst_compress(SECTOR) + 1) as u32).to_le_bytes());
    let mut out = vec![0; SECTOR];
    let err = decompress_extent(&framed, &mut out, SECTOR).unwrap_err();
    assert_eq!(
        err,
        Error::Corrupt("segment longer than lzo1x_worst_compress(sector)")
    );
}

#[test]
fn rejects_segment_decoding_to_more_than_a_sector() {
    let raw = text(2 * SECTOR);
    let mut seg = vec![0; worst_compress(raw.len())];
    let n = compress(&raw, &mut seg, &mut CompressState::new()).unwrap();
    assert!(n <= worst_compress(SECTOR));
    let mut framed = ((8 + n) as u32).to_le_bytes().to_vec();
    framed.extend_from_slice(&(n as u32).to_le_bytes());
    framed.extend_from_slice(&seg[..n]);
    let mut out = vec![0; 2 * SECTOR];
    let err = decompress_extent(&framed, &mut out, SECTOR).unwrap_err();
    assert_eq!(
        err,
        Error::Corrupt("segment decodes to more than one sector")
    );
}

#[test]
fn short_dst_is_an_output_overrun() {
    let src = text(3 * SECTOR + 100);
    let framed = frame(&src);
    for len in [0, 1, 100, SECTOR, SECTOR + 1, 3 * SECTOR + 99] {
        let mut out = vec![0; len];
        assert_eq!(
            decompress_extent(&framed, &mut out, SECTOR),
            Err(Error::OutputOverrun),
            "dst {len}"
        );
    }
    let mut exact = vec![0; src.len()];
    assert_eq!(
        decompress_extent(&framed, &mut exact, SECTOR),
        Ok(src.len())
    );
    assert_eq!(exact, src);
    let mut out = vec![0; src.len() + 500];
    assert_eq!(decompress_extent(&framed, &mut out, SECTOR), Ok(src.len()));
}

#[test]
fn inline_extent_round_trips_and_is_checked() {
    let src = text(1000);
    let framed = frame(&src);
    let mut out = vec![0; src.len()];
    assert_eq!(decompress_inline(&framed, &mut out, SECTOR), Ok(src.len()));
    assert_eq!(out, src);
    let mut long = vec![0; src.len() + 1];
    assert!(decompress_inline(&framed, &mut long, SECTOR).is_err());
    let mut bad = framed.clone();
    bad[0] ^= 1;
    assert!(decompress_inline(&bad, &mut out, SECTOR).is_err());
    let mut bad = framed.clone();
    bad[4] ^= 1;
    assert!(decompress_inline(&bad, &mut out, SECTOR).is_err());
    assert!(decompress_inline(&framed[..3], &mut out, SECTOR).is_err());
    // A header that matches a size too short for a segment header.
    for n in 4..8u8 {
        let short: Vec<u8> = [n, 0, 0, 0].into_iter().chain(3..n).collect();
        assert!(
            decompress_inline(&short, &mut out, SECTOR).is_err(),
            "{n} bytes"
        );
    }
}
