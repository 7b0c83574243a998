//! The actions: zram's sysfs triggers (`idle`, `recompress`, `writeback`) and, beyond zram,
//! `train_dict` and the scheduled policy that runs them, as operations on the device. Each
//! takes a [`Store`](crate::device::Store) and uses only its crate-visible interface (the slots
//! under their locks, a slot's load, release and writeback, the algorithms, the arena, the
//! budget); the device never calls up into them.
//!
//! In `use` order: `idle`, `writeback`, `recompress`, `train` (which recompresses), `schedule`
//! (which runs the three first).

pub(crate) mod idle;
pub(crate) mod recompress;
pub(crate) mod schedule;
pub(crate) mod train;
pub(crate) mod writeback;
