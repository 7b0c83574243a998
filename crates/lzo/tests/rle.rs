//! `lzo-rle`: [`compress_rle`] against this crate's decoder (the kernel's
//! `lzo1x_decompress_safe`, which reads version-1 zero runs) on arbitrary inputs, zero-heavy
//! pages and the one match the kernel shortens; and against the kernel itself: each page's
//! compressed size must equal what the kernel's zram (`comp_algorithm=lzo-rle`) reports for
//! it (root and zram: the test fails without them unless `WRING_SKIP_ROOT=1` or
//! `WRING_SKIP_ZRAM=1` opts out).

mod common;

use proptest::prelude::*;
use wring_lzo::{compress, compress_rle, decompress, worst_compress, CompressState};

fn rle(src: &[u8]) -> Vec<u8> {
    let mut dst = vec![0; worst_compress(src.len()) + 2];
    let n = compress_rle(src, &mut dst, &mut CompressState::new()).expect("room enough");
    dst.truncate(n);
    dst
}

fn round_trip(src: &[u8]) -> Vec<u8> {
    let packed = rle(src);
    assert_eq!(&packed[..2], &[17, 1], "the version-1 header");
    let mut back = vec![0; src.len() + 64];
    let n = decompress(&packed, &mut back).expect("the decoder reads it");
    back.truncate(n);
    back
}

/// Zero runs of every length around the encodable ones, between text and noise.
fn zero_heavy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            (0usize..2200).prop_map(|n| vec![0u8; n]),
            prop::collection::vec(any::<u8>(), 0..40),
            (1usize..300).prop_map(|n| b"zram lzo-rle page "
                .iter()
                .copied()
                .cycle()
                .take(n)
                .collect()),
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

fn input(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..max),
        prop::collection::vec(0u8..3, 0..max),
        (prop::collection::vec(any::<u8>(), 1..64), 0..max).prop_map(|(pat, n)| pat
            .iter()
            .copied()
            .cycle()
            .take(n)
            .collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rle_round_trips_through_the_decoder(src in input(70_000)) {
        prop_assert_eq!(round_trip(&src), src);
    }

    #[test]
    fn zero_runs_round_trip(src in zero_heavy()) {
        prop_assert_eq!(round_trip(&src), src);
    }

    /// lzo-rle streams, whole and damaged, into exact, short and roomy destinations: the
    /// decoder (whose fast loop now runs on version-1 streams too) gives what the decoder
    /// before any fast path gives — the same bytes or the same error.
    #[test]
    fn the_decoder_matches_the_reference_on_rle_streams(
        src in prop_oneof![zero_heavy(), zero_heavy().prop_map(|z| z.repeat(8)), input(20_000)],
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in 0usize..8,
    ) {
        let mut packed = rle(&src);
        for (at, x) in flips {
            let at = 2 + at % (packed.len() - 2);
            packed[at] ^= x;
        }
        packed.truncate(packed.len() - cut.min(packed.len() - 2));
        for room in [src.len(), src.len().saturating_sub(1), src.len() + 100] {
            let (mut a, mut b) = (vec![0u8; room], vec![0u8; room]);
            let ours = decompress(&packed, &mut a);
            let reference = common::reference::decompress(&packed, &mut b);
            prop_assert_eq!(ours, reference);
            if let Ok(n) = ours {
                prop_assert_eq!(&a[..n], &b[..n]);
            }
        }
    }

    #[test]
    fn a_short_output_buffer_fails_cleanly(src in zero_heavy(), cut in 0usize..64) {
        let full = rle(&src);
        let mut dst = vec![0; full.len().saturating_sub(cut + 1)];
        prop_assert!(compress_rle(&src, &mut dst, &mut CompressState::new()).is_err());
    }
}

#[test]
fn zero_runs_are_instructions_of_their_own() {
    // A page of zeros with a few bytes: a zero run each way.
    let mut page = vec![0u8; 4096];
    page[2000..2008].copy_from_slice(b"lzo-rle!");
    let packed = rle(&page);
    assert!(packed.len() < 64, "{} bytes: {packed:?}", packed.len());
    // (LZO1X writes such a page in fewer bytes still, as long matches; lzo-rle's gain is
    // the time a zero run saves the match finder, not size.)
    let mut plain = vec![0; worst_compress(page.len())];
    assert!(compress(&page, &mut plain, &mut CompressState::new()).is_ok());
    // The run instruction: 0001 1LLL, 0xfc, 0xff, length high bits.
    assert!(
        packed
            .windows(3)
            .any(|w| w[0] & 0xf8 == 0x18 && w[1] & 0xfc == 0xfc && w[2] == 0xff),
        "{packed:?}"
    );
    assert_eq!(round_trip(&page), page);
    assert_eq!(round_trip(&[]), Vec::<u8>::new());
    assert_eq!(round_trip(&[0u8; 21]), vec![0u8; 21]);
}

