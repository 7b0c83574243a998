//! With `page_pool` set, the device's steady-state read path allocates no buffer of 4 KiB or
//! more: a read copies each compressed object into a pool page and decodes it into the
//! caller's page when it reads a whole page, or into a second pool page, a bounce page
//! (EROFS's reserved pages), when it reads part of one; raw (huge) pages read in part bounce
//! through that page too. A request takes its two pool pages once, at the first page that
//! needs them. Every allocation of 4 KiB or more in the process is counted while a
//! warm device serves reads of every shape — one page, part of a page, 128 KiB, 1 MiB across
//! compressed, huge, same-filled and never-written pages — and the pool's hits must account
//! for every staged read. Writes compress into pool pages as well: their hits are checked, and
//! a warm rewrite of the compressed pages must not allocate 4 KiB or more either (a state or
//! a buffer made per page, or an arena that grows instead of reusing freed room).
//!
//! One test in this binary, so that no other test's threads allocate during the count.

use wring_blk::{Options, Slot, Store, PAGE_SIZE};
use wring_testing::alloc::{Counting, Counts};

#[global_allocator]
static ALLOC: Counting = Counting::new();

/// 2 MiB: text, noise (huge pages), one repeated word, and the never-written rest.
const PAGES: usize = 512;
const TEXT: std::ops::Range<usize> = 0..384;
const NOISE: std::ops::Range<usize> = 384..448;
const SAME: std::ops::Range<usize> = 448..480;

/// The device's contents, page by page.
fn contents() -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = vec![0u8; PAGES * PAGE_SIZE];
    for (p, page) in out.chunks_mut(PAGE_SIZE).enumerate() {
        for (i, b) in page.iter_mut().enumerate() {
            *b = if TEXT.contains(&p) {
                let words = b"the quick brown fox jumps over the lazy dog, page ";
                words[(i + p * 7) % words.len()] ^ (((i / 512) as u8) & 1)
            } else if NOISE.contains(&p) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            } else if SAME.contains(&p) {
                [7, 1, 2, 3, 4, 5, 6, p as u8][i % 8]
            } else {
                0
            };
        }
    }
    out
}

/// Reads of every shape: (offset, length), and how many of them touch a page the pool stages
/// (a compressed page, or part of a huge one: two pool pages per request).
fn reads() -> (Vec<(usize, usize)>, u64) {
    let mut v = Vec::new();
    for p in (0..PAGES).step_by(3) {
        v.push((p * PAGE_SIZE, PAGE_SIZE)); // one page
        v.push((p * PAGE_SIZE + 1000, 100)); // part of a page
    }
    for p in (0..PAGES).step_by(32) {
        v.push((p * PAGE_SIZE, 32 * PAGE_SIZE)); // 128 KiB
    }
    v.push((0, 256 * PAGE_SIZE)); // 1 MiB
    v.push((256 * PAGE_SIZE + 5, 256 * PAGE_SIZE - 5)); // 1 MiB less 5 bytes, unaligned
                                                        // A compressed page always stages (its compressed copy); a huge one only when read in
                                                        // part (through the bounce page).
    let staged = v
        .iter()
        .filter(|&&(o, l)| {
            (o / PAGE_SIZE..(o + l).div_ceil(PAGE_SIZE)).any(|p| {
                let part = o > p * PAGE_SIZE || o + l < (p + 1) * PAGE_SIZE;
                TEXT.contains(&p) || (NOISE.contains(&p) && part)
            })
        })
        .count() as u64;
    (v, staged)
}

fn read_all(store: &Store, want: &[u8], reads: &[(usize, usize)], out: &mut [u8]) {
    for &(offset, len) in reads {
        let out = &mut out[..len];
        store.read(offset as u64, out).unwrap();
        assert!(
            out[..] == want[offset..offset + len],
            "{len} bytes at {offset} read back wrong"
        );
    }
}

#[test]
fn warm_reads_and_rewrites_stage_in_the_pool_without_allocating() {
    let want = contents();
    let (reads, staged) = reads();
    let mut out = vec![0u8; 256 * PAGE_SIZE];
    for algorithm in ["lz4", "zstd:3", "lzo-rle"] {
        let opts = format!("comp_algorithm={algorithm},streams=1,page_pool=32");
        let store =
            wring_blk::open((PAGES * PAGE_SIZE) as u64, &Options::parse(&opts).unwrap()).unwrap();
        let written = (TEXT.end + NOISE.len() + SAME.len()) * PAGE_SIZE;
        store.write(0, &want[..written]).unwrap();
        let compressing = store.stat().page_pool;
        assert!(
            matches!(store.slot(NOISE.start), Some(Slot::Stored { len, .. }) if len as usize == PAGE_SIZE),
            "{algorithm}: the noise pages should be stored huge"
        );
        // Every text and noise page was compressed into a pool page.
        assert_eq!(
            (compressing.hits, compressing.misses),
            ((TEXT.len() + NOISE.len()) as u64, 0),
            "{algorithm}: the write path's compressed output comes from the pool: {compressing:?}"
        );

        // Warm: the streams' workspaces and the pool's pages exist.
        read_all(&store, &want, &reads, &mut out);
        let before = store.stat().page_pool;
        ALLOC.start();
        read_all(&store, &want, &reads, &mut out);
        let Counts { large, small } = ALLOC.stop();
        let after = store.stat().page_pool;

        assert_eq!(
            large,
            0,
            "{algorithm}: allocations of 4 KiB or more in {} warm reads (and {small} smaller ones)",
            reads.len()
        );
        assert_eq!(
            (after.hits - before.hits, after.misses - before.misses),
            (2 * staged, 0),
            "{algorithm}: every staged read takes its two pages from the pool: {after:?}"
        );
        assert_eq!(
            (after.size, after.in_use, after.free),
            (32, 0, 32),
            "{after:?}"
        );

        // Writes, warm: rewriting the compressed pages (each freed and stored again, in the
        // room the old objects leave) allocates nothing of 4 KiB or more either: the page
        // compresses into a pool page, with the stream's state kept. (A huge page is an
        // object of a whole page, alone in its zspage: storing one makes a zspage and freeing
        // the old one gives its page back, as zsmalloc does, so the noise pages are left out.)
        let text = &want[..TEXT.end * PAGE_SIZE];
        store.write(0, text).unwrap();
        ALLOC.start();
        store.write(0, text).unwrap();
        let Counts { large, small } = ALLOC.stop();
        assert_eq!(
            large,
            0,
            "{algorithm}: allocations of 4 KiB or more rewriting {} bytes (and {small} smaller ones)",
            text.len()
        );
    }
}
