//! One decoded request to its body in `Ops`, and the answer written back, for both
//! transports: [`Answer`] is the buffer a reply is written into (a ring entry's payload, or
//! the `/dev/fuse` loop's reply buffer), and with a [`Direct`] it sends a body's bytes (a
//! READ's data, an xattr's value) straight from where they lie, as `/dev/fuse` can with
//! `writev` and a ring entry cannot.
//!
//! Mirrors libfuse's fuse_lowlevel.c (do_lookup, do_getattr, …: a request's fields to the
//! filesystem's operation, and fuse_reply_* for the answers).

use std::io::IoSlice;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::transport::ops::{
    AnswerAttr, AnswerCreate, AnswerData, AnswerDir, AnswerDirPlus, AnswerEmpty, AnswerEntry,
    AnswerIoctl, AnswerOpen, AnswerStatfs, AnswerStatx, AnswerWrite, AnswerXattr, Fail, Ops,
};
use crate::transport::wire::{
    self, forgets, Errno, FileAttr, FileType, Header, Request, Statfs, StatxExtra,
};
use crate::volume::data::reflink::CopyRange;
use crate::volume::Caller;

/// Whether a request gets a reply: FORGET and BATCH_FORGET get none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// Send the answer.
    Send,
    /// Send nothing.
    None,
}

/// Decode a request and answer it into `a`; a malformed one is answered EIO, with a log
/// line saying what was wrong (`what`: the transport).
pub(super) fn decode_and_dispatch(
    ops: &Ops,
    (in_header, op_in, payload): wire::Parts,
    a: &mut Answer,
    what: &str,
) -> Reply {
    match wire::parse(in_header, op_in, payload) {
        Ok((h, r)) => dispatch(ops, &h, r, a),
        Err(e) => {
            log::error!("{what}: {e}");
            a.fail(Errno::EIO);
            Reply::Send
        }
    }
}

/// Hand a decoded request to its body.
pub(super) fn dispatch(ops: &Ops, h: &Header, r: Request, a: &mut Answer) -> Reply {
    let c = Caller {
        uid: h.uid,
        gid: h.gid,
        pid: h.pid,
    };
    let ino = h.nodeid;
    match r {
        Request::Lookup { name } => ops.lookup(ino, name, a),
        Request::Forget { nlookup } => {
            ops.forget(ino, nlookup);
            return Reply::None;
        }
        Request::BatchForget { items } => {
            for (ino, nlookup) in forgets(items) {
                ops.forget(ino, nlookup);
            }
            return Reply::None;
        }
        Request::Getattr => ops.getattr(ino, a),
        Request::Statx => ops.statx(ino, a),
        Request::Setattr(s) => ops.setattr(c, ino, s, a),
        Request::Readlink => ops.readlink(ino, a),
        Request::Symlink { name, target } => ops.symlink(c, ino, name, target, a),
        Request::Mknod {
            name,
            mode,
            rdev,
            umask,
        } => ops.mknod(c, ino, name, mode, umask, rdev, a),
        Request::Mkdir { name, mode, umask } => ops.mkdir(c, ino, name, mode, umask, a),
        Request::Unlink { name } => ops.remove(ino, name, false, a),
        Request::Rmdir { name } => ops.remove(ino, name, true, a),
        Request::Rename {
            newdir,
            name,
            newname,
            flags,
        } => ops.rename(ino, name, newdir, newname, flags, a),
        Request::Link { ino: from, newname } => ops.link(from, ino, newname, a),
        Request::Open { flags } => ops.open(ino, flags, a),
        Request::Read { offset, size } => ops.read(ino, offset, size, a.limited(size)),
        Request::Write {
            offset,
            kill_suidgid,
            data,
        } => ops.write(c, ino, offset, data, kill_suidgid, a),
        Request::Statfs => ops.statfs(a),
        Request::Release { fh } => ops.release(ino, fh, a),
        Request::Fsync { dir } => ops.fsync(ino, dir, a),
        Request::Setxattr { name, value, flags } => ops.setxattr(c, ino, name, value, flags, a),
        Request::Getxattr { name, size } => ops.getxattr(c, ino, name, size, a),
        Request::Listxattr { size } => ops.listxattr(ino, size, a),
        Request::Removexattr { name } => ops.removexattr(ino, name, a),
        Request::Ioctl { cmd, input } => ops.ioctl(c, ino, cmd, input, a),
        Request::Tmpfile { mode, umask } => ops.tmpfile(c, ino, mode, umask, a),
        Request::Flush => ops.flush(a),
        Request::Opendir => ops.opendir(ino, a),
        Request::Readdir {
            fh,
            offset,
            size,
            plus: false,
        } => ops.readdir(ino, fh, offset, a.limited(size)),
        Request::Readdir {
            fh, offset, size, ..
        } => ops.readdirplus(ino, fh, offset, a.limited(size)),
        Request::Releasedir { fh } => ops.releasedir(ino, fh, a),
        Request::Access => ops.access(a),
        Request::Create {
            name,
            mode,
            umask,
            flags,
        } => ops.create(c, ino, name, (mode, umask, flags), a),
        Request::Fallocate {
            offset,
            length,
            mode,
        } => ops.fallocate(c, ino, (offset, length, mode), a),
        Request::CopyFileRange {
            off_in,
            nodeid_out,
            off_out,
            len,
            flags,
        } => {
            let req = CopyRange {
                ino_in: ino,
                off_in,
                ino_out: nodeid_out,
                off_out,
                len,
            };
            ops.copy_file_range(c, req, flags, a)
        }
        // Sent for fuseblk mounts only; the final commit follows the end of the connection.
        Request::Destroy => a.send_ok(),
        // No request can be cut short (a write waits for its compression, an fsync for its
        // commit): ENOSYS tells the kernel so, and it sends no INTERRUPT again.
        Request::Interrupt => a.fail(Errno::ENOSYS),
        // INIT is answered once, before the loop serves (`dev::init`).
        Request::Init(_) => {
            log::error!("FUSE: INIT after the connection was set up");
            a.fail(Errno::EIO)
        }
        Request::Unsupported => a.fail(Errno::ENOSYS),
    }
    Reply::Send
}

