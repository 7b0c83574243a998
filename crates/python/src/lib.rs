//! The `wring` Python package's native module, `wring._wring`: the engine's one-shot calls
//! (the engine's `frame` module), btrfs extents (the bridge's `codec`), batches on an engine's
//! streams with the GIL released, dictionaries and the level table. `python/wring` re-exports
//! it with docstrings and type stubs.

mod buffer;
mod dict;
mod engine;
mod errors;

use std::sync::OnceLock;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use wring_btrfs::codec;
use wring_btrfs::Compression;
use wring_engine::frame::{self, FrameError};
use wring_engine::levels::level_table;
use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig};

use buffer::Buffer;
use dict::Dict;

/// Decoded sizes above this need `max_size=` when the size is not given (1 GiB).
pub const DEFAULT_MAX_SIZE: usize = 1 << 30;
/// Inputs at least this long are compressed with the GIL released; below it, releasing and
/// taking the GIL back costs more than it frees.
const RELEASE_GIL_FROM: usize = 16 * 1024;

/// The engine behind the one-shot calls: its workspaces are reused from call to call.
fn oneshot() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(EngineConfig::default()))
}

/// A spec in btrfs's syntax, strictly: a level out of range is a ValueError.
fn parse_spec(spec: &str) -> PyResult<CompressSpec> {
    CompressSpec::parse_strict(spec).map_err(errors::spec)
}

/// The algorithm of a spec for decoding (its level is ignored); `None` for `no`.
fn parse_algorithm(spec: &str) -> PyResult<Option<Algorithm>> {
    Ok(parse_spec(spec)?.algorithm)
}

/// Run `f` with the GIL released when the work is big enough to be worth it.
fn maybe_detached<T: Send>(py: Python<'_>, len: usize, f: impl FnOnce() -> T + Send) -> T {
    match len >= RELEASE_GIL_FROM {
        true => py.allow_threads(f),
        false => f(),
    }
}

/// compress(data, spec="zstd:3", *, dict=None) -> bytes
///
/// Compress any buffer (bytes, bytearray, memoryview, numpy array; not copied) under `spec`,
/// btrfs's option text (`zstd:3`, `zlib:9`, `lzo`) or zram's names (`lz4`, `lz4hc:9`,
/// `lzo-rle`, `deflate:6`). The result is the codec's own format: a zstd frame that records
/// its size, a zlib stream, btrfs's LZO framing, a raw lz4 block. `dict` is a `wring.Dict`
/// (zstd only). A bad spec is a ValueError naming what is accepted.
#[pyfunction]
#[pyo3(signature = (data, spec = "zstd:3", *, dict = None))]
fn compress<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    spec: &str,
    dict: Option<PyRef<'py, Dict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let spec = parse_spec(spec)?;
    let src = Buffer::read(data)?;
    let d = dict.as_ref().map(|d| &d.inner);
    let input = src.as_slice();
    let bound = frame::compress_bound(spec, input.len());
    with_scratch(bound, |scratch| {
        let n = maybe_detached(py, input.len(), || {
            frame::compress_into(oneshot(), spec, d, input, scratch)
        })
        .map_err(errors::frame)?;
        Ok(PyBytes::new(py, &scratch[..n]))
    })
}

/// Scratch kept for the next call up to this size (a compression's output before its copy
/// into the result; python-zstandard shrinks a bytes object in place, which abi3 cannot).
const SCRATCH_KEEP: usize = 8 << 20;

/// Run `f` with this thread's scratch buffer of at least `len` bytes: a call reuses it
/// instead of zeroing a fresh output buffer each time.
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut buf = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if buf.len() < len {
        buf = vec![0u8; len];
    }
    let r = f(&mut buf[..len]);
    if buf.len() <= SCRATCH_KEEP {
        SCRATCH.with(|s| *s.borrow_mut() = buf);
    }
    r
}

