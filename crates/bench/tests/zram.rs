//! zram's rules as wring applies them to 4 KiB pages, and the parsing of the kernel's figures.

mod common;

use wring_bench::zram::{
    config_value, huge_class_size, parse_mm_stat, same_filled, wring_pages, PageCodec, PAGE,
};
use wring_engine::{Algorithm, CompressSpec};

#[test]
fn huge_class_is_a_large_fraction_of_a_page() {
    for chain in [4, 8, 16] {
        let h = huge_class_size(PAGE, chain);
        assert!(h > PAGE / 2 && h <= PAGE, "chain {chain}: {h}");
    }
    // Kernels before 6.3 (zspages of at most 4 pages) stored pages of 3257 bytes or more whole.
    assert_eq!(huge_class_size(PAGE, 4), 3257);
    // Longer zspage chains let larger objects share zspages.
    assert!(huge_class_size(PAGE, 8) >= huge_class_size(PAGE, 4));
    // With single-page zspages no class qualifies: every page is stored whole.
    assert_eq!(huge_class_size(PAGE, 1), PAGE);
}

#[test]
fn same_filled_pages_are_one_repeated_word() {
    assert_eq!(same_filled(&[0u8; PAGE]), Some(0));
    let word = 0x0102_0304_0506_0708u64.to_ne_bytes();
    let page: Vec<u8> = word.iter().copied().cycle().take(PAGE).collect();
    assert_eq!(same_filled(&page), Some(0x0102_0304_0506_0708));
    let mut other = page.clone();
    other[PAGE - 1] ^= 1;
    assert_eq!(same_filled(&other), None);
    // A repeated byte pattern that is not word-periodic is not same-filled.
    let odd: Vec<u8> = [1u8, 2, 3].iter().copied().cycle().take(PAGE).collect();
    assert_eq!(same_filled(&odd), None);
}

#[test]
fn kernel_texts() {
    let st = parse_mm_stat("16777216 10240768 10756096 0 10756096 3 0 7 0\n").unwrap();
    assert_eq!(
        (st.orig, st.compr, st.mem_used, st.same_pages, st.huge_pages),
        (16_777_216, 10_240_768, 10_756_096, 3, 7)
    );
    assert!(parse_mm_stat("1 2 3").is_none());
    let cfg = "# CONFIG_ZRAM_WRITEBACK is not set\nCONFIG_ZSMALLOC_CHAIN_SIZE=8\nCONFIG_ZRAM_DEF_COMP=\"lzo-rle\"\n";
    assert_eq!(
        config_value(cfg, "CONFIG_ZSMALLOC_CHAIN_SIZE").as_deref(),
        Some("8")
    );
    assert_eq!(
        config_value(cfg, "CONFIG_ZRAM_DEF_COMP").as_deref(),
        Some("lzo-rle")
    );
    assert_eq!(config_value(cfg, "CONFIG_ZRAM_WRITEBACK"), None);
}

/// zram's accounting of `data`, page by page: a page of one repeated 8-byte word costs
/// nothing (same-filled), a page whose compressed size reaches `huge` is stored whole, any other
/// costs its compressed size. Returns (same pages, huge pages, stored bytes).
fn zram_by_hand(codec: PageCodec, data: &[u8], huge: usize) -> (u64, u64, u64) {
    let engine = wring_engine::Engine::new(wring_engine::EngineConfig::default());
    let mut state = wring_lzo::CompressState::new();
    let mut dst = vec![0u8; 2 * PAGE];
    let (mut same, mut whole, mut bytes) = (0, 0, 0);
    for page in data.chunks(PAGE) {
        if page.chunks(8).all(|w| w == &page[..8]) {
            same += 1;
            continue;
        }
        let n = match codec {
            PageCodec::LzoRaw => wring_lzo::compress(page, &mut dst, &mut state).expect("lzo"),
            PageCodec::LzoRle => {
                wring_lzo::compress_rle(page, &mut dst, &mut state).expect("lzo-rle")
            }
            PageCodec::Engine(spec) => engine
                .compress_into(spec, page, &mut dst)
                .expect("compress")
                .unwrap_or(PAGE),
        };
        if n < huge {
            bytes += n as u64;
        } else {
            whole += 1;
            bytes += PAGE as u64;
        }
    }
    (same, whole, bytes)
}

#[test]
fn wring_pages_follow_zrams_rules() {
    let corpus = common::corpus();
    let data = corpus.concatenated(PAGE);
    let pages = (data.len() / PAGE) as u64;
    let huge = huge_class_size(PAGE, 8);
    // Zero pages: the 64 KiB zeros file is 16 pages, plus the padding page's tail is not whole.
    let random_pages = (200 * 1024 / PAGE) as u64;
    for codec in [
        PageCodec::LzoRaw,
        PageCodec::LzoRle,
        PageCodec::Engine(CompressSpec::default_for(Algorithm::Lz4)),
    ] {
        let f = wring_pages(codec, &data, 2, huge).expect("pages");
        assert_eq!(f.pages, pages);
        assert_eq!(f.orig_bytes, data.len() as u64);
        assert!(f.same_pages >= 16, "{codec:?}: {f:?}");
        // The random file does not compress: its pages are stored whole.
        assert!(f.huge_pages >= random_pages - 1, "{codec:?}: {f:?}");
        // Page by page, by zram's rules, without the bench.
        assert_eq!(
            (f.same_pages, f.huge_pages, f.compr_bytes),
            zram_by_hand(codec, &data, huge),
            "{codec:?}"
        );
        assert!(f.ratio > 1.0);
        assert!(f.write_mbps > 0.0 && f.read_mbps > 0.0);
    }
    // All-huge and all-same extremes.
    let random = common::random_bytes(9, 8 * PAGE);
    let f = wring_pages(PageCodec::LzoRaw, &random, 1, huge).unwrap();
    assert_eq!((f.huge_pages, f.compr_bytes), (8, 8 * PAGE as u64));
    let zeros = vec![0u8; 8 * PAGE];
    let f = wring_pages(PageCodec::LzoRaw, &zeros, 1, huge).unwrap();
    assert_eq!((f.same_pages, f.compr_bytes), (8, 0));
    assert!(f.ratio.is_infinite());
}

#[test]
fn counterparts_of_zram_algorithms() {
    assert_eq!(PageCodec::for_zram("lzo-rle"), Some(PageCodec::LzoRle));
    assert_eq!(PageCodec::for_zram("lzo"), Some(PageCodec::LzoRaw));
    assert_eq!(
        PageCodec::for_zram("lz4"),
        Some(PageCodec::Engine(CompressSpec::default_for(Algorithm::Lz4)))
    );
    assert_eq!(PageCodec::for_zram("842"), None);
}
