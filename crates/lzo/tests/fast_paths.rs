//! Hand-built streams aimed at the decoder's fast paths and at the edges
//! between them and the fully checked one: every match kind at every short
//! distance and at the lengths where the block copies change, literal runs of
//! every length, matches 16..48 KiB back and the M4 byte patterns that are
//! end markers, the `0000xxxx` byte after literal runs of every length. Each
//! stream is decoded into destinations exactly sized, a byte short and
//! roomy, and must give what the decoder before the fast paths
//! (`common::reference`) gives: the same error, or the same bytes.

mod common;

use proptest::prelude::*;
use wring_lzo::decompress;

/// Builds an LZO1X stream instruction by instruction, tracking the output
/// length (for distances) and what the last instruction left behind.
#[derive(Clone)]
struct Stream {
    bytes: Vec<u8>,
    out: usize,
    /// Literals after the last instruction: 0, 1..=3, or 4 for a run.
    class: usize,
    seed: u8,
}

impl Stream {
    fn new() -> Self {
        Stream {
            bytes: Vec::new(),
            out: 0,
            class: 0,
            seed: 1,
        }
    }

    /// Literal bytes: varied, so that a wrong distance shows.
    fn lit_bytes(&mut self, n: usize) {
        for _ in 0..n {
            self.seed = self.seed.wrapping_mul(73).wrapping_add(41);
            self.bytes.push(self.seed);
        }
        self.out += n;
    }

    /// An extended length field: `n` past the field's maximum.
    fn ext(&mut self, n: usize) {
        self.bytes.extend(std::iter::repeat_n(0, (n - 1) / 255));
        self.bytes.push(((n - 1) % 255 + 1) as u8);
    }

    /// The first instruction: a bare literal run of 1..=238 bytes.
    fn first_literals(&mut self, n: usize) -> &mut Self {
        assert!(self.bytes.is_empty() && (1..=238).contains(&n));
        self.bytes.push(17 + n as u8);
        self.lit_bytes(n);
        self.class = n.min(4);
        self
    }

    /// A literal run of `n` >= 4 bytes (after a match without literals).
    fn literals(&mut self, n: usize) -> &mut Self {
        if n <= 18 {
            self.bytes.push(n as u8 - 3);
        } else {
            self.bytes.push(0);
            self.ext(n - 18);
        }
        self.lit_bytes(n);
        self.class = 4;
        self
    }

    /// The `next` literals after a match, in the low bits of `low`.
    fn trailing(&mut self, next: usize) {
        self.lit_bytes(next);
        self.class = next;
    }

    /// M1: 2 bytes at distance 1..=1024 after 1..=3 literals, 3 bytes at
    /// distance 2049..=3072 after a literal run.
    fn m1(&mut self, dist: usize, next: usize) -> &mut Self {
        let (d, len) = if self.class == 4 {
            (dist - 2049, 3)
        } else {
            (dist - 1, 2)
        };
        self.bytes
            .extend([((d & 3) << 2 | next) as u8, (d >> 2) as u8]);
        self.out += len;
        self.trailing(next);
        self
    }

    /// M2: 3..=8 bytes at distance 1..=2048.
    fn m2(&mut self, len: usize, dist: usize, next: usize) -> &mut Self {
        let d = dist - 1;
        self.bytes
            .extend([((len - 1) << 5 | (d & 7) << 2 | next) as u8, (d >> 3) as u8]);
        self.out += len;
        self.trailing(next);
        self
    }

    /// M3: 3.. bytes at distance 1..=16384.
    fn m3(&mut self, len: usize, dist: usize, next: usize) -> &mut Self {
        if len <= 33 {
            self.bytes.push(32 | (len - 2) as u8);
        } else {
            self.bytes.push(32);
            self.ext(len - 33);
        }
        self.bytes
            .extend((((dist - 1) << 2 | next) as u16).to_le_bytes());
        self.out += len;
        self.trailing(next);
        self
    }

    /// M4: 3.. bytes at distance 16384 + `h` * 16384 + `field`, `field` in
    /// 0..16384 (16384 + 0 being the end marker).
    fn m4(&mut self, len: usize, h: usize, field: usize, next: usize) -> &mut Self {
        if len <= 9 {
            self.bytes.push((16 | h << 3 | (len - 2)) as u8);
        } else {
            self.bytes.push((16 | h << 3) as u8);
            self.ext(len - 9);
        }
        self.bytes
            .extend(((field << 2 | next) as u16).to_le_bytes());
        self.out += len;
        self.trailing(next);
        self
    }

    /// A literal run (after a match without literals, or a few literals and
    /// then a match first) of `n` bytes, and the end marker: room on both
    /// sides for the instructions before it to take the fast paths.
    fn finish(&mut self, n: usize) -> Vec<u8> {
        if self.class != 0 && self.out >= 8 {
            self.m2(3, 8, 0);
        }
        if self.class == 0 && n >= 4 {
            self.literals(n);
        }
        self.bytes.extend([0x11, 0, 0]);
        std::mem::take(&mut self.bytes)
    }

