//! What each FUSE request does, once, for both transports: the `/dev/fuse` loop
//! (`transport/dev/`) and FUSE over io_uring ([`crate::uring`]), which decode requests with the
//! same [`crate::wire`] and hand them here through `transport/dispatch.rs`.
//!
//! Mirrors the VFS entry points btrfs fills in (btrfs_dir_inode_operations,
//! btrfs_file_operations); the kernel's writeback cache stands in for the page cache.
//! Differs in keeping nothing per open file: OPEN is answered only to refuse writing opens of
//! an immutable or append-only file, as the VFS's may_open does for btrfs (see [`Ops::open`]),
//! CREATE makes and opens a file in one request, and FLUSH is answered ENOSYS once, after which
//! the kernel closes files without asking.
//!
//! A body answers through one of the small `Answer*` traits below, which `dispatch.rs`'s
//! answer buffer implements for both transports.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::counters::Op;
use crate::error::{chain, FsError};
use crate::store::records::{Inode, Kind};
use crate::store::ROOT;
use crate::transport::wire::FOPEN_KEEP_CACHE;
pub(crate) use crate::transport::wire::{attr, Errno, FileAttr, FileType, Statfs, StatxExtra};
use crate::volume::data::defrag::{DefragArgs, BTRFS_IOC_DEFRAG, BTRFS_IOC_DEFRAG_RANGE};
use crate::volume::data::reflink::CopyRange;
use crate::volume::names::{acl, fsflags};
use crate::volume::status::{Status, Transport, Uring};
use crate::volume::{Caller, NewInode, SetAttr};
use crate::volume::{Listed, Volume};
use crate::{
    METRICS_XATTR, OPTIONS_XATTR, PID_XATTR, READ_ONLY_XATTR, STATUS_JSON_XATTR, STATUS_XATTR,
    STAT_JSON_XATTR, STAT_XATTR, SYNC_XATTR,
};

/// How long the kernel may trust an entry or attributes without asking: the daemon is the
/// only writer, every change made through the mount is one the kernel makes or sees, and the
/// one change the daemon makes behind it (a file's stored size, `st_blocks`, once its
/// writeback commits) is invalidated then ([`Volume::attrs_changed`]).
pub(crate) const TTL: Duration = Duration::from_secs(60);
/// The handle of an open that may write (RELEASE counts it off); every other open's is 0.
const WRITER: u64 = 1;
/// Entries of a READDIRPLUS reply held and read from one snapshot at a time.
const LISTED_CHUNK: usize = 64;

/// Every answer can be an error.
pub trait Fail {
    /// Answer with an errno.
    fn fail(self, e: Errno);
}
/// LOOKUP, MKNOD, MKDIR, SYMLINK, LINK.
pub trait AnswerEntry: Fail {
    /// The entry and its attributes, both valid for `ttl`.
    fn send_entry(self, ttl: &Duration, attr: &FileAttr);
}
/// GETATTR, SETATTR.
pub trait AnswerAttr: Fail {
    /// The attributes, valid for `ttl`.
    fn send_attr(self, ttl: &Duration, attr: &FileAttr);
}
/// STATX.
pub trait AnswerStatx: Fail {
    /// The attributes and statx's own fields, valid for `ttl`.
    fn send_statx(self, ttl: &Duration, attr: &FileAttr, extra: &StatxExtra);
}
/// READ, READLINK.
pub trait AnswerData: Fail {
    /// The bytes.
    fn send_data(self, data: &[u8]);
}
/// Requests answered with success alone.
pub trait AnswerEmpty: Fail {
    /// Success.
    fn send_ok(self);
}
/// WRITE.
pub trait AnswerWrite: Fail {
    /// `n` bytes written.
    fn send_written(self, n: u32);
}
/// OPEN, OPENDIR.
pub trait AnswerOpen: Fail {
    /// The handle, and the `FOPEN_*` flags that say how the kernel caches it.
    fn send_opened(self, fh: u64, open_flags: u32);
}
/// STATFS.
pub trait AnswerStatfs: Fail {
    /// The figures.
    fn send_statfs(self, s: &Statfs);
}

