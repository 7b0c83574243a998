//! A device made from its options (zram's `disksize` written after the attributes it reads:
//! `comp_algorithm`, `recomp_algorithm`, `algorithm_params`, `backing_dev`, …): the store, its
//! algorithms on the engine's offload with their dictionaries, the backing file, the budget,
//! the page pool and the policy value.

use wring_engine::dict::Dictionary;

use super::backing::Backing;
use super::store::Store;
use super::streams::{OffloadStreams, Streams};
use crate::error::BlkError;
use crate::options::{CompAlgorithm, Options, PAGE_SIZE};

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
