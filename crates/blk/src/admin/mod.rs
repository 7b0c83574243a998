//! The top layer: what talks to a running device from outside besides NBD. [`control`] is the
//! control channel (zram's sysfs files as request lines: `wring blk` sends them, the device's
//! server answers them by calling the actions and the device); [`metrics`] is the Prometheus
//! exposition of the device's `stat` and its endpoint (`metrics=ADDR`).

pub mod control;
pub mod metrics;
