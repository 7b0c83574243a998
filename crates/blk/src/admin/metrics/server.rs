//! `metrics=ADDR` for a blk device: wring-metrics' listener (the mount's too) answering `GET
//! /metrics` with the device's exposition ([`exposition`](super::exposition)). Bound before nbdkit forks (so a
//! bad address fails the start), served after (threads do not survive the fork), like the
//! control socket.

use std::sync::Arc;
use std::thread::JoinHandle;

pub use wring_metrics::Listener;

use super::{exposition, MetricsAddr};
use crate::device::Store;
use crate::error::BlkError;

/// Bind `addr` (a stale Unix socket file nobody answers on is replaced).
pub fn bind(addr: &MetricsAddr) -> Result<Listener, BlkError> {
    Listener::bind(addr).map_err(|source| BlkError::Io {
        what: format!("listening for metrics={addr}"),
        source,
    })
}

/// Serve `store`'s metrics, labelled `device`, on `l` until the process exits.
pub fn serve(l: Listener, store: Arc<Store>, device: String) -> Result<JoinHandle<()>, BlkError> {
    l.serve(move || Some(exposition(&store.stat(), &device)))
        .map_err(|source| BlkError::Io {
            what: "starting the metrics thread".into(),
            source,
        })
}
