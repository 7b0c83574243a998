//! `metrics=ADDR`: a thread that answers `GET /metrics` with the device's exposition
//! ([`crate::metrics`]), HTTP/1.0-style (one request per connection, then close), one
//! connection at a time with a 5 s limit each. Bound before nbdkit forks (so a bad address
//! fails the start), served after (threads do not survive the fork), like the control socket.
//!
//! Mirrors wring-fs's `admin/metrics.rs` (a mount's `metrics=`), duplicated until both use
//! one crate.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::BlkError;
use crate::metrics::{exposition, MetricsAddr, CONTENT_TYPE};
use crate::store::Store;

/// How long a client has to send its request, and to take the answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a request read.
const MAX_REQUEST: usize = 8192;

/// A bound listener, not yet served.
pub enum Listener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix socket listener and its file.
    Unix(UnixListener, PathBuf),
}

/// Bind `addr`: a TCP address, or a Unix socket (a stale socket file nobody answers on is
/// replaced; anything else there is left for the bind to refuse).
pub fn bind(addr: &MetricsAddr) -> Result<Listener, BlkError> {
    let io = |source| BlkError::Io {
        what: format!("listening for metrics={addr}"),
        source,
    };
    match addr {
        MetricsAddr::Tcp { addr, .. } => Ok(Listener::Tcp(TcpListener::bind(addr).map_err(io)?)),
        MetricsAddr::Unix(path) => {
            remove_stale(path);
            let l = UnixListener::bind(path).map_err(io)?;
            Ok(Listener::Unix(l, path.clone()))
        }
    }
}

fn remove_stale(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if is_socket && UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
}

/// Serve `store`'s metrics, labelled `device`, on `l` until the process exits.
pub fn serve(l: Listener, store: Arc<Store>, device: String) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || match l {
        Listener::Tcp(l) => {
            for s in l.incoming().flatten() {
                let _ = s.set_read_timeout(Some(TIMEOUT));
                let _ = s.set_write_timeout(Some(TIMEOUT));
                answer(s, &store, &device);
            }
        }
        Listener::Unix(l, _) => {
            for s in l.incoming().flatten() {
                let _ = s.set_read_timeout(Some(TIMEOUT));
                let _ = s.set_write_timeout(Some(TIMEOUT));
                answer(s, &store, &device);
            }
        }
    })
}

/// Read one request and answer it.
fn answer(mut s: impl Read + Write, store: &Store, device: &str) {
    let Some(line) = request_line(&mut s) else {
        return;
    };
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", CONTENT_TYPE, exposition(&store.stat(), device)),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s
        .write_all(head.as_bytes())
        .and_then(|()| s.write_all(body.as_bytes()));
}

/// The request's first line, once its head has come (or the client stopped sending).
fn request_line(s: &mut impl Read) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let line = text.lines().next()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}
