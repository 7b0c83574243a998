//! Trained dictionaries for small extents (`dict=auto`): what no kernel filesystem has. A
//! small extent — a file or a file's tail of at most [`SMALL`] bytes — starts zstd's window
//! empty, and most of a header file or a script is boilerplate its neighbours share; a zstd
//! dictionary trained on the filesystem's own small extents gives each one that start.
//!
//! The life of a dictionary: writes of small extents under zstd offer copies of their data
//! as samples until [`Options::dict_train_bytes`] are collected; the committer's tick then
//! trains a dictionary of [`DICT_SIZE`] bytes on a thread of its own
//! ([`Volume::train_dictionary`]), stores it under the next id in a transaction of its own
//! (`store::dicts`), and from then on small extents are compressed with it and carry its id.
//! Reads keep every dictionary they met prepared ([`Dicts::get`]); one the store lacks, or
//! cannot digest, is EIO with a log line naming the extent.
//!
//! Crash rules: the dictionary's transaction commits before any extent that names it is
//! written (an extent gets the dictionary only once it is in `newest`, set after that commit),
//! and redb's commits are ordered, so whatever commit survives a crash holds the dictionary of
//! every extent it holds.
//!
//! Left for later (said in the README): training again when the content drifts, and a pass
//! that rewrites small extents written before the first dictionary or with an older one.

use std::collections::HashMap;
use std::sync::Arc;

use wring_engine::dict::Dictionary;
use wring_engine::{Algorithm, CompressSpec};

use crate::error::FsError;
use crate::store::dicts;
use crate::sync::{lock, Mutex};
use crate::volume::data::encode::{Decision, DictUse};
use crate::volume::Volume;

/// Extents of at most this many bytes are small: they get the dictionary and are its samples.
/// 16 KiB: past it an extent's own window holds most of what a dictionary would give (the
/// issue's measure of files up to 16 KiB gained 28%; zstd's own guidance puts the gain of
/// dictionaries in the first few KiB).
pub const SMALL: usize = 16 << 10;
/// Bytes of a trained dictionary: 112 KiB, zstd's default (`zstd --train`'s maxdict).
pub const DICT_SIZE: usize = 112 << 10;

/// The mount's dictionaries.
#[derive(Default)]
pub(crate) struct Dicts {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The dictionary new small extents are compressed with.
    newest: Option<DictUse>,
    /// Dictionaries prepared for reads, by id.
    loaded: HashMap<u8, Dictionary>,
    /// Samples collected for the next training.
    samples: Vec<Vec<u8>>,
    sample_bytes: usize,
    /// A training is running (its samples taken).
    training: bool,
    /// No more trainings this mount (every id taken, or zstd failed).
    done: bool,
    /// The last training of this mount.
    last: Option<Training>,
}

/// What a training measured on its own samples, at zstd:3.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Training {
    /// The dictionary's id.
    pub id: u8,
    /// Samples it was trained on.
    pub samples: usize,
    /// Their bytes.
    pub raw: u64,
    /// Their bytes compressed one by one without a dictionary.
    pub alone: u64,
    /// Their bytes compressed one by one with the dictionary.
    pub with: u64,
}

/// What `wring status` shows of the dictionaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DictStatus {
    /// Id and size of each dictionary in the store.
    pub dicts: Vec<(u8, usize)>,
    /// The id new small extents are compressed with (0: none yet).
    pub newest: u8,
    /// Bytes of samples collected toward the next training.
    pub sample_bytes: usize,
    /// The last training of this mount.
    pub last: Option<Training>,
}

impl Dicts {
    /// The dictionaries of a store: the newest (highest id) is used for new extents.
    pub(crate) fn load(all: Vec<(u8, Vec<u8>)>) -> Dicts {
        let mut st = State::default();
        for (id, bytes) in all {
            match Dictionary::new(bytes) {
                Ok(dict) => {
                    st.loaded.insert(id, dict.clone());
                    st.newest = Some(DictUse { id, dict });
                }
                // Its extents fail when read (EIO, logged there); new ones use none.
                Err(e) => log::error!("the store's dictionary {id} is damaged: {e}"),
            }
        }
        Dicts {
            state: Mutex::new(st),
        }
    }

    /// The dictionary for new small extents of `decision`'s writes, offering `small` (the
    /// write's small extents) as samples while no dictionary exists.
    fn attach(&self, decision: &mut Decision, small: &[&[u8]], train_bytes: usize) {
        let Some(c) = decision.as_mut() else {
            return;
        };
        if c.spec.algorithm != Some(Algorithm::Zstd) || small.is_empty() {
            return;
        }
        let mut st = lock(&self.state);
        if st.newest.is_none() && !st.training && !st.done {
            for s in small {
                if st.sample_bytes >= train_bytes {
                    break;
                }
                st.sample_bytes += s.len();
                st.samples.push(s.to_vec());
            }
        }
        c.dict = st.newest.clone();
    }

    /// Samples to train on, when enough are collected and no training runs.
    fn take_samples(&self, train_bytes: usize) -> Option<Vec<Vec<u8>>> {
        let mut st = lock(&self.state);
        if st.training || st.done || st.newest.is_some() || st.sample_bytes < train_bytes {
            return None;
        }
        st.training = true;
        st.sample_bytes = 0;
        Some(std::mem::take(&mut st.samples))
    }

    /// A training ended: with the stored dictionary, or with none (no more this mount).
    fn trained(&self, new: Option<(DictUse, Training)>) {
        let mut st = lock(&self.state);
        st.training = false;
        match new {
            Some((d, t)) => {
                st.loaded.insert(d.id, d.dict.clone());
                st.newest = Some(d);
                st.last = Some(t);
            }
            None => st.done = true,
        }
    }

