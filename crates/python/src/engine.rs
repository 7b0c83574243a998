//! `wring.Engine`: an engine with its own streams; batches run on the offload's workers with
//! the GIL released.

use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use wring_engine::dict::Dictionary;
use wring_engine::frame::{self, FrameError, Scratch};
use wring_engine::offload::{Offload, OffloadConfig};
use wring_engine::{CompressSpec, Engine, EngineConfig};

use crate::buffer::Buffer;
use crate::dict::Dict;
use crate::{errors, parse_algorithm, parse_spec, DEFAULT_MAX_SIZE};

/// Engine(streams=None, workspace_mem=None)
///
/// An engine with its own compression streams (one worker each; the default is one per CPU)
/// and an optional workspace memory budget in bytes. `compress_many`/`decompress_many` run a
/// batch on the workers with the GIL released; `stats()` reads the counters.
#[pyclass(module = "wring", name = "Engine", frozen)]
pub struct PyEngine {
    offload: Offload,
}

/// Buffers of an iterable, held for the call.
fn buffers(items: &Bound<'_, PyAny>) -> PyResult<Vec<Buffer>> {
    items.try_iter()?.map(|i| Buffer::read(&i?)).collect()
}

/// The results as a list of bytes, or the first failure (naming its index).
fn results<'py>(
    py: Python<'py>,
    results: Vec<Result<Vec<u8>, FrameError>>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (i, r) in results.into_iter().enumerate() {
        list.append(PyBytes::new(py, &r.map_err(|e| item_error(py, i, e))?))?;
    }
    Ok(list)
}

/// Item `i`'s failure as its exception, the message naming the item.
fn item_error(py: Python<'_>, i: usize, e: FrameError) -> PyErr {
    let err = errors::frame(e);
    let message = format!("item {i}: {}", err.value(py));
    match err.get_type(py).call1((message,)) {
        Ok(typed) => PyErr::from_value(typed),
        Err(e) => e,
    }
}

/// Lengths of one chunk's results in its scratch.
type Lens = Vec<Result<usize, FrameError>>;