    /// A prefix of at least `n` bytes of varied output: literal runs and
    /// short matches reaching far back.
    fn prefix(n: usize) -> Stream {
        let mut s = Stream::new();
        s.first_literals(200);
        while s.out < n {
            let far = s.out.min(2048);
            s.m2(3, far, 0).literals(250);
        }
        s
    }
}

/// Decodes `s` with ours and with the previous decoder into destinations of
/// the given sizes (and a few around `n`, the length it should decode to):
/// the same result, and the same bytes when it succeeds.
fn agree(what: &str, s: &[u8], n: usize) {
    let caps = [
        n,
        n.saturating_sub(1),
        n + 1,
        n + 35,
        n + 36,
        n + 37,
        n + 64,
        n + 300,
    ];
    common::agrees_with_previous_decoder(what, s, &caps);
}

/// Distances around every boundary the block copies care about.
fn short_distances() -> impl Iterator<Item = usize> {
    (1..=40).chain([47, 48, 49, 63, 64, 65, 66, 100, 1000])
}

#[test]
fn m2_at_every_short_distance() {
    for len in 3..=8 {
        for dist in short_distances().chain([2047, 2048]) {
            for next in [0, 1, 3] {
                let mut s = Stream::prefix(2100);
                s.m2(len, dist, next);
                let n = s.out + 40;
                let what = format!("M2 len {len} dist {dist} next {next}");
                agree(&what, &s.finish(40), n);
            }
        }
    }
}

#[test]
fn m3_at_every_short_distance_and_block_length() {
    let lens = (3..=40).chain([47, 48, 49, 63, 64, 65, 66, 80, 287, 288, 289, 300, 700]);
    for len in lens {
        for dist in short_distances() {
            for next in [0, 2] {
                let mut s = Stream::prefix(1100);
                s.m3(len, dist, next);
                let n = s.out + 40;
                let what = format!("M3 len {len} dist {dist} next {next}");
                agree(&what, &s.finish(40), n);
            }
        }
    }
}

#[test]
fn back_to_back_short_matches() {
    // Matches that read what the one before them has just written, and
    // runs of them without literals in between.
    for dist in 1..=34 {
        for len in [3, 8, 15, 16, 17, 31, 32, 33, 34, 64] {
            let mut s = Stream::prefix(300);
            for k in 0..6 {
                if len <= 8 && k % 2 == 0 {
                    s.m2(len, dist, 0);
                } else {
                    s.m3(len, dist + k, k % 4);
                }
            }
            let n = s.out + 40;
            agree(&format!("dist {dist} len {len}"), &s.finish(40), n);
        }
    }
}

#[test]
fn literal_runs_of_every_length() {
    for len in (4..=300).chain([500, 528, 529, 530, 1000, 5000]) {
        for lead in [5, 20, 3000] {
            let mut s = Stream::prefix(lead);
            s.m2(3, 5, 0).literals(len).m2(4, 7, 0);
            let n = s.out + 20;
            let what = format!("literal run of {len} after {lead}");
            agree(&what, &s.finish(20), n);
        }
    }
    // A first literal run of every length, then a match, and a stream that
    // is nothing but literals.
    for len in 1..=238 {
        let mut s = Stream::new();
        s.first_literals(len);
        let n = s.out;
        agree(&format!("first literal run {len}"), &s.finish(0), n);
        let mut s = Stream::new();
        s.first_literals(len);
        if len >= 3 {
            s.m2(3, len.min(3), 0);
        }
        let n = s.out + 30;
        agree(&format!("first literal run {len}, M2"), &s.finish(30), n);
    }
}

#[test]
fn literal_runs_ending_at_the_end_of_the_input() {
    // The stream cut inside, right after and past a literal run of each
    // length: input overruns (or success) as before.
    for len in (4..=80).chain([255, 273, 274, 300]) {
        let mut s = Stream::prefix(100);
        s.m2(3, 5, 0).literals(len);
        let full = s.out;
        let bytes = s.finish(0);
        for cut in 0..=12 {
            let part = &bytes[..bytes.len() - cut];
            agree(&format!("literal run {len}, cut {cut}"), part, full);
        }
    }
}

#[test]
fn class_after_literal_runs_of_every_length() {
    // 0000DDSS after a literal run (of any length, short or long) is a
    // 3-byte match 2049..=3072 back; after 1..=3 literals a 2-byte match
    // 1..=1024 back.
    for len in 4..=70 {
        for dist in [2049, 2050, 2500, 3072] {
            let mut s = Stream::prefix(3100);
            s.m2(3, 5, 0).literals(len).m1(dist, 1).m1(3, 0);
            let n = s.out + 30;
            agree(&format!("M1 {dist} after {len} literals"), &s.finish(30), n);
        }
    }
    for next in 1..=3 {
        for dist in [1, 2, 3, 4, 15, 16, 17, 1024] {
            let mut s = Stream::prefix(1100);
            s.m3(20, 40, next).m1(dist, 0);
            let n = s.out + 30;
            agree(
                &format!("M1 {dist} after {next} literals"),
                &s.finish(30),
                n,
            );
        }
    }
}

