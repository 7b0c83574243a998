//! Writes seed corpora for the fuzz targets: `cargo run --example seeds -- DIR` fills
//! `DIR/<target>/` with a few valid inputs per target (compressed extents behind a destination
//! selector for the decoders, raw LZO1X streams, round-trip choices, and the store's records
//! behind their selector byte), so that a short run starts from inputs that reach deep into
//! each format.

use std::path::Path;

use wring_engine::{compressed_limit, Algorithm, CompressSpec, Outcome, MAX_EXTENT};
use wring_fuzz::{engine, selector_for};
use wring_lzo::{worst_compress, CompressState};

/// Sample data: text, zeros, runs and a short odd-sized piece.
fn samples() -> Vec<Vec<u8>> {
    let text: Vec<u8> = b"btrfs stores compressed extents of at most 128 KiB; zram a page. "
        .iter()
        .copied()
        .cycle()
        .take(40_000)
        .collect();
    let runs: Vec<u8> = (0..MAX_EXTENT).map(|i| (i / 700) as u8).collect();
    vec![
        text,
        vec![0; 9000],
        runs,
        b"wring wring wring wring wring!".repeat(200),
    ]
}

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = dir.join(target);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(name), bytes)
}

/// A compressed extent of `src`, or `None` when it does not save a block.
fn extent(algorithm: Algorithm, src: &[u8]) -> Option<Vec<u8>> {
    let mut dst = vec![0; compressed_limit(src.len())];
    match engine().compress(CompressSpec::default_for(algorithm), src, &mut dst) {
        Ok(Outcome::Compressed(n)) => Some(dst[..n].to_vec()),
        _ => None,
    }
}

/// Decoder seeds: each sample's extent behind a selector for its full size and for half.
fn decoder_seeds(dir: &Path, target: &str, algorithm: Algorithm) -> std::io::Result<()> {
    for (i, src) in samples().iter().enumerate() {
        let Some(packed) = extent(algorithm, src) else {
            continue;
        };
        for (j, dst_len) in [src.len(), src.len() / 2].into_iter().enumerate() {
            let seed = [&selector_for(dst_len)[..], &packed].concat();
            write(dir, target, &format!("seed-{i}-{j}"), &seed)?;
        }
    }
    Ok(())
}

/// Dictionary seeds: each sample compressed with zstd and the target's dictionary, behind a
/// selector for its full size (decoded, and recompressed, whole).
fn dict_seeds(dir: &Path) -> std::io::Result<()> {
    for (i, src) in samples().iter().enumerate() {
        let src = &src[..src.len().min(MAX_EXTENT)];
        let mut packed = vec![0; src.len()];
        let spec = CompressSpec::new(Algorithm::Zstd, 3);
        let dict = Some(wring_fuzz::dictionary());
        if let Ok(Some(n)) = engine().compress_into_dict(spec, dict, src, &mut packed) {
            let seed = [&selector_for(src.len())[..], &packed[..n]].concat();
            write(dir, "zstd_dict", &format!("seed-{i}"), &seed)?;
        }
    }
    Ok(())
}

/// Raw LZO1X seeds: each sample's first 4 KiB (one btrfs segment) as one raw stream.
fn lzo1x_seeds(dir: &Path) -> std::io::Result<()> {
    let mut state = CompressState::new();
    for (i, src) in samples().iter().enumerate() {
        let src = &src[..src.len().min(4096)];
        let mut packed = vec![0; worst_compress(src.len())];
        let n = wring_lzo::compress(src, &mut packed, &mut state)
            .expect("a worst-case buffer suffices");
        let seed = [&selector_for(src.len())[..], &packed[..n]].concat();
        write(dir, "lzo1x_raw", &format!("seed-{i}"), &seed)?;
    }
    Ok(())
}

/// Round-trip seeds: every algorithm under compress-force at level byte 0, on each sample.
fn round_trip_seeds(dir: &Path) -> std::io::Result<()> {
    for (i, src) in samples().iter().enumerate() {
        for algorithm_byte in 0..Algorithm::ALL.len() as u8 {
            let seed = [&[algorithm_byte, 0][..], src].concat();
            write(
                dir,
                "roundtrip",
                &format!("seed-{i}-{algorithm_byte}"),
                &seed,
            )?;
        }
    }
    Ok(())
}

