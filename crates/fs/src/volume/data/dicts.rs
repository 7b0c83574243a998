//! Trained dictionaries for small extents (`dict=auto`): what no kernel filesystem has. A
//! small extent — a file or a file's tail of at most [`SMALL`] bytes — starts zstd's window
//! empty, and most of a header file or a script is boilerplate its neighbours share; a zstd
//! dictionary trained on the filesystem's own small extents gives each one that start.
//!
//! The life of a dictionary: every write of small extents under zstd offers them to a
//! reservoir of samples ([`RESERVOIR`] of them at most, each kept with equal chance: Vitter's
//! algorithm R). Once [`Options::dict_train_bytes`] are in, the committer's tick trains a
//! dictionary of [`DICT_SIZE`] bytes on a thread of its own ([`Volume::train_dictionary`]),
//! stores it under the next id in a transaction of its own (`store::dicts`), and from then
//! on small extents are compressed with it and carry its id. Content drifts (C headers,
//! then Perl modules): after every [`RETRAIN_AFTER`] times `dict_train_bytes` of small
//! extents, a candidate is trained on the reservoir, which holds the new content beside the
//! old, and measured against the newest dictionary on the most recent small extents
//! ([`RECENT_BYTES`] of them); it is stored and used only if it saves [`BETTER`] more. A
//! candidate is also trained when writing pauses after new small extents (the end of a
//! copy: the reservoir then stands for all of it). After each new dictionary a rewrite pass
//! (`dict_rewrite.rs`) gives every small zstd extent the newest one where that makes it
//! smaller. Training and pass run on a thread at the lowest CPU priority.
//! Reads keep every dictionary they met prepared ([`Dicts::get`]); one the store lacks, or
//! cannot digest, is EIO with a log line naming the extent.
//!
//! Crash rules: the dictionary's transaction commits durably before any extent that names it
//! is written (an extent gets the dictionary only once it is in `newest`, set after that
//! commit), so whatever commit survives a crash — or the store's return to its last durable
//! commit after an I/O error — holds the dictionary of every extent it holds.
//!
//! Left for later (said in the README): deleting a dictionary no extent uses any more (each
//! is 112 KiB; a store holds at most 255, then stops training).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use wring_engine::dict::Dictionary;
use wring_engine::{Algorithm, CompressSpec};

use crate::error::FsError;
use crate::store::dicts;
use crate::sync::{lock, Mutex};
use crate::volume::data::encode::{Compression, Decision, DictUse};
use crate::volume::Volume;

/// Extents of at most this many bytes are small: they get the dictionary and are its samples.
/// 16 KiB: past it an extent's own window holds most of what a dictionary would give (the
/// issue's measure of files up to 16 KiB gained 28%; zstd's own guidance puts the gain of
/// dictionaries in the first few KiB).
pub(crate) const SMALL: usize = 16 << 10;
/// Bytes of a trained dictionary: 112 KiB, zstd's default (`zstd --train`'s maxdict).
pub(crate) const DICT_SIZE: usize = 112 << 10;
/// Samples the reservoir keeps: at most 32 MiB of small extents, typically 10 MiB.
pub(crate) const RESERVOIR: usize = 2048;
/// A candidate is trained once this many times `dict_train_bytes` of small extents were
/// written since the last training.
pub(crate) const RETRAIN_AFTER: usize = 4;
/// The most recent small extents a candidate is measured on.
pub(crate) const RECENT_BYTES: usize = 1 << 20;
/// A candidate must compress the recent extents to at most this share of the newest's.
const BETTER: f64 = 0.97;
/// Committer ticks (seconds) without a new small extent that make writing paused.
const IDLE_TICKS: u32 = 2;

