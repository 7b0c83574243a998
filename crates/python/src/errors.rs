//! The engine's errors as Python exceptions; the messages are the CLI's.

use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::PyErr;
use wring_btrfs::codec::ExtentError;
use wring_engine::frame::FrameError;
use wring_engine::{Error, SpecError};

create_exception!(
    wring,
    CorruptError,
    PyValueError,
    "The compressed data is damaged or not of the algorithm named."
);

/// An engine error as its exception.
pub fn engine(e: Error) -> PyErr {
    match e {
        Error::Corrupt { .. } | Error::Oversized { .. } => CorruptError::new_err(e.to_string()),
        Error::Library { .. } => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A one-shot call's error as its exception.
pub fn frame(e: FrameError) -> PyErr {
    match e {
        FrameError::Codec(c) => engine(c),
        FrameError::NoMemory { .. } => PyMemoryError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// An extent call's error as its exception.
pub fn extent(e: ExtentError) -> PyErr {
    match e {
        ExtentError::Codec(c) => engine(c),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A spec that does not parse.
pub fn spec(e: SpecError) -> PyErr {
    PyValueError::new_err(e.to_string())
}
