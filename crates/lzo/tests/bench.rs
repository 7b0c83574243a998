//! Rough throughput comparison with liblzo2 (ignored by default). Run with
//! `cargo test --release -p wring-lzo --test bench -- --ignored --nocapture`;
//! set `LZO_BENCH_FILE` to measure on a file of your own (first 32 MiB).

mod common;

use std::time::{Duration, Instant};

use lzo_sys::lzo1x::{lzo1x_1_compress, lzo1x_decompress_safe, LZO1X_1_MEM_COMPRESS};
use wring_lzo::{btrfs, compress, decompress, worst_compress, CompressState};

const SECTOR: usize = 4096;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    if let Ok(path) = std::env::var("LZO_BENCH_FILE") {
        let mut data = std::fs::read(&path).expect("LZO_BENCH_FILE unreadable");
        data.truncate(32 << 20);
        v.push((path, data));
    }
    let n = 8 << 20;
    v.push(("text".into(), common::text(n, 1)));
    v.push(("mixed".into(), common::mixed(n, 2)));
    v.push(("random".into(), common::random(n, 3)));
    v
}

/// The file from `LZO_BENCH_FILE`, else generated text; 4 MiB at most.
fn first_corpus() -> Vec<u8> {
    let mut data = match std::env::var("LZO_BENCH_FILE") {
        Ok(path) => std::fs::read(path).expect("LZO_BENCH_FILE unreadable"),
        Err(_) => common::text(4 << 20, 1),
    };
    data.truncate(4 << 20);
    data
}

/// Runs `f` repeatedly for about half a second; returns MB/s of `bytes`.
fn rate(bytes: usize, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut rounds = 0u32;
    while start.elapsed() < Duration::from_millis(500) {
        f();
        rounds += 1;
    }
    bytes as f64 * f64::from(rounds) / start.elapsed().as_secs_f64() / 1e6
}

fn lzo2_compress_into(src: &[u8], dst: &mut [u8], wrk: &mut [u8]) -> usize {
    let mut len = dst.len();
    // SAFETY: valid buffers of the given lengths; dst has worst-case room.
    let r = unsafe {
        lzo1x_1_compress(
            src.as_ptr(),
            src.len(),
            dst.as_mut_ptr(),
            &mut len,
            wrk.as_mut_ptr().cast(),
        )
    };
    assert_eq!(r, 0);
    len
}

fn lzo2_decompress_into(src: &[u8], dst: &mut [u8]) -> usize {
    let mut len = dst.len();
    // SAFETY: valid buffers of the given lengths.
    let r = unsafe {
        lzo1x_decompress_safe(
            src.as_ptr(),
            src.len(),
            dst.as_mut_ptr(),
            &mut len,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, 0);
    len
}

/// Compresses `data` in `chunk`-sized pieces; returns the streams.
fn pack_all(
    data: &[u8],
    chunk: usize,
    mut f: impl FnMut(&[u8], &mut [u8]) -> usize,
) -> Vec<Vec<u8>> {
    let mut buf = vec![0; worst_compress(chunk)];
    data.chunks(chunk)
        .map(|c| {
            let n = f(c, &mut buf);
            buf[..n].to_vec()
        })
        .collect()
}

/// Compress-only loop on 4 KiB chunks of the first corpus, for `perf stat`:
/// `LZO_BENCH_WHICH=ours|liblzo2` picks the implementation.
#[test]
#[ignore]
fn compress_loop_4k() {
    let _ = common::lzo2_compress(b"init");
    let which = std::env::var("LZO_BENCH_WHICH").unwrap_or_default();
    let mut state = CompressState::new();
    let mut wrk = vec![0u8; LZO1X_1_MEM_COMPRESS as usize];
    let mut buf = vec![0; worst_compress(SECTOR)];
    let data = first_corpus();
    let mut total = 0;
    for _ in 0..10 {
        for c in data.chunks(SECTOR) {
            total += if which == "liblzo2" {
                lzo2_compress_into(c, &mut buf, &mut wrk)
            } else if which == "none" {
                c.len()
            } else {
                compress(c, &mut buf, &mut state).unwrap()
            };
        }
    }
    println!("{which}: {total} bytes out for {} in", 10 * data.len());
}

/// Decompress-only loop, like [`compress_loop_4k`].
#[test]
#[ignore]
fn decompress_loop_4k() {
    let _ = common::lzo2_compress(b"init");
    let which = std::env::var("LZO_BENCH_WHICH").unwrap_or_default();
    let data = first_corpus();
    let packed: Vec<Vec<u8>> = data.chunks(SECTOR).map(common::lzo2_compress).collect();
    let mut out = vec![0; SECTOR];
    let mut total = 0;
    for _ in 0..20 {
        for p in &packed {
            total += if which == "liblzo2" {
                lzo2_decompress_into(p, &mut out)
            } else if which == "none" {
                p.len()
            } else {
                decompress(p, &mut out).unwrap()
            };
        }
    }
    println!("{which}: {total} bytes out");
}

#[test]
#[ignore]
fn throughput_vs_liblzo2() {
    let _ = common::lzo2_compress(b"init");
    let mut state = CompressState::new();
    let mut wrk = vec![0u8; LZO1X_1_MEM_COMPRESS as usize];
    for (name, data) in corpus() {
        for chunk in [SECTOR, 128 << 10] {
            let mut buf = vec![0; worst_compress(chunk)];
            let ours = rate(data.len(), || {
                for c in data.chunks(chunk) {
                    compress(c, &mut buf, &mut state).unwrap();
                }
            });
            let theirs = rate(data.len(), || {
                for c in data.chunks(chunk) {
                    lzo2_compress_into(c, &mut buf, &mut wrk);
                }
            });
            let a = pack_all(&data, chunk, |c, b| compress(c, b, &mut state).unwrap());
            let b = pack_all(&data, chunk, |c, d| lzo2_compress_into(c, d, &mut wrk));
            let size =
                |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>() as f64 / data.len() as f64;
            let mut out = vec![0; chunk];
            let d_ours = rate(data.len(), || {
                for s in &a {
                    decompress(s, &mut out).unwrap();
                }
            });
            let d_theirs = rate(data.len(), || {
                for s in &b {
                    lzo2_decompress_into(s, &mut out);
                }
            });
            println!(
                "{name:>10} chunk {chunk:>6}: compress ours {ours:7.0} MB/s, liblzo2 {theirs:7.0} MB/s; \
                 ratio ours {:.3}, liblzo2 {:.3}; decompress ours {d_ours:7.0} MB/s, liblzo2 {d_theirs:7.0} MB/s",
                size(&a),
                size(&b),
            );
        }
        let mut dst = vec![0; worst_compress(128 << 10) + 4096];
        let framed = rate(data.len(), || {
            for c in data.chunks(128 << 10) {
                let _ = btrfs::compress_extent(c, &mut dst, SECTOR, &mut state).unwrap();
            }
        });
        println!("{name:>10} btrfs::compress_extent (128 KiB extents): {framed:7.0} MB/s");
    }
}