/// CREATE, TMPFILE: the entry, and the open.
pub trait AnswerCreate: Fail {
    /// The entry and its attributes, valid for `ttl`, opened as `fh` with `FOPEN_*` flags
    /// `open_flags`.
    fn send_created(self, ttl: &Duration, attr: &FileAttr, fh: u64, open_flags: u32);
}

/// IOCTL.
pub trait AnswerIoctl: Fail {
    /// The ioctl's result and what it writes back.
    fn send_ioctl(self, result: i32, data: &[u8]);
}

/// FS_IOC_GETFLAGS and FS_IOC_SETFLAGS (`_IOR/_IOW('f', 1/2, long)`, as the kernel's
/// fileattr calls send them), FS_IOC_FSGETXATTR and FS_IOC_FSSETXATTR
/// (`_IOR/_IOW('X', 31/32, struct fsxattr)`).
const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;

/// GETXATTR, LISTXATTR.
pub trait AnswerXattr: Fail {
    /// The size a buffer would need (the caller asked with size 0).
    fn send_size(self, n: u32);
    /// The value.
    fn send_value(self, data: &[u8]);
}
/// READDIR.
pub trait AnswerDir: Fail {
    /// One entry; true when the reply is full (the entry was left out).
    fn push(&mut self, ino: u64, next: u64, kind: FileType, name: &[u8]) -> bool;
    /// The entries pushed so far.
    fn send_listing(self);
}
/// READDIRPLUS.
pub trait AnswerDirPlus: Fail {
    /// One entry with attributes; true when the reply is full (the entry was left out).
    fn push_plus(&mut self, next: u64, name: &[u8], ttl: &Duration, attr: &FileAttr) -> bool;
    /// The entries pushed so far.
    fn send_listing(self);
}

/// What the io_uring queues have served (`uring=1`), for `wring status`.
#[derive(Debug, Default)]
pub struct RingStats {
    /// Queues registered (one per possible CPU).
    pub queues: AtomicUsize,
    /// Entries (one per thread).
    pub entries: AtomicUsize,
    /// Entries the kernel refused (it then serves through `/dev/fuse`).
    pub refused: AtomicUsize,
    /// Requests answered through the ring.
    pub requests: AtomicU64,
    /// Which transport the mount chose and why (`uring=`), set once before it serves.
    pub transport: std::sync::OnceLock<String>,
}

impl RingStats {
    /// Which transport serves, and the ring's figures when it does.
    fn figures(&self) -> Transport {
        Transport {
            name: self.transport.get().cloned(),
            uring: match self.entries.load(Ordering::Relaxed) {
                0 => None,
                entries => Some(Uring {
                    queues: self.queues.load(Ordering::Relaxed) as u64,
                    entries: entries as u64,
                    refused: self.refused.load(Ordering::Relaxed) as u64,
                    requests: self.requests.load(Ordering::Relaxed),
                }),
            },
        }
    }
}

/// The requests' bodies over one volume.
pub struct Ops {
    pub(crate) vol: Arc<Volume>,
    /// The io_uring transport's figures.
    pub ring: RingStats,
    /// Where the mount is, as its metrics label it (set once before it serves).
    pub mountpoint: std::sync::OnceLock<String>,
    /// One remount at a time: each applies its options and starts the writeback threads
    /// they ask for before the next looks at the count.
    remount: std::sync::Mutex<()>,
}

/// Root and the mount's owner (the daemon's user): only they may make durable commits on
/// demand (`wring.sync`) and remount. With allow_other anyone else reaches the root too.
fn privileged(c: Caller) -> bool {
    // SAFETY: geteuid has no preconditions.
    let owner = unsafe { libc::geteuid() };
    c.uid == 0 || c.uid == owner
}

fn err(e: FsError) -> Errno {
    if !matches!(e, FsError::Errno(_)) {
        log::warn!("{}", chain(&e));
    }
    Errno::from_i32(e.errno())
}

fn answer_empty(reply: impl AnswerEmpty, r: Result<(), FsError>) {
    match r {
        Ok(()) => reply.send_ok(),
        Err(e) => reply.fail(err(e)),
    }
}

fn answer_xattr(reply: impl AnswerXattr, size: u32, data: &[u8]) {
    if size == 0 {
        reply.send_size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.fail(Errno::from_i32(libc::ERANGE));
    } else {
        reply.send_value(data);
    }
}

