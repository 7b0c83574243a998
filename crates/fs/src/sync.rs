//! Locks: std's, or shuttle's when built for model checking (`--features shuttle`), through
//! the one seam every crate locks through ([`wring_sync`]).

wring_sync::primitives!();
