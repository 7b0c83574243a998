//! `metrics=ADDR`: a thread that answers `GET /metrics` with the mount's Prometheus exposition
//! (HTTP/1.0-style: one request per connection, then close), on a loopback TCP address, one
//! the owner wrote `public:`, or a Unix socket. One connection at a time, each with a 5 s
//! limit to send its request: scrapes are rare, and the figures come from the counters the
//! daemon keeps anyway, so nothing is done for metrics between scrapes.
//!
//! Mirrors what Prometheus exporters serve (node_exporter's `/metrics`); no kernel file.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Weak;
use std::time::Duration;

use crate::error::{io, FsError};
use crate::options::MetricsAddr;
use crate::transport::ops::Ops;
use crate::volume::status::prometheus::CONTENT_TYPE;

/// How long a client has to send its request, and to take the answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a request read.
const MAX_REQUEST: usize = 8192;

/// The listener's thread runs until the daemon exits; a Unix socket's file is removed when
/// this drops.
pub struct MetricsServer {
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
pub fn serve(addr: &MetricsAddr, ops: Weak<Ops>) -> Result<MetricsServer, FsError> {
    let what = format!("metrics={addr}");
    let spawn = |f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name("wring-metrics".into())
            .spawn(f)
            .map(drop)
            .map_err(io(format!("starting the thread of {what}")))
    };
    match addr {
        MetricsAddr::Tcp { addr, .. } => {
            let l = TcpListener::bind(addr).map_err(io(format!("listening for {what}")))?;
            spawn(Box::new(move || answer_all(l.incoming(), &ops)))?;
            Ok(MetricsServer { unix: None })
        }
        MetricsAddr::Unix(path) => {
            remove_stale(path);
            let l = UnixListener::bind(path).map_err(io(format!("listening for {what}")))?;
            spawn(Box::new(move || answer_all(l.incoming(), &ops)))?;
            Ok(MetricsServer {
                unix: Some(path.clone()),
            })
        }
    }
}

/// A socket file left by a daemon that died: nobody answers on it, so it goes. Anything else
/// there is left for the bind to refuse.
fn remove_stale(path: &std::path::Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if is_socket && UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
}

/// A connection, TCP or Unix, with the time limits every client gets.
trait Conn: Read + Write {
    fn limit(&self, t: Duration);
}

/// Both stream types have the same timeout setters, outside any trait.
macro_rules! conn {
    ($($t:ty),*) => {$(
        impl Conn for $t {
            fn limit(&self, t: Duration) {
                let _ = self.set_read_timeout(Some(t));
                let _ = self.set_write_timeout(Some(t));
            }
        }
    )*};
}
conn!(std::net::TcpStream, UnixStream);

/// Answer connections one at a time until the mount is gone.
fn answer_all<C: Conn>(incoming: impl Iterator<Item = std::io::Result<C>>, ops: &Weak<Ops>) {
    for s in incoming.flatten() {
        s.limit(TIMEOUT);
        if !answer(s, ops) {
            return;
        }
    }
}

/// Read one request and answer it; false once the mount is gone.
fn answer(mut s: impl Read + Write, ops: &Weak<Ops>) -> bool {
    let Some(line) = request_line(&mut s) else {
        return true;
    };
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, kind, body, alive) = match (method, path) {
        ("GET", "/metrics") => match ops.upgrade() {
            Some(ops) => ("200 OK", CONTENT_TYPE, ops.metrics(), true),
            None => (
                "503 Service Unavailable",
                "text/plain",
                "unmounted\n".into(),
                false,
            ),
        },
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".into(), true),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".into(),
            true,
        ),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s
        .write_all(head.as_bytes())
        .and_then(|()| s.write_all(body.as_bytes()));
    alive
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
