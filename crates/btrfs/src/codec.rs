//! One extent in the kernel's on-disk formats, held in memory: the bytes `wring recompress`
//! hands to BTRFS_IOC_ENCODED_WRITE and `wring verify` decodes from ENCODED_READ, for callers
//! that have the bytes themselves (the Python and C bindings, tools reading btrfs images or
//! `btrfs send --compressed-data` streams).
//!
//! Encoding follows fs/btrfs/compression.c: at most BTRFS_MAX_UNCOMPRESSED (128 KiB) in, the
//! result kept only if it saves a whole sector once rounded up (`Saving::Block`); otherwise
//! the kernel stores the range raw, and so does the caller. Decoding mirrors the read path:
//! the extent decodes into `ram_bytes`, and a short stream's tail is zeros.

use wring_engine::{Algorithm, CompressSpec, Engine, NotInBtrfs, Outcome, Policy, Saving};

use crate::ioctl::{Compression, MAX_UNCOMPRESSED};

/// The largest `ram_bytes` an extent may declare here: btrfs's 128 KiB, and wring-fs's larger
/// extents up to 16 times that.
pub const MAX_RAM_BYTES: usize = 16 * MAX_UNCOMPRESSED;

/// Why an extent could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtentError {
    /// The spec names an algorithm or level btrfs does not have.
    #[error(transparent)]
    NotInBtrfs(#[from] NotInBtrfs),
    /// More input than one extent holds.
    #[error("an extent holds at most {max} bytes; got {len}")]
    TooLarge {
        /// Bytes given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An encoding wring cannot decode (LZO for sectors other than 4 KiB, an unknown value).
    #[error("wring cannot decode {0} extents")]
    Unsupported(Compression),
    /// The codec refused the data (corrupt input).
    #[error(transparent)]
    Codec(#[from] wring_engine::Error),
}

/// Compress `data` as the kernel would store it under `spec` (`compress-force=`, 4 KiB
/// sectors): the encoding to declare and its bytes, or `None` when the kernel would store
/// the range raw because compressing it does not save a sector.
pub fn encode_extent(
    engine: &Engine,
    spec: CompressSpec,
    data: &[u8],
) -> Result<Option<(Compression, Vec<u8>)>, ExtentError> {
    // Any level: the kernel decodes zstd:19 as well as zstd:15 (its option stops at 15).
    let algorithm = spec.algorithm.ok_or(NotInBtrfs::NoCompression)?;
    if data.len() > MAX_UNCOMPRESSED {
        return Err(ExtentError::TooLarge {
            len: data.len(),
            max: MAX_UNCOMPRESSED,
        });
    }
    let Some(compression) = Compression::for_algorithm(algorithm, 4096) else {
        return Err(NotInBtrfs::NoSuchAlgorithm(algorithm).into());
    };
    let mut out = vec![0u8; Saving::Block.limit(data.len())];
    let outcome =
        engine.compress_with_dict(spec, Policy::Force, Saving::Block, None, data, &mut out)?;
    match outcome {
        Outcome::Compressed(n) => {
            out.truncate(n);
            Ok(Some((compression, out)))
        }
        _ => Ok(None),
    }
}

/// Decode one extent of `compression` that declares `ram_bytes` decoded bytes (a stream that
/// ends early leaves zeros, as the kernel's read path does).
pub fn decode_extent(
    engine: &Engine,
    compression: Compression,
    data: &[u8],
    ram_bytes: usize,
) -> Result<Vec<u8>, ExtentError> {
    if ram_bytes > MAX_RAM_BYTES {
        return Err(ExtentError::TooLarge {
            len: ram_bytes,
            max: MAX_RAM_BYTES,
        });
    }
    if compression == Compression::None {
        let mut out = data
            .get(..ram_bytes.min(data.len()))
            .unwrap_or(data)
            .to_vec();
        out.resize(ram_bytes, 0);
        return Ok(out);
    }
    let algorithm: Algorithm = compression
        .algorithm()
        .ok_or(ExtentError::Unsupported(compression))?;
    let mut out = vec![0u8; ram_bytes];
    engine.decompress(algorithm, data, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wring_engine::EngineConfig;

    fn text(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"btrfs extent "[i % 13]).collect()
    }

    #[test]
    fn every_btrfs_spec_round_trips_and_others_are_refused() {
        let engine = Engine::new(EngineConfig::default());
        for spec in [
            "zlib:1", "zlib:9", "lzo", "zstd:-3", "zstd:3", "zstd:15", "zstd:19",
        ] {
            let spec: CompressSpec = spec.parse().unwrap();
            for n in [4097, 60_000, MAX_UNCOMPRESSED] {
                let data = text(n);
                let (compression, bytes) = encode_extent(&engine, spec, &data).unwrap().unwrap();
                assert_eq!(
                    decode_extent(&engine, compression, &bytes, n).unwrap(),
                    data
                );
            }
        }
        let lz4: CompressSpec = "lz4".parse().unwrap();
        assert!(matches!(
            encode_extent(&engine, lz4, b"x"),
            Err(ExtentError::NotInBtrfs(_))
        ));
        let zstd: CompressSpec = "zstd:3".parse().unwrap();
        let big = text(MAX_UNCOMPRESSED + 1);
        assert!(matches!(
            encode_extent(&engine, zstd, &big),
            Err(ExtentError::TooLarge { .. })
        ));
    }

    #[test]
    fn what_saves_no_sector_is_stored_raw_and_garbage_is_an_error() {
        let engine = Engine::new(EngineConfig::default());
        let zstd: CompressSpec = "zstd:3".parse().unwrap();
        assert_eq!(encode_extent(&engine, zstd, &text(4096)).unwrap(), None);
        let err = decode_extent(&engine, Compression::Zstd, &[7; 64], 4096).unwrap_err();
        assert!(matches!(err, ExtentError::Codec(_)), "{err}");
        let lzo64 = Compression::Lzo { sector_size: 65536 };
        assert_eq!(
            decode_extent(&engine, lzo64, &[0; 8], 4096),
            Err(ExtentError::Unsupported(lzo64))
        );
    }
}