#[test]
fn the_m4_match_that_would_read_as_a_zero_run_is_shortened() {
    // A 264-byte block repeated 0x803f bytes later: an M4 match whose distance bits
    // (0x803f - 0x4000 = 0x403f) and length (261..=264) would spell a zero run.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8 | 1
            })
            .collect()
    };
    // Zero runs before each copy leave the dictionary alone and end exactly at the copy, so
    // the probe lands on both starts and the second finds the first.
    let block = noise(264);
    let mut src = vec![0u8; 100];
    src.extend(&block);
    src.extend(vec![0u8; 0x803f - block.len()]);
    src.extend(&block);
    src.extend(noise(64));
    let packed = rle(&src);
    // The match as the kernel writes it: M4 with the distance's high bit, length 260 (9 + 251).
    let at = packed
        .windows(4)
        .position(|w| w == [16 | 8, 251, 0xfc, 0x00])
        .unwrap_or_else(|| panic!("no shortened M4 match in {packed:?}"));
    assert!(at > 2);
    assert_eq!(round_trip(&src), src);
}

/// The kernel's zram with lzo-rle: each page's compressed size in mm_stat must be ours.
mod kernel {
    use std::io::{Seek, SeekFrom, Write};
    use std::path::PathBuf;

    use super::*;
    use wring_testing::{require, Need};

    /// A zram device of our own (hot_add), removed on drop also when the test fails.
    struct Zram {
        id: String,
        sys: PathBuf,
    }

    impl Zram {
        fn add() -> Zram {
            let id = std::fs::read_to_string("/sys/class/zram-control/hot_add")
                .expect("zram-control hot_add (modprobe zram)")
                .trim()
                .to_string();
            let sys = PathBuf::from(format!("/sys/block/zram{id}"));
            Zram { id, sys }
        }

        fn set(&self, attr: &str, value: &str) {
            std::fs::write(self.sys.join(attr), value)
                .unwrap_or_else(|e| panic!("writing {value} to zram{} {attr}: {e}", self.id));
        }

        fn compr_data_size(&self) -> u64 {
            let mm = std::fs::read_to_string(self.sys.join("mm_stat")).expect("mm_stat");
            mm.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .expect("compr_data_size")
        }
    }

    impl Drop for Zram {
        fn drop(&mut self) {
            let _ = std::fs::write(self.sys.join("reset"), "1");
            let _ = std::fs::write("/sys/class/zram-control/hot_remove", &self.id);
        }
    }

    /// Pages of several kinds: text, zero-heavy, structured binary, a zero page with holes.
    fn pages() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let words = [
            "lzo ", "rle ", "zram ", "page ", "kernel ", "the ", "run ", "of ",
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for k in 0..96 {
            let mut p = Vec::with_capacity(4096);
            match k % 4 {
                0 => {
                    while p.len() < 4096 {
                        p.extend(words[(next() % 8) as usize].bytes());
                    }
                }
                1 => {
                    while p.len() < 4096 {
                        let z = (next() % 300) as usize;
                        p.extend(std::iter::repeat_n(0u8, z));
                        let lit = (next() % 24) as usize;
                        p.extend((0..lit).map(|_| next() as u8));
                    }
                }
                2 => {
                    for i in 0..1024u32 {
                        let v = if next() % 3 == 0 {
                            next() as u32 & 0xffff
                        } else {
                            i * 16
                        };
                        p.extend(v.to_le_bytes());
                    }
                }
                _ => {
                    p.resize(4096, 0);
                    for _ in 0..(1 + next() % 6) {
                        let at = (next() % 4000) as usize;
                        let n = (next() % 90) as usize;
                        for b in &mut p[at..(at + n).min(4096)] {
                            *b = next() as u8;
                        }
                    }
                }
            }
            p.truncate(4096);
            out.push(p);
        }
        out
    }

    #[test]
    fn compressed_sizes_equal_the_kernels() {
        if !require(
            "lzo-rle compressed sizes against the kernel's zram",
            &[Need::Root, Need::Zram],
        ) {
            return;
        }
        let z = Zram::add();
        z.set("comp_algorithm", "lzo-rle");
        z.set("disksize", "16M");
        let dev = PathBuf::from(format!("/dev/zram{}", z.id));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&dev)
            .expect("open the zram device");
        let mut compared = 0;
        for (i, page) in pages().iter().enumerate() {
            let ours = rle(page).len() as u64;
            // Same-filled pages take no compression; pages that do not compress below
            // zsmalloc's huge class are stored raw: neither says anything about the stream.
            if ours > 3000 || page.chunks(8).all(|w| w == &page[..8]) {
                continue;
            }
            let before = z.compr_data_size();
            f.seek(SeekFrom::Start(i as u64 * 4096)).expect("seek");
            f.write_all(page).expect("write a page");
            f.sync_all().expect("fsync the zram device");
            let theirs = z.compr_data_size() - before;
            assert_eq!(
                ours,
                theirs,
                "page {i} (kind {}): {ours} bytes here, {theirs} in the kernel's zram",
                i % 4
            );
            compared += 1;
        }
        assert!(compared >= 60, "only {compared} pages compared");
    }
}
