//! The device: zram's (drivers/block/zram/) without the block layer, and zsmalloc's arena
//! (mm/zsmalloc.c). The bottom layer: it names only the shared leaves, never the actions or
//! the control channel above it.
//!
//! In `use` order, each file naming only those before it:
//!
//! * [`arena`]: zsmalloc's size classes and zspages, with compaction.
//! * `stats`: zram's counters and reports (`mm_stat`, `io_stat`, `bd_stat`, the streams').
//! * `streams`: the compressor seam (zcomp): the engine's offload, or a toy coder for models.
//! * `backing`: the backing file and its block bitmap (`backing_dev`).
//! * `slot`: one slot (`zram_table_entry`), its flags, the same-filled test.
//! * `staging`: a request cut by slots, and the staging buffers its pages pass through.
//! * `algos`: the primary algorithm and the `recomp_algorithm`s.
//! * `policy`: the scheduled policy as a value the device holds for the actions.
//! * `store`: the device ([`Store`]): slots, reads and writes, discard, `stat`.
//! * `open`: a store made from its options.

pub(crate) mod algos;
pub mod arena;
pub(crate) mod backing;
pub(crate) mod open;
pub(crate) mod policy;
pub(crate) mod slot;
pub(crate) mod staging;
pub(crate) mod stats;
pub(crate) mod store;
pub(crate) mod streams;

pub(crate) use store::Store;
