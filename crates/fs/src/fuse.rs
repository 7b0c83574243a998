//! The `fuser::Filesystem` adapter: translates FUSE requests into [`Volume`] calls. Thin.
//!
//! Mirrors the VFS entry points btrfs fills in (btrfs_dir_inode_operations,
//! btrfs_file_operations); the kernel's writeback cache stands in for the page cache.
//! Differs in keeping nothing per open file: OPEN, FLUSH and CREATE are answered ENOSYS once
//! and the kernel then opens, closes and makes files without asking (see `open`), as it does
//! for a local filesystem.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::counters::Op;
use crate::error::FsError;
use crate::inode::{NewInode, SetAttr};
use crate::store::records::{Inode, Kind};
use crate::store::ROOT;
use crate::volume::{Listed, Volume};
use crate::{OPTIONS_XATTR, PID_XATTR, STATUS_XATTR, STAT_XATTR, SYNC_XATTR};

/// How long the kernel may trust an entry or attributes without asking: the daemon is the
/// only writer, every change made through the mount is one the kernel makes or sees, and the
/// one change the daemon makes behind it (a file's stored size, `st_blocks`, once its
/// writeback commits) is invalidated then ([`Volume::attrs_changed`]).
const TTL: Duration = Duration::from_secs(60);
/// Entries of a READDIRPLUS reply held and read from one snapshot at a time.
const LISTED_CHUNK: usize = 64;

/// The FUSE face of a volume.
pub struct WringFs {
    vol: Arc<Volume>,
    /// One remount at a time: each applies its options and starts the writeback threads
    /// they ask for before the next looks at the count.
    remount: std::sync::Mutex<()>,
}

impl WringFs {
    /// Wrap a volume.
    pub fn new(vol: Arc<Volume>) -> WringFs {
        WringFs {
            vol,
            remount: std::sync::Mutex::default(),
        }
    }
}

fn kind(k: Kind) -> FileType {
    match k {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::Char => FileType::CharDevice,
        Kind::Block => FileType::BlockDevice,
    }
}

/// The attributes FUSE reports for an inode.
pub fn attr(ino: u64, i: &Inode, blksize: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: i.size,
        blocks: i.disk.div_ceil(512),
        atime: i.atime.to_system(),
        mtime: i.mtime.to_system(),
        ctime: i.ctime.to_system(),
        crtime: i.ctime.to_system(),
        kind: kind(i.kind),
        perm: i.perm as u16,
        nlink: i.nlink,
        uid: i.uid,
        gid: i.gid,
        rdev: i.rdev,
        blksize,
        flags: 0,
    }
}