/// compress_into(data, out, spec="zstd:3", *, dict=None) -> int
///
/// As `compress`, into the writable buffer `out`; returns the bytes written. An `out` of
/// `compress_bound(spec, len(data))` bytes is always enough; a shorter one that the result does
/// not fit is a ValueError.
#[pyfunction]
#[pyo3(signature = (data, out, spec = "zstd:3", *, dict = None))]
fn compress_into(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    spec: &str,
    dict: Option<PyRef<'_, Dict>>,
) -> PyResult<usize> {
    let spec = parse_spec(spec)?;
    let src = Buffer::read(data)?;
    let mut dst = Buffer::write(out)?;
    let d = dict.as_ref().map(|d| &d.inner);
    let (input, output) = (src.as_slice(), dst.as_mut_slice());
    maybe_detached(py, input.len(), || {
        frame::compress_into(oneshot(), spec, d, input, output)
    })
    .map_err(errors::frame)
}

/// decompress(data, spec="zstd", size=None, *, dict=None, max_size=DEFAULT_MAX_SIZE) -> bytes
///
/// Decompress data of `spec`'s algorithm (its level is ignored). `size` is the decoded size
/// when known; without it any valid input decodes, including zstd frames that do not record
/// their size: the output grows up to `max_size` bytes (1 GiB by default; beyond is a
/// ValueError). Damaged data is `wring.CorruptError`.
#[pyfunction]
#[pyo3(signature = (data, spec = "zstd", size = None, *, dict = None, max_size = DEFAULT_MAX_SIZE))]
fn decompress<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    spec: &str,
    size: Option<usize>,
    dict: Option<PyRef<'py, Dict>>,
    max_size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let src = Buffer::read(data)?;
    let input = src.as_slice();
    let Some(algorithm) = parse_algorithm(spec)? else {
        return Ok(PyBytes::new(py, input));
    };
    let d = dict.as_ref().map(|d| &d.inner);
    match size {
        // The size known: decode straight into the result.
        Some(size) if size <= max_size => {
            let mut produced = size;
            let out = PyBytes::new_with(py, size, |buf| {
                produced = maybe_detached(py, size, || {
                    frame::decompress_into(oneshot(), algorithm, d, input, buf)
                })
                .map_err(errors::frame)?;
                Ok(())
            })?;
            match produced == size {
                true => Ok(out),
                false => Ok(PyBytes::new(py, &out.as_bytes()[..produced])),
            }
        }
        _ => {
            let out = maybe_detached(py, input.len() * 4, || {
                frame::decompress(oneshot(), algorithm, d, input, size, max_size)
            })
            .map_err(errors::frame)?;
            Ok(PyBytes::new(py, &out))
        }
    }
}

/// decompress_into(data, out, spec="zstd", *, dict=None) -> int
///
/// Decompress into the writable buffer `out`; returns the bytes produced. Data that decodes
/// to more than `out` holds is a ValueError; damaged data is `wring.CorruptError`.
#[pyfunction]
#[pyo3(signature = (data, out, spec = "zstd", *, dict = None))]
fn decompress_into(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    spec: &str,
    dict: Option<PyRef<'_, Dict>>,
) -> PyResult<usize> {
    let src = Buffer::read(data)?;
    let mut dst = Buffer::write(out)?;
    let (input, output) = (src.as_slice(), dst.as_mut_slice());
    let Some(algorithm) = parse_algorithm(spec)? else {
        let (n, got) = (input.len(), output.len());
        let o = output
            .get_mut(..n)
            .ok_or_else(|| errors::engine(wring_engine::Error::ShortBuffer { got, need: n }))?;
        o.copy_from_slice(input);
        return Ok(n);
    };
    let d = dict.as_ref().map(|d| &d.inner);
    let cap = output.len();
    maybe_detached(py, cap, || {
        frame::decompress_into(oneshot(), algorithm, d, input, output)
    })
    .map_err(|e| match e {
        FrameError::Codec(wring_engine::Error::Oversized { .. }) => PyValueError::new_err(format!(
            "the data decodes to more than the output buffer's {cap} bytes"
        )),
        e => errors::frame(e),
    })
}

/// compress_bound(spec, size) -> int
///
/// The most bytes `compress` can produce for `size` input bytes under `spec`.
#[pyfunction]
#[pyo3(signature = (spec, size))]
fn compress_bound(spec: &str, size: usize) -> PyResult<usize> {
    Ok(frame::compress_bound(parse_spec(spec)?, size))
}

