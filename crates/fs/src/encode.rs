//! The filesystem's one extent encoder: what to do with an extent's data (the decision), and
//! the extent value it becomes — a header and the stored bytes, compressed through the
//! engine's offload API or raw — for writeback and for truncate alike.
//!
//! Mirrors fs/btrfs/inode.c's compress_file_range(): compress when the decision says so, keep
//! the result only when it saves a block, and otherwise store the data raw, marking the inode
//! NOCOMPRESS under `compress` (inode_need_compress's rule). Zero-filled extents become holes,
//! which btrfs leaves to fallocate and wring does on every write.

use wring_engine::offload::{BatchJob, Completed, Offload, Op};
use wring_engine::{compressed_limit, CompressSpec, Outcome, Policy};

use crate::error::{errno, FsError};
use crate::store::records::{checksum, Encoding, ExtentHeader, EXTENT_HEADER_LEN};

/// How new data of an inode is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compression {
    /// Algorithm and level.
    pub spec: CompressSpec,
    /// compress-force or the heuristic.
    pub policy: Policy,
    /// Whether an extent that does not compress marks the inode NOCOMPRESS (`compress`
    /// without a property; never under compress-force or a property).
    pub judge: bool,
}

/// What to do with an extent's data: compress it so, or (`None`) store it raw.
pub(crate) type Decision = Option<Compression>;

/// An encoded extent value: its length in its buffer and whether it marks the inode
/// NOCOMPRESS; `None` for a hole.
pub(crate) type Encoded = Option<(usize, bool)>;

/// Whether a range is all zeros (it then becomes a hole).
pub(crate) fn is_zero(buf: &[u8]) -> bool {
    // OR-folding a chunk vectorises; checking between chunks still stops early on data.
    buf.chunks(256)
        .all(|c| c.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

/// Encode extents — (data, decision) each — into `bufs` (one value buffer per extent, grown as
/// needed), compressing those their decision compresses in one batch on `offload`.
pub(crate) fn encode_values(
    offload: &Offload,
    extents: &[(&[u8], Decision)],
    bufs: &mut [Vec<u8>],
) -> Vec<Result<Encoded, FsError>> {
    let mut out: Vec<Result<Encoded, FsError>> = Vec::with_capacity(extents.len());
    let mut batch = Vec::with_capacity(extents.len());
    let mut compressed = Vec::with_capacity(extents.len());
    for (i, (&(data, decision), buf)) in extents.iter().zip(bufs.iter_mut()).enumerate() {
        if is_zero(data) {
            out.push(Ok(None));
            continue;
        }
        let need = EXTENT_HEADER_LEN + compressed_limit(data.len()).max(data.len());
        if buf.len() < need {
            buf.resize(need, 0);
        }
        match decision {
            None => out.push(Ok(Some(put_raw(buf, data, false)))),
            Some(c) => {
                out.push(Ok(None));
                let limit = compressed_limit(data.len());
                let dst = &mut buf[EXTENT_HEADER_LEN..EXTENT_HEADER_LEN + limit];
                let op = Op::Compress {
                    spec: c.spec,
                    policy: c.policy,
                };
                batch.push(BatchJob::new(op, data, dst));
                compressed.push(i);
            }
        }
    }
    offload.run_batch(&mut batch);
    let results: Vec<_> = batch.into_iter().map(|b| b.result).collect();
    for (result, i) in results.into_iter().zip(compressed) {
        let (data, decision) = extents[i];
        out[i] = finish(data, decision, &mut bufs[i], result);
    }
    out
}

/// Store `data` raw in `buf` after its header.
fn put_raw(buf: &mut [u8], data: &[u8], mark: bool) -> (usize, bool) {
    buf[EXTENT_HEADER_LEN..EXTENT_HEADER_LEN + data.len()].copy_from_slice(data);
    let h = ExtentHeader {
        encoding: Encoding::Raw,
        ram_len: data.len() as u32,
        crc: checksum(data),
        seq: 0,
    };
    h.put(buf);
    (EXTENT_HEADER_LEN + data.len(), mark)
}

/// The value of an extent whose compression request finished with `result`.
fn finish(
    data: &[u8],
    decision: Decision,
    buf: &mut [u8],
    result: Option<Result<Completed, wring_engine::Error>>,
) -> Result<Encoded, FsError> {
    let Some(c) = decision else {
        return Ok(Some(put_raw(buf, data, false)));
    };
    Ok(Some(match result.ok_or(errno(libc::EIO))?? {
        Completed::Compressed(Outcome::Compressed(n)) => {
            let alg = c.spec.algorithm.ok_or(errno(libc::EIO))?;
            let h = ExtentHeader {
                encoding: Encoding::Compressed(alg, c.spec.level),
                ram_len: data.len() as u32,
                crc: checksum(&buf[EXTENT_HEADER_LEN..EXTENT_HEADER_LEN + n]),
                seq: 0,
            };
            h.put(buf);
            (EXTENT_HEADER_LEN + n, false)
        }
        Completed::Compressed(Outcome::Incompressible) => put_raw(buf, data, c.judge),
        _ => put_raw(buf, data, false),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_detection() {
        let mut v = vec![0u8; 10000];
        assert!(is_zero(&v[3..]));
        v[9999] = 1;
        assert!(!is_zero(&v[1..]));
        assert!(is_zero(&[]));
    }
}
