//! The `fuser::Filesystem` adapter: fuser reads requests from `/dev/fuse` and this hands
//! each to `Ops` (`transport/ops.rs`), whose answers go back through fuser's reply objects.
//! Thin.
//!
//! With `uring=1` the same `Ops` serve the requests the kernel puts on the io_uring queues
//! ([`crate::uring`]); fuser's threads then see only INIT, FORGET and INTERRUPT, which the
//! kernel still sends through `/dev/fuse`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::transport::ops::{
    AnswerAttr, AnswerData, AnswerDir, AnswerDirPlus, AnswerEmpty, AnswerEntry, AnswerIoctl,
    AnswerOpen, AnswerStatfs, AnswerWrite, AnswerXattr, Fail, Ops, Statfs,
};
use crate::volume::SetAttr;

pub use crate::transport::ops::attr;

/// The FUSE face of a volume.
pub struct WringFs {
    ops: Arc<Ops>,
    /// Ask the kernel for FUSE over io_uring at INIT (`uring=1`).
    uring: bool,
}

impl WringFs {
    /// Serve `ops`; `uring`: ask for the io_uring queues at INIT.
    pub fn new(ops: Arc<Ops>, uring: bool) -> WringFs {
        WringFs { ops, uring }
    }
}

/// The process a request comes from.
fn caller(req: &Request) -> crate::volume::Caller {
    crate::volume::Caller {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

fn time(t: Option<TimeOrNow>) -> Option<Option<SystemTime>> {
    t.map(|t| match t {
        TimeOrNow::SpecificTime(s) => Some(s),
        TimeOrNow::Now => None,
    })
}

/// `Fail` for each of fuser's reply types, and the answers that map one to one.
macro_rules! fails {
    ($($t:ty),*) => {$(
        impl Fail for $t {
            fn fail(self, e: Errno) {
                self.error(e)
            }
        }
    )*};
}
impl AnswerIoctl for ReplyIoctl {
    fn send_ioctl(self, result: i32, data: &[u8]) {
        self.ioctl(result, data)
    }
}

fails!(
    ReplyIoctl,
    ReplyEntry,
    ReplyAttr,
    ReplyData,
    ReplyEmpty,
    ReplyWrite,
    ReplyOpen,
    ReplyStatfs,
    ReplyXattr,
    ReplyDirectory,
    ReplyDirectoryPlus,
    ReplyCreate
);

impl AnswerEntry for ReplyEntry {
    fn send_entry(self, ttl: &Duration, attr: &FileAttr) {
        self.entry(ttl, attr, Generation(0))
    }
}
impl AnswerAttr for ReplyAttr {
    fn send_attr(self, ttl: &Duration, attr: &FileAttr) {
        self.attr(ttl, attr)
    }
}
impl AnswerData for ReplyData {
    fn send_data(self, data: &[u8]) {
        self.data(data)
    }
}
impl AnswerEmpty for ReplyEmpty {
    fn send_ok(self) {
        self.ok()
    }
}
impl AnswerWrite for ReplyWrite {
    fn send_written(self, n: u32) {
        self.written(n)
    }
}
impl AnswerOpen for ReplyOpen {
    fn send_opened(self, fh: u64) {
        self.opened(FileHandle(fh), FopenFlags::empty())
    }
}
impl AnswerStatfs for ReplyStatfs {
    fn send_statfs(self, s: &Statfs) {
        self.statfs(
            s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
        )
    }
}
impl AnswerXattr for ReplyXattr {
    fn send_size(self, n: u32) {
        self.size(n)
    }
    fn send_value(self, data: &[u8]) {
        self.data(data)
    }
}
impl AnswerDir for ReplyDirectory {
    fn push(&mut self, ino: u64, next: u64, kind: FileType, name: &[u8]) -> bool {
        self.add(INodeNo(ino), next, kind, OsStr::from_bytes(name))
    }
    fn send_listing(self) {
        self.ok()
    }
}
impl AnswerDirPlus for ReplyDirectoryPlus {
    fn push_plus(&mut self, next: u64, name: &[u8], ttl: &Duration, attr: &FileAttr) -> bool {
        let name = OsStr::from_bytes(name);
        self.add(attr.ino, next, name, ttl, attr, Generation(0))
    }
    fn send_listing(self) {
        self.ok()
    }
}

impl fuser::Filesystem for WringFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.add_capabilities(
            InitFlags::FUSE_WRITEBACK_CACHE
                | InitFlags::FUSE_BIG_WRITES
                | InitFlags::FUSE_ASYNC_READ
                | InitFlags::FUSE_PARALLEL_DIROPS
                | InitFlags::FUSE_MAX_PAGES
                | InitFlags::FUSE_HANDLE_KILLPRIV_V2
                // The kernel enforces POSIX ACLs; wring stores them and keeps the mode in
                // step, and applies the umask itself (a default ACL replaces it).
                | InitFlags::FUSE_POSIX_ACL
                | InitFlags::FUSE_DONT_MASK
                // Listings with the entries' attributes when the kernel is about to look
                // them up (ls -l, find, rm -rf): one request instead of one per entry.
                | InitFlags::FUSE_DO_READDIRPLUS
                | InitFlags::FUSE_READDIRPLUS_AUTO
                // File handles (name_to_handle_at, an NFS export) that outlive the kernel's
                // cache and a remount: node ids are the store's inode numbers, never reused,
                // and LOOKUP answers `.` and `..` by node id (see Volume::find).
                | InitFlags::FUSE_EXPORT_SUPPORT,
        );
        if self.uring
            && config
                .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
                .is_err()
        {
            // The daemon checked enable_uring before mounting; the kernel changed its mind.
            return Err(std::io::Error::other(crate::transport::uring::NOT_OFFERED));
        }
        let _ = config.set_max_write(crate::transport::uring::MAX_WRITE as u32);
        let _ = config.set_max_readahead(crate::transport::READAHEAD_KB << 10);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn destroy(&mut self) {
        self.ops.destroy();
    }

    /// fuser's batch_forget, whose argument type it does not export, calls this once per
    /// inode.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.ops.forget(ino.0, nlookup);
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.ops.lookup(parent.0, name.as_bytes(), reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.ops.getattr(ino.0, reply);
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: time(atime),
            mtime: time(mtime),
            ctime,
            caller: None,
        };
        self.ops.setattr(caller(req), ino.0, a, reply);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.ops.readlink(ino.0, reply);
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.as_bytes();
        self.ops
            .mknod(caller(req), parent.0, name, mode, umask, rdev, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.as_bytes();
        self.ops
            .mkdir(caller(req), parent.0, name, mode, umask, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.ops.remove(parent.0, name.as_bytes(), false, reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.ops.remove(parent.0, name.as_bytes(), true, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (name, target) = (link_name.as_bytes(), target.as_os_str().as_bytes());
        self.ops.symlink(caller(req), parent.0, name, target, reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.as_bytes(), newname.as_bytes());
        self.ops
            .rename(parent.0, name, newparent.0, newname, flags.bits(), reply);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.ops.link(ino.0, newparent.0, newname.as_bytes(), reply);
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.ops.open(reply);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.ops.read(ino.0, offset, size, reply);
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let kill = wf.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        self.ops
            .write(caller(req), ino.0, offset, data, kill, reply);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.ops.flush(reply);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.ops.release(reply);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.ops.fsync(ino.0, false, reply);
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let range = (offset, length, mode);
        self.ops.fallocate(caller(req), ino.0, range, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.ops.opendir(ino.0, reply);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.ops.readdir(ino.0, fh.0, offset, reply);
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.ops.readdirplus(ino.0, fh.0, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.ops.releasedir(ino.0, fh.0, reply);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.ops.fsync(ino.0, true, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.ops.statfs(reply);
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let name = name.as_bytes();
        self.ops
            .setxattr(caller(req), ino.0, name, value, flags, reply);
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let name = name.as_bytes();
        self.ops.getxattr(caller(req), ino.0, name, size, reply);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.ops.listxattr(ino.0, size, reply);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.ops.removexattr(ino.0, name.as_bytes(), reply);
    }

    fn ioctl(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        self.ops.ioctl(ino.0, cmd, in_data, reply);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        self.ops.access(reply);
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        self.ops.create(reply);
    }
}
