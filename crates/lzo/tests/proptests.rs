//! Property tests: raw and framed round trips, and decoders that never panic
//! and never claim more output than the buffer holds, on arbitrary or
//! damaged input.

mod common;

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

/// Long runs of short repeating patterns (distances 1..8 and a little more)
/// mixed with random bytes and copies from further back, so the decoder's
/// overlapping-match paths all run.
fn patterned(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        (prop::collection::vec(any::<u8>(), 1..=16), 1usize..600).prop_map(|(pat, n)| pat
            .iter()
            .copied()
            .cycle()
            .take(n)
            .collect::<Vec<u8>>()),
        prop::collection::vec(any::<u8>(), 1..40),
        (any::<u8>(), 1usize..3000).prop_map(|(b, n)| vec![b; n]),
    ];
    prop::collection::vec(piece, 1..40).prop_map(move |pieces| {
        let mut out: Vec<u8> = Vec::new();
        for (k, p) in pieces.into_iter().enumerate() {
            if k % 5 == 4 && out.len() > 64 {
                // A copy from earlier output, at a distance that varies.
                let back = (p.len() * 37) % out.len() + 1;
                let start = out.len() - back;
                let n = p.len().min(back).min(300);
                out.extend_from_within(start..start + n);
            }
            out.extend_from_slice(&p);
        }
        out.truncate(max);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn patterned_round_trip(src in patterned(70_000)) {
        let p = packed(&src);
        // Exactly sized output (no room for block copies at the end), and
        // room to spare.
        for extra in [0, 100] {
            let mut out = vec![0xAA; src.len() + extra];
            prop_assert_eq!(decompress(&p, &mut out), Ok(src.len()));
            prop_assert_eq!(&out[..src.len()], &src[..]);
        }
    }

    #[test]
    fn same_result_as_the_previous_decoder(
        src in prop_oneof![input(20_000), patterned(20_000)],
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..4),
        cut in any::<prop::sample::Index>(),
        cap in any::<prop::sample::Index>(),
    ) {
        let mut p = packed(&src);
        for (i, bit) in flips {
            let i = i.index(p.len());
            p[i] ^= 1 << bit;
        }
        let p = &p[..p.len() - cut.index(p.len().min(4) + 1)];
        let cap = cap.index(src.len() + 80);
        let mut ours = vec![0; cap];
        let mut theirs = vec![0; cap];
        let r = decompress(p, &mut ours);
        prop_assert_eq!(r, common::reference::decompress(p, &mut theirs));
        if let Ok(n) = r {
            prop_assert_eq!(&ours[..n], &theirs[..n]);
        }
    }

    #[test]
    fn same_result_as_the_previous_decoder_on_arbitrary_bytes(
        src in prop::collection::vec(any::<u8>(), 0..3000),
        cap in 0usize..6000,
    ) {
        let mut ours = vec![0; cap];
        let mut theirs = vec![0; cap];
        let r = decompress(&src, &mut ours);
        prop_assert_eq!(r, common::reference::decompress(&src, &mut theirs));
        if let Ok(n) = r {
            prop_assert_eq!(&ours[..n], &theirs[..n]);
        }
    }
}

/// Writes an extended length field: `n` past `max` as zero bytes worth 255
/// each and a non-zero last byte.
fn put_ext(out: &mut Vec<u8>, n: usize) {
    out.extend(std::iter::repeat_n(0, (n - 1) / 255));
    out.push(((n - 1) % 255 + 1) as u8);
}

