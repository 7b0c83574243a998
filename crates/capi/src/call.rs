//! What every entry point shares: the status codes, the calling thread's last error, and
//! the guard that turns an error or a panic into a status.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use wring_btrfs::codec::ExtentError;
use wring_engine::frame::FrameError;
use wring_engine::{Algorithm, CompressSpec, Error};

/// The result of every call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum wring_status {
    /// Done.
    WRING_OK = 0,
    /// An argument is wrong: a spec wring does not know, a NULL pointer, a size over a limit.
    WRING_INVALID = 1,
    /// The compressed data is damaged or not of the algorithm named.
    WRING_CORRUPT = 2,
    /// The output buffer is too small; `wring_compress_bound` says how much compression needs.
    WRING_SHORT_BUFFER = 3,
    /// (btrfs extents) compressing does not save a sector: the kernel would store it raw.
    WRING_INCOMPRESSIBLE = 4,
    /// Memory for a codec could not be allocated.
    WRING_NO_MEMORY = 5,
    /// A bug in wring (a caught panic); the message says where.
    WRING_INTERNAL = 6,
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// The message of the calling thread's last failed call ("" if none). Valid until the next
/// call on this thread.
#[no_mangle]
pub extern "C" fn wring_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// wring's version, e.g. "0.1.0".
#[no_mangle]
pub extern "C" fn wring_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// A failure: its status and message.
pub(crate) struct Failure(pub wring_status, pub String);

impl Failure {
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure(wring_status::WRING_INVALID, message.into())
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let status = match e {
            Error::Corrupt { .. } | Error::Oversized { .. } => wring_status::WRING_CORRUPT,
            Error::ShortBuffer { .. } => wring_status::WRING_SHORT_BUFFER,
            Error::Library { .. } => wring_status::WRING_INTERNAL,
            _ => wring_status::WRING_INVALID,
        };
        Failure(status, e.to_string())
    }
}

impl From<FrameError> for Failure {
    fn from(e: FrameError) -> Failure {
        match e {
            FrameError::Codec(c) => c.into(),
            FrameError::NoMemory { .. } => Failure(wring_status::WRING_NO_MEMORY, e.to_string()),
            _ => Failure::invalid(e.to_string()),
        }
    }
}

impl From<ExtentError> for Failure {
    fn from(e: ExtentError) -> Failure {
        match e {
            ExtentError::Codec(c) => c.into(),
            _ => Failure::invalid(e.to_string()),
        }
    }
}

/// Run one entry point: its error or panic becomes a status and the thread's message.
pub(crate) fn guard(f: impl FnOnce() -> Result<wring_status, Failure>) -> wring_status {
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Failure(
            wring_status::WRING_INTERNAL,
            format!("wring panicked: {what}"),
        ))
    });
    match result {
        Ok(status) => status,
        Err(Failure(status, message)) => {
            let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
            LAST.with(|l| *l.borrow_mut() = message);
            status
        }
    }
}

/// A NUL-terminated argument as text.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that lives for the call.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null and NUL-terminated, per this function's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// A spec argument (`zstd:3`), with the CLI's error when it is not one.
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn spec(p: *const c_char) -> Result<CompressSpec, Failure> {
    // SAFETY: forwarded contract.
    let t = unsafe { text(p, "spec") }?;
    CompressSpec::parse_strict(t).map_err(|e| Failure::invalid(e.to_string()))
}

/// An algorithm argument for decoding: a name, or a spec whose level is ignored.
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn algorithm(p: *const c_char) -> Result<Option<Algorithm>, Failure> {
    // SAFETY: forwarded contract.
    Ok(unsafe { spec(p) }?.algorithm)
}

/// A (pointer, length) input as a slice; NULL is allowed with length 0.
///
/// # Safety
/// `p` is NULL (then `len` is 0) or points to `len` readable bytes that live for the call.
pub(crate) unsafe fn input<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    match (p.is_null(), len) {
        (true, 0) => Ok(&[]),
        (true, _) => Err(Failure::invalid(format!("{what} is NULL"))),
        // SAFETY: `len` readable bytes at a non-null `p`, per this function's contract.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(p, len) }),
    }
}

/// A (pointer, capacity) output as a slice; NULL is allowed with capacity 0.
///
/// # Safety
/// `p` is NULL (then `cap` is 0) or points to `cap` writable bytes, not aliased by any input,
/// that live for the call.
pub(crate) unsafe fn output<'a>(p: *mut u8, cap: usize) -> Result<&'a mut [u8], Failure> {
    match (p.is_null(), cap) {
        (true, 0) => Ok(&mut []),
        (true, _) => Err(Failure::invalid("dst is NULL")),
        // SAFETY: `cap` writable unaliased bytes at a non-null `p`, per the contract.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts_mut(p, cap) }),
    }
}

/// Store `value` through an out-pointer.
///
/// # Safety
/// `p` is NULL or points to a writable `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T, what: &str) -> Result<(), Failure> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null and writable, per the contract.
    unsafe { p.write(value) };
    Ok(())
}