/// `decision` for an extent of `len` bytes: a dictionary only for a small one.
pub(crate) fn for_len(decision: &Decision, len: usize) -> Decision {
    match decision {
        Some(c) if c.dict.is_some() && len > SMALL => Some(Compression {
            dict: None,
            ..c.clone()
        }),
        d => d.clone(),
    }
}

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
    /// The reservoir of samples.
    samples: Vec<Vec<u8>>,
    sample_bytes: usize,
    /// Small extents offered to the reservoir.
    seen: u64,
    /// xorshift state for the reservoir's choices.
    rng: u64,
    /// A training is running.
    training: bool,
    /// Bytes of small extents offered since the last training.
    since: usize,
    /// `seen` at the committer's last tick, and the ticks since it last changed.
    seen_at_tick: u64,
    idle_ticks: u32,
    /// The most recent small extents, up to [`RECENT_BYTES`].
    recent: VecDeque<Vec<u8>>,
    recent_bytes: usize,
    /// A rewrite pass is running.
    pub(super) rewriting: bool,
    /// Extents the rewrite passes of this mount rewrote.
    rewritten: u64,
    /// Trainings this mount ran to the end, and of those, the ones whose dictionary it kept.
    trainings: u64,
    kept: u64,
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
    /// A training or a rewrite pass runs, or a training is due at the next tick.
    pub busy: bool,
    /// Extents the rewrite passes of this mount rewrote.
    pub rewritten: u64,
    /// Trainings this mount ran to the end (a dictionary made and judged).
    pub trainings: u64,
    /// Of those, the ones whose dictionary was stored (better than the newest).
    pub kept: u64,
}

impl Dicts {
    /// The dictionaries of a store (its table's records): the newest (highest id) is used
    /// for new extents.
    pub(crate) fn load(all: Vec<(u32, Vec<u8>)>) -> Dicts {
        let mut st = State::default();
        for (key, bytes) in all {
            match dicts::record(key, &bytes) {
                Ok((id, dict)) => {
                    st.loaded.insert(id, dict.clone());
                    st.newest = Some(DictUse { id, dict });
                }
                // Its extents fail when read (EIO, logged there); new ones use another.
                Err(e) => log::error!("the store's dictionary table is damaged: {e}"),
            }
        }
        Dicts {
            state: Mutex::new(st),
        }
    }

    /// The dictionary for new small extents of `decision`'s writes, offering `small` (the
    /// write's small extents) to the reservoir.
    fn attach(&self, decision: &mut Decision, small: &[&[u8]]) {
        let Some(c) = decision.as_mut() else {
            return;
        };
        if c.spec.algorithm != Some(Algorithm::Zstd) || small.is_empty() {
            return;
        }
        let mut st = lock(&self.state);
        for s in small {
            st.offer(s);
        }
        c.dict = st.newest.clone();
    }

    /// What a training needs — the reservoir, the newest dictionary and the recent extents
    /// to measure a candidate on — when one is due and none runs.
    fn take_samples(&self, train_bytes: usize) -> Option<Round> {
        let mut st = lock(&self.state);
        st.tick();
        if st.training || !st.due(train_bytes) {
            return None;
        }
        st.training = true;
        st.since = 0;
        Some(Round {
            samples: st.samples.clone(),
            newest: st.newest.clone(),
            recent: st.recent.iter().cloned().collect(),
        })
    }

    /// A training ended: with a new dictionary stored, with a candidate not better than
    /// the newest (`Kept`), or unable to train or store one (no more this mount).
    fn trained(&self, outcome: Outcome) {
        let mut st = lock(&self.state);
        st.training = false;
        st.trainings += u64::from(!matches!(outcome, Outcome::Failed));
        match outcome {
            Outcome::New(d, t) => {
                st.kept += 1;
                st.loaded.insert(d.id, d.dict.clone());
                st.newest = Some(d);
                st.last = Some(t);
            }
            Outcome::Kept => {}
            Outcome::Failed => st.done = true,
        }
    }

    /// The dictionary new small extents get.
    pub(super) fn newest(&self) -> Option<DictUse> {
        lock(&self.state).newest.clone()
    }

    /// Mark a rewrite pass as running; false when one already is.
    pub(super) fn start_rewrite(&self) -> bool {
        !std::mem::replace(&mut lock(&self.state).rewriting, true)
    }

    /// No small extent was written since the committer's last tick: a rewrite pass may
    /// start, and runs its batches without a pause.
    pub(super) fn quiet(&self) -> bool {
        lock(&self.state).idle_ticks >= 1
    }

    /// A rewrite pass ended.
    pub(super) fn end_rewrite(&self) {
        lock(&self.state).rewriting = false;
    }

    /// A batch of the rewrite pass replaced `n` extents.
    pub(super) fn rewrote(&self, n: u64) {
        lock(&self.state).rewritten += n;
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
        let (_, dict) = dicts::record(u32::from(id), &bytes)
            .map_err(|e| format!("the store's {e} (damaged)"))?;
        lock(&self.state).loaded.insert(id, dict.clone());
        Ok(dict)
    }

