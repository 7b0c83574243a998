//! Rough throughput comparison with liblzo2 (ignored by default). Run with
//! `cargo test --release -p wring-lzo --test bench -- --ignored --nocapture`;
//! set `LZO_BENCH_FILE` to measure on a file of your own (first 32 MiB).

mod common;

use std::time::{Duration, Instant};

use lzo_sys::lzo1x::{lzo1x_1_compress, lzo1x_decompress_safe, LZO1X_1_MEM_COMPRESS};
use wring_lzo::{btrfs, compress, decompress, worst_compress, CompressState};

use common::reference_compress;

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

/// MB/s of `bytes` for each of `fs`, from the fastest of many alternating
/// passes: steadier than [`rate`] on a shared machine.
fn best_rates<const N: usize>(bytes: usize, fs: [&mut dyn FnMut(); N]) -> [f64; N] {
    best_rates_within(Duration::from_secs(2), bytes, fs)
}

/// [`best_rates`], passing over `fs` for about `limit` (at least 5 rounds).
fn best_rates_within<const N: usize>(
    limit: Duration,
    bytes: usize,
    mut fs: [&mut dyn FnMut(); N],
) -> [f64; N] {
    let mut best = [f64::MAX; N];
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < 5 || (rounds < 200 && start.elapsed() < limit) {
        for (f, b) in fs.iter_mut().zip(&mut best) {
            let t = Instant::now();
            f();
            *b = b.min(t.elapsed().as_secs_f64());
        }
        rounds += 1;
    }
    best.map(|t| bytes as f64 / t / 1e6)
}

/// Real files for [`decompress_real_data`]: `LZO_BENCH_FILE` if set, else the
/// files of `/tmp/wring-corpus`, else a few system files; 8 MiB of each.
fn real_corpus() -> Vec<(String, Vec<u8>)> {
    let mut paths: Vec<String> = match std::env::var("LZO_BENCH_FILE") {
        Ok(p) => vec![p],
        Err(_) => std::fs::read_dir("/tmp/wring-corpus")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path().to_string_lossy().into_owned())
                    .filter(|p| !p.ends_with("MANIFEST"))
                    .collect()
            })
            .unwrap_or_default(),
    };
    if paths.is_empty() {
        paths = ["/usr/share/dict/words", "/usr/bin/cargo", "/usr/bin/bash"]
            .map(String::from)
            .to_vec();
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let mut data = std::fs::read(&p).ok()?;
            data.truncate(8 << 20);
            let name = p.rsplit('/').next().unwrap_or(&p).to_string();
            (!data.is_empty()).then_some((name, data))
        })
        .collect()
}

/// Decompression speed on real files cut into 4 KiB pages and 128 KiB
/// extents, compressed with this crate, decoded by it, by the decoder it
/// replaced (`common::reference`) and by liblzo2:
/// `cargo test --release -p wring-lzo --test bench decompress_real_data -- --ignored --nocapture`.
#[test]
#[ignore]
fn decompress_real_data() {
    let _ = common::lzo2_compress(b"init");
    let mut state = CompressState::new();
    let mut totals = [[0f64; 3]; 2];
    let mut total_bytes = 0usize;
    for (name, data) in real_corpus() {
        for (k, chunk) in [SECTOR, 128 << 10].into_iter().enumerate() {
            let packed = pack_all(&data, chunk, |c, b| compress(c, b, &mut state).unwrap());
            let ratio = packed.iter().map(Vec::len).sum::<usize>() as f64 / data.len() as f64;
            let mut out = vec![0; chunk];
            let mut out2 = vec![0; chunk];
            let mut out3 = vec![0; chunk];
            let [ours, old, theirs] = best_rates(
                data.len(),
                [
                    &mut || {
                        for s in &packed {
                            std::hint::black_box(decompress(s, &mut out).unwrap());
                        }
                    },
                    &mut || {
                        for s in &packed {
                            std::hint::black_box(
                                common::reference::decompress(s, &mut out2).unwrap(),
                            );
                        }
                    },
                    &mut || {
                        for s in &packed {
                            std::hint::black_box(lzo2_decompress_into(s, &mut out3));
                        }
                    },
                ],
            );
            // Time-weighted totals: all bytes over the sum of the times.
            for (total, r) in totals[k].iter_mut().zip([ours, old, theirs]) {
                *total += data.len() as f64 / r;
            }
            println!(
                "{name:>16} chunk {chunk:>6}: ratio {ratio:.3}; decompress ours {ours:5.0} MB/s, \
                 before {old:5.0} MB/s ({:.2}x), liblzo2 {theirs:5.0} MB/s",
                ours / old
            );
        }
        // As the filesystem reads them: 128 KiB extents in btrfs's framing,
        // one raw stream per 4 KiB sector.
        let mut buf = vec![0; 2 * (128 << 10)];
        let mut framed_bytes = 0;
        let framed: Vec<Vec<u8>> = data
            .chunks(128 << 10)
            .filter_map(|c| {
                let n = btrfs::compress_extent(c, &mut buf, SECTOR, &mut state).unwrap()?;
                framed_bytes += c.len();
                Some(buf[..n].to_vec())
            })
            .collect();
        let mut out = vec![0; 128 << 10];
        let [extents] = best_rates(
            framed_bytes,
            [&mut || {
                for s in &framed {
                    std::hint::black_box(btrfs::decompress_extent(s, &mut out, SECTOR).unwrap());
                }
            }],
        );
        println!(
            "{name:>16} btrfs::decompress_extent, {} compressible 128 KiB extents: {extents:5.0} MB/s",
            framed.len()
        );
        total_bytes += data.len();
    }
    for (k, chunk) in [SECTOR, 128 << 10].into_iter().enumerate() {
        let [ours, old, theirs] = totals[k].map(|s| total_bytes as f64 / s);
        println!(
            "{:>16} chunk {chunk:>6}: decompress ours {ours:5.0} MB/s, \
             before {old:5.0} MB/s ({:.2}x), liblzo2 {theirs:5.0} MB/s",
            "all",
            ours / old
        );
    }
}

