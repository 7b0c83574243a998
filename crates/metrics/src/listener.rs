//! The `GET /metrics` listener: HTTP/1.0-style (one request per connection, then close), one
//! connection at a time, each with a 5 s limit to send its request and take the answer.
//! Scrapes are rare and the figures come from counters the front end keeps anyway, so nothing
//! is done for metrics between them.
//!
//! Bound and served in two steps: nbdkit binds before it forks (a bad address fails the
//! start) and serves after (threads do not survive the fork).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::Addr;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// How long a client has to send its request, and to take the answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a request read.
const MAX_REQUEST: usize = 8192;

/// A bound listener, not yet served.
#[derive(Debug)]
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A Unix socket, and its file (which the owner removes when it stops serving).
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Bind `addr`. A stale Unix socket file (nobody answers on it: a daemon that died) is
    /// replaced; anything else there is left for the bind to refuse.
    pub fn bind(addr: &Addr) -> io::Result<Listener> {
        match addr {
            Addr::Tcp { addr, .. } => Ok(Listener::Tcp(TcpListener::bind(addr)?)),
            Addr::Unix(path) => {
                remove_stale(path);
                Ok(Listener::Unix(UnixListener::bind(path)?, path.clone()))
            }
        }
    }

    /// The socket file, for a Unix socket.
    pub fn socket_path(&self) -> Option<&Path> {
        match self {
            Listener::Tcp(_) => None,
            Listener::Unix(_, p) => Some(p),
        }
    }

    /// Answer on a thread of its own, `exposition` building each scrape's text, until it
    /// answers `None` (its source is gone: 503, and the thread ends).
    pub fn serve(
        self,
        exposition: impl Fn() -> Option<String> + Send + 'static,
    ) -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("wring-metrics".into())
            .spawn(move || match self {
                Listener::Tcp(l) => answer_all(l.incoming(), &exposition),
                Listener::Unix(l, _) => answer_all(l.incoming(), &exposition),
            })
    }
}

fn remove_stale(path: &Path) {
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
conn!(TcpStream, UnixStream);

/// Answer connections one at a time until the source is gone.
fn answer_all<C: Conn>(
    incoming: impl Iterator<Item = io::Result<C>>,
    exposition: &dyn Fn() -> Option<String>,
) {
    for s in incoming.flatten() {
        s.limit(TIMEOUT);
        if !answer(s, exposition) {
            return;
        }
    }
}

/// Read one request and answer it; false once the source is gone.
fn answer(mut s: impl Read + Write, exposition: &dyn Fn() -> Option<String>) -> bool {
    let Some(line) = request_line(&mut s) else {
        return true;
    };
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, kind, body, alive) = match (method, path) {
        ("GET", "/metrics") => match exposition() {
            Some(text) => ("200 OK", CONTENT_TYPE, text, true),
            None => (
                "503 Service Unavailable",
                "text/plain",
                "gone\n".into(),
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
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: \
         close\r\n\r\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn get_metrics_is_answered_others_are_refused_and_a_gone_source_stops_it() {
        let l = Listener::bind(&Addr::parse("127.0.0.1:0").unwrap()).unwrap();
        let Listener::Tcp(t) = &l else { panic!() };
        let addr = t.local_addr().unwrap();
        let n = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let c = n.clone();
        let thread = l
            .serve(move || {
                let k = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                (k < 1).then(|| "wring_x 1\n# EOF\n".to_string())
            })
            .unwrap();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.0 200 OK\r\n") && ok.ends_with("wring_x 1\n# EOF\n"));
        assert!(get(addr, "GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        assert!(get(addr, "POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 405"));
        assert!(get(addr, "GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 503"));
        thread.join().unwrap();
    }
}