    /// The prepared dictionary `id`, from memory or the store.
    pub(crate) fn get(
        &self,
        id: u8,
        load: impl FnOnce() -> Result<Option<Vec<u8>>, FsError>,
    ) -> Result<Dictionary, String> {
        if let Some(d) = lock(&self.state).loaded.get(&id) {
            return Ok(d.clone());
        }
        let bytes = load()
            .map_err(|e| format!("reading dictionary {id}: {e}"))?
            .ok_or_else(|| format!("the store has no dictionary {id}"))?;
        let dict =
            Dictionary::new(bytes).map_err(|e| format!("dictionary {id} is damaged: {e}"))?;
        lock(&self.state).loaded.insert(id, dict.clone());
        Ok(dict)
    }

    fn status(&self) -> (u8, usize, Option<Training>) {
        let st = lock(&self.state);
        (
            st.newest.as_ref().map_or(0, |d| d.id),
            st.sample_bytes,
            st.last,
        )
    }
}

impl Volume {
    /// Give `decision` the dictionary for a write's extents `chunks` when `dict=auto` and
    /// some are small, collecting samples while there is none. The write's large extents
    /// drop it again when queued ([`crate::volume::data::encode::for_len`]).
    pub(crate) fn with_dictionary(&self, decision: &mut Decision, chunks: &[(u64, Vec<u8>)]) {
        let opts = self.options();
        if !opts.dict {
            return;
        }
        let small: Vec<&[u8]> = chunks
            .iter()
            .map(|c| c.1.as_slice())
            .filter(|d| d.len() <= SMALL)
            .collect();
        self.dicts.attach(decision, &small, opts.dict_train_bytes);
    }

    /// Train a dictionary when enough samples are collected, on a thread of its own; the
    /// committer's tick calls this.
    pub(crate) fn maybe_train(self: &Arc<Self>) {
        let Some(samples) = self.dicts.take_samples(self.options().dict_train_bytes) else {
            return;
        };
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("wring-dict".into())
            .spawn(move || {
                if let Some(vol) = weak.upgrade() {
                    let new = vol.train_dictionary(&samples);
                    vol.dicts.trained(new);
                }
            });
        if let Err(e) = spawned {
            log::error!("could not start training a dictionary: {e}");
            self.dicts.trained(None);
        }
    }

    /// Train on `samples` and store the dictionary under the next id; `None` (logged) when
    /// zstd cannot train on them, every id is taken, or the store refuses the transaction.
    fn train_dictionary(&self, samples: &[Vec<u8>]) -> Option<(DictUse, Training)> {
        let views: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
        let dict = match Dictionary::train(&views, DICT_SIZE) {
            Ok(d) => d,
            Err(e) => {
                log::warn!("no dictionary for small files this mount: {e}");
                return None;
            }
        };
        match self.store_dictionary(&dict) {
            Ok(Some(id)) => {
                let t = self.measure(id, &dict, samples);
                log::info!(
                    "trained dictionary {id} ({} bytes) on {} small extents: {} bytes \
                     compress to {} alone, {} with it (zstd:3)",
                    dict.bytes().len(),
                    t.samples,
                    t.raw,
                    t.alone,
                    t.with
                );
                Some((DictUse { id, dict }, t))
            }
            Ok(None) => {
                log::warn!("the store holds 255 dictionaries; no new one is trained");
                None
            }
            Err(e) => {
                log::error!("storing a new dictionary failed: {e}");
                None
            }
        }
    }

    /// What dictionary `id` saves on the samples it was trained on, at zstd:3.
    fn measure(&self, id: u8, dict: &Dictionary, samples: &[Vec<u8>]) -> Training {
        let spec = CompressSpec::new(Algorithm::Zstd, 3);
        let mut t = Training {
            id,
            samples: samples.len(),
            ..Training::default()
        };
        let mut out = Vec::new();
        for s in samples {
            out.resize(s.len() + 64, 0);
            let mut size = |d: Option<&Dictionary>| {
                let n = self.engine.compress_into_dict(spec, d, s, &mut out);
                n.ok().flatten().unwrap_or(s.len()) as u64
            };
            t.raw += s.len() as u64;
            t.alone += size(None);
            t.with += size(Some(dict));
        }
        t
    }

    /// Store `dict` under the next free id, in a transaction of its own; `None` when every
    /// id is taken.
    fn store_dictionary(&self, dict: &Dictionary) -> Result<Option<u8>, FsError> {
        let txn = self.store.write()?;
        let Some(id) = dicts::next_id(&txn)? else {
            return Ok(None);
        };
        dicts::put(&txn, id, dict.bytes())?;
        self.store.commit(txn, false)?;
        Ok(Some(id))
    }

    /// The prepared dictionary an extent names, or the reason it cannot be had (for the
    /// extent's EIO and log line).
    pub(crate) fn dictionary(&self, id: u8) -> Result<Dictionary, String> {
        self.dicts.get(id, || {
            let snap = self.store.read()?;
            dicts::get(&snap, id)
        })
    }

    /// The dictionaries for `wring status`.
    pub fn dict_status(&self) -> Result<DictStatus, FsError> {
        let snap = self.store.read()?;
        let (newest, sample_bytes, last) = self.dicts.status();
        Ok(DictStatus {
            dicts: dicts::all(&snap)?
                .into_iter()
                .map(|(id, b)| (id, b.len()))
                .collect(),
            newest,
            sample_bytes,
            last,
        })
    }
}