/// Where a `/dev/fuse` answer's bytes can be sent from where they lie: the descriptor the
/// request was read from and the request's number.
pub struct Direct<'b> {
    /// The `/dev/fuse` descriptor (the thread's clone).
    pub fd: BorrowedFd<'b>,
    /// The request's `unique`.
    pub unique: u64,
}

/// An answer being written into a buffer.
pub struct Answer<'b> {
    out: &'b mut [u8],
    /// How much of `out` this answer may fill (a READ's or READDIR's size).
    limit: usize,
    /// Bytes of answer in `out`.
    pub len: usize,
    /// 0, or a negative errno.
    pub error: i32,
    direct: Option<Direct<'b>>,
    /// The answer went out already (through [`Direct`]).
    pub sent: bool,
}

impl<'b> Answer<'b> {
    /// An answer written into `out`.
    pub fn new(out: &'b mut [u8]) -> Self {
        let limit = out.len();
        Answer {
            out,
            limit,
            len: 0,
            error: 0,
            direct: None,
            sent: false,
        }
    }

    /// An answer written into `out`, whose bytes answers are sent through `direct`.
    pub fn with_direct(out: &'b mut [u8], direct: Direct<'b>) -> Self {
        Answer {
            direct: Some(direct),
            ..Answer::new(out)
        }
    }

    /// The answer's bytes.
    pub fn bytes_written(&self) -> &[u8] {
        // `put` and `bytes` set len only to what they wrote into out.
        self.out.get(..self.len).unwrap_or_default()
    }

    /// At most `size` bytes of answer, as a READ or READDIR asks.
    fn limited(&mut self, size: u32) -> &mut Self {
        self.limit = self.out.len().min(size as usize);
        self
    }

    /// An answer written by `f` into the buffer: its length, or `None` when it did not fit.
    fn put(&mut self, f: impl FnOnce(&mut [u8]) -> Option<usize>) {
        match f(self.out) {
            Some(n) if n <= self.out.len() => self.len = n,
            _ => {
                let room = self.out.len();
                log::error!("FUSE: an answer's structure does not fit its {room}-byte buffer");
                self.fail(Errno::EIO)
            }
        }
    }

