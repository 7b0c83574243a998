//! Serving `/dev/fuse`: the transport every kernel has (`uring=0`, and `uring=auto` where
//! the kernel's io_uring switch is off), and, beside the ring, what the kernel still sends
//! through `/dev/fuse` when the ring serves (INIT, FORGET, INTERRUPT). After INIT ([`init`]),
//! each of the mount's request threads reads one request at a time with `read(2)` from its own
//! clone of the connection (FUSE_DEV_IOC_CLONE), decodes it with the same [`crate::wire`] the
//! ring uses, answers it through the same `Ops` (`transport/dispatch.rs`) and writes the reply
//! with one `writev(2)`: a READ's data straight from where the volume decoded it. The
//! notifications the volume sends go out through [`notify`].
//!
//! Mirrors libfuse's multi-threaded loop (lib/fuse_loop_mt.c with clone_fd, fuse_lowlevel.c's
//! fuse_session_receive_buf and fuse_send_msg): the server's side of fs/fuse/dev.c
//! (fuse_dev_do_read, fuse_dev_do_write, fuse_dev_ioctl_clone).
//!
//! Who may ask is the kernel's check (`allow_other`, fuse_allow_current_process, before a
//! request is queued), on this transport as on the ring: fuser repeated it for what it read
//! from `/dev/fuse`, which made the two transports differ where the kernel lets more in
//! (`allow_sys_admin_access`); test `another_user_gets_in_only_with_allow_other_on_either_transport`.

pub(crate) mod init;
pub(crate) mod notify;

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::transport::dispatch::{decode_and_dispatch, send, Answer, Direct, Reply};
use crate::transport::ops::Ops;
use crate::transport::{wire, MAX_WRITE, READAHEAD_KB};

/// What the log lines of a malformed request name.
const WHAT: &str = "FUSE (/dev/fuse)";

/// A read buffer: the kernel refuses one smaller than a WRITE's headers and `max_write`
/// (fuse_dev_do_read).
pub(crate) const REQUEST_BUF: usize = MAX_WRITE + (64 << 10);

/// The answer buffer: the largest listing (at most `max_pages`, as a READ); a READ's data and
/// an xattr's value go out from where they lie.
const ANSWER_BUF: usize = {
    let ra = (READAHEAD_KB as usize) << 10;
    if ra > MAX_WRITE {
        ra
    } else {
        MAX_WRITE
    }
};

/// FUSE_DEV_IOC_CLONE: `_IOR(229, 0, uint32_t)`.
const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;

/// A connection after INIT.
pub(crate) struct Session {
    fd: Arc<OwnedFd>,
    /// What INIT settled.
    pub negotiated: init::Negotiated,
}

impl Session {
    /// Answer INIT on `fd`, a connection just mounted; `uring`: ask for FUSE over io_uring.
    pub(crate) fn new(fd: OwnedFd, uring: bool) -> io::Result<Session> {
        let negotiated = init::handshake(fd.as_fd(), uring)?;
        Ok(Session {
            fd: Arc::new(fd),
            negotiated,
        })
    }

    /// The connection's descriptor (the ring registers on a duplicate of it).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// What sends the volume's notifications.
    pub(crate) fn notifier(&self) -> notify::Notifier {
        notify::Notifier::new(self.fd.clone())
    }

    /// Serve with `threads` threads until the kernel ends the connection (unmount, abort),
    /// then make the final commit. The first error a thread met, if any.
    pub(crate) fn run(self, ops: Arc<Ops>, threads: usize) -> io::Result<()> {
        let mut handles: Vec<JoinHandle<io::Result<()>>> = Vec::with_capacity(threads);
        let mut started = Ok(());
        for k in 0..threads.max(1) {
            let fd = match k {
                0 => None,
                _ => clone(&self.fd),
            };
            let (main, ops) = (self.fd.clone(), ops.clone());
            let h = std::thread::Builder::new()
                .name(format!("wring-fuse-{k}"))
                .spawn(move || serve(fd.as_ref().map_or(main.as_fd(), |f| f.as_fd()), &ops));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Serve with the threads there are; the first one is enough.
                    log::error!("FUSE: starting request thread {k}: {e}");
                    if handles.is_empty() {
                        started = Err(e);
                    }
                    break;
                }
            }
        }
        let mut result = started;
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a FUSE request thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        ops.destroy();
        result
    }
}

/// A clone of connection `fd` for one thread (FUSE_DEV_IOC_CLONE: requests read from it are
/// answered on it); `None` when the kernel or /dev/fuse's mode refuses, and the thread reads
/// from `fd` itself.
fn clone(fd: &OwnedFd) -> Option<OwnedFd> {
    let new = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| log::debug!("FUSE: opening /dev/fuse for a clone: {e}"))
        .ok()?;
    let mut source = fd.as_raw_fd() as u32;
    // SAFETY: FUSE_DEV_IOC_CLONE reads one u32 (the descriptor to clone) through the pointer,
    // which points at `source`, alive across the call; `new` is an open /dev/fuse descriptor.
    let r = unsafe { libc::ioctl(new.as_raw_fd(), FUSE_DEV_IOC_CLONE, &mut source) };
    if r != 0 {
        log::debug!("FUSE: FUSE_DEV_IOC_CLONE: {}", io::Error::last_os_error());
        return None;
    }
    Some(new.into())
}

/// Read one request from `fd` into `buf`: its bytes, or `None` once the connection is gone.
pub(crate) fn read_request<'b>(fd: BorrowedFd, buf: &'b mut [u8]) -> io::Result<Option<&'b [u8]>> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Ok(n) => {
                let read = buf.get(..n);
                return read
                    .map(Some)
                    .ok_or_else(|| io::Error::other("read past the buffer"));
            }
            // ENOENT: the request was interrupted before it was read; the others: again.
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            Err(rustix::io::Errno::NODEV) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// One thread's loop: a request in, its answer out.
fn serve(fd: BorrowedFd, ops: &Ops) -> io::Result<()> {
    let mut buf = vec![0u8; REQUEST_BUF];
    let mut answer = vec![0u8; ANSWER_BUF];
    while let Some(request) = read_request(fd, &mut buf)? {
        answer_one(fd, request, &mut answer, ops);
    }
    Ok(())
}

/// Decode `request`, answer it, and write the reply (FORGETs have none).
fn answer_one(fd: BorrowedFd, request: &[u8], buf: &mut [u8], ops: &Ops) {
    let parts = match wire::split(request) {
        Ok(parts) => parts,
        Err(e) => {
            log::error!("{WHAT}: {e}");
            // A header that can be read is answered EIO; without one there is no request
            // to answer.
            if let Ok(h) = wire::header(request) {
                if h.opcode != wire::FORGET && h.opcode != wire::BATCH_FORGET {
                    let header = wire::out_header(h.unique, -libc::EIO, 0);
                    send(fd, &[IoSlice::new(&header)]);
                }
            }
            return;
        }
    };
    let Ok(h) = wire::header(parts.0) else {
        return;
    };
    let mut a = Answer::with_direct(
        buf,
        Direct {
            fd,
            unique: h.unique,
        },
    );
    if decode_and_dispatch(ops, parts, &mut a, WHAT) == Reply::None || a.sent {
        return;
    }
    let body = a.bytes_written();
    let header = wire::out_header(h.unique, a.error, body.len());
    send(fd, &[IoSlice::new(&header), IoSlice::new(body)]);
}
