//! wring blk: zram in userspace. A compressed RAM block device — 4 KiB slots (or, beyond
//! zram, up to 32 KiB: `slot_size`) whose pages live compressed in a size-class arena — for an NBD server to serve (the `wring-blk-nbdkit`
//! plugin). Mirrors drivers/block/zram/ (the device model, `mm_stat`/`io_stat`) and
//! mm/zsmalloc.c (the arena); compression runs on the engine's offload API, whose CPU workers
//! are zram's streams.
//!
//! * [`store`]: slots, same-filled and huge pages, read-modify-write, discard, block status,
//!   `mem_limit`, `compact`, `reset`.
//! * [`arena`]: zsmalloc's size classes and zspages, with compaction.
//! * [`streams`]: the compressor seam ([`OffloadStreams`] on the engine's codec table for every
//!   algorithm, lzo-rle, raw deflate and zstd with a dictionary included; [`ToyStreams`] for
//!   models).
//! * [`backing`]: writeback to a backing file, `writeback_limit`, `bd_stat`.
//! * [`options`]: zram's option names and algorithm names.
//! * [`stats`]: `mm_stat` and `io_stat` in zram's field order.
//! * [`recompress`]: zram's `recompress` with up to three secondary algorithms.
//! * [`schedule`]: beyond zram, idle aging, recompression and writeback on a schedule.
//! * [`control`]: the control channel a running device serves for `wring blk` (stat and the
//!   live sysfs actions).

// Compression is the engine's: nothing here needs unsafe code.
#![forbid(unsafe_code)]

pub mod arena;
pub mod backing;
pub mod control;
mod error;
pub mod metrics;
pub mod metrics_server;
pub mod options;
pub mod recompress;
pub mod schedule;
pub mod stats;
pub mod store;
pub mod streams;
mod sync;

pub use arena::PAGE_SIZE;
pub use backing::{Backing, WritebackReport, WritebackType};
pub use error::BlkError;
pub use options::{CompAlgorithm, Options};
pub use recompress::{
    RecompressReport, RecompressRequest, RecompressType, TrainReport, TrainRequest,
};
pub use schedule::{Schedule, ScheduleReport};
pub use stats::{BdStat, IoStat, MmStat, ScheduleStat, Stat, StreamStat};
pub use store::{flag, Extent, Slot, Store};
pub use streams::{OffloadStreams, PageJob, Streams, ToyStreams};
/// The clock idle tracking reads is the engine's (injected in tests), read in whole seconds.
pub use wring_engine::clock::{Clock, ManualClock, SystemClock};
use wring_engine::dict::Dictionary;

/// The streams for the algorithm at `prio`: the engine's offload, with the zstd dictionary
/// `algorithm_params dict=FILE` gave that priority, if any.
fn make_streams(
    options: &Options,
    prio: u8,
    alg: &CompAlgorithm,
    streams: usize,
) -> Result<Box<dyn Streams>, BlkError> {
    let dict = match options.dicts.iter().find(|(p, _)| *p == prio) {
        Some((_, path)) => Some(read_dictionary(path, alg)?),
        None => None,
    };
    let name = match dict {
        Some(_) => format!("{}+dict", alg.text()),
        None => alg.text(),
    };
    let s = OffloadStreams::for_slots(alg.spec, &name, streams, options.slot_size)?;
    Ok(Box::new(match dict {
        Some(d) => s.with_dictionary(d)?,
        None => s,
    }))
}

/// The dictionary file of `algorithm_params dict=FILE`, as the engine's dictionary.
fn read_dictionary(path: &std::path::Path, alg: &CompAlgorithm) -> Result<Dictionary, BlkError> {
    let bytes = std::fs::read(path).map_err(|source| BlkError::Io {
        what: format!("reading the dictionary {}", path.display()),
        source,
    })?;
    Dictionary::new(bytes)
        .map_err(|e| BlkError::Option(format!("{}+dict ({}): {e}", alg.text(), path.display())))
}

/// A store with `options`, compressing on the engine's offload.
pub fn open(size: u64, options: &Options) -> Result<Store, BlkError> {
    options.check()?;
    let streams = make_streams(options, 0, &options.comp_algorithm, options.streams)?;
    let mut store = Store::with_slot_size(size, options.slot_size, options.mem_limit, streams)?;
    for (prio, alg) in &options.recomp_algorithm {
        // Recompression is one request at a time: one stream each.
        store.set_recomp(*prio, make_streams(options, *prio, alg, 1)?)?;
    }
    if let Some(path) = &options.backing_dev {
        store.set_backing(Backing::open(path, size.div_ceil(PAGE_SIZE as u64))?)?;
    }
    store.set_writeback_limit(options.writeback_limit);
    store.set_policy(options.policy.clone());
    store.set_page_pool(options.page_pool);
    Ok(store)
}
