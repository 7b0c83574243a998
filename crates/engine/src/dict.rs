//! Dictionaries: zstd's, as zram's `algorithm_params dict=FILE` gives one to its zstd backend
//! (drivers/block/zram/backend_zstd.c: `ZSTD_createCDict_byReference` at the configured level
//! and `ZSTD_createDDict_byReference`), and [`Dictionary::train`] to build one from samples
//! (zstd's `ZDICT_trainFromBuffer`, which the kernel does not have).
//!
//! A [`Dictionary`] is a value: the bytes, zstd's dictionary ID, and the digested forms — one
//! for decompression, made at once (which also checks the bytes), and one per compression
//! level, made at the first extent of that level or by [`Dictionary::prepare`]. It is cheap to
//! clone (an `Arc`) and safe to share: zstd's digested dictionaries are read-only, used by
//! many contexts on many threads at once. A request carries it
//! ([`BatchJob::with_dictionary`](crate::offload::BatchJob::with_dictionary),
//! [`Engine::compress_into_dict`](crate::Engine::compress_into_dict)); the workspace's codec
//! state compresses and decompresses with its digested forms, so any zstd workspace serves any
//! dictionary and the manager needs no dictionary-bound ones. A front end keeps its
//! dictionaries (blk one per algorithm priority; a filesystem could keep one per directory,
//! recording [`Dictionary::id`] with each extent) and hands the right one with each request.
//!
//! Differs from zram: the digested forms copy the bytes (`ZSTD_createCDict`, not
//! `_byReference`), and any level's compression form is made on demand, not only the
//! configured one.

use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

use zstd_sys as z;

use crate::codec::zstd::check;
use crate::error::Error;
use crate::spec::Algorithm;

/// A zstd dictionary with its digested forms; clones share them.
#[derive(Clone)]
pub struct Dictionary(Arc<Inner>);

struct Inner {
    /// The digested compression forms, one per zstd level from the lowest up (made on demand).
    cdicts: Box<[OnceLock<CDict>]>,
    ddict: DDict,
    id: u32,
    bytes: Box<[u8]>,
}

/// A digested compression dictionary, freed on drop.
struct CDict(NonNull<z::ZSTD_CDict>);
/// A digested decompression dictionary, freed on drop.
struct DDict(NonNull<z::ZSTD_DDict>);

// SAFETY: digested dictionaries are immutable after creation; zstd documents them as usable
// by many contexts on many threads at once, and they hold no thread-bound state.
unsafe impl Send for CDict {}
// SAFETY: as above; nothing mutates them through a shared reference.
unsafe impl Sync for CDict {}
// SAFETY: as for CDict.
unsafe impl Send for DDict {}
// SAFETY: as for CDict.
unsafe impl Sync for DDict {}

impl Drop for CDict {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCDict and freed once, here; no context uses it any
        // longer (a context only references it during a call, which holds the Dictionary).
        unsafe { z::ZSTD_freeCDict(self.0.as_ptr()) };
    }
}

impl Drop for DDict {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createDDict and freed once, here; as for CDict.
        unsafe { z::ZSTD_freeDDict(self.0.as_ptr()) };
    }
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("id", &self.0.id)
            .field("bytes", &self.0.bytes.len())
            .finish()
    }
}

fn refused(why: impl Into<String>) -> Error {
    Error::Dictionary(why.into())
}

impl Dictionary {
    /// A dictionary from its bytes: zstd's format (what [`Dictionary::train`] or `zstd
    /// --train` writes) or raw content. Refused when empty or when zstd refuses it.
    pub fn new(bytes: Vec<u8>) -> Result<Dictionary, Error> {
        if bytes.is_empty() {
            return Err(refused("the dictionary is empty"));
        }
        // SAFETY: `bytes` is readable for its length; zstd copies what it keeps.
        let ddict = unsafe { z::ZSTD_createDDict(bytes.as_ptr().cast(), bytes.len()) };
        let ddict = NonNull::new(ddict).map(DDict).ok_or_else(|| {
            refused(format!(
                "zstd refused the dictionary ({} bytes)",
                bytes.len()
            ))
        })?;
        // SAFETY: reads only within `bytes`; 0 when it is not in zstd's format.
        let id = unsafe { z::ZSTD_getDictID_fromDict(bytes.as_ptr().cast(), bytes.len()) };
        let levels = Algorithm::Zstd.levels().count() + 1;
        Ok(Dictionary(Arc::new(Inner {
            cdicts: (0..levels).map(|_| OnceLock::new()).collect(),
            ddict,
            id,
            bytes: bytes.into_boxed_slice(),
        })))
    }