/// Compress one chunk into `scratch`, handing both back (run on a helper thread).
fn chunk_on(
    offload: &Offload,
    spec: CompressSpec,
    dict: Option<&Dictionary>,
    part: &[&[u8]],
    mut scratch: Scratch,
) -> (Scratch, Lens) {
    let lens = frame::compress_chunk(offload, spec, dict, part, &mut scratch)
        .into_iter()
        .map(|r| r.map(<[u8]>::len))
        .collect();
    (scratch, lens)
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (streams = None, workspace_mem = None))]
    fn new(streams: Option<usize>, workspace_mem: Option<usize>) -> PyResult<PyEngine> {
        let mut config = EngineConfig::default();
        if let Some(s) = streams {
            if s == 0 {
                return Err(PyValueError::new_err("streams must be at least 1"));
            }
            config.streams = s;
        }
        config.workspace_mem = workspace_mem;
        let engine = Arc::new(Engine::new(config));
        let offload = Offload::new(engine.clone(), OffloadConfig::for_engine(&engine))
            .map_err(errors::engine)?;
        Ok(PyEngine { offload })
    }

    /// The number of streams (workers).
    #[getter]
    fn streams(&self) -> usize {
        self.offload.workers()
    }

    /// compress_many(items, spec="zstd:3", *, dict=None) -> list[bytes]
    ///
    /// Compress every buffer of `items` (each at most 128 KiB: one extent) on the engine's
    /// streams, in order. The first failure raises, naming its item.
    #[pyo3(signature = (items, spec = "zstd:3", *, dict = None))]
    fn compress_many<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        spec: &str,
        dict: Option<PyRef<'py, Dict>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let spec = parse_spec(spec)?;
        let held = buffers(items)?;
        let inputs: Vec<&[u8]> = held.iter().map(Buffer::as_slice).collect();
        let d = dict.as_ref().map(|d| &d.inner);
        let offload = &self.offload;
        let list = PyList::empty(py);
        // Chunk k compresses (a helper thread waits on the workers) while this thread, holding
        // the GIL, turns chunk k-1 into bytes objects: converting after the whole batch left
        // the workers idle for it (measured 0.89x a thread pool of one-shot calls at lz4).
        std::thread::scope(|scope| -> PyResult<()> {
            let mut parts = inputs.chunks(frame::BATCH_CHUNK);
            let mut spare = Some(Scratch::for_inputs(spec, &inputs));
            let first = Scratch::for_inputs(spec, &inputs);
            let mut running = parts
                .next()
                .map(|part| scope.spawn(move || chunk_on(offload, spec, d, part, first)));
            let mut index = 0;
            while let Some(handle) = running.take() {
                let (scratch, lens) = py
                    .allow_threads(|| handle.join())
                    .map_err(|_| PyRuntimeError::new_err("wring: a batch thread panicked"))?;
                if let Some(part) = parts.next() {
                    let next = spare.take().unwrap_or_default();
                    running = Some(scope.spawn(move || chunk_on(offload, spec, d, part, next)));
                }
                for (i, len) in lens.into_iter().enumerate() {
                    let n = len.map_err(|e| item_error(py, index + i, e))?;
                    list.append(PyBytes::new(py, &scratch.buffer(i)[..n]))?;
                }
                index += frame::BATCH_CHUNK;
                spare = Some(scratch);
            }
            Ok(())
        })?;
        Ok(list)
    }

    /// decompress_many(items, spec="zstd", sizes=None, *, dict=None, max_size=DEFAULT_MAX_SIZE)
    ///
    /// Decompress every buffer of `items` on the engine's streams. `sizes` is one decoded size
    /// for all, or a list (None entries allowed); zstd frames without one use the size they
    /// record, and other data without one is a ValueError.
    #[pyo3(signature = (items, spec = "zstd", sizes = None, *, dict = None, max_size = DEFAULT_MAX_SIZE))]
    fn decompress_many<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        spec: &str,
        sizes: Option<&Bound<'py, PyAny>>,
        dict: Option<PyRef<'py, Dict>>,
        max_size: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let held = buffers(items)?;
        let inputs: Vec<&[u8]> = held.iter().map(Buffer::as_slice).collect();
        let Some(algorithm) = parse_algorithm(spec)? else {
            let copies: Vec<_> = inputs.iter().map(|i| Ok(i.to_vec())).collect();
            return results(py, copies);
        };
        let sizes: Vec<Option<usize>> = match sizes {
            None => Vec::new(),
            Some(s) => match s.extract::<usize>() {
                Ok(one) => vec![Some(one); inputs.len()],
                Err(_) => s.extract::<Vec<Option<usize>>>()?,
            },
        };
        if !sizes.is_empty() && sizes.len() != inputs.len() {
            return Err(PyValueError::new_err(format!(
                "sizes has {} entries for {} items",
                sizes.len(),
                inputs.len()
            )));
        }
        let d = dict.as_ref().map(|d| &d.inner);
        let out = py.allow_threads(|| {
            frame::decompress_many(&self.offload, algorithm, d, &inputs, &sizes, max_size)
        });
        results(py, out)
    }

    /// The workspace managers', page pool's and offload's counters.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let managers = PyDict::new(py);
        for (algorithm, m) in self.offload.engine().stats().managers {
            let d = PyDict::new(py);
            d.set_item("hits", m.hits)?;
            d.set_item("scans_up", m.scans_up)?;
            d.set_item("allocations", m.allocations)?;
            d.set_item("alloc_failures", m.alloc_failures)?;
            d.set_item("waits", m.waits)?;
            d.set_item("reclaims", m.reclaims)?;
            d.set_item("frees", m.frees)?;
            d.set_item("resident_bytes", m.resident_bytes)?;
            d.set_item("peak_bytes", m.peak_bytes)?;
            d.set_item("workspaces", m.workspaces)?;
            d.set_item("busy", m.busy)?;
            d.set_item("streams", m.streams)?;
            managers.set_item(algorithm.name(), d)?;
        }
        out.set_item("workspaces", managers)?;
        let o = self.offload.stats();
        let offload = PyDict::new(py);
        offload.set_item("depth", o.depth)?;
        offload.set_item("in_flight", o.in_flight)?;
        offload.set_item("workers", o.cpu.workers)?;
        offload.set_item("submitted", o.cpu.submitted)?;
        offload.set_item("completed", o.cpu.completed)?;
        out.set_item("offload", offload)?;
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!("wring.Engine(streams={})", self.offload.workers())
    }
}