    fn bytes(&mut self, data: &[u8]) {
        // The limit is at most the buffer's length.
        let fits = data.len() <= self.limit;
        let Some(out) = self.out.get_mut(..data.len()).filter(|_| fits) else {
            log::error!(
                "FUSE: a {}-byte answer does not fit the kernel's {} bytes",
                data.len(),
                self.limit
            );
            return self.fail(Errno::EIO);
        };
        if let Some(d) = &self.direct {
            let header = wire::out_header(d.unique, 0, data.len());
            send(d.fd, &[IoSlice::new(&header), IoSlice::new(data)]);
            self.sent = true;
            return;
        }
        out.copy_from_slice(data);
        self.len = data.len();
    }
}

/// Write one reply to `/dev/fuse`. ENOENT means the kernel no longer waits for it (the
/// request was interrupted, or the connection aborted): nothing to do.
pub(super) fn send(fd: BorrowedFd, parts: &[IoSlice]) {
    match rustix::io::writev(fd, parts) {
        Ok(_) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => log::warn!("FUSE: writing a reply: {e}"),
    }
}

impl Fail for &mut Answer<'_> {
    fn fail(self, e: Errno) {
        self.error = -e.code();
        self.len = 0;
    }
}
impl AnswerEntry for &mut Answer<'_> {
    fn send_entry(self, ttl: &Duration, attr: &FileAttr) {
        self.put(|b| wire::put_entry_out(b, ttl, attr))
    }
}
impl AnswerAttr for &mut Answer<'_> {
    fn send_attr(self, ttl: &Duration, attr: &FileAttr) {
        self.put(|b| wire::put_attr_out(b, ttl, attr))
    }
}
impl AnswerStatx for &mut Answer<'_> {
    fn send_statx(self, ttl: &Duration, attr: &FileAttr, extra: &StatxExtra) {
        self.put(|b| wire::put_statx_out(b, ttl, attr, extra))
    }
}
impl AnswerData for &mut Answer<'_> {
    fn send_data(self, data: &[u8]) {
        self.bytes(data)
    }
}
impl AnswerEmpty for &mut Answer<'_> {
    fn send_ok(self) {
        self.len = 0;
    }
}
impl AnswerWrite for &mut Answer<'_> {
    fn send_written(self, n: u32) {
        self.put(|b| wire::put_u32_out(b, n))
    }
}
impl AnswerOpen for &mut Answer<'_> {
    fn send_opened(self, fh: u64, open_flags: u32) {
        self.put(|b| wire::put_open_out(b, fh, open_flags))
    }
}
impl AnswerCreate for &mut Answer<'_> {
    fn send_created(self, ttl: &Duration, attr: &FileAttr, fh: u64, open_flags: u32) {
        self.put(|b| {
            let entry = wire::put_entry_out(b, ttl, attr)?;
            Some(entry + wire::put_open_out(b.get_mut(entry..)?, fh, open_flags)?)
        })
    }
}
impl AnswerIoctl for &mut Answer<'_> {
    fn send_ioctl(self, result: i32, data: &[u8]) {
        // At most a struct fsxattr: well within any answer buffer.
        self.put(|b| wire::put_ioctl_out(b, result, data))
    }
}
impl AnswerStatfs for &mut Answer<'_> {
    fn send_statfs(self, s: &Statfs) {
        self.put(|b| wire::put_statfs_out(b, s))
    }
}
impl AnswerXattr for &mut Answer<'_> {
    fn send_size(self, n: u32) {
        self.put(|b| wire::put_u32_out(b, n))
    }
    fn send_value(self, data: &[u8]) {
        self.bytes(data)
    }
}
impl AnswerDir for &mut Answer<'_> {
    fn push(&mut self, ino: u64, next: u64, kind: FileType, name: &[u8]) -> bool {
        let Some(room) = self.out.get_mut(self.len..self.limit) else {
            return true;
        };
        match wire::put_dirent(room, ino, next, kind, name, None) {
            Some(n) => {
                self.len += n;
                false
            }
            None => true,
        }
    }
    fn send_listing(self) {}
}
impl AnswerDirPlus for &mut Answer<'_> {
    fn push_plus(&mut self, next: u64, name: &[u8], ttl: &Duration, attr: &FileAttr) -> bool {
        let Some(room) = self.out.get_mut(self.len..self.limit) else {
            return true;
        };
        match wire::put_dirent(room, attr.ino, next, attr.kind, name, Some((ttl, attr))) {
            Some(n) => {
                self.len += n;
                false
            }
            None => true,
        }
    }
    fn send_listing(self) {}
}
