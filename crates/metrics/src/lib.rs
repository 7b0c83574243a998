//! `metrics=ADDR` for every front end: the address rules and the `GET /metrics` listener.
//!
//! Mirrors what Prometheus exporters serve (node_exporter's `/metrics`); no kernel file. A
//! mount (wring-fs's `admin/metrics.rs`) and a blk device (wring-blk's `metrics_server.rs`)
//! give the listener a closure that builds their exposition at each scrape.

mod addr;
mod listener;

pub use addr::{Addr, AddrError};
pub use listener::{Listener, CONTENT_TYPE};
