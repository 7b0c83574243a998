//! FUSE_INIT, the first request of a connection: what the daemon asks of the kernel's offer
//! (the capabilities, the largest write and readahead, FUSE over io_uring with `uring=1`).
//!
//! Mirrors libfuse's do_init (lib/fuse_lowlevel.c) from the server's side of fs/fuse/inode.c's
//! process_init_reply: a kernel with a newer major version is answered with ours alone and
//! sends INIT again; the reply's flags are what was asked and offered both.

use std::io;
use std::os::fd::BorrowedFd;

use crate::transport::wire::{self, InitIn, InitOut, Request};
use crate::transport::{uring, MAX_WRITE, READAHEAD_KB};

/// The protocol minor version the daemon speaks (FUSE_KERNEL_MINOR_VERSION of the requests
/// and replies it knows; what fuser spoke before this loop replaced it).
pub(crate) const MINOR: u32 = 40;
/// The oldest kernel minor version served: from 7.23 on the kernel takes the whole
/// `fuse_init_out`, and the request layouts `wire` decodes are the ones it sends.
pub(crate) const MIN_MINOR: u32 = 23;

/// FUSE_INIT capability bits (include/uapi/linux/fuse.h).
mod cap {
    pub(super) const ASYNC_READ: u64 = 1 << 0;
    pub(super) const EXPORT_SUPPORT: u64 = 1 << 4;
    pub(super) const BIG_WRITES: u64 = 1 << 5;
    pub(super) const DONT_MASK: u64 = 1 << 6;
    pub(super) const DO_READDIRPLUS: u64 = 1 << 13;
    pub(super) const READDIRPLUS_AUTO: u64 = 1 << 14;
    pub(super) const WRITEBACK_CACHE: u64 = 1 << 16;
    pub(super) const PARALLEL_DIROPS: u64 = 1 << 18;
    pub(super) const POSIX_ACL: u64 = 1 << 20;
    pub(super) const MAX_PAGES: u64 = 1 << 22;
    pub(super) const HANDLE_KILLPRIV_V2: u64 = 1 << 28;
    pub(super) const OVER_IO_URING: u64 = 1 << 41;
}

/// What wring asks for, where the kernel offers it.
const WANTED: u64 = cap::ASYNC_READ
    | cap::BIG_WRITES
    | cap::MAX_PAGES
    | cap::WRITEBACK_CACHE
    | cap::PARALLEL_DIROPS
    | cap::HANDLE_KILLPRIV_V2
    // The kernel enforces POSIX ACLs; wring stores them and keeps the mode in step, and
    // applies the umask itself (a default ACL replaces it).
    | cap::POSIX_ACL
    | cap::DONT_MASK
    // Listings with the entries' attributes when the kernel is about to look them up (ls -l,
    // find, rm -rf): one request instead of one per entry.
    | cap::DO_READDIRPLUS
    | cap::READDIRPLUS_AUTO
    // File handles (name_to_handle_at, an NFS export) that outlive the kernel's cache and a
    // remount: node ids are the store's inode numbers, never reused, and LOOKUP answers `.`
    // and `..` by node id (see Volume::find).
    | cap::EXPORT_SUPPORT;

/// Background requests (readahead, writeback) the kernel keeps in flight at most.
const MAX_BACKGROUND: u16 = 64;

/// What INIT settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// The kernel's minor version.
    pub kernel_minor: u32,
    /// The flags both sides have.
    pub flags: u64,
    /// The largest READ or WRITE, in pages.
    pub max_pages: u16,
}

/// The answer to the kernel's offer `offer`, or why the connection cannot be served (the
/// errno to answer with and the error to return).
pub(crate) fn answer(offer: &InitIn, uring: bool) -> Result<InitOut, (i32, io::Error)> {
    if offer.major < wire::KERNEL_VERSION
        || (offer.major == wire::KERNEL_VERSION && offer.minor < MIN_MINOR)
    {
        let why = format!(
            "the kernel speaks FUSE {}.{}; wring needs {}.{MIN_MINOR} or later",
            offer.major,
            offer.minor,
            wire::KERNEL_VERSION
        );
        return Err((libc::EPROTO, io::Error::other(why)));
    }
    let mut wanted = WANTED;
    if uring {
        if offer.flags & cap::OVER_IO_URING == 0 {
            // The daemon checked enable_uring before mounting; the kernel changed its mind.
            return Err((libc::EPROTO, io::Error::other(uring::NOT_OFFERED)));
        }
        wanted |= cap::OVER_IO_URING;
    }
    let flags = (wanted | wire::FUSE_INIT_EXT) & offer.flags;
    // The kernel takes the smaller of this and its bdi's; the daemon sets the bdi after
    // mounting (`admin/bdi.rs`).
    let max_readahead = (READAHEAD_KB << 10).min(offer.max_readahead);
    let max_write = MAX_WRITE as u32;
    let page = rustix::param::page_size() as u32;
    let max_pages = ((max_write.max(max_readahead) - 1) / page + 1) as u16;
    Ok(InitOut {
        minor: MINOR,
        max_readahead,
        flags,
        max_background: MAX_BACKGROUND,
        congestion_threshold: MAX_BACKGROUND * 3 / 4,
        max_write,
        time_gran: 1,
        max_pages,
    })
}