/// The process a request comes from.
fn caller(req: &Request) -> crate::inode::Caller {
    crate::inode::Caller {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

/// Root and the mount's owner (the daemon's user): only they may make durable commits on
/// demand (`wring.sync`) and remount. With allow_other anyone else reaches the root too.
fn privileged(req: &Request) -> bool {
    // SAFETY: geteuid has no preconditions.
    let owner = unsafe { libc::geteuid() };
    req.uid() == 0 || req.uid() == owner
}

fn err(e: FsError) -> Errno {
    if !matches!(e, FsError::Errno(_)) {
        log::warn!("{e}");
    }
    Errno::from_i32(e.errno())
}

fn time(t: Option<TimeOrNow>) -> Option<Option<SystemTime>> {
    t.map(|t| match t {
        TimeOrNow::SpecificTime(s) => Some(s),
        TimeOrNow::Now => None,
    })
}

fn reply_xattr(reply: ReplyXattr, size: u32, data: &[u8]) {
    if size == 0 {
        reply.size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(data);
    }
}

impl WringFs {
    fn blksize(&self) -> u32 {
        self.vol.options().max_extent as u32
    }

    fn entry(&self, reply: ReplyEntry, r: Result<(u64, Inode), FsError>) {
        match r {
            Ok((ino, i)) => reply.entry(&TTL, &attr(ino, &i, self.blksize()), Generation(0)),
            Err(e) => reply.error(err(e)),
        }
    }

    /// What a request makes: its owner is the caller.
    fn new_inode<'t>(
        req: &Request,
        kind: Kind,
        mode: u32,
        rdev: u32,
        target: Option<&'t [u8]>,
        umask: u32,
    ) -> NewInode<'t> {
        NewInode {
            kind,
            perm: mode,
            uid: req.uid(),
            gid: req.gid(),
            rdev,
            target,
            umask,
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

    fn control_get(
        &self,
        req: &Request,
        ino: u64,
        name: &[u8],
    ) -> Option<Result<Vec<u8>, FsError>> {
        let v = match name {
            n if n == STAT_XATTR.as_bytes() => self
                .vol
                .stat_report_for(ino, caller(req))
                .map(|r| r.to_string().into_bytes()),
            n if ino != ROOT => {
                return (n == STATUS_XATTR.as_bytes()).then(|| Err(FsError::Errno(libc::ENODATA)))
            }
            n if n == STATUS_XATTR.as_bytes() => {
                Ok(crate::status::status_text(&self.vol).into_bytes())
            }
            n if n == OPTIONS_XATTR.as_bytes() => Ok(self.vol.options().to_string().into_bytes()),
            // A durable commit, on demand: not for anyone allow_other lets in.
            n if n == SYNC_XATTR.as_bytes() && !privileged(req) => Err(FsError::Errno(libc::EPERM)),
            n if n == SYNC_XATTR.as_bytes() => self.vol.sync().map(|_| b"ok".to_vec()),
            n if n == PID_XATTR.as_bytes() => Ok(std::process::id().to_string().into_bytes()),
            _ => return None,
        };
        Some(v)
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
                | InitFlags::FUSE_READDIRPLUS_AUTO,
        );
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(crate::bdi::READAHEAD_KB << 10);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn destroy(&mut self) {
        if let Err(e) = self.vol.sync() {
            log::error!("final commit failed: {e}");
        }
    }

    /// The kernel's references to an inode (one per entry reply) keep it as an orphan after
    /// its last name goes (fuser's batch_forget, whose argument type it does not export,
    /// calls this once per inode).
    fn forget(&self, _req: &Request, _ino: INodeNo, _nlookup: u64) {
        let _t = self.vol.ops.count(Op::Forget);
        self.vol.forget(_ino.0, _nlookup);
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _t = self.vol.ops.count(Op::Lookup);
        self.entry(reply, self.vol.lookup_held(parent.0, name.as_bytes()));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _t = self.vol.ops.count(Op::Getattr);
        match self.vol.inode(ino.0) {
            Ok(i) => reply.attr(&TTL, &attr(ino.0, &i, self.blksize())),
            Err(e) => reply.error(err(e)),
        }
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
        let _t = self.vol.ops.count(Op::Setattr);
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: time(atime),
            mtime: time(mtime),
            ctime,
            caller: Some(caller(req)),
        };
        match self.vol.setattr(ino.0, &set) {
            Ok(i) => reply.attr(&TTL, &attr(ino.0, &i, self.blksize())),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _t = self.vol.ops.count(Op::Readlink);
        match self.vol.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(err(e)),
        }
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
        let _t = self.vol.ops.count(Op::Mknod);
        match Kind::from_mode(mode) {
            Some(k) if k != Kind::Dir && k != Kind::Symlink => self.entry(
                reply,
                self.vol.create_held(
                    parent.0,
                    name.as_bytes(),
                    Self::new_inode(req, k, mode, rdev, None, umask),
                    1,
                ),
            ),
            _ => reply.error(Errno::from_i32(libc::EINVAL)),
        }
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
        let _t = self.vol.ops.count(Op::Mkdir);
        self.entry(
            reply,
            self.vol.create_held(
                parent.0,
                name.as_bytes(),
                Self::new_inode(req, Kind::Dir, mode, 0, None, umask),
                1,
            ),
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _t = self.vol.ops.count(Op::Unlink);
        match self.vol.remove(parent.0, name.as_bytes(), false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _t = self.vol.ops.count(Op::Rmdir);
        match self.vol.remove(parent.0, name.as_bytes(), true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _t = self.vol.ops.count(Op::Symlink);
        let t = target.as_os_str().as_bytes();
        self.entry(
            reply,
            self.vol.create_held(
                parent.0,
                link_name.as_bytes(),
                Self::new_inode(req, Kind::Symlink, 0o777, 0, Some(t), 0),
                1,
            ),
        );
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
        let _t = self.vol.ops.count(Op::Rename);
        match self.vol.rename(
            parent.0,
            name.as_bytes(),
            newparent.0,
            newname.as_bytes(),
            flags.bits(),
        ) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _t = self.vol.ops.count(Op::Link);
        self.entry(
            reply,
            self.vol
                .link_held(ino.0, newparent.0, newname.as_bytes())
                .map(|i| (ino.0, i)),
        );
    }

    /// Files need no open: the daemon keeps no state per open file (reads and writes name
    /// the inode; the kernel's reference to an open file's inode, held until FORGET, keeps an
    /// unlinked file readable). ENOSYS tells the kernel so (`fc->no_open`): it opens files
    /// without asking and sends no RELEASE for them, two round trips less per file opened,
    /// and keeps their cached pages across opens (FOPEN_KEEP_CACHE, right here: every change
    /// to a file's data goes through the kernel).
    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _t = self.vol.ops.count(Op::Open);
        reply.error(Errno::ENOSYS);
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
        let _t = self.vol.ops.count(Op::Read);
        thread_local! {
            /// The reply buffer of this request thread, kept between reads.
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with_borrow_mut(|buf| match self.vol.read_into(ino.0, offset, size, buf) {
            Ok(()) => reply.data(buf),
            Err(e) => reply.error(err(e)),
        })
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
        let _t = self.vol.ops.count(Op::Write);
        let kill = wf
            .contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
            .then(|| caller(req));
        match self.vol.write(ino.0, offset, data, kill) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(err(e)),
        }
    }

    /// close(2) has nothing for the daemon to do: the kernel writes the file's dirty pages
    /// back (WRITE requests, whose errors close reports) before it would send FLUSH, and a
    /// write's compression errors are fsync's to report, as btrfs reports them at fsync and
    /// not at close. ENOSYS tells the kernel so (`fc->no_flush`): it sends no FLUSH again,
    /// a round trip less on every close.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _t = self.vol.ops.count(Op::Flush);
        reply.error(Errno::ENOSYS);
    }

    /// A RELEASE comes at most for the file opened before the kernel learnt that opens need
    /// nothing (see `open`): nothing to do, the daemon keeps nothing per open file and the
    /// kernel's reference (until FORGET) holds the inode.
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
        let _t = self.vol.ops.count(Op::Release);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _t = self.vol.ops.count(Op::Fsync);
        match self.vol.fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _t = self.vol.ops.count(Op::Fallocate);
        match self.vol.fallocate(ino.0, offset, length, mode) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _t = self.vol.ops.count(Op::Opendir);
        match self.vol.opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _t = self.vol.ops.count(Op::Readdir);
        match self.vol.readdir(ino.0, fh.0, offset) {
            Ok(list) => {
                let from = usize::try_from(offset).unwrap_or(usize::MAX);
                for (i, e) in list.iter().enumerate().skip(from) {
                    let next = i as u64 + 1;
                    if reply.add(
                        INodeNo(e.ino),
                        next,
                        kind(e.kind),
                        OsStr::from_bytes(&e.name),
                    ) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(err(e)),
        }
    }

    /// READDIRPLUS: the listing with each entry's attributes. The kernel takes every entry
    /// but `.` and `..` as a lookup it will FORGET, so each is held as LOOKUP holds it
    /// ([`Volume::hold_listed`], a chunk of entries from one snapshot), and the holds are
    /// dropped again for the entries that do not fit the reply. An entry removed since the
    /// listing was taken is left out.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _t = self.vol.ops.count(Op::Readdirplus);
        let list = match self.vol.readdir(ino.0, fh.0, offset) {
            Ok(list) => list,
            Err(e) => return reply.error(err(e)),
        };
        let blksize = self.blksize();
        let from = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(list.len());
        let mut start = from;
        while start < list.len() {
            let chunk = &list[start..(start + LISTED_CHUNK).min(list.len())];
            let entries: Vec<(u64, bool, Kind)> = chunk
                .iter()
                .map(|e| (e.ino, e.name == b"." || e.name == b"..", e.kind))
                .collect();
            let attrs = match self.vol.hold_listed(&entries) {
                Ok(a) => a,
                Err(e) if start == from => return reply.error(err(e)),
                Err(_) => break,
            };
            for (k, (e, a)) in chunk.iter().zip(&attrs).enumerate() {
                let (inode, ttl) = match a {
                    None => continue,
                    Some(Listed::Held(i)) => (i, &TTL),
                    Some(Listed::Damaged(i)) => (i, &Duration::ZERO),
                };
                let name = OsStr::from_bytes(&e.name);
                let a = attr(e.ino, inode, blksize);
                let next = (start + k) as u64 + 1;
                if reply.add(INodeNo(e.ino), next, name, ttl, &a, Generation(0)) {
                    self.unhold(&entries[k..], &attrs[k..]);
                    return reply.ok();
                }
            }
            start += chunk.len();
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _t = self.vol.ops.count(Op::Releasedir);
        match self.vol.releasedir(ino.0, fh.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _t = self.vol.ops.count(Op::Fsyncdir);
        match self.vol.fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _t = self.vol.ops.count(Op::Statfs);
        match self.vol.statfs() {
            Ok((blocks, free, files)) => {
                reply.statfs(blocks, free, free, files, u32::MAX as u64, 4096, 255, 4096)
            }
            Err(e) => reply.error(err(e)),
        }
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
        let _t = self.vol.ops.count(Op::Setxattr);
        let name = name.as_bytes();
        let r = if ino.0 == ROOT && name == OPTIONS_XATTR.as_bytes() {
            if !privileged(req) {
                return reply.error(Errno::EPERM);
            }
            let _one = crate::volume::lock(&self.remount);
            self.vol
                .remount(&String::from_utf8_lossy(value))
                .map(|o| log::info!("remounted: {o}"))
        } else if name == crate::acl::ACCESS || name == crate::acl::DEFAULT {
            self.vol.set_acl(ino.0, name, value, flags, caller(req))
        } else if name.starts_with(b"wring.") {
            Err(FsError::Errno(libc::EPERM))
        } else {
            self.vol.setxattr(ino.0, name, value, flags)
        };
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _t = self.vol.ops.count(Op::Getxattr);
        let r = match self.control_get(req, ino.0, name.as_bytes()) {
            Some(r) => r,
            None => self.vol.getxattr(ino.0, name.as_bytes()),
        };
        match r {
            Ok(v) => reply_xattr(reply, size, &v),
            Err(e) => reply.error(err(e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _t = self.vol.ops.count(Op::Listxattr);
        match self.vol.listxattr(ino.0) {
            Ok(names) => {
                let mut buf = Vec::new();
                for n in names {
                    buf.extend_from_slice(&n);
                    buf.push(0);
                }
                reply_xattr(reply, size, &buf);
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _t = self.vol.ops.count(Op::Removexattr);
        match self.vol.removexattr(ino.0, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _t = self.vol.ops.count(Op::Access);
        reply.ok();
    }

    /// No CREATE: ENOSYS makes the kernel make files with MKNOD and open them itself
    /// (`fc->no_create`), and with no OPEN (see `open`) a file made so is also never
    /// RELEASEd — where a CREATE's open would be, once the kernel knows opens need nothing
    /// only after the first OPEN it sends (a `tar -x` sends none). The same transaction
    /// makes the file either way (see `mknod`).
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
        let _t = self.vol.ops.count(Op::Create);
        reply.error(Errno::ENOSYS);
    }
}
