//! The control channel's client side (`wring blk`): one request line to a device's control
//! socket, one JSON reply line back.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::Value;

use super::Request;
use crate::actions::recompress::RecompressRequest;
use crate::actions::train::TrainRequest;
use crate::device::stats::Stat;
use crate::error::BlkError;
use crate::options::WritebackType;
use crate::report::{RecompressReport, TrainReport, WritebackReport};

/// Send one request to the control socket at `path` and return the reply's value.
pub fn request(path: &Path, req: Request) -> Result<Value, BlkError> {
    let io = |what: &str, source| BlkError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    let mut s = UnixStream::connect(path)
        .map_err(|e| io("could not reach the device's control socket", e))?;
    writeln!(s, "{}", req.line()).map_err(|e| io("could not send to", e))?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| io("could not read the reply from", e))?;
    let v: Value = serde_json::from_str(&line)
        .map_err(|e| BlkError::Option(format!("bad reply from the device: {e}: {line}")))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(BlkError::Option(e.to_string()));
    }
    Ok(v.get("ok").cloned().unwrap_or(Value::Null))
}

/// The device's statistics over the control socket at `path`.
pub fn stat(path: &Path) -> Result<Stat, BlkError> {
    let v = request(path, Request::Stat)?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad stat reply: {e}")))
}

/// Write back over the control socket at `path`.
pub fn writeback(path: &Path, kind: WritebackType) -> Result<WritebackReport, BlkError> {
    let v = request(path, Request::Writeback(kind))?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad writeback reply: {e}")))
}

/// Train a dictionary over the control socket at `path`.
pub fn train_dict(path: &Path, req: TrainRequest) -> Result<TrainReport, BlkError> {
    let v = request(path, Request::TrainDict(req))?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad train_dict reply: {e}")))
}

/// Recompress over the control socket at `path`.
pub fn recompress(path: &Path, req: RecompressRequest) -> Result<RecompressReport, BlkError> {
    let v = request(path, Request::Recompress(req))?;
    serde_json::from_value(v).map_err(|e| BlkError::Option(format!("bad recompress reply: {e}")))
}
