//! Shared test helpers: deterministic data generators and thin wrappers over
//! liblzo2 (via lzo-sys), the reference implementation we cross-test against.

#![allow(dead_code)]

pub mod reference;
pub mod reference_compress;

use std::sync::Once;

use lzo_sys::lzo1x::{lzo1x_1_compress, lzo1x_decompress_safe, LZO1X_1_MEM_COMPRESS};
use lzo_sys::lzoconf::{lzo_init, LZO_E_OK};

/// Deterministic pseudo-random generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 56) as u8).collect()
    }
}

/// Incompressible bytes.
pub fn random(n: usize, seed: u64) -> Vec<u8> {
    Rng::new(seed).bytes(n)
}

/// Long runs and short repeating patterns (zeros, `abcabc…`, stripes).
pub fn repetitive(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n + 4096);
    while out.len() < n {
        let run = 1 + rng.below(3000);
        match rng.below(4) {
            0 => out.resize(out.len() + run, 0),
            1 => {
                let k = 1 + rng.below(7);
                let pat = rng.bytes(k);
                out.extend(pat.iter().cycle().take(run));
            }
            2 => out.resize(out.len() + run, rng.next_u64() as u8),
            _ => {
                let back = out.len().min(1 + rng.below(60_000));
                let start = out.len() - back;
                for i in 0..run.min(back) {
                    out.push(out[start + i]);
                }
            }
        }
    }
    out.truncate(n);
    out
}

/// Text-like bytes: words with a skewed distribution, punctuation, lines.
pub fn text(n: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "had",
        "they",
        "you",
        "were",
        "their",
        "one",
        "all",
        "we",
        "can",
        "her",
        "has",
        "there",
        "been",
        "if",
        "more",
        "when",
        "will",
        "would",
        "who",
        "so",
        "no",
        "extent",
        "compression",
        "filesystem",
        "sector",
        "btrfs",
        "kernel",
        "segment",
        "header",
        "payload",
        "decompress",
        "buffer",
        "struct",
        "return",
        "error",
        "static",
    ];
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n + 32);
    while out.len() < n {
        // Squaring skews the choice towards the first, common words.
        let r = rng.below(WORDS.len() * WORDS.len());
        let w = WORDS[(r as f64).sqrt() as usize % WORDS.len()];
        out.extend_from_slice(w.as_bytes());
        out.push(match rng.below(20) {
            0 => b'\n',
            1 => b',',
            2 => b'.',
            _ => b' ',
        });
        if rng.below(50) == 0 {
            out.extend_from_slice(format!("{}", rng.next_u64() % 100_000).as_bytes());
        }
    }
    out.truncate(n);
    out
}

/// Mixed: text, random and repetitive stretches, so every match kind occurs.
pub fn mixed(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n + 8192);
    while out.len() < n {
        let len = 1 + rng.below(8192);
        let s = rng.next_u64();
        out.extend(match rng.below(3) {
            0 => text(len, s),
            1 => random(len.min(300), s),
            _ => repetitive(len, s),
        });
    }
    out.truncate(n);
    out
}

/// A data generator: `(length, seed) -> bytes`.
pub type Generator = fn(usize, u64) -> Vec<u8>;

/// Every generator, with a name for messages.
pub fn kinds() -> [(&'static str, Generator); 4] {
    [
        ("random", random),
        ("repetitive", repetitive),
        ("text", text),
        ("mixed", mixed),
    ]
}

fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: lzo_init only checks the library's ABI and sets up tables.
        let r = unsafe { lzo_init() };
        assert_eq!(r, LZO_E_OK, "lzo_init failed");
    });
}

/// liblzo2's `lzo1x_1_compress`.
pub fn lzo2_compress(src: &[u8]) -> Vec<u8> {
    init();
    let mut dst = vec![0u8; src.len() + src.len() / 16 + 64 + 3];
    let mut wrk = vec![0u8; LZO1X_1_MEM_COMPRESS as usize];
    let mut len = dst.len();
    // SAFETY: the buffers are valid for the lengths given; dst has the
    // documented worst-case room, wrk the documented work memory.
    let r = unsafe {
        lzo1x_1_compress(
            src.as_ptr(),
            src.len(),
            dst.as_mut_ptr(),
            &mut len,
            wrk.as_mut_ptr().cast(),
        )
    };
    assert_eq!(r, LZO_E_OK);
    dst.truncate(len);
    dst
}

/// liblzo2's `lzo1x_decompress_safe` into a buffer of `cap` bytes: the
/// output, or liblzo2's error code.
pub fn lzo2_decompress(src: &[u8], cap: usize) -> Result<Vec<u8>, i32> {
    init();
    let mut dst = vec![0u8; cap];
    let mut len = cap;
    // SAFETY: the buffers are valid for the lengths given; the safe
    // decompressor never reads or writes outside them.
    let r = unsafe {
        lzo1x_decompress_safe(
            src.as_ptr(),
            src.len(),
            dst.as_mut_ptr(),
            &mut len,
            std::ptr::null_mut(),
        )
    };
    if r != LZO_E_OK {
        return Err(r);
    }
    dst.truncate(len);
    Ok(dst)
}

/// Our result (error or bytes) equals the decoder before the fast paths
/// (`common::reference`), for destinations of several sizes.
pub fn agrees_with_previous_decoder(what: &str, s: &[u8], caps: &[usize]) {
    for &cap in caps {
        let mut ours = vec![0x5a; cap];
        let mut theirs = vec![0xa5; cap];
        let r = wring_lzo::decompress(s, &mut ours);
        assert_eq!(
            r,
            reference::decompress(s, &mut theirs),
            "{what}, cap {cap}"
        );
        if let Ok(n) = r {
            assert_eq!(ours[..n], theirs[..n], "{what}, cap {cap}");
        }
    }
}