/// Read INIT from `fd` (a connection just mounted) and answer it; other requests before it
/// are a protocol error.
pub(crate) fn handshake(fd: BorrowedFd, uring: bool) -> io::Result<Negotiated> {
    let mut buf = vec![0u8; super::REQUEST_BUF];
    loop {
        let request = super::read_request(fd, &mut buf)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                "FUSE: disconnected during INIT",
            )
        })?;
        let (h, r) = wire::split(request)
            .and_then(|(i, o, p)| wire::parse(i, o, p))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let Request::Init(offer) = r else {
            reply_error(fd, h.unique, libc::EIO);
            let why = format!("FUSE: opcode {} before INIT", h.opcode);
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        };
        if offer.major > wire::KERNEL_VERSION {
            // Ours alone: the kernel sends INIT again with a version we speak.
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&wire::KERNEL_VERSION.to_le_bytes());
            b[4..].copy_from_slice(&MINOR.to_le_bytes());
            reply(fd, h.unique, &b);
            continue;
        }
        return match answer(&offer, uring) {
            Ok(out) => {
                reply(fd, h.unique, &wire::init_out(&out));
                log::debug!(
                    "FUSE INIT: kernel 7.{}, flags {:#x}",
                    offer.minor,
                    out.flags
                );
                Ok(Negotiated {
                    kernel_minor: offer.minor,
                    flags: out.flags,
                    max_pages: out.max_pages,
                })
            }
            Err((errno, e)) => {
                reply_error(fd, h.unique, errno);
                Err(e)
            }
        };
    }
}

fn reply(fd: BorrowedFd, unique: u64, body: &[u8]) {
    let header = wire::out_header(unique, 0, body.len());
    crate::transport::dispatch::send(
        fd,
        &[std::io::IoSlice::new(&header), std::io::IoSlice::new(body)],
    );
}

fn reply_error(fd: BorrowedFd, unique: u64, errno: i32) {
    let header = wire::out_header(unique, -errno, 0);
    crate::transport::dispatch::send(fd, &[std::io::IoSlice::new(&header)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(minor: u32, flags: u64) -> InitIn {
        InitIn {
            major: 7,
            minor,
            max_readahead: 128 << 10,
            flags,
        }
    }

    #[test]
    fn asks_what_fuser_asked_where_offered() {
        let all = u64::MAX;
        let out = answer(&offer(44, all), false).unwrap();
        assert_eq!(out.flags, WANTED | wire::FUSE_INIT_EXT);
        assert_eq!(out.flags & cap::OVER_IO_URING, 0);
        assert_eq!(out.max_write, 1 << 20);
        // The kernel's 128 KiB bdi is the smaller; a READ or WRITE of up to 1 MiB.
        assert_eq!(out.max_readahead, 128 << 10);
        assert_eq!(
            out.max_pages as usize,
            (1 << 20) / rustix::param::page_size()
        );
        assert_eq!((out.max_background, out.congestion_threshold), (64, 48));
        let ring = answer(&offer(44, all), true).unwrap();
        assert_eq!(ring.flags, out.flags | cap::OVER_IO_URING);
        // Nothing the kernel does not offer.
        let some = cap::ASYNC_READ | cap::WRITEBACK_CACHE;
        assert_eq!(answer(&offer(44, some), false).unwrap().flags, some);
    }

    #[test]
    fn refuses_a_kernel_without_the_ring_or_too_old() {
        let (errno, e) = answer(&offer(44, WANTED), true).unwrap_err();
        assert_eq!(errno, libc::EPROTO);
        assert_eq!(e.to_string(), uring::NOT_OFFERED);
        assert!(answer(&offer(22, WANTED), false).is_err());
    }
}
