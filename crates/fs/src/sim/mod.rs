//! Whole-filesystem simulations (tests only): the real [`crate::Volume`], fsck and the store
//! over the store's simulated disk ([`crate::store::simdisk`]), cut by power losses
//! ([`power_loss`]) and failing or filling up under every operation ([`faults`]).
//!
//! They sit at the top, not inside the store: they drive every layer (volume, store, fsck),
//! while the simulated disk they run on is the store's own test double of a block device.
//!
//! Mirror xfstests' power-fail tests (generic/482, replaying a dm-log-writes log) and the
//! dm-flakey/dm-error tests of failing and full devices.

mod faults;
mod power_loss;
