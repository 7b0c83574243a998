//! wring blk: zram in userspace. A compressed RAM block device — 4 KiB slots (or, beyond
//! zram, up to 32 KiB: `slot_size`) whose pages live compressed in a size-class arena — for an NBD server to serve (the `wring-blk-nbdkit`
//! plugin). Mirrors drivers/block/zram/ (the device model, `mm_stat`/`io_stat`) and
//! mm/zsmalloc.c (the arena); compression runs on the engine's offload API, whose CPU workers
//! are zram's streams.
//!
//! * [`store`]: slots, same-filled and huge pages, read-modify-write, discard, block status,
//!   `mem_limit`, `compact`, `reset`.
//! * [`arena`]: zsmalloc's size classes and zspages, with compaction.
//! * `lzorle`: zram's default `lzo-rle` ([`LzoRleStreams`], wring-lzo's port of the kernel's).
//! * [`deflate`]: zram's `deflate`, raw deflate with the kernel's window ([`DeflateStreams`]).
//! * [`streams`]: the compressor seam ([`OffloadStreams`] on the engine, [`ToyStreams`] for
//!   models).
//! * [`backing`]: writeback to a backing file, `writeback_limit`, `bd_stat`.
//! * [`clock`]: the clock idle tracking reads (injected in tests).
//! * [`options`]: zram's option names and algorithm names.
//! * [`stats`]: `mm_stat` and `io_stat` in zram's field order.
//! * [`recompress`]: zram's `recompress` with up to three secondary algorithms.
//! * [`dict`]: zstd with a dictionary (`algorithm_params dict=FILE`, `train_dict`).
//! * [`policy`]: beyond zram, idle aging, recompression and writeback on a schedule.
//! * [`control`]: the control channel a running device serves for `wring blk` (stat and the
//!   live sysfs actions).
//! * [`serve`]: nbdkit in the foreground and nbdcopy, for the benchmark and the tests.

// Unsafe code only in `dict` (libzstd's dictionary API), each block with its SAFETY note.
#![deny(unsafe_code)]

pub mod arena;
pub mod backing;
pub mod clock;
pub mod control;
pub mod deflate;
#[allow(unsafe_code)]
pub mod dict;
mod error;
mod lzorle;
pub mod options;
pub mod policy;
pub mod recompress;
pub mod serve;
pub mod stats;
pub mod store;
pub mod streams;
mod sync;

pub use arena::PAGE_SIZE;
pub use backing::{Backing, WritebackReport, WritebackType};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use deflate::DeflateStreams;
pub use error::BlkError;
pub use lzorle::LzoRleStreams;
pub use options::{CompAlgorithm, Options};
pub use policy::{Policy, PolicyReport};
pub use recompress::{
    RecompressReport, RecompressRequest, RecompressType, TrainReport, TrainRequest,
};
pub use stats::{BdStat, IoStat, MmStat, PolicyStat, PoolStat, Stat, StreamStat};
pub use store::{flag, Extent, Slot, Store};
pub use streams::{OffloadStreams, PageJob, Streams, ToyStreams};

/// The streams for the algorithm at `prio`: zstd with its dictionary when `algorithm_params`
/// gave one, lzo-rle's and raw deflate's own (the engine has neither), else the engine's
/// offload.
fn make_streams(
    options: &Options,
    prio: u8,
    alg: &CompAlgorithm,
    streams: usize,
) -> Result<Box<dyn Streams>, BlkError> {
    let Some((_, path)) = options.dicts.iter().find(|(p, _)| *p == prio) else {
        if alg.name == "lzo-rle" {
            return Ok(Box::new(LzoRleStreams::new(streams)));
        }
        if alg.name == "deflate" {
            return Ok(Box::new(DeflateStreams::new(alg.spec.level, streams)?));
        }
        return Ok(Box::new(OffloadStreams::for_slots(
            alg.spec,
            &alg.text(),
            streams,
            options.slot_size,
        )?));
    };
    let bytes = std::fs::read(path).map_err(|source| BlkError::Io {
        what: format!("reading the dictionary {}", path.display()),
        source,
    })?;
    let name = format!("{}+dict", alg.text());
    let s = dict::DictStreams::new(bytes, alg.spec.level, &name)?;
    s.set_streams(streams)?;
    Ok(Box::new(s))
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
