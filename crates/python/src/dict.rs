//! zstd dictionaries: trained on samples or loaded from bytes, digested once.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use wring_engine::dict::Dictionary;

use crate::buffer::Buffer;
use crate::errors;

/// Dict(data)
///
/// A zstd dictionary, from a trained dictionary's bytes (or raw content), digested once and
/// shared by every call that names it. `bytes(d)` gives the bytes to store beside the data.
#[pyclass(module = "wring", name = "Dict", frozen)]
pub struct Dict {
    pub(crate) inner: Dictionary,
}

#[pymethods]
impl Dict {
    #[new]
    fn new(data: &Bound<'_, PyAny>) -> PyResult<Dict> {
        let buf = Buffer::read(data)?;
        let inner = Dictionary::new(buf.as_slice().to_vec()).map_err(errors::engine)?;
        Ok(Dict { inner })
    }

    /// The dictionary's id (0 for raw content).
    #[getter]
    fn id(&self) -> u32 {
        self.inner.id()
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.bytes())
    }

    fn __len__(&self) -> usize {
        self.inner.bytes().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "wring.Dict(id={}, {} bytes)",
            self.inner.id(),
            self.inner.bytes().len()
        )
    }
}

/// train_dict(samples, size=114688) -> Dict
///
/// Train a zstd dictionary of at most `size` bytes on an iterable of buffers (zstd's
/// ZDICT_trainFromBuffer, as `wring blk` and the filesystem's small files use).
#[pyfunction]
#[pyo3(signature = (samples, size = 114_688))]
pub fn train_dict(py: Python<'_>, samples: &Bound<'_, PyAny>, size: usize) -> PyResult<Dict> {
    let buffers = samples
        .try_iter()?
        .map(|s| Buffer::read(&s?))
        .collect::<PyResult<Vec<Buffer>>>()?;
    let slices: Vec<&[u8]> = buffers.iter().map(Buffer::as_slice).collect();
    let inner = py
        .allow_threads(|| Dictionary::train(&slices, size))
        .map_err(errors::engine)?;
    Ok(Dict { inner })
}