    /// Train a dictionary of at most `capacity` bytes on `samples` (zstd's
    /// `ZDICT_trainFromBuffer`); zstd wants a few dozen samples or more, and fails with too
    /// few or too uniform ones.
    pub fn train(samples: &[&[u8]], capacity: usize) -> Result<Dictionary, Error> {
        let sizes: Vec<usize> = samples.iter().map(|s| s.len()).collect();
        let flat: Vec<u8> = samples.concat();
        let mut dict = vec![0u8; capacity];
        let count = u32::try_from(sizes.len())
            .map_err(|_| refused(format!("{} samples are too many", sizes.len())))?;
        // SAFETY: `dict` is writable for its length; `flat` holds exactly the sum of `sizes`
        // bytes and `sizes` has `count` entries; zstd reads and writes only those.
        let n = unsafe {
            z::ZDICT_trainFromBuffer(
                dict.as_mut_ptr().cast(),
                dict.len(),
                flat.as_ptr().cast(),
                sizes.as_ptr(),
                count,
            )
        };
        let n = check(n).map_err(|e| {
            refused(format!(
                "could not train a dictionary from {} samples: {}",
                samples.len(),
                match e {
                    Error::Library { reason, .. } => reason,
                    other => other.to_string(),
                }
            ))
        })?;
        dict.truncate(n);
        Dictionary::new(dict)
    }

    /// zstd's dictionary ID (from the dictionary's header, written into each frame made with
    /// it); 0 for raw content.
    pub fn id(&self) -> u32 {
        self.0.id
    }

    /// The dictionary's bytes (to save it, and give it again later).
    pub fn bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    /// Digest the dictionary for compression at `level` now rather than at the first extent.
    pub fn prepare(&self, level: i32) -> Result<(), Error> {
        self.cdict(level).map(|_| ())
    }

    /// The digested compression form for `level` (clamped into zstd's range), made on first
    /// use. Two threads racing to make it both digest; one keeps its own, the other's is freed.
    pub(crate) fn cdict(&self, level: i32) -> Result<*const z::ZSTD_CDict, Error> {
        let level = Algorithm::Zstd.clamp_level(level).0;
        let index = usize::try_from(level - Algorithm::Zstd.min_level()).unwrap_or(0);
        let cell = self
            .0
            .cdicts
            .get(index)
            .ok_or_else(|| refused(format!("no compression form for level {level}")))?;
        if let Some(c) = cell.get() {
            return Ok(c.0.as_ptr().cast_const());
        }
        let bytes = &self.0.bytes;
        // SAFETY: `bytes` is readable for its length; zstd copies it into the digested form.
        let made = unsafe { z::ZSTD_createCDict(bytes.as_ptr().cast(), bytes.len(), level) };
        let made = NonNull::new(made).map(CDict).ok_or_else(|| {
            refused(format!(
                "zstd could not digest the dictionary ({} bytes) for level {level}",
                bytes.len()
            ))
        })?;
        // Losing a race drops our digest; the winner's is the one kept.
        drop(cell.set(made));
        cell.get()
            .map(|c| c.0.as_ptr().cast_const())
            .ok_or_else(|| refused("the compression form vanished"))
    }

    /// The digested decompression form.
    pub(crate) fn ddict(&self) -> *const z::ZSTD_DDict {
        self.0.ddict.0.as_ptr().cast_const()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_clones_share_digests() {
        assert!(matches!(
            Dictionary::new(Vec::new()),
            Err(Error::Dictionary(_))
        ));
        let d = Dictionary::new(b"raw content dictionary ".repeat(40)).unwrap();
        assert_eq!(d.id(), 0, "raw content has no zstd ID");
        let c = d.clone();
        d.prepare(3).unwrap();
        assert_eq!(d.cdict(3).unwrap(), c.cdict(3).unwrap());
        assert_eq!(d.cdict(99).unwrap(), d.cdict(22).unwrap());
        assert_eq!(c.bytes().len(), 23 * 40);
    }

    #[test]
    fn trained_dictionaries_carry_an_id() {
        let samples: Vec<Vec<u8>> = (0..200u32)
            .map(|i| {
                format!(
                    "record {i}: name=wring kind=page size={} flags=idle\n",
                    i * 37
                )
                .repeat(8)
                .into_bytes()
            })
            .collect();
        let views: Vec<&[u8]> = samples.iter().map(|s| &s[..]).collect();
        let d = Dictionary::train(&views, 4096).unwrap();
        assert!(d.id() != 0 && d.bytes().len() <= 4096);
        let e = Dictionary::train(&views[..2], 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 samples"), "{e}");
    }
}
