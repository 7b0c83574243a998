//! wring's zstd frames are the kernel's, byte for byte (needs root; runs in CI).
//!
//! For a level of each zstd strategy btrfs offers, the kernel writes the same data with
//! `compress-force=zstd:LEVEL`; every compressed extent it stores (ENCODED_READ: the frame, zero
//! padded to the sector) must equal wring's frame of the same bytes at the same level, padded
//! the same way. The kernel's zstd is built without SIMD and so never uses the row-based match
//! finder on btrfs's 128 KiB windows; wring turns it off for those frames too, or levels 5 to 11
//! would differ. (zlib and lzo streams differ from the kernel's but decode both ways, which
//! kernel_compat.rs checks.)

use std::fs::File;

use wring_btrfs::ioctl::MAX_UNCOMPRESSED;
use wring_btrfs::scratch::{ScratchError, ScratchFs};
use wring_btrfs::{encoded_read, Compression};
use wring_engine::{CompressSpec, Engine, EngineConfig};
use wring_testing::{self as testing, interleave, samples};

/// Levels covering every strategy in btrfs's range (fast, dfast, greedy, lazy, lazy2, btlazy2,
/// btopt), and a negative one.
const LEVELS: [i32; 8] = [-5, 1, 3, 5, 7, 9, 12, 15];
const BYTES: usize = 2 << 20;
/// Compressed extents each level must compare at least.
const MIN_COMPARED: usize = 8;

#[test]
fn zstd_frames_are_byte_identical_to_the_kernels() {
    if !testing::require_root("zstd_frames_are_byte_identical_to_the_kernels") {
        return;
    }
    let data = interleave(&samples(4 << 20), MAX_UNCOMPRESSED, BYTES);
    let engine = Engine::new(EngineConfig::default());
    for level in LEVELS {
        let option = format!("compress-force=zstd:{level}");
        let mut fs = match ScratchFs::new(&option) {
            Ok(fs) => fs,
            Err(ScratchError::Mount { stderr, .. }) if level < 0 => {
                println!("{option}: this kernel refuses negative levels ({stderr}); not tested");
                continue;
            }
            Err(e) => panic!("setting up btrfs with {option}: {e}"),
        };
        std::fs::write(fs.path().join("f"), &data).unwrap();
        fs.sync().unwrap();
        fs.remount().unwrap();
        let compared = compare_file(
            &engine,
            &File::open(fs.path().join("f")).unwrap(),
            &data,
            level,
        );
        println!("{option}: {compared} extents byte-identical to the kernel's");
        assert!(
            compared >= MIN_COMPARED,
            "{option}: only {compared} compressed extents"
        );
    }
}

/// Compare every compressed extent of `file` (holding `data`) with wring's frame; returns how
/// many were compared.
fn compare_file(engine: &Engine, file: &File, data: &[u8], level: i32) -> usize {
    let spec = CompressSpec::new(wring_engine::Algorithm::Zstd, level);
    let (mut offset, mut compared) = (0u64, 0);
    let mut kernel = vec![0u8; 2 * MAX_UNCOMPRESSED];
    let mut ours = vec![0u8; 2 * MAX_UNCOMPRESSED];
    while (offset as usize) < data.len() {
        let r = encoded_read(file, offset, &mut kernel).unwrap();
        assert!(r.len > 0, "zstd:{level}: no extent at {offset}");
        if r.compression == Compression::Zstd {
            assert_eq!(
                r.unencoded_offset, 0,
                "zstd:{level}: a fresh file's extent at {offset}"
            );
            let start = offset as usize;
            let src = &data[start..start + r.unencoded_len as usize];
            let n = engine
                .compress_into(spec, src, &mut ours)
                .unwrap()
                .expect("a frame fits twice the extent");
            let stored = &kernel[..r.bytes];
            assert!(
                stored.len() >= n
                    && stored[..n] == ours[..n]
                    && stored[n..].iter().all(|&b| b == 0),
                "zstd:{level} extent at {offset}: the kernel stored {} bytes, wring's frame is {n} \
                 and differs",
                stored.len()
            );
            compared += 1;
        }
        offset += r.len;
    }
    compared
}