/// Store record seeds: a selector byte (0 inode, 1 extent item, 2 dirent kind, 3 ACL, 4 time),
/// then a valid record of that kind.
fn store_record_seeds(dir: &Path) -> std::io::Result<()> {
    use wring_fs::store::records::{external_item, Encoding, ExtentHeader, Inode, Kind, Time};
    let mut seeds: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut file = Inode::new(Kind::File, 0o644, 1000, 1000);
    file.size = 3 * 131072 + 5;
    file.disk = 4096;
    file.extent_size = 131072;
    file.mtime = Time {
        secs: -1,
        nsecs: 999_999_999,
    };
    seeds.push((0, file.to_bytes()));
    seeds.push((0, Inode::new(Kind::Dir, 0o755, 0, 0).to_bytes()));
    let header = ExtentHeader {
        encoding: Encoding::Compressed(Algorithm::Zstd, 3),
        ram_len: 131072,
        crc: 0x1234_5678,
        seq: 42,
        dict: 1,
    };
    let inline = header.encode(b"stored bytes of a small extent");
    let external = external_item(&inline, 1 << 20).map_err(std::io::Error::other)?;
    seeds.push((1, external.to_vec()));
    seeds.push((1, inline));
    let raw = ExtentHeader {
        encoding: Encoding::Raw,
        ram_len: 5,
        dict: 0,
        ..header
    };
    seeds.push((1, raw.encode(b"hello")));
    seeds.push((2, vec![Kind::Symlink as u8]));
    // user::rw-, group::r--, other::r-- in the kernel's xattr format.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(1u16, 6u16), (4, 4), (0x20, 4)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    seeds.push((3, acl));
    let mut time = i64::MAX.to_le_bytes().to_vec();
    time.extend_from_slice(&999_999_999u32.to_le_bytes());
    seeds.push((4, time));
    // A dictionary record: id 1 and a dictionary trained on header-like lines.
    let samples: Vec<Vec<u8>> = (0..200)
        .map(|i| format!("#define SEED_{i} (1 << {}) /* flag {i} */\n", i % 31).repeat(3))
        .map(String::into_bytes)
        .collect();
    let views: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
    if let Ok(d) = wring_engine::dict::Dictionary::train(&views, 4096) {
        seeds.push((5, [&1u32.to_le_bytes()[..], d.bytes()].concat()));
    }
    for (i, (kind, record)) in seeds.iter().enumerate() {
        let seed = [&[*kind][..], record].concat();
        write(dir, "store_records", &format!("seed-{i}"), &seed)?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os().nth(1).expect("usage: seeds DIR");
    let dir = Path::new(&dir);
    let decoders = [
        ("decompress_zlib", Algorithm::Zlib),
        ("decompress_zstd", Algorithm::Zstd),
        ("decompress_lzo", Algorithm::Lzo),
        ("decompress_lz4", Algorithm::Lz4),
        ("decompress_lzo_rle", Algorithm::LzoRle),
        ("decompress_deflate", Algorithm::Deflate),
    ];
    for (target, algorithm) in decoders {
        decoder_seeds(dir, target, algorithm)?;
    }
    lzo1x_seeds(dir)?;
    dict_seeds(dir)?;
    store_record_seeds(dir)?;
    fuse_ring_seeds(dir)?;
    round_trip_seeds(dir)
}

/// Ring-layout FUSE requests (in_out, op_in, payload): a LOOKUP, a MKNOD, a RENAME2, a
/// WRITE and a SETATTR.
fn fuse_ring_seeds(dir: &Path) -> std::io::Result<()> {
    let request = |opcode: u32, op: &[u8], payload: &[u8]| {
        let mut v = vec![0u8; 256];
        v[4..8].copy_from_slice(&opcode.to_le_bytes());
        v[8..16].copy_from_slice(&1u64.to_le_bytes());
        v[16..24].copy_from_slice(&1u64.to_le_bytes());
        v[128..128 + op.len()].copy_from_slice(op);
        v.extend_from_slice(payload);
        v
    };
    let mut write_in = vec![0u8; 40];
    write_in[16..20].copy_from_slice(&5u32.to_le_bytes());
    let mut setattr_in = vec![0u8; 88];
    setattr_in[0..4].copy_from_slice(&0x7ffu32.to_le_bytes());
    let seeds = [
        ("lookup", request(1, &[], b"name\0")),
        ("mknod", request(8, &0o100644u32.to_le_bytes(), b"file\0")),
        (
            "rename2",
            request(45, &[2, 0, 0, 0, 0, 0, 0, 0, 1], b"a\0b\0"),
        ),
        ("write", request(16, &write_in, b"hello")),
        ("setattr", request(4, &setattr_in, b"")),
    ];
    for (name, bytes) in seeds {
        write(dir, "fuse_ring_requests", name, &bytes)?;
    }
    Ok(())
}