/// levels() -> list[dict]
///
/// The memory table (`wring levels`): one row per algorithm and level with its workspace's
/// bytes, whether btrfs accepts it, and for zstd the kernel's own figure.
#[pyfunction]
fn levels(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let rows = PyList::empty(py);
    for row in level_table(oneshot(), &[]) {
        let d = PyDict::new(py);
        d.set_item("algorithm", row.algorithm.name())?;
        d.set_item("level", row.level)?;
        d.set_item("default", row.default)?;
        d.set_item("in_btrfs", row.in_btrfs)?;
        d.set_item("workspace_bytes", row.workspace_bytes)?;
        d.set_item("total_bytes", row.total_bytes)?;
        d.set_item("kernel_bytes", row.kernel_bytes)?;
        rows.append(d)?;
    }
    Ok(rows)
}

/// The kernel's encoding from a name (`zlib`, `lzo`, `zstd`) or its number.
fn compression_of(algorithm: &Bound<'_, PyAny>) -> PyResult<Compression> {
    if let Ok(raw) = algorithm.extract::<u32>() {
        return Ok(Compression::from_raw(raw));
    }
    let name: String = algorithm.extract()?;
    match name.as_str() {
        "none" => Ok(Compression::None),
        "zlib" => Ok(Compression::Zlib),
        "zstd" => Ok(Compression::Zstd),
        "lzo" => Ok(Compression::Lzo { sector_size: 4096 }),
        other => Err(PyValueError::new_err(format!(
            "unknown btrfs compression '{other}': accepted are zlib, lzo, zstd, none, or the kernel's number"
        ))),
    }
}

/// encode_extent(data, spec="zstd:3") -> bytes | None
///
/// Compress at most 128 KiB as the kernel's btrfs stores an extent under `compress-force=spec`
/// (zlib, lzo or zstd at any level; 4 KiB sectors): the bytes BTRFS_IOC_ENCODED_WRITE takes.
/// None when compressing does not save a whole sector, so btrfs would store the range raw.
#[pyfunction]
#[pyo3(signature = (data, spec = "zstd:3"))]
fn btrfs_encode_extent<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    spec: &str,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let spec = parse_spec(spec)?;
    let src = Buffer::read(data)?;
    let input = src.as_slice();
    let encoded = maybe_detached(py, input.len(), || {
        codec::encode_extent(oneshot(), spec, input)
    })
    .map_err(errors::extent)?;
    Ok(encoded.map(|(_, bytes)| PyBytes::new(py, &bytes)))
}

/// decode_extent(data, algorithm, ram_bytes) -> bytes
///
/// Decode one extent as the kernel's read path does: `algorithm` is "zlib", "lzo", "zstd",
/// "none" or the kernel's encoding number (BTRFS_ENCODED_IO_COMPRESSION_*), `ram_bytes` the
/// decoded size the extent declares (a stream that ends early leaves zeros).
#[pyfunction]
#[pyo3(signature = (data, algorithm, ram_bytes))]
fn btrfs_decode_extent<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    algorithm: &Bound<'py, PyAny>,
    ram_bytes: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let compression = compression_of(algorithm)?;
    let src = Buffer::read(data)?;
    let input = src.as_slice();
    let decoded = maybe_detached(py, ram_bytes, || {
        codec::decode_extent(oneshot(), compression, input, ram_bytes)
    })
    .map_err(errors::extent)?;
    Ok(PyBytes::new(py, &decoded))
}

#[pymodule]
fn _wring(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CorruptError", m.py().get_type::<errors::CorruptError>())?;
    m.add("DEFAULT_MAX_SIZE", DEFAULT_MAX_SIZE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(compress, m)?)?;
    m.add_function(wrap_pyfunction!(compress_into, m)?)?;
    m.add_function(wrap_pyfunction!(decompress, m)?)?;
    m.add_function(wrap_pyfunction!(decompress_into, m)?)?;
    m.add_function(wrap_pyfunction!(compress_bound, m)?)?;
    m.add_function(wrap_pyfunction!(levels, m)?)?;
    m.add_function(wrap_pyfunction!(btrfs_encode_extent, m)?)?;
    m.add_function(wrap_pyfunction!(btrfs_decode_extent, m)?)?;
    m.add_function(wrap_pyfunction!(dict::train_dict, m)?)?;
    m.add_class::<Dict>()?;
    m.add_class::<engine::PyEngine>()?;
    Ok(())
}
