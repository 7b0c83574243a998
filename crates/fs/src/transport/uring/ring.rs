//! One ring entry and the thread that serves it: FUSE_IO_URING_CMD_REGISTER once, then
//! FUSE_IO_URING_CMD_COMMIT_AND_FETCH (the reply to one request and the wait for the next in
//! one `io_uring_enter`) until the kernel ends the connection.
//!
//! Mirrors libfuse's fuse_uring.c in shape (an io_uring of the thread's own with 128-byte
//! SQEs, the entry's header and payload buffers handed over as two iovecs); differs in
//! keeping one entry per thread, so a request that blocks (an fsync) holds up no other.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::transport::wire;

const FUSE_IO_URING_CMD_REGISTER: u32 = 1;
const FUSE_IO_URING_CMD_COMMIT_AND_FETCH: u32 = 2;
/// `sqe->len`: the iovecs an entry hands over (FUSE_URING_IOV_SEGS).
const IOV_SEGS: u32 = 2;
/// Offset of `len` in `struct io_uring_sqe`.
const SQE_LEN_AT: usize = 24;
/// How long REGISTER may be refused with EAGAIN while the kernel finishes INIT.
const INIT_WAIT: Duration = Duration::from_secs(10);

/// An entry's buffers: the kernel writes requests into them and reads replies out of them
/// for as long as the entry is registered.
pub(super) struct Buffers {
    /// `struct fuse_uring_req_header`.
    pub headers: Vec<u8>,
    /// The payload: names, a write's data, a reply's body.
    pub payload: Vec<u8>,
    /// A copy of a request's payload, kept while the reply is written over it.
    pub request: Vec<u8>,
}

/// The two iovecs an entry hands the kernel: its header and payload buffers.
pub(super) struct Iovecs([libc::iovec; 2]);

// SAFETY: the pointers are into the heap buffers of the same `Entry` (a `Vec`'s allocation does
// not move when the `Vec` does), which moves between threads with them; nothing reads through
// them but the kernel, on behalf of whichever thread submits the entry's commands.
unsafe impl Send for Iovecs {}

/// How the wait for a request ended.
pub(super) enum Next {
    /// A request is in the buffers.
    Request,
    /// The kernel ended the connection (unmount, abort): the entry is released.
    Closed,
}

/// One entry of queue `qid`: its ring and buffers, made before the mount (so that a process
/// io_uring is refused to does not mount at all: once INIT has asked for the ring, the kernel
/// holds every request until each queue has an entry), registered from its thread.
pub(super) struct Entry {
    qid: u16,
    /// Declared before `buffers`, so dropped first: the kernel lets go of an entry's buffers
    /// when its ring goes.
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    iov: Box<Iovecs>,
    buffers: Buffers,
    /// A command was submitted and its completion not seen: the kernel may still write into
    /// the buffers, which are then leaked rather than freed.
    in_flight: bool,
    /// The connection, once registered.
    fd: Option<Arc<OwnedFd>>,
}

impl Entry {
    /// An entry of queue `qid` with a payload buffer of `payload` bytes.
    pub(super) fn new(qid: u16, payload: usize) -> io::Result<Self> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder().build(2)?;
        let mut buffers = Buffers {
            headers: vec![0; wire::REQ_HEADER],
            payload: vec![0; payload],
            request: Vec::new(),
        };
        let iov = Box::new(Iovecs([
            libc::iovec {
                iov_base: buffers.headers.as_mut_ptr().cast(),
                iov_len: buffers.headers.len(),
            },
            libc::iovec {
                iov_base: buffers.payload.as_mut_ptr().cast(),
                iov_len: buffers.payload.len(),
            },
        ]));
        Ok(Entry {
            qid,
            ring,
            iov,
            buffers,
            in_flight: false,
            fd: None,
        })
    }

    /// The queue this entry serves.
    pub(super) fn qid(&self) -> u16 {
        self.qid
    }

    /// Register with the connection `fd` and wait for the first request.
    pub(super) fn register(&mut self, fd: Arc<OwnedFd>) -> io::Result<Next> {
        self.fd = Some(fd);
        let deadline = Instant::now() + INIT_WAIT;
        loop {
            match self.command(FUSE_IO_URING_CMD_REGISTER, 0) {
                // The kernel has not taken INIT's reply yet.
                Err(x) if x.raw_os_error() == Some(libc::EAGAIN) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                r => return r,
            }
        }
    }

    /// The buffers holding the current request (and, once written, its reply).
    pub(super) fn buffers(&mut self) -> &mut Buffers {
        &mut self.buffers
    }

    /// Send the reply in the buffers for request `commit_id` and wait for the next request.
    pub(super) fn commit_and_fetch(&mut self, commit_id: u64) -> io::Result<Next> {
        self.command(FUSE_IO_URING_CMD_COMMIT_AND_FETCH, commit_id)
    }

    /// Submit one command and wait for its completion: a request, the end, or an error.
    fn command(&mut self, cmd_op: u32, commit_id: u64) -> io::Result<Next> {
        let mut cmd = [0u8; 80];
        // struct fuse_uring_cmd_req: flags, commit_id, qid.
        cmd[8..16].copy_from_slice(&commit_id.to_le_bytes());
        cmd[16..18].copy_from_slice(&self.qid.to_le_bytes());
        let fd = self.fd.as_ref().map_or(-1, |f| f.as_raw_fd());
        let sqe = opcode::UringCmd80::new(types::Fd(fd), cmd_op)
            .cmd(cmd)
            .addr(Some(self.iov.0.as_ptr() as u64))
            .build();
        let sqe = with_len(sqe, IOV_SEGS);
        // SAFETY: the SQE points at `self.iov` (boxed, alive as long as `self`) and through
        // it at `self.buffers`, which the kernel may write until the entry is released: they
        // are dropped after the ring, or leaked (see Drop) while the entry is registered.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.in_flight = true;
        loop {
            match self.ring.submit_and_wait(1) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            if let Some(cqe) = self.ring.completion().next() {
                self.in_flight = false;
                return match cqe.result() {
                    r if r >= 0 => Ok(Next::Request),
                    r if [libc::ENOTCONN, libc::ECONNABORTED, libc::ECANCELED].contains(&-r) => {
                        Ok(Next::Closed)
                    }
                    r => Err(io::Error::from_raw_os_error(-r)),
                };
            }
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.in_flight {
            // The kernel may still write into the buffers: never free them.
            std::mem::forget(std::mem::replace(
                &mut self.buffers,
                Buffers {
                    headers: Vec::new(),
                    payload: Vec::new(),
                    request: Vec::new(),
                },
            ));
        }
    }
}

/// Set `sqe->len`, which `UringCmd80` leaves 0 and FUSE reads as the number of iovecs.
fn with_len(sqe: squeue::Entry128, len: u32) -> squeue::Entry128 {
    // SAFETY: `squeue::Entry128` is `#[repr(C)]` over the kernel's 128-byte SQE (a 64-byte
    // `struct io_uring_sqe` and the command's tail), so its bytes are the SQE's; `len` is a
    // u32 at offset 24 of `struct io_uring_sqe` (include/uapi/linux/io_uring.h). Every bit
    // pattern is a valid `[u8; 128]` and the bytes written back form a valid SQE.
    let mut bytes: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    bytes[SQE_LEN_AT..SQE_LEN_AT + 4].copy_from_slice(&len.to_le_bytes());
    // SAFETY: as above, the reverse way.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(bytes) }
}
