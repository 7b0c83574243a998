//! wring blk: zram in userspace. A compressed RAM block device — 4 KiB slots (or, beyond
//! zram, up to 32 KiB: `slot_size`) whose pages live compressed in a size-class arena — for an
//! NBD server to serve (the `wring-blk-nbdkit` plugin). Mirrors drivers/block/zram/ (the device
//! model, `mm_stat`/`io_stat`) and mm/zsmalloc.c (the arena); compression runs on the engine's
//! offload API, whose CPU workers are zram's streams.
//!
//! # Layers
//!
//! The folders are the layers; arrows point down only (`use` never names a layer above):
//!
//! ```text
//! admin/     control/ (the control channel: request lines parsed and printed, the server
//!   │        that carries them out, the client `wring blk` sends them with), metrics/ (the
//!   │        Prometheus exposition of `stat`, and its `metrics=ADDR` endpoint)
//!   ▼
//! actions/   operations on the device, zram's sysfs triggers: idle (aging), writeback,
//!   │        recompress, train (train_dict), schedule (the policy's rounds, its thread)
//!   ▼
//! device/    arena (zsmalloc), stats (mm_stat, io_stat, bd_stat, the streams'), streams
//!            (zcomp on the engine's offload), backing (the backing file), slot, staging,
//!            algos (the primary and recomp algorithms), policy (the policy value the device
//!            holds for the actions), store (the Store: slots, reads, writes, discard,
//!            stat), open (a store from its options)
//! ```
//!
//! Beside them, depended on by every layer and depending on none (the leaves): `options`
//! (zram's option names and values: [`Options`], [`CompAlgorithm`], the page selectors
//! [`WritebackType`] and [`RecompressType`], the policy's words [`Schedule`], [`PAGE_SIZE`]),
//! `report` (what the actions report: [`WritebackReport`], [`RecompressReport`],
//! [`TrainReport`], [`ScheduleReport`], [`ScheduleStat`]), `error` ([`BlkError`],
//! [`ArenaError`]) and `sync` (the lock seam the shuttle model swaps); and the clock, the
//! engine's, re-exported here.
//!
//! The device needs two things that used to be the actions': the policy it shows in `stat`
//! and the reports of its last round. The policy is a value the device holds
//! ([`Store::set_policy`]) and the actions run ([`policy_tick`]); its words and the reports are
//! leaves, so the device names neither the actions nor the control channel.
//!
//! # The public face
//!
//! The layers are private; what other crates use is re-exported here, each item once: the
//! device ([`Store`], [`open`], [`Slot`], [`flag`], [`Extent`], [`Backing`], the [`Streams`]
//! seam, the [`arena`] for its tests and tools, the statistics [`Stat`]), the actions as
//! functions of a store ([`mark_idle`], [`writeback`], [`recompress`], [`train_dict`],
//! [`policy_tick`], [`spawn_policy`]), the options and reports, and the top layer's two
//! modules, [`control`] and [`metrics`].

// Compression is the engine's: nothing here needs unsafe code.
#![forbid(unsafe_code)]
// Modules are private behind the curated `pub use` below: a `pub` item no path can reach
// from outside says `pub(crate)`.
#![warn(unreachable_pub)]

mod actions;
mod admin;
mod device;
mod error;
mod options;
mod report;
mod sync;

pub use actions::idle::mark_idle;
pub use actions::recompress::{recompress, RecompressRequest};
pub use actions::schedule::{policy_tick, spawn_policy};
pub use actions::train::{train_dict, TrainRequest};
pub use actions::writeback::writeback;
pub use admin::{control, metrics};
pub use device::arena;
pub use device::backing::Backing;
pub use device::open::open;
pub use device::slot::{flag, same_filled, Extent, Slot};
pub use device::stats::{to_json, BdStat, IoStat, MmStat, Stat, StreamStat};
pub use device::store::Store;
pub use device::streams::{OffloadStreams, PageJob, Streams, ToyStreams};
pub use error::{ArenaError, BlkError};
pub use options::{
    parse_size, parse_slot_size, parse_wb_limit, CompAlgorithm, Options, RecompressType, Schedule,
    WritebackType, PAGE_SIZE, SLOT_SIZES,
};
pub use report::{RecompressReport, ScheduleReport, ScheduleStat, TrainReport, WritebackReport};
/// The clock idle tracking reads is the engine's (injected in tests), read in whole seconds.
pub use wring_engine::clock::{Clock, ManualClock, SystemClock};
