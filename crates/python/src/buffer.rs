//! Any object with the buffer protocol (bytes, bytearray, memoryview, array, numpy arrays) as
//! a byte slice, without a copy.
//!
//! The abi3 wheel targets CPython 3.9, whose limited API leaves the buffer protocol out (it
//! joined in 3.11), so pyo3 offers no `PyBuffer` there. `PyObject_GetBuffer` and
//! `PyBuffer_Release` have been exported by every CPython 3 with this `Py_buffer` layout, so
//! they are declared here, as other abi3 extensions do.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi::{PyErr_Clear, PyObject};
use pyo3::prelude::*;

/// CPython's `Py_buffer` (Include/pybuffer.h, unchanged since 3.0).
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: isize,
    itemsize: isize,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut isize,
    strides: *mut isize,
    suboffsets: *mut isize,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// PyBUF_SIMPLE: contiguous bytes, no format.
const PYBUF_SIMPLE: c_int = 0;
/// PyBUF_WRITABLE.
const PYBUF_WRITABLE: c_int = 1;

/// A buffer held for the duration of a call; released (with the GIL) when dropped.
pub struct Buffer {
    view: Box<RawBuffer>,
}

// SAFETY: the view only points at memory the exporting object keeps alive until
// PyBuffer_Release, which `Drop` calls with the GIL held; moving the holder between threads
// moves nothing it points to.
unsafe impl Send for Buffer {}

impl Buffer {
    /// The readable bytes of `obj`.
    pub fn read(obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        Buffer::get(obj, PYBUF_SIMPLE)
    }

    /// The writable bytes of `obj` (a bytearray, a writable memoryview or array).
    pub fn write(obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        Buffer::get(obj, PYBUF_WRITABLE)
    }

    fn get(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<Buffer> {
        let mut view = Box::new(RawBuffer {
            buf: ptr::null_mut(),
            obj: ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: ptr::null_mut(),
            shape: ptr::null_mut(),
            strides: ptr::null_mut(),
            suboffsets: ptr::null_mut(),
            internal: ptr::null_mut(),
        });
        // SAFETY: the GIL is held (`obj` is bound to it); `view` is a valid Py_buffer to fill.
        let r = unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) };
        if r != 0 {
            // SAFETY: GIL held; clears the BufferError set by the failed call.
            unsafe { PyErr_Clear() };
            let kind = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            let what = match flags {
                PYBUF_WRITABLE => "a writable, contiguous buffer (bytearray, memoryview)",
                _ => "a contiguous buffer (bytes, bytearray, memoryview, numpy array)",
            };
            return Err(PyTypeError::new_err(format!("expected {what}, got {kind}")));
        }
        Ok(Buffer { view })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self.view.len {
            // SAFETY: a buffer from PyObject_GetBuffer with PyBUF_SIMPLE is `len` contiguous
            // bytes at `buf`, alive until released in Drop.
            n if n > 0 => unsafe { std::slice::from_raw_parts(self.view.buf.cast(), n as usize) },
            _ => &[],
        }
    }

    /// The bytes, writable (only for a buffer from [`Buffer::write`]).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match (self.view.len, self.view.readonly) {
            // SAFETY: a buffer from PyObject_GetBuffer with PyBUF_WRITABLE is `len` writable
            // contiguous bytes at `buf`; `&mut self` makes this the only slice of it here.
            (n, 0) if n > 0 => unsafe {
                std::slice::from_raw_parts_mut(self.view.buf.cast(), n as usize)
            },
            _ => &mut [],
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by PyObject_GetBuffer and is released once, here, with
        // the GIL held.
        Python::with_gil(|_| unsafe { PyBuffer_Release(&mut *self.view) });
    }
}
