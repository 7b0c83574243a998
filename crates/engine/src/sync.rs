//! Synchronisation primitives: std's, or shuttle's when built for model checking, through
//! the one seam every crate locks through ([`wring_sync`]).
//!
//! Everything in the engine that locks, waits or spawns goes through here so that
//! `--features shuttle` can explore its interleavings.

wring_sync::primitives!();
