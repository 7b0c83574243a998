//! The filesystem's one extent encoder: what to do with an extent's data (the decision), and
//! the extent value it becomes — a header and the stored bytes, compressed through the
//! engine's offload API or raw — for writeback and for truncate alike.
//!
//! Mirrors fs/btrfs/inode.c's compress_file_range(): compress when the decision says so, keep
//! the result only when it saves enough, and otherwise store the data raw, marking the inode
//! NOCOMPRESS under `compress` (inode_need_compress's rule). Differs in what is enough: bytes,
//! not a block ([`SAVING`]), as the store packs extents without rounding. Zero-filled extents
//! become holes, which btrfs leaves to fallocate and wring does on every write.

use wring_engine::dict::Dictionary;
use wring_engine::offload::{BatchJob, Completed, Offload, Op};
use wring_engine::{CompressSpec, Outcome, Policy, Saving};

use crate::error::{errno, FsError};
use crate::store::records::{checksum, Encoding, ExtentHeader};

/// What an extent must save to be stored compressed. The store packs extents without rounding
/// them to blocks, so every byte saved is saved: a small file is compressed too, where btrfs's
/// block rule leaves every file of 4 KiB or less raw (issue 32 measured 9.2 of 41 MB of
/// small files stored raw under compress-force=zstd:3 with the block rule).
const SAVING: Saving = Saving::Bytes;

/// The store's dictionary an extent is compressed with: its id and its prepared forms.
#[derive(Debug, Clone)]
pub(crate) struct DictUse {
    /// Its id in the store (1 to 255).
    pub id: u8,
    /// The dictionary.
    pub dict: Dictionary,
}

impl PartialEq for DictUse {
    fn eq(&self, other: &DictUse) -> bool {
        self.id == other.id
    }
}

impl Eq for DictUse {}

/// How new data of an inode is compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compression {
    /// Algorithm and level.
    pub spec: CompressSpec,
    /// compress-force or the heuristic.
    pub policy: Policy,
    /// Whether an extent that does not compress marks the inode NOCOMPRESS (`compress`
    /// without a property; never under compress-force or a property).
    pub judge: bool,
    /// The dictionary a small extent is compressed with (zstd, `dict=auto`).
    pub dict: Option<DictUse>,
}

/// What to do with an extent's data: compress it so, or (`None`) store it raw.
pub(crate) type Decision = Option<Compression>;

/// What an extent's value is once its compression, if any, has finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// All zeros: no value (a hole).
    Hole,
    /// The data itself; `mark` when it makes the inode NOCOMPRESS.
    Raw {
        /// Whether the inode becomes NOCOMPRESS.
        mark: bool,
    },
    /// The first `n` bytes of the compression output.
    Compressed(usize),
}

/// Whether a range is all zeros (it then becomes a hole).
pub(crate) fn is_zero(buf: &[u8]) -> bool {
    // OR-folding a chunk vectorises; checking between chunks still stops early on data.
    buf.chunks(256)
        .all(|c| c.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

/// The compression request an extent needs: `None` when it becomes a hole or is stored raw
/// (then [`shape`] with no result says which).
pub(crate) fn op_for(data: &[u8], decision: &Decision) -> Option<Op> {
    let c = decision.as_ref()?;
    (!is_zero(data)).then_some(Op::Compress {
        spec: c.spec,
        policy: c.policy,
        saving: SAVING,
    })
}

/// The shape of an extent's value: from its compression's `result` when [`op_for`] asked for
/// one, else a hole or raw.
pub(crate) fn shape(
    data: &[u8],
    decision: &Decision,
    result: Option<Result<Completed, wring_engine::Error>>,
) -> Result<Shape, FsError> {
    let Some(result) = result else {
        return Ok(if is_zero(data) {
            Shape::Hole
        } else {
            Shape::Raw { mark: false }
        });
    };
    // An extent of one block or less is tried (bytes saved are saved) but never judged, as
    // btrfs judges none: a short tail that cannot compress must not mark a whole file.
    let judge = decision.as_ref().is_some_and(|c| c.judge) && data.len() > wring_engine::BLOCK_SIZE;
    Ok(match result? {
        Completed::Compressed(Outcome::Compressed(n)) => Shape::Compressed(n),
        Completed::Compressed(Outcome::Incompressible) => Shape::Raw { mark: judge },
        _ => Shape::Raw { mark: false },
    })
}

/// The header and stored bytes of an extent of `data` shaped so, whose compression output is
/// `out`; `None` for a hole.
pub(crate) fn value<'a>(
    shape: Shape,
    decision: &Decision,
    data: &'a [u8],
    out: &'a [u8],
) -> Result<Option<(ExtentHeader, &'a [u8])>, FsError> {
    let (encoding, stored, dict) = match shape {
        Shape::Hole => return Ok(None),
        Shape::Raw { .. } => (Encoding::Raw, data, 0),
        Shape::Compressed(n) => {
            let c = decision.as_ref().ok_or(errno(libc::EIO))?;
            let alg = c.spec.algorithm.ok_or(errno(libc::EIO))?;
            let stored = out.get(..n).ok_or(errno(libc::EIO))?;
            let dict = c.dict.as_ref().map_or(0, |d| d.id);
            (Encoding::Compressed(alg, c.spec.level), stored, dict)
        }
    };
    let h = ExtentHeader {
        encoding,
        ram_len: data.len() as u32,
        crc: checksum(stored),
        seq: 0,
        dict,
    };
    Ok(Some((h, stored)))
}

/// The dictionary `decision` compresses with, if any.
pub(crate) fn dictionary(decision: &Decision) -> Option<&Dictionary> {
    decision.as_ref()?.dict.as_ref().map(|d| &d.dict)
}

/// Shape extents — (data, decision) each — compressing those that need it in one batch on
/// `offload`, into `outs` (one output buffer per extent, grown as needed).
pub(crate) fn encode_batch(
    offload: &Offload,
    extents: &[(&[u8], &Decision)],
    outs: &mut [Vec<u8>],
) -> Vec<Result<Shape, FsError>> {
    let mut batch = Vec::with_capacity(extents.len());
    let mut which = Vec::with_capacity(extents.len());
    for (i, (&(data, decision), out)) in extents.iter().zip(outs.iter_mut()).enumerate() {
        if let Some(op) = op_for(data, decision) {
            let limit = SAVING.limit(data.len());
            if out.len() < limit {
                out.resize(limit, 0);
            }
            let job = BatchJob::new(op, data, &mut out[..limit]);
            batch.push(job.with_dictionary(dictionary(decision)));
            which.push(i);
        }
    }
    offload.run_batch(&mut batch);
    let mut results: Vec<_> = (0..extents.len()).map(|_| None).collect();
    for (job, i) in batch.into_iter().zip(which) {
        results[i] = Some(job.result.unwrap_or(Err(wring_engine::Error::ShutDown)));
    }
    extents
        .iter()
        .zip(results)
        .map(|(&(data, decision), r)| shape(data, decision, r))
        .collect()
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