#[test]
fn far_matches_and_end_marker_lookalikes() {
    let base = Stream::prefix(49_200);
    let reset = Stream::clone;
    // M3 up to exactly 16 KiB back.
    for dist in [16_381, 16_382, 16_383, 16_384] {
        for len in [3, 16, 17, 33, 64] {
            let mut s = reset(&base);
            s.m3(len, dist, 1);
            let n = s.out + 40;
            agree(&format!("M3 {len} at {dist}"), &s.finish(40), n);
        }
    }
    // M4 16..48 KiB back, the length in the byte or extended; a zero field
    // with H = 0 is an end marker (length 3) or corrupt (any other), with
    // H = 1 a match 32 KiB back.
    for h in 0..2 {
        for field in [0, 1, 2, 3, 4, 100, 16_383] {
            for len in (3..=12).chain([40, 300]) {
                for next in [0, 3] {
                    let mut s = reset(&base);
                    s.m4(len, h, field, next);
                    let n = s.out + 40;
                    let what = format!("M4 {len} h {h} field {field} next {next}");
                    agree(&what, &s.finish(40), n);
                }
            }
        }
    }
    // A zero-field M4 with a bad length in the middle of a long stream:
    // an error, with the fast loop around it.
    for len in 4..=9 {
        let mut s = reset(&base);
        s.m4(len, 0, 0, 0).literals(50).m2(3, 20, 0);
        let n = s.out + 40;
        let bytes = s.finish(40);
        let mut out = vec![0; n + 100];
        assert!(
            matches!(
                decompress(&bytes, &mut out),
                Err(wring_lzo::Error::Corrupt(_))
            ),
            "zero-field M4 of length {len}"
        );
        agree(&format!("zero-field M4 {len}"), &bytes, n);
    }
}

#[test]
fn matches_reaching_before_the_start() {
    for reach in 1..=40 {
        let mut s = Stream::new();
        s.first_literals(20);
        for _ in 0..3 {
            s.m2(3, 10, 0).literals(30);
        }
        let over = s.out + reach;
        let mut m2 = s.clone();
        m2.m2(5, over, 0);
        let n = m2.out + 40;
        agree(&format!("M2 {reach} too far"), &m2.finish(40), n);
        for len in [5, 20, 40, 100] {
            let mut m3 = s.clone();
            m3.m3(len, over, 0);
            let n = m3.out + 40;
            agree(&format!("M3 {len} {reach} too far"), &m3.finish(40), n);
        }
    }
}

/// A random instruction for [`random_stream`]: kind, length, distance,
/// trailing literals.
fn op() -> impl Strategy<Value = (u8, u16, u16, u8)> {
    (any::<u8>(), any::<u16>(), any::<u16>(), any::<u8>())
}

/// A valid stream of the instructions `ops` describe, with distances mostly
/// short (where matches overlap their source) and lengths around the block
/// sizes; returns it and the length it decodes to.
fn random_stream(first: usize, ops: &[(u8, u16, u16, u8)]) -> (Vec<u8>, usize) {
    let mut s = Stream::new();
    s.first_literals(first);
    for &(kind, a, b, next) in ops {
        let (a, b) = (usize::from(a), usize::from(b));
        let next = usize::from(next & 3);
        let dist = match kind >> 6 {
            0 => 1 + b % 20,
            1 => 1 + b % 70,
            2 => 1 + b % s.out,
            _ => s.out.min(1 + b % 2048),
        }
        .min(s.out);
        match kind % 8 {
            0 | 1 if s.class == 0 => {
                let n = match a % 4 {
                    0 => 4 + a % 15,
                    1 => 16 + a % 4,
                    2 => 19 + a % 60,
                    _ => 60 + a % 300,
                };
                s.literals(n);
            }
            2 | 3 if dist <= 2048 => {
                s.m2(3 + a % 6, dist, next);
            }
            4 if s.class != 0 && s.class < 4 && dist <= 1024 => {
                s.m1(dist, next);
            }
            4 if s.class == 4 && s.out >= 2049 => {
                s.m1(2049 + b % (s.out.min(3072) - 2048), next);
            }
            _ => {
                let len = match a % 5 {
                    0 => 3 + a % 14,
                    1 => 15 + a % 4,
                    2 => 30 + a % 6,
                    3 => 60 + a % 10,
                    _ => 3 + a % 300,
                };
                s.m3(len, dist.min(16_384), next);
            }
        }
    }
    let n = s.out + 25;
    (s.finish(25), n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Random valid streams of short-distance matches and literal runs, whole,
    /// cut short and with a byte changed, decode as before into destinations
    /// of every size around their length.
    #[test]
    fn random_short_distance_streams_decode_as_before(
        first in 1usize..=238,
        ops in prop::collection::vec(op(), 1..150),
        cut in 0usize..8,
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let (s, n) = random_stream(first, &ops);
        agree("whole", &s, n);
        agree("cut", &s[..s.len() - cut.min(s.len())], n);
        let mut bad = s.clone();
        bad[flip.index(s.len())] = byte;
        agree("changed", &bad, n);
    }
}
