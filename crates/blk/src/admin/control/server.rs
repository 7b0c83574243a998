//! The control channel's server side: the device's server (the nbdkit plugin) binds the
//! socket before it forks and serves it from a thread of its own, one connection at a time,
//! carrying each request out on the store (zram's sysfs `store` handlers).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use super::{Request, MAX_LINE};
use crate::actions::idle::mark_idle;
use crate::actions::recompress::recompress;
use crate::actions::train::train_dict;
use crate::actions::writeback::writeback;
use crate::device::Store;
use crate::error::BlkError;
use crate::options::Schedule;

/// Carry out a request on a store.
pub fn handle(store: &Store, req: Request) -> Result<Value, BlkError> {
    Ok(match req {
        Request::Stat => {
            serde_json::to_value(store.stat()).map_err(|e| BlkError::Option(e.to_string()))?
        }
        Request::Compact => json!(store.compact()),
        Request::Reset => {
            store.reset();
            Value::Null
        }
        Request::MemLimit(b) => {
            store.set_mem_limit(b);
            json!(b)
        }
        Request::Streams(n) => {
            store.set_streams(n)?;
            json!(store.stat().streams)
        }
        Request::Idle(older_than) => json!(mark_idle(store, older_than)),
        Request::Recompress(r) => serde_json::to_value(recompress(store, &r)?)
            .map_err(|e| BlkError::Option(e.to_string()))?,
        Request::Policy(p) => {
            let text = p.as_ref().map(Schedule::text);
            store.set_policy(p);
            json!(text)
        }
        Request::TrainDict(t) => serde_json::to_value(train_dict(store, &t)?)
            .map_err(|e| BlkError::Option(e.to_string()))?,
        Request::Writeback(t) => serde_json::to_value(writeback(store, t)?)
            .map_err(|e| BlkError::Option(e.to_string()))?,
        Request::WritebackLimit(n) => {
            store.set_writeback_limit(n);
            json!(store.writeback_limit())
        }
        Request::PagePool(n) => {
            store.set_page_pool(n);
            serde_json::to_value(store.stat().page_pool)
                .map_err(|e| BlkError::Option(e.to_string()))?
        }
    })
}

/// Bind the control socket at `path` (mode 0600), replacing a stale socket file.
pub fn bind(path: &Path) -> Result<UnixListener, BlkError> {
    let io = |what: &str, source| BlkError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("could not remove the stale socket", e)),
    }
    let l = UnixListener::bind(path).map_err(|e| io("could not bind the control socket", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io("could not make the control socket 0600:", e))?;
    Ok(l)
}

fn serve_one(store: &Store, stream: UnixStream) -> std::io::Result<()> {
    // A client that connects and says nothing must not hold the channel (one at a time).
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut line = String::new();
    BufReader::new(stream.try_clone()?.take(MAX_LINE)).read_line(&mut line)?;
    let reply = match Request::parse(&line).and_then(|r| handle(store, r)) {
        Ok(v) => json!({ "ok": v }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    let mut w = stream;
    writeln!(w, "{reply}")?;
    w.flush()
}

/// Serve requests on `listener` from a thread of its own, for as long as the process lives.
pub fn serve(listener: UnixListener, store: Arc<Store>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // A failed accept or a client that goes away mid-request costs nothing but its reply.
        for conn in listener.incoming().flatten() {
            let _ = serve_one(&store, conn);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::control::{request, stat};
    use crate::device::streams::ToyStreams;

    #[test]
    fn a_served_socket_answers_and_is_private() {
        /// Removes the directory also when an assertion fails.
        struct TempDir(std::path::PathBuf);
        impl Drop for TempDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let dir =
            TempDir(std::env::temp_dir().join(format!("wring-blk-control-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).unwrap();
        let path = dir.0.join("control.sock");
        let store = Arc::new(Store::new(1 << 20, 0, Box::new(ToyStreams)).unwrap());
        let l = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        serve(l, Arc::clone(&store));
        store.write(0, &[1u8; 4096]).unwrap();
        assert_eq!(stat(&path).unwrap().mm_stat.orig_data_size, 4096);
        assert_eq!(
            request(&path, Request::MemLimit(8192)).unwrap(),
            json!(8192)
        );
        assert_eq!(store.stat().mm_stat.mem_limit, 8192);
        let pool = request(&path, Request::PagePool(4)).unwrap();
        assert_eq!(
            (pool["size"].clone(), pool["free"].clone()),
            (json!(4), json!(4))
        );
        assert_eq!(store.stat().page_pool.size, 4);
        request(&path, Request::Reset).unwrap();
        assert_eq!(store.stat().mm_stat.orig_data_size, 0);
        // A raw bad line gets an error reply naming what is accepted.
        let mut s = UnixStream::connect(&path).unwrap();
        writeln!(s, "defrag").unwrap();
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).unwrap();
        assert!(
            reply.contains("error") && reply.contains("compact"),
            "{reply}"
        );
    }
}