/// Compression speed and ratio on real files (see [`real_corpus`]) cut into
/// 4 KiB pieces, each its own stream as btrfs and zram write them: this
/// crate's compressor, the one it replaced (`common::reference_compress`)
/// and liblzo2's `lzo1x_1_compress`; then whole 128 KiB extents in btrfs's
/// framing. About a second per file (`--exact`, or the decompression
/// benchmark runs too):
/// `cargo test --release -p wring-lzo --test bench -- --ignored --nocapture --exact compress_real_data`.
#[test]
#[ignore]
fn compress_real_data() {
    let _ = common::lzo2_compress(b"init");
    let limit = Duration::from_millis(600);
    let mut state = CompressState::new();
    let mut old_state = reference_compress::CompressState::new();
    let mut wrk = vec![0u8; LZO1X_1_MEM_COMPRESS as usize];
    // Time-weighted totals (all bytes over the sum of the times) and sizes.
    let mut times = [0f64; 4];
    let mut sizes = [0usize; 3];
    let mut total_bytes = 0usize;
    for (name, data) in real_corpus() {
        let [mut buf, mut buf2, mut buf3] = [(); 3].map(|_| vec![0; worst_compress(SECTOR)]);
        let a = pack_all(&data, SECTOR, |c, b| compress(c, b, &mut state).unwrap());
        let b = pack_all(&data, SECTOR, |c, b| {
            reference_compress::compress(c, b, &mut old_state).unwrap()
        });
        let c = pack_all(&data, SECTOR, |c, d| lzo2_compress_into(c, d, &mut wrk));
        // Every stream must decode (here, with liblzo2) to its piece.
        let mut out = vec![0; SECTOR];
        for (s, piece) in a.iter().zip(data.chunks(SECTOR)) {
            let n = lzo2_decompress_into(s, &mut out);
            assert_eq!(&out[..n], piece, "{name}: liblzo2 decodes ours wrongly");
        }
        let len = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
        let got = [len(&a), len(&b), len(&c)];
        let [ours, old, theirs] = best_rates_within(
            limit,
            data.len(),
            [
                &mut || {
                    for c in data.chunks(SECTOR) {
                        std::hint::black_box(compress(c, &mut buf, &mut state).unwrap());
                    }
                },
                &mut || {
                    for c in data.chunks(SECTOR) {
                        std::hint::black_box(
                            reference_compress::compress(c, &mut buf2, &mut old_state).unwrap(),
                        );
                    }
                },
                &mut || {
                    for c in data.chunks(SECTOR) {
                        std::hint::black_box(lzo2_compress_into(c, &mut buf3, &mut wrk));
                    }
                },
            ],
        );
        let mut dst = vec![0; worst_compress(128 << 10) + 4096];
        let [framed] = best_rates_within(
            limit / 2,
            data.len(),
            [&mut || {
                for c in data.chunks(128 << 10) {
                    std::hint::black_box(
                        btrfs::compress_extent(c, &mut dst, SECTOR, &mut state).unwrap(),
                    );
                }
            }],
        );
        let ratio = got.map(|n| n as f64 / data.len() as f64);
        println!(
            "{name:>16} 4 KiB: compress ours {ours:5.0} MB/s, before {old:5.0} MB/s ({:.2}x), \
             liblzo2 {theirs:5.0} MB/s; ratio ours {:.4}, before {:.4}, liblzo2 {:.4}; \
             128 KiB btrfs extents {framed:5.0} MB/s",
            ours / old,
            ratio[0],
            ratio[1],
            ratio[2],
        );
        for (t, r) in times.iter_mut().zip([ours, old, theirs, framed]) {
            *t += data.len() as f64 / r;
        }
        for (s, n) in sizes.iter_mut().zip(got) {
            *s += n;
        }
        total_bytes += data.len();
    }
    let [ours, old, theirs, framed] = times.map(|t| total_bytes as f64 / t);
    let ratio = sizes.map(|n| n as f64 / total_bytes as f64);
    println!(
        "{:>16} 4 KiB: compress ours {ours:5.0} MB/s, before {old:5.0} MB/s ({:.2}x), \
         liblzo2 {theirs:5.0} MB/s; ratio ours {:.4}, before {:.4}, liblzo2 {:.4}; \
         128 KiB btrfs extents {framed:5.0} MB/s",
        "all",
        ours / old,
        ratio[0],
        ratio[1],
        ratio[2],
    );
}