    fn status(&self, train_bytes: usize) -> DictStatus {
        let st = lock(&self.state);
        DictStatus {
            dicts: Vec::new(),
            newest: st.newest.as_ref().map_or(0, |d| d.id),
            sample_bytes: st.sample_bytes,
            last: st.last,
            busy: st.training || st.rewriting || st.pending(train_bytes),
            rewritten: st.rewritten,
            trainings: st.trainings,
            kept: st.kept,
        }
    }
}

/// What a training works on.
struct Round {
    samples: Vec<Vec<u8>>,
    newest: Option<DictUse>,
    recent: Vec<Vec<u8>>,
}

/// How a training ended.
enum Outcome {
    /// A new dictionary, stored.
    New(DictUse, Training),
    /// The candidate did not beat the newest dictionary.
    Kept,
    /// No dictionary (zstd could not train, every id is taken, or the store refused it).
    Failed,
}

/// Give the calling thread the lowest CPU priority (nice 19; Linux sets it per thread): the
/// training and the rewrite pass take what the mount's own work leaves.
fn lowest_priority() {
    // SAFETY: gettid has no preconditions; setpriority on this thread's own id changes only
    // its scheduling priority, and a failure (reported in the return value) changes nothing.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    if r != 0 {
        log::debug!(
            "could not lower the dictionary thread's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl State {
    /// A training is due: the first once `train_bytes` of samples are in; then a candidate
    /// after [`RETRAIN_AFTER`] times that of new small extents, or after `train_bytes` of
    /// them once writing has paused for [`IDLE_TICKS`] ticks (the end of a copy: the
    /// reservoir then stands for all of it).
    fn due(&self, train_bytes: usize) -> bool {
        let wanted = match self.newest {
            None => self.sample_bytes >= train_bytes,
            Some(_) => {
                self.since >= train_bytes.saturating_mul(RETRAIN_AFTER)
                    || (self.since >= train_bytes && self.idle_ticks >= IDLE_TICKS)
            }
        };
        wanted && !self.done
    }

    /// A training is due, or will be once writing pauses.
    fn pending(&self, train_bytes: usize) -> bool {
        let later = self.newest.is_some() && self.since >= train_bytes;
        (self.due(train_bytes) || later) && !self.done
    }

    /// The committer's tick: count the ticks without a new small extent.
    fn tick(&mut self) {
        if self.seen == self.seen_at_tick {
            self.idle_ticks = self.idle_ticks.saturating_add(1);
        } else {
            self.seen_at_tick = self.seen;
            self.idle_ticks = 0;
        }
    }

    /// Offer a small extent to the reservoir (algorithm R: the n-th is kept with chance
    /// RESERVOIR / n, in place of one chosen at random) and to the recent ones.
    fn offer(&mut self, s: &[u8]) {
        self.since = self.since.saturating_add(s.len());
        self.recent_bytes += s.len();
        self.recent.push_back(s.to_vec());
        while self.recent_bytes > RECENT_BYTES {
            match self.recent.pop_front() {
                Some(old) => self.recent_bytes -= old.len(),
                None => break,
            }
        }
        self.seen += 1;
        if self.samples.len() < RESERVOIR {
            self.sample_bytes += s.len();
            self.samples.push(s.to_vec());
            return;
        }
        // xorshift64: the choice needs no more than to be spread evenly.
        let mut x = self.rng | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        let j = (x % self.seen) as usize;
        if let Some(slot) = self.samples.get_mut(j) {
            self.sample_bytes = self.sample_bytes - slot.len() + s.len();
            *slot = s.to_vec();
        }
    }
}

impl Volume {
    /// Give `decision` the dictionary for a write's extents `chunks` when `dict=auto` and
    /// some are small, collecting samples while there is none. The write's large extents
    /// drop it again when queued ([`for_len`]).
    /// `switch` is the inode's `wring.dict`, which overrides the mount's `dict=`.
    pub(crate) fn with_dictionary(
        &self,
        decision: &mut Decision,
        chunks: &[(u64, Vec<u8>)],
        switch: Option<bool>,
    ) {
        if !switch.unwrap_or_else(|| self.options().dict) {
            return;
        }
        let small: Vec<&[u8]> = chunks
            .iter()
            .map(|c| c.1.as_slice())
            .filter(|d| d.len() <= SMALL)
            .collect();
        self.dicts.attach(decision, &small);
    }

    /// Train a dictionary when enough samples are collected, on a thread of its own; the
    /// committer's tick calls this.
    pub(crate) fn maybe_train(self: &Arc<Self>) {
        let Some(round) = self.dicts.take_samples(self.options().dict_train_bytes) else {
            return;
        };
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("wring-dict".into())
            .spawn(move || {
                lowest_priority();
                let Some(vol) = weak.upgrade() else {
                    return;
                };
                let outcome = vol.train_dictionary(&round);
                let trained = matches!(outcome, Outcome::New(..));
                vol.dicts.trained(outcome);
                drop(vol);
                if trained {
                    Volume::rewrite_small(&weak);
                }
            });
        if let Err(e) = spawned {
            log::error!("could not start training a dictionary: {e}");
            self.dicts.trained(Outcome::Kept);
        }
    }

    /// A training if one is due, and a rewrite pass if it gave a new dictionary, on this
    /// thread (the power-loss simulation's step); the extents rewritten.
    #[cfg(test)]
    pub(crate) fn dict_round_now(&self) -> u64 {
        let Some(round) = self.dicts.take_samples(self.options().dict_train_bytes) else {
            return 0;
        };
        let outcome = self.train_dictionary(&round);
        let new = matches!(outcome, Outcome::New(..));
        self.dicts.trained(outcome);
        match (new, self.dicts.newest()) {
            (true, Some(newest)) => self.rewrite_all(&newest),
            _ => 0,
        }
    }

    /// Train on the round's samples; store the dictionary under the next id if it is the
    /// first, or if it compresses the recent extents better than the newest by [`BETTER`].
    fn train_dictionary(&self, round: &Round) -> Outcome {
        let views: Vec<&[u8]> = round.samples.iter().map(Vec::as_slice).collect();
        let dict = match Dictionary::train(&views, DICT_SIZE) {
            Ok(d) => d,
            Err(e) => {
                log::warn!("no dictionary for small files this mount: {e}");
                return Outcome::Failed;
            }
        };
        if let Some(newest) = &round.newest {
            let (now, candidate) = (
                self.compressed(&newest.dict, &round.recent),
                self.compressed(&dict, &round.recent),
            );
            if candidate as f64 > BETTER * now as f64 {
                log::debug!(
                    "a new dictionary would store the recent small extents in {candidate} \
                     bytes against {now} with dictionary {}: kept",
                    newest.id
                );
                return Outcome::Kept;
            }
        }
        match self.store_dictionary(&dict) {
            Ok(Some(id)) => {
                let t = self.measure(id, &dict, &round.samples);
                log::info!(
                    "trained dictionary {id} ({} bytes) on {} small extents: {} bytes \
                     compress to {} alone, {} with it (zstd:3)",
                    dict.bytes().len(),
                    t.samples,
                    t.raw,
                    t.alone,
                    t.with
                );
                Outcome::New(DictUse { id, dict }, t)
            }
            Ok(None) => {
                log::warn!("the store holds 255 dictionaries; no new one is trained");
                Outcome::Failed
            }
            Err(e) => {
                log::error!("storing a new dictionary failed: {e}");
                Outcome::Failed
            }
        }
    }

    /// Bytes `samples` take compressed one by one with `dict` at zstd:3.
    fn compressed(&self, dict: &Dictionary, samples: &[Vec<u8>]) -> u64 {
        let spec = CompressSpec::new(Algorithm::Zstd, 3);
        let mut out = Vec::new();
        samples
            .iter()
            .map(|s| {
                out.resize(s.len() + 64, 0);
                let n = self
                    .engine
                    .compress_into_dict(spec, Some(dict), s, &mut out);
                n.ok().flatten().unwrap_or(s.len()) as u64
            })
            .sum()
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

    /// Store `dict` under the next free id, in a transaction of its own, committed durably:
    /// a store that goes back to its last durable commit after an I/O error (see
    /// `store::recovery`) keeps every dictionary an extent may name. `None` when every id is
    /// taken.
    fn store_dictionary(&self, dict: &Dictionary) -> Result<Option<u8>, FsError> {
        let txn = self.store.write()?;
        let Some(id) = dicts::next_id(&txn)? else {
            return Ok(None);
        };
        dicts::put(&txn, id, dict.bytes())?;
        self.store.commit(txn, true)?;
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
        let o = self.options();
        let mut st = match o.dict {
            true => self.dicts.status(o.dict_train_bytes),
            false => self.dicts.status(usize::MAX),
        };
        st.dicts = dicts::all(&snap)?
            .into_iter()
            .filter_map(|(k, b)| Some((u8::try_from(k).ok()?, b.len())))
            .collect();
        Ok(st)
    }
}