/// Builds an LZO1X stream instruction by instruction from `ops`: each is a
/// kind selector, two numbers that become a length and a distance, and a
/// trailing literal count. Every instruction kind is reachable (first
/// literal run, literal runs short and extended, M1 in both classes, M2,
/// M3 and M4 short and extended), distances reach up to the whole output,
/// and op number `bad`, if there is one, reaches back too far. Returns the
/// stream and the length it decodes to when valid.
fn build_stream(
    first: u8,
    ops: &[(u8, u16, u16, u8)],
    lit_seed: u8,
    bad: usize,
) -> (Vec<u8>, usize) {
    let mut s = Vec::new();
    let mut out = 0usize;
    let mut lit = lit_seed;
    let mut literals = |s: &mut Vec<u8>, n: usize| {
        for _ in 0..n {
            lit = lit.wrapping_mul(31).wrapping_add(7);
            s.push(lit);
        }
    };
    // Class: 0 after a match without literals, 1 after 1..=3, 2 after more.
    let mut class;
    if first > 17 {
        let n = usize::from(first - 17);
        s.push(first);
        literals(&mut s, n);
        out += n;
        class = if n >= 4 { 2 } else { 1 };
    } else {
        class = 0;
    }
    for (k, &(kind, a, b, next)) in ops.iter().enumerate() {
        let next = usize::from(next & 3);
        let a = usize::from(a);
        let b = usize::from(b);
        if class == 0 && (kind % 4 == 0 || out == 0) {
            // Literal run: 4..=18 in the instruction byte, more extended.
            let n = if kind & 4 == 0 {
                4 + a % 15
            } else {
                19 + a % 600
            };
            if n <= 18 {
                s.push((n - 3) as u8);
            } else {
                s.push(0);
                put_ext(&mut s, n - 18);
            }
            literals(&mut s, n);
            out += n;
            class = 2;
            continue;
        }
        // A distance within the output (or, for op `bad`, beyond it).
        let reach = if k == bad {
            out + 1 + b % 64
        } else {
            1 + b % out
        };
        let len;
        match (kind % 4, class) {
            (1, 1) if reach <= 1024 => {
                // M1 after a few literals: 2 bytes.
                len = 2;
                let d = reach - 1;
                s.extend([((d & 3) << 2 | next) as u8, (d >> 2) as u8]);
            }
            (1, 2) if (2049..=3072).contains(&reach) => {
                // M1 after a literal run: 3 bytes 2..3 KiB back.
                len = 3;
                let d = reach - 2049;
                s.extend([((d & 3) << 2 | next) as u8, (d >> 2) as u8]);
            }
            (1 | 2, _) if reach <= 2048 => {
                // M2: 3..8 bytes.
                len = 3 + a % 6;
                let d = reach - 1;
                s.extend([((len - 1) << 5 | (d & 7) << 2 | next) as u8, (d >> 3) as u8]);
            }
            (0..=2, _) if reach <= 16384 => {
                // M3: short or extended length (now and then a long one,
                // so that outputs pass the 16 KiB M4 needs).
                len = match a % 11 {
                    0 => 2000 + a % 15000,
                    1..=3 => 34 + a % 700,
                    _ => 3 + a % 31,
                };
                if len <= 33 {
                    s.push(32 | (len - 2) as u8);
                } else {
                    s.push(32);
                    put_ext(&mut s, len - 33);
                }
                s.extend((((reach - 1) << 2 | next) as u16).to_le_bytes());
            }
            _ => {
                // M4, 16..48 KiB back (distance 16 KiB itself would be the
                // end marker); M3 while the output is shorter.
                let far = 0x4001 + b % (out.clamp(0x4001, 0xbfff) - 0x4000);
                let reach = if k == bad || out > 0x4000 {
                    reach.max(far)
                } else {
                    reach
                };
                if reach <= 0x4000 {
                    len = 3 + a % 31;
                    s.push(32 | (len - 2) as u8);
                    s.extend((((reach - 1) << 2 | next) as u16).to_le_bytes());
                } else {
                    let reach = reach.min(0xbfff);
                    let (h, d) = ((reach - 0x4000) >> 14, (reach - 0x4000) & 0x3fff);
                    len = if a % 3 == 0 { 10 + a % 300 } else { 3 + a % 7 };
                    if len <= 9 {
                        s.push((16 | h << 3 | (len - 2)) as u8);
                    } else {
                        s.push((16 | h << 3) as u8);
                        put_ext(&mut s, len - 9);
                    }
                    s.extend(((d << 2 | next) as u16).to_le_bytes());
                }
            }
        }
        literals(&mut s, next);
        out += len + next;
        class = usize::from(next != 0);
    }
    s.extend([0x11, 0, 0]);
    (s, out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Hand-built streams with every instruction kind, at every length and
    /// distance class, decode exactly as the previous decoder decodes them,
    /// into destinations exactly sized, roomy and too small.
    #[test]
    fn built_streams_decode_as_before(
        first in prop_oneof![0u8..=17, 18u8..=255],
        ops in prop::collection::vec((any::<u8>(), any::<u16>(), any::<u16>(), any::<u8>()), 0..120),
        lit_seed in any::<u8>(),
        bad in 0usize..1000,
        cut in any::<prop::sample::Index>(),
    ) {
        let (s, n) = build_stream(first, &ops, lit_seed, bad);
        for cap in [n, n + 1, n + 100, cut.index(n + 1)] {
            let mut ours = vec![0x5a; cap];
            let mut theirs = vec![0xa5; cap];
            let r = decompress(&s, &mut ours);
            prop_assert_eq!(r, common::reference::decompress(&s, &mut theirs));
            if let Ok(k) = r {
                prop_assert_eq!(&ours[..k], &theirs[..k]);
            }
        }
    }
}

/// Inputs for the compressor, by shape and size: random bytes, runs of one
/// byte, short patterns repeated, text-like and mixed data (the generators of
/// `common`), and `patterned`; sized 0..64 bytes (the shortest, all literal
/// or nearly), exactly 4096 bytes (a btrfs sector, a zram page), around 4096
/// or anything up to 70 000 (several 48 KiB dictionary blocks).
fn compressor_input() -> impl Strategy<Value = Vec<u8>> {
    let size = prop_oneof![
        2 => 0usize..64,
        3 => Just(SECTOR),
        1 => SECTOR - 24..SECTOR + 24,
        1 => 0usize..70_000,
    ];
    let runs = prop::collection::vec((any::<u8>(), 1usize..300), 1..400).prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(b, n)| std::iter::repeat_n(b, n))
            .collect::<Vec<u8>>()
    });
    let pattern = (prop::collection::vec(any::<u8>(), 1..=24), 0usize..8)
        .prop_map(|(pat, noise)| (pat, noise));
    (
        size,
        0usize..7,
        any::<u64>(),
        runs,
        pattern,
        patterned(70_000),
    )
        .prop_map(|(n, kind, seed, runs, (pat, noise), patterned)| {
            let mut v = match kind {
                0 => common::random(n, seed),
                1 => common::repetitive(n, seed),
                2 => common::text(n, seed),
                3 => common::mixed(n, seed),
                4 => runs.into_iter().cycle().take(n).collect(),
                5 => {
                    // A short pattern repeated, with a few bytes changed.
                    let mut v: Vec<u8> = pat.iter().copied().cycle().take(n).collect();
                    let mut rng = common::Rng::new(seed);
                    for _ in 0..noise.min(n) {
                        let i = rng.below(n);
                        v[i] = rng.next_u64() as u8;
                    }
                    v
                }
                _ => patterned.into_iter().cycle().take(n).collect(),
            };
            v.truncate(n);
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// What the compressor writes decodes to the input with this crate's
    /// decoder and with liblzo2's `lzo1x_decompress_safe`, stays within the
    /// worst case, and fits exactly the room it reports: one byte less is an
    /// error, never a panic.
    #[test]
    fn compressed_streams_decode_with_ours_and_liblzo2(src in compressor_input()) {
        let mut state = CompressState::new();
        let mut dst = vec![0; worst_compress(src.len())];
        let n = compress(&src, &mut dst, &mut state).unwrap();
        let p = &dst[..n];
        prop_assert_eq!(&p[n - 3..], &[0x11, 0, 0]);

        let mut out = vec![0xAA; src.len()];
        prop_assert_eq!(decompress(p, &mut out), Ok(src.len()));
        prop_assert!(out == src, "our decoder gives other bytes");
        prop_assert!(
            common::lzo2_decompress(p, src.len()).as_deref() == Ok(&src[..]),
            "liblzo2 does not decode it to the input"
        );

        // The same state, reused: the same stream, into a destination with
        // exactly enough room, and an error with one byte less.
        let mut exact = vec![0; n];
        prop_assert_eq!(compress(&src, &mut exact, &mut state), Ok(n));
        prop_assert!(exact == p, "a reused state or a tight destination changes the stream");
        let mut short = vec![0; n - 1];
        prop_assert_eq!(
            compress(&src, &mut short, &mut state),
            Err(wring_lzo::Error::OutputOverrun)
        );
    }

    /// The faster compressor writes, byte for byte, the stream the one it
    /// replaced (`common::reference_compress`) writes, so its ratio is the
    /// same by construction.
    #[test]
    fn same_stream_as_the_previous_compressor(src in compressor_input()) {
        let mut dst = vec![0; worst_compress(src.len())];
        let n = compress(&src, &mut dst, &mut CompressState::new()).unwrap();
        let mut old = vec![0; worst_compress(src.len())];
        let m = common::reference_compress::compress(
            &src,
            &mut old,
            &mut common::reference_compress::CompressState::new(),
        )
        .unwrap();
        prop_assert!(dst[..n] == old[..m], "the stream differs from the previous compressor's");
    }
}