/// What a request makes: its owner is the caller.
fn new_inode<'t>(
    c: Caller,
    kind: Kind,
    mode: u32,
    rdev: u32,
    target: Option<&'t [u8]>,
    umask: u32,
) -> NewInode<'t> {
    NewInode {
        kind,
        perm: mode,
        uid: c.uid,
        gid: c.gid,
        rdev,
        target,
        umask,
    }
}

impl Ops {
    /// The bodies over `vol`.
    pub fn new(vol: Arc<Volume>) -> Ops {
        Ops {
            vol,
            ring: RingStats::default(),
            mountpoint: std::sync::OnceLock::new(),
            remount: std::sync::Mutex::default(),
        }
    }

    fn blksize(&self) -> u32 {
        self.vol.options().max_extent as u32
    }

    fn entry(&self, reply: impl AnswerEntry, r: Result<(u64, Inode), FsError>) {
        match r {
            Ok((ino, i)) => reply.send_entry(&TTL, &attr(ino, &i, self.blksize())),
            Err(e) => reply.fail(err(e)),
        }
    }

    fn attr_reply(&self, reply: impl AnswerAttr, ino: u64, r: Result<Inode, FsError>) {
        match r {
            Ok(i) => reply.send_attr(&TTL, &attr(ino, &i, self.blksize())),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// Drop the holds [`Volume::hold_listed`] took for entries a reply left out.
    fn unhold(&self, entries: &[(u64, bool, Kind)], attrs: &[Option<Listed>]) {
        for (&(ino, dot, _), a) in entries.iter().zip(attrs) {
            if a.is_some() && !dot {
                if let Err(u) = self.vol.released(ino) {
                    log::warn!("undoing the hold of an entry left out of a listing: {u}");
                }
            }
        }
    }

    fn control_get(&self, c: Caller, ino: u64, name: &[u8]) -> Option<Result<Vec<u8>, FsError>> {
        let v = match name {
            n if n == STAT_XATTR.as_bytes() => self
                .vol
                .stat_report_for(ino, c)
                .map(|r| r.to_string().into_bytes()),
            n if n == STAT_JSON_XATTR.as_bytes() => self
                .vol
                .stat_report_for(ino, c)
                .map(|r| r.json().into_bytes()),
            n if ino != ROOT => {
                let status = [STATUS_XATTR, STATUS_JSON_XATTR, METRICS_XATTR]
                    .iter()
                    .any(|x| n == x.as_bytes());
                return status.then(|| Err(FsError::Errno(libc::ENODATA)));
            }
            n if n == STATUS_XATTR.as_bytes() => Ok(self.status().to_string().into_bytes()),
            n if n == STATUS_JSON_XATTR.as_bytes() => Ok(self.status().json().into_bytes()),
            n if n == METRICS_XATTR.as_bytes() => Ok(self.metrics().into_bytes()),
            n if n == OPTIONS_XATTR.as_bytes() => Ok(self.vol.options().to_string().into_bytes()),
            // A durable commit, on demand: not for anyone allow_other lets in.
            n if n == SYNC_XATTR.as_bytes() && !privileged(c) => Err(FsError::Errno(libc::EPERM)),
            n if n == SYNC_XATTR.as_bytes() => self.vol.sync_all().map(|_| b"ok".to_vec()),
            n if n == READ_ONLY_XATTR.as_bytes() && !privileged(c) => {
                Err(FsError::Errno(libc::EPERM))
            }
            n if n == READ_ONLY_XATTR.as_bytes() => {
                let _one = crate::volume::lock(&self.remount);
                self.vol.remount("ro").map(|_| b"ok".to_vec())
            }
            n if n == PID_XATTR.as_bytes() => Ok(std::process::id().to_string().into_bytes()),
            _ => return None,
        };
        Some(v)
    }

    /// What `wring status` shows: the volume's figures and the transport's.
    pub fn status(&self) -> Status {
        let mut st = Status::of(&self.vol);
        st.transport = self.ring.figures();
        st
    }

    /// The Prometheus exposition of [`Ops::status`] (`metrics=`, `wring metrics`).
    pub fn metrics(&self) -> String {
        let at = self.mountpoint.get().map_or("", String::as_str);
        crate::volume::status::prometheus::exposition(&self.status(), at)
    }

    /// The last commit before the daemon lets go of the mount.
    pub fn destroy(&self) {
        if let Err(e) = self.vol.sync() {
            log::error!("final commit failed: {e}");
        }
    }

    /// The kernel's references to an inode (one per entry reply) keep it as an orphan after
    /// its last name goes.
    pub fn forget(&self, ino: u64, nlookup: u64) {
        let _t = self.vol.op_counts().count(Op::Forget);
        self.vol.forget(ino, nlookup);
    }

    /// LOOKUP.
    pub fn lookup(&self, parent: u64, name: &[u8], reply: impl AnswerEntry) {
        let _t = self.vol.op_counts().count(Op::Lookup);
        self.entry(reply, self.vol.lookup_held(parent, name));
    }

    /// GETATTR.
    pub fn getattr(&self, ino: u64, reply: impl AnswerAttr) {
        let _t = self.vol.op_counts().count(Op::Getattr);
        self.attr_reply(reply, ino, self.vol.inode(ino));
    }

    /// STATX, which the kernel sends (Linux 6.6 on) instead of GETATTR when statx(2) asks
    /// for more than stat(2) has (the birth time) and its cached attributes are stale, then
    /// caches the answer as GETATTR's: the attributes, and the inode flags btrfs_getattr
    /// reports in `stx_attributes` with its `stx_attributes_mask` (immutable, append-only,
    /// nodump, and compressed for a file with the `c` flag or the `compression` property, see
    /// [`fsflags::statx_attributes`]). No birth time: the store keeps none, and the kernel
    /// caches that it has none. Linux 6.18 reports none of these attributes from a FUSE
    /// server (fs/fuse/dir.c fuse_do_statx takes the basic fields and the birth time only);
    /// they are answered for the kernels that pass them on.
    pub fn statx(&self, ino: u64, reply: impl AnswerStatx) {
        let _t = self.vol.op_counts().count(Op::Statx);
        let r = self
            .vol
            .inode(ino)
            .and_then(|i| Ok((self.vol.fs_flags(ino)?, i)));
        match r {
            Ok((flags, i)) => {
                let (attributes, attributes_mask) = fsflags::statx_attributes(flags);
                let extra = StatxExtra {
                    attributes,
                    attributes_mask,
                };
                reply.send_statx(&TTL, &attr(ino, &i, self.blksize()), &extra)
            }
            Err(e) => reply.fail(err(e)),
        }
    }

    /// SETATTR: `set` as the kernel sent it, made by `c`.
    pub fn setattr(&self, c: Caller, ino: u64, set: SetAttr, reply: impl AnswerAttr) {
        let _t = self.vol.op_counts().count(Op::Setattr);
        let set = SetAttr {
            caller: Some(c),
            ..set
        };
        self.attr_reply(reply, ino, self.vol.setattr(ino, &set));
    }

    /// READLINK.
    pub fn readlink(&self, ino: u64, reply: impl AnswerData) {
        let _t = self.vol.op_counts().count(Op::Readlink);
        match self.vol.readlink(ino) {
            Ok(t) => reply.send_data(&t),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// MKNOD: fifos, sockets, devices, and files made without an open (mknod(2); open(2)
    /// with O_CREAT sends CREATE, see [`Ops::create`]).
    #[allow(clippy::too_many_arguments)]
    pub fn mknod(
        &self,
        c: Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: impl AnswerEntry,
    ) {
        let _t = self.vol.op_counts().count(Op::Mknod);
        match Kind::from_mode(mode) {
            Some(k) if k != Kind::Dir && k != Kind::Symlink => {
                let new = new_inode(c, k, mode, rdev, None, umask);
                self.entry(reply, self.vol.create_held(parent, name, new, 1))
            }
            _ => reply.fail(Errno::from_i32(libc::EINVAL)),
        }
    }

    /// MKDIR.
    pub fn mkdir(
        &self,
        c: Caller,
        parent: u64,
        name: &[u8],
        mode: u32,
        umask: u32,
        reply: impl AnswerEntry,
    ) {
        let _t = self.vol.op_counts().count(Op::Mkdir);
        let new = new_inode(c, Kind::Dir, mode, 0, None, umask);
        self.entry(reply, self.vol.create_held(parent, name, new, 1));
    }

    /// UNLINK and RMDIR.
    pub fn remove(&self, parent: u64, name: &[u8], dir: bool, reply: impl AnswerEmpty) {
        let _t = self
            .vol
            .op_counts()
            .count(if dir { Op::Rmdir } else { Op::Unlink });
        answer_empty(reply, self.vol.remove(parent, name, dir));
    }

    /// SYMLINK.
    pub fn symlink(
        &self,
        c: Caller,
        parent: u64,
        name: &[u8],
        target: &[u8],
        reply: impl AnswerEntry,
    ) {
        let _t = self.vol.op_counts().count(Op::Symlink);
        let new = new_inode(c, Kind::Symlink, 0o777, 0, Some(target), 0);
        self.entry(reply, self.vol.create_held(parent, name, new, 1));
    }

    /// RENAME and RENAME2 (`flags`: RENAME_NOREPLACE, RENAME_EXCHANGE).
    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
        reply: impl AnswerEmpty,
    ) {
        let _t = self.vol.op_counts().count(Op::Rename);
        answer_empty(
            reply,
            self.vol.rename(parent, name, newparent, newname, flags),
        );
    }

    /// LINK.
    pub fn link(&self, ino: u64, newparent: u64, newname: &[u8], reply: impl AnswerEntry) {
        let _t = self.vol.op_counts().count(Op::Link);
        let r = self.vol.link_held(ino, newparent, newname);
        self.entry(reply, r.map(|i| (ino, i)));
    }

    /// OPEN with open(2)'s `flags`. The daemon keeps no state per open file (reads and
    /// writes name the inode; the kernel's reference to an open file's inode, held until
    /// FORGET, keeps an unlinked file readable), but an immutable or append-only file refuses
    /// opens for writing here with EPERM, where the VFS's may_open refuses them on btrfs:
    /// FUSE sets no S_IMMUTABLE or S_APPEND on the kernel's inode, so the VFS never does
    /// (see [`fsflags::guard_open`]; O_TRUNC, which the kernel does not pass on, is refused
    /// by the SETATTR that follows the open). The answer keeps the file's cached pages across
    /// opens (FOPEN_KEEP_CACHE, what the kernel does for a server that answers OPEN with
    /// ENOSYS, as wring did before issue 40: every change to a file's data goes through the
    /// kernel), handle 0. The kernel sends RELEASE at close, in the background.
    pub fn open(&self, ino: u64, flags: u32, reply: impl AnswerOpen) {
        let _t = self.vol.op_counts().count(Op::Open);
        match self.vol.may_open(ino, flags) {
            Ok(()) => reply.send_opened(self.handle(ino, flags), FOPEN_KEEP_CACHE),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// The handle of an open of `ino` with `flags`: [`WRITER`] for one that may write, which
    /// the volume counts until its RELEASE (see `Volume::sync_all`), else 0.
    fn handle(&self, ino: u64, flags: u32) -> u64 {
        if flags as i32 & libc::O_ACCMODE == libc::O_RDONLY {
            return 0;
        }
        self.vol.write_opened(ino);
        WRITER
    }

    /// READ.
    pub fn read(&self, ino: u64, offset: u64, size: u32, reply: impl AnswerData) {
        let _t = self.vol.op_counts().count(Op::Read);
        thread_local! {
            /// The reply buffer of this request thread, kept between reads.
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with_borrow_mut(|buf| match self.vol.read_into(ino, offset, size, buf) {
            Ok(()) => reply.send_data(buf),
            Err(e) => reply.fail(err(e)),
        })
    }

    /// WRITE; `kill_suidgid`: the kernel asks to drop the set-ID bits (the writer lacks
    /// CAP_FSETID).
    pub fn write(
        &self,
        c: Caller,
        ino: u64,
        offset: u64,
        data: &[u8],
        kill_suidgid: bool,
        reply: impl AnswerWrite,
    ) {
        let _t = self.vol.op_counts().count(Op::Write);
        let kill = kill_suidgid.then_some(c);
        match self.vol.write(ino, offset, data, kill) {
            Ok(()) => {
                self.vol.op_counts().wrote(data.len());
                reply.send_written(data.len() as u32)
            }
            Err(e) => reply.fail(err(e)),
        }
    }

    /// close(2) has nothing for the daemon to do: the kernel writes the file's dirty pages
    /// back (WRITE requests, whose errors close reports) before it would send FLUSH, and a
    /// write's compression errors are fsync's to report, as btrfs reports them at fsync and
    /// not at close. ENOSYS tells the kernel so (`fc->no_flush`): it sends no FLUSH again,
    /// a round trip less on every close.
    pub fn flush(&self, reply: impl Fail) {
        let _t = self.vol.op_counts().count(Op::Flush);
        reply.fail(Errno::ENOSYS);
    }

    /// RELEASE, at the last close of a file OPEN or CREATE opened: an open for writing is
    /// counted off; the kernel's reference (until FORGET) holds the inode.
    pub fn release(&self, ino: u64, fh: u64, reply: impl AnswerEmpty) {
        let _t = self.vol.op_counts().count(Op::Release);
        if fh == WRITER {
            self.vol.write_released(ino);
        }
        reply.send_ok();
    }

    /// FSYNC and FSYNCDIR.
    pub fn fsync(&self, ino: u64, dir: bool, reply: impl AnswerEmpty) {
        let _t = self
            .vol
            .op_counts()
            .count(if dir { Op::Fsyncdir } else { Op::Fsync });
        answer_empty(reply, self.vol.fsync(ino));
    }

    /// FALLOCATE by `c`.
    pub fn fallocate(
        &self,
        c: Caller,
        ino: u64,
        (offset, length, mode): (u64, u64, i32),
        reply: impl AnswerEmpty,
    ) {
        let _t = self.vol.op_counts().count(Op::Fallocate);
        let r = self.vol.fallocate(ino, (offset, length, mode), Some(c));
        answer_empty(reply, r);
    }

    /// COPY_FILE_RANGE within the mount: see [`Volume::copy_range`]. No flags are defined
    /// (copy_file_range(2) refuses any before the kernel sends one).
    pub fn copy_file_range(&self, c: Caller, req: CopyRange, flags: u64, reply: impl AnswerWrite) {
        let _t = self.vol.op_counts().count(Op::CopyFileRange);
        if flags != 0 {
            return reply.fail(Errno::from_i32(libc::EINVAL));
        }
        match self.vol.copy_range(req, Some(c)) {
            // At most MAX_COPY (1 GiB): it fits the reply's 32 bits.
            Ok(n) => reply.send_written(u32::try_from(n).unwrap_or(u32::MAX)),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// TMPFILE (O_TMPFILE) by `c` in `parent`: see [`Volume::tmpfile`].
    pub fn tmpfile(&self, c: Caller, parent: u64, mode: u32, umask: u32, reply: impl AnswerCreate) {
        let _t = self.vol.op_counts().count(Op::Tmpfile);
        let new = new_inode(c, Kind::File, mode, 0, None, umask);
        match self.vol.tmpfile(parent, new) {
            Ok((ino, i)) => {
                let fh = self.vol.new_fh();
                reply.send_created(&TTL, &attr(ino, &i, self.blksize()), fh, FOPEN_KEEP_CACHE)
            }
            Err(e) => reply.fail(err(e)),
        }
    }

    /// IOCTL: the inode flags of chattr and lsattr (see [`fsflags`]) and btrfs's defragment
    /// (see [`DefragArgs`]); any other command is ENOTTY, as for an ioctl the filesystem does
    /// not know.
    pub fn ioctl(&self, c: Caller, ino: u64, cmd: u32, input: &[u8], reply: impl AnswerIoctl) {
        let _t = self.vol.op_counts().count(Op::Ioctl);
        let word = |b: &[u8]| {
            b.first_chunk()
                .map(|w| u32::from_le_bytes(*w))
                .ok_or(FsError::Errno(libc::EINVAL))
        };
        let r = match cmd {
            FS_IOC_GETFLAGS => self.vol.fs_flags(ino).map(|f| f.to_le_bytes().to_vec()),
            FS_IOC_FSGETXATTR => self.vol.fs_flags(ino).map(|f| fsflags::fsxattr(f).to_vec()),
            FS_IOC_SETFLAGS => word(input)
                .and_then(|f| self.vol.set_fs_flags(ino, f))
                .map(|()| Vec::new()),
            FS_IOC_FSSETXATTR => self
                .vol
                .fs_flags(ino)
                .and_then(|old| fsflags::from_fsxattr(input, old))
                .and_then(|f| self.vol.set_fs_flags(ino, f))
                .map(|()| Vec::new()),
            BTRFS_IOC_DEFRAG_RANGE => DefragArgs::from_bytes(input)
                .and_then(|args| self.vol.defrag(ino, c, &args))
                .map(|_| Vec::new()),
            // btrfs_ioctl_defrag with no argument: the whole file, no compression.
            BTRFS_IOC_DEFRAG => self
                .vol
                .defrag(ino, c, &DefragArgs::whole())
                .map(|_| Vec::new()),
            _ => Err(FsError::Errno(libc::ENOTTY)),
        };
        match r {
            Ok(data) => reply.send_ioctl(0, &data),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// OPENDIR.
    pub fn opendir(&self, ino: u64, reply: impl AnswerOpen) {
        let _t = self.vol.op_counts().count(Op::Opendir);
        match self.vol.opendir(ino) {
            Ok(fh) => reply.send_opened(fh, 0),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// READDIR.
    pub fn readdir<R: AnswerDir>(&self, ino: u64, fh: u64, offset: u64, mut reply: R) {
        let _t = self.vol.op_counts().count(Op::Readdir);
        match self.vol.readdir(ino, fh, offset) {
            Ok(list) => {
                let from = usize::try_from(offset).unwrap_or(usize::MAX);
                for (i, e) in list.iter().enumerate().skip(from) {
                    if reply.push(
                        e.ino,
                        i as u64 + 1,
                        crate::transport::wire::kind(e.kind),
                        &e.name,
                    ) {
                        break;
                    }
                }
                reply.send_listing();
            }
            Err(e) => reply.fail(err(e)),
        }
    }

    /// READDIRPLUS: the listing with each entry's attributes. The kernel takes every entry
    /// but `.` and `..` as a lookup it will FORGET, so each is held as LOOKUP holds it
    /// ([`Volume::hold_listed`], a chunk of entries from one snapshot), and the holds are
    /// dropped again for the entries that do not fit the reply. An entry removed since the
    /// listing was taken is left out.
    pub fn readdirplus<R: AnswerDirPlus>(&self, ino: u64, fh: u64, offset: u64, mut reply: R) {
        let _t = self.vol.op_counts().count(Op::Readdirplus);
        let list = match self.vol.readdir(ino, fh, offset) {
            Ok(list) => list,
            Err(e) => return reply.fail(err(e)),
        };
        let blksize = self.blksize();
        let from = usize::try_from(offset).unwrap_or(usize::MAX);
        let rest = list.get(from..).unwrap_or_default();
        for (n, chunk) in rest.chunks(LISTED_CHUNK).enumerate() {
            let start = from + n * LISTED_CHUNK;
            let entries: Vec<(u64, bool, Kind)> = chunk
                .iter()
                .map(|e| (e.ino, e.name == b"." || e.name == b"..", e.kind))
                .collect();
            let attrs = match self.vol.hold_listed(&entries) {
                Ok(a) => a,
                Err(e) if n == 0 => return reply.fail(err(e)),
                Err(_) => break,
            };
            for (k, (e, a)) in chunk.iter().zip(&attrs).enumerate() {
                let (inode, ttl) = match a {
                    None => continue,
                    Some(Listed::Held(i)) => (i, &TTL),
                    Some(Listed::Damaged(i)) => (i, &Duration::ZERO),
                };
                let a = attr(e.ino, inode, blksize);
                let next = (start + k) as u64 + 1;
                if reply.push_plus(next, &e.name, ttl, &a) {
                    // k indexes the zip of the two: inside both.
                    let (entries, attrs) = (entries.get(k..), attrs.get(k..));
                    self.unhold(entries.unwrap_or_default(), attrs.unwrap_or_default());
                    return reply.send_listing();
                }
            }
        }
        reply.send_listing();
    }

    /// RELEASEDIR.
    pub fn releasedir(&self, ino: u64, fh: u64, reply: impl AnswerEmpty) {
        let _t = self.vol.op_counts().count(Op::Releasedir);
        answer_empty(reply, self.vol.releasedir(ino, fh));
    }

    /// STATFS.
    pub fn statfs(&self, reply: impl AnswerStatfs) {
        let _t = self.vol.op_counts().count(Op::Statfs);
        match self.vol.statfs() {
            Ok((blocks, free, files)) => reply.send_statfs(&Statfs {
                blocks,
                bfree: free,
                bavail: free,
                files,
                ffree: u32::MAX as u64,
                bsize: 4096,
                namelen: 255,
                frsize: 4096,
            }),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// SETXATTR, and the control names on the root (`wring.options` remounts).
    pub fn setxattr(
        &self,
        c: Caller,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
        reply: impl AnswerEmpty,
    ) {
        let _t = self.vol.op_counts().count(Op::Setxattr);
        let r = if ino == ROOT && name == OPTIONS_XATTR.as_bytes() {
            if !privileged(c) {
                return reply.fail(Errno::EPERM);
            }
            let _one = crate::volume::lock(&self.remount);
            self.vol
                .remount(&String::from_utf8_lossy(value))
                .map(|o| log::info!("remounted: {o}"))
        } else if name == acl::ACCESS || name == acl::DEFAULT {
            self.vol.set_acl(ino, name, value, flags, c)
        } else if name.starts_with(b"wring.") && name != crate::DICT_XATTR.as_bytes() {
            Err(FsError::Errno(libc::EPERM))
        } else {
            self.vol.setxattr(ino, name, value, flags)
        };
        answer_empty(reply, r);
    }

    /// GETXATTR, and the control names (`wring.status`, `wring.stat`, `wring.sync`, …).
    pub fn getxattr(&self, c: Caller, ino: u64, name: &[u8], size: u32, reply: impl AnswerXattr) {
        let _t = self.vol.op_counts().count(Op::Getxattr);
        let r = match self.control_get(c, ino, name) {
            Some(r) => r,
            None => self.vol.getxattr(ino, name),
        };
        match r {
            Ok(v) => answer_xattr(reply, size, &v),
            Err(e) => reply.fail(err(e)),
        }
    }

    /// LISTXATTR.
    pub fn listxattr(&self, ino: u64, size: u32, reply: impl AnswerXattr) {
        let _t = self.vol.op_counts().count(Op::Listxattr);
        match self.vol.listxattr(ino) {
            Ok(names) => {
                let mut buf = Vec::new();
                for n in names {
                    buf.extend_from_slice(&n);
                    buf.push(0);
                }
                answer_xattr(reply, size, &buf);
            }
            Err(e) => reply.fail(err(e)),
        }
    }

    /// REMOVEXATTR.
    pub fn removexattr(&self, ino: u64, name: &[u8], reply: impl AnswerEmpty) {
        let _t = self.vol.op_counts().count(Op::Removexattr);
        answer_empty(reply, self.vol.removexattr(ino, name));
    }

    /// ACCESS: `default_permissions` has the kernel check; only `access(2)` itself asks.
    pub fn access(&self, reply: impl AnswerEmpty) {
        let _t = self.vol.op_counts().count(Op::Access);
        reply.send_ok();
    }

    /// CREATE (open(2) with O_CREAT of a name that is not there): the file made as MKNOD
    /// makes it, and opened as [`Ops::open`] opens (a new file is neither immutable nor
    /// append-only): one request where MKNOD and OPEN would be two.
    pub fn create(
        &self,
        c: Caller,
        parent: u64,
        name: &[u8],
        (mode, umask, flags): (u32, u32, u32),
        reply: impl AnswerCreate,
    ) {
        let _t = self.vol.op_counts().count(Op::Create);
        if Kind::from_mode(mode) != Some(Kind::File) {
            return reply.fail(Errno::from_i32(libc::EINVAL));
        }
        let new = new_inode(c, Kind::File, mode, 0, None, umask);
        match self.vol.create_held(parent, name, new, 1) {
            Ok((ino, i)) => {
                let a = attr(ino, &i, self.blksize());
                let fh = self.handle(ino, flags);
                reply.send_created(&TTL, &a, fh, FOPEN_KEEP_CACHE)
            }
            Err(e) => reply.fail(err(e)),
        }
    }
}
