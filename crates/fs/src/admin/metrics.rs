//! `metrics=ADDR`: the mount's Prometheus exposition on `GET /metrics`, served by
//! wring-metrics' listener (the address rules and the HTTP loop a blk device shares), from a
//! weak reference to the mount's `Ops`: each scrape builds the exposition from the counters
//! the daemon keeps anyway, and once the mount is gone the listener answers 503 and stops.
//!
//! Mirrors what Prometheus exporters serve (node_exporter's `/metrics`); no kernel file.

use std::path::PathBuf;
use std::sync::Weak;

use wring_metrics::Listener;

use crate::error::{io, FsError};
use crate::options::MetricsAddr;
use crate::transport::ops::Ops;

/// The listener's thread runs until the daemon exits; a Unix socket's file is removed when
/// this drops.
pub(crate) struct MetricsServer {
    unix: Option<PathBuf>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(p) = &self.unix {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Bind `addr` and serve `ops`'s metrics there until the mount is gone.
pub(crate) fn serve(addr: &MetricsAddr, ops: Weak<Ops>) -> Result<MetricsServer, FsError> {
    let what = format!("metrics={addr}");
    let l = Listener::bind(addr).map_err(io(format!("listening for {what}")))?;
    let unix = l.socket_path().map(PathBuf::from);
    l.serve(move || ops.upgrade().map(|o| o.metrics()))
        .map_err(io(format!("starting the thread of {what}")))?;
    Ok(MetricsServer { unix })
}
