//! Running an [`Op`] on one side (the mount, or the kernel's filesystem) with real system
//! calls, and what it answered, in a form the two sides can be compared in.

use std::ffi::OsString;
use std::hash::{DefaultHasher, Hasher};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FallocateFlags, Mode, OFlags, RenameFlags, XattrFlags};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::op::{self, Creat, Falloc, Node, Op, OpenHow, RenameHow, TimeArg, Who, XattrHow};

/// How a file is opened to write to it: never blocking on a fifo (which answers ENXIO
/// without a reader, on every filesystem).
const WRITE: OFlags = OFlags::WRONLY.union(OFlags::NONBLOCK);

/// Open descriptors a run keeps at once.
pub const SLOTS: usize = 3;

/// A time as the comparison sees it: set explicitly (long ago, see [`op::OLD_TIME`]) and then
/// exact, or set by the filesystem ("now", whatever it was).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Time {
    /// Seconds and nanoseconds, as set by utimensat.
    Set(i64, i64),
    /// Any time the filesystem chose.
    Now,
}

impl Time {
    /// Classify a timestamp.
    pub fn of(secs: i64, nsecs: i64) -> Time {
        // Explicit times are below OLD_TIME + 2^32; every "now" is past 2020.
        if secs < 1_577_836_800 {
            Time::Set(secs, nsecs)
        } else {
            Time::Now
        }
    }
}

/// What stat says, in the parts both sides must agree on (no inode numbers, no ctime or
/// atime, no block counts; a directory's size and, unless asked, its link count differ
/// between filesystems and are left out).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attrs {
    /// S_IFMT bits.
    pub kind: u32,
    /// Permission bits with set-id and sticky.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Links (directories: `None` unless the oracle counts subdirectories as wring does).
    pub nlink: Option<u64>,
    /// Size (directories: `None`).
    pub size: Option<u64>,
    /// Modification time.
    pub mtime: Time,
    /// Device numbers of a character node.
    pub rdev: u64,
}

/// How stat results are made comparable.
#[derive(Clone, Copy, Debug)]
pub struct Norm {
    /// Compare directories' link counts (the oracle counts `..` of subdirectories, as tmpfs
    /// and wring do; btrfs keeps 1).
    pub dir_nlink: bool,
}

impl Attrs {
    /// The comparable part of `st`.
    pub fn of(st: &rfs::Stat, norm: Norm) -> Attrs {
        let kind = st.st_mode & libc::S_IFMT;
        let dir = kind == libc::S_IFDIR;
        Attrs {
            kind,
            perm: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            nlink: (!dir || norm.dir_nlink).then_some(st.st_nlink),
            size: (!dir).then_some(st.st_size as u64),
            mtime: Time::of(st.st_mtime, st.st_mtime_nsec as i64),
            rdev: if kind == libc::S_IFCHR { st.st_rdev } else { 0 },
        }
    }
}

/// What an operation answered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// Success with nothing to compare.
    Done,
    /// A count (bytes written).
    Count(u64),
    /// A hash of bytes read, and how many.
    Bytes(u64, usize),
    /// Attributes.
    Attrs(Attrs),
    /// A directory's names, sorted.
    Names(Vec<Vec<u8>>),
    /// A symlink's target.
    Target(Vec<u8>),
}

/// An operation's answer: a value, or an errno.
pub type Outcome = Result<Value, i32>;

/// Render an outcome for a report.
pub fn show(o: &Outcome) -> String {
    match o {
        Ok(Value::Done) => "ok".into(),
        Ok(v) => format!("ok {v:?}"),
        Err(e) => errno_name(*e),
    }
}

/// An errno's symbolic name.
pub fn errno_name(e: i32) -> String {
    let known = [
        (libc::EPERM, "EPERM"),
        (libc::ENOENT, "ENOENT"),
        (libc::EIO, "EIO"),
        (libc::EBADF, "EBADF"),
        (libc::EACCES, "EACCES"),
        (libc::EBUSY, "EBUSY"),
        (libc::EEXIST, "EEXIST"),
        (libc::EXDEV, "EXDEV"),
        (libc::ENOTDIR, "ENOTDIR"),
        (libc::EISDIR, "EISDIR"),
        (libc::EINVAL, "EINVAL"),
        (libc::EFBIG, "EFBIG"),
        (libc::ENOSPC, "ENOSPC"),
        (libc::EMLINK, "EMLINK"),
        (libc::ENOTEMPTY, "ENOTEMPTY"),
        (libc::ENODATA, "ENODATA"),
        (libc::ELOOP, "ELOOP"),
        (libc::ENAMETOOLONG, "ENAMETOOLONG"),
        (libc::EOPNOTSUPP, "EOPNOTSUPP"),
        (libc::ENOTCONN, "ENOTCONN"),
        (libc::ESTALE, "ESTALE"),
        (libc::EUCLEAN, "EUCLEAN"),
        (libc::ENOSYS, "ENOSYS"),
        (libc::ENXIO, "ENXIO"),
        (libc::ETXTBSY, "ETXTBSY"),
        (libc::ERANGE, "ERANGE"),
    ];
    match known.iter().find(|(n, _)| *n == e) {
        Some((_, name)) => (*name).to_string(),
        None => format!("errno {e}"),
    }
}

/// What a side needs to run the global operations.
pub trait Global: Sync {
    /// Everything durable (syncfs; on the mount also the daemon's durable commit).
    fn sync(&self, root: &Path) -> Outcome;
}

/// A plain kernel filesystem: syncfs.
pub struct Kernel;

impl Global for Kernel {
    fn sync(&self, root: &Path) -> Outcome {
        let f = rfs::open(root, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).map_err(e)?;
        rfs::syncfs(&f).map_err(e)?;
        Ok(Value::Done)
    }
}

/// One side of a run: a test directory and the descriptors opened in it.
pub struct Side<'g> {
    /// The test directory.
    pub root: PathBuf,
    slots: [Option<OwnedFd>; SLOTS],
    norm: Norm,
    global: &'g dyn Global,
}

fn e(err: Errno) -> i32 {
    err.raw_os_error()
}

/// An optional id as rustix's.
fn uid(u: Option<u32>) -> Option<Uid> {
    u.map(Uid::from_raw)
}

fn gid(g: Option<u32>) -> Option<Gid> {
    g.map(Gid::from_raw)
}

impl<'g> Side<'g> {
    /// A side working in `root` (which exists).
    pub fn new(root: PathBuf, norm: Norm, global: &'g dyn Global) -> Side<'g> {
        Side {
            root,
            slots: Default::default(),
            norm,
            global,
        }
    }

    /// Close every slot.
    pub fn close_all(&mut self) {
        self.slots = Default::default();
    }

    /// The inode number of what `slot` holds open.
    pub fn slot_ino(&self, slot: u8) -> Option<u64> {
        let st = rfs::fstat(self.slot(slot).ok()?).ok()?;
        Some(st.st_ino)
    }

    /// The inode number `rel` names (following a symlink).
    pub fn ino(&self, rel: &str) -> Option<u64> {
        Some(rfs::stat(self.p(rel)).ok()?.st_ino)
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn slot(&self, slot: u8) -> Result<&OwnedFd, i32> {
        let s = self.slots.get(usize::from(slot)).ok_or(libc::EBADF)?;
        s.as_ref().ok_or(libc::EBADF)
    }

    fn put(&mut self, slot: u8, fd: OwnedFd) -> Outcome {
        let s = self.slots.get_mut(usize::from(slot)).ok_or(libc::EBADF)?;
        *s = Some(fd);
        Ok(Value::Done)
    }

    /// Run `op`; what it answered.
    pub fn run(&mut self, op: &Op) -> Outcome {
        match op {
            Op::Chmod { who, .. }
            | Op::Chown { who, .. }
            | Op::Utimes { who, .. }
            | Op::Defrag { who, .. }
                if *who == Who::User =>
            {
                as_user(|| self.run_as(op))
            }
            _ => self.run_as(op),
        }
    }

    fn run_as(&mut self, op: &Op) -> Outcome {
        let done = |r: rustix::io::Result<()>| r.map(|()| Value::Done).map_err(e);
        match op {
            Op::Creat { p, how, mode } => {
                let extra = match how {
                    Creat::Plain => OFlags::empty(),
                    Creat::Excl => OFlags::EXCL,
                    Creat::Trunc => OFlags::TRUNC,
                };
                let flags = OFlags::CREATE | OFlags::WRONLY | OFlags::NONBLOCK | extra;
                rfs::open(self.p(p), flags, Mode::from_raw_mode(*mode))
                    .map(|_| Value::Done)
                    .map_err(e)
            }
            Op::Write { p, off, len, seed } => {
                let f = rfs::open(self.p(p), WRITE, Mode::empty()).map_err(e)?;
                write_at(&f, *off, *len, *seed)
            }
            Op::Truncate { p, size } => {
                let f = rfs::open(self.p(p), WRITE, Mode::empty()).map_err(e)?;
                done(rfs::ftruncate(&f, u64::from(*size)))
            }
            Op::Fallocate { p, how, off, len } => {
                let f = rfs::open(self.p(p), WRITE, Mode::empty()).map_err(e)?;
                fallocate(&f, *how, *off, *len)
            }
            Op::Mkdir { p, mode } => done(rfs::mkdir(self.p(p), Mode::from_raw_mode(*mode))),
            Op::Rmdir { p } => done(rfs::unlinkat(rfs::CWD, self.p(p), AtFlags::REMOVEDIR)),
            Op::Unlink { p } => done(rfs::unlinkat(rfs::CWD, self.p(p), AtFlags::empty())),
            Op::Rename { from, to, how } => {
                let flags = match how {
                    RenameHow::Plain => RenameFlags::empty(),
                    RenameHow::NoReplace => RenameFlags::NOREPLACE,
                    RenameHow::Exchange => RenameFlags::EXCHANGE,
                };
                let (a, b) = (self.p(from), self.p(to));
                done(rfs::renameat_with(rfs::CWD, a, rfs::CWD, b, flags))
            }
            Op::Link { from, to } => done(rfs::linkat(
                rfs::CWD,
                self.p(from),
                rfs::CWD,
                self.p(to),
                AtFlags::empty(),
            )),
            Op::Symlink { target, p } => done(rfs::symlink(target, self.p(p))),
            Op::Mknod { p, node } => {
                let (kind, dev) = match node {
                    Node::Fifo => (rfs::FileType::Fifo, 0),
                    Node::Char => (rfs::FileType::CharacterDevice, rustix::fs::makedev(1, 3)),
                    Node::Socket => (rfs::FileType::Socket, 0),
                };
                let mode = Mode::from_raw_mode(0o644);
                done(rfs::mknodat(rfs::CWD, self.p(p), kind, mode, dev))
            }
            Op::Chmod { p, mode, .. } => done(rfs::chmod(self.p(p), Mode::from_raw_mode(*mode))),
            Op::Chown {
                p, uid: u, gid: g, ..
            } => done(rfs::chownat(
                rfs::CWD,
                self.p(p),
                uid(*u),
                gid(*g),
                AtFlags::empty(),
            )),
            Op::SetXattr {
                p,
                name,
                value,
                len,
                how,
            } => {
                let flags = match how {
                    XattrHow::Any => XattrFlags::empty(),
                    XattrHow::Create => XattrFlags::CREATE,
                    XattrHow::Replace => XattrFlags::REPLACE,
                };
                let v = vec![*value; usize::from(*len)];
                done(rfs::lsetxattr(self.p(p), xname(*name), &v, flags))
            }
            Op::RemoveXattr { p, name } => done(rfs::lremovexattr(self.p(p), xname(*name))),
            Op::Utimes {
                p, atime, mtime, ..
            } => {
                let ts = rfs::Timestamps {
                    last_access: timespec(*atime),
                    last_modification: timespec(*mtime),
                };
                done(rfs::utimensat(rfs::CWD, self.p(p), &ts, AtFlags::empty()))
            }
            Op::Open { slot, p, how } => {
                let flags = match how {
                    OpenHow::Read => OFlags::RDONLY,
                    OpenHow::ReadWrite => OFlags::RDWR | OFlags::CREATE,
                    OpenHow::Append => OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
                };
                // Never blocks on a fifo.
                let flags = flags | OFlags::NONBLOCK | OFlags::CLOEXEC;
                let fd = rfs::open(self.p(p), flags, Mode::from_raw_mode(0o644)).map_err(e)?;
                self.put(*slot, fd)
            }
            Op::Close { slot } => {
                let s = self.slots.get_mut(usize::from(*slot)).ok_or(libc::EBADF)?;
                s.take().map(|_| Value::Done).ok_or(libc::EBADF)
            }
            Op::FdWrite {
                slot,
                off,
                len,
                seed,
            } => write_at(self.slot(*slot)?, *off, *len, *seed),
            Op::FdRead { slot, off, len } => {
                let mut buf = vec![0u8; *len as usize];
                let f = self.slot(*slot)?;
                let n = rustix::io::pread(f, &mut buf, u64::from(*off)).map_err(e)?;
                Ok(Value::Bytes(hash(&buf[..n]), n))
            }
            Op::FdStat { slot } => {
                let st = rfs::fstat(self.slot(*slot)?).map_err(e)?;
                Ok(Value::Attrs(Attrs::of(&st, self.norm)))
            }
            Op::FdTruncate { slot, size } => {
                done(rfs::ftruncate(self.slot(*slot)?, u64::from(*size)))
            }
            Op::FdSync { slot } => done(rfs::fsync(self.slot(*slot)?)),
            Op::Tmpfile { slot, dir } => {
                let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
                let fd = rfs::open(self.p(dir), flags, Mode::from_raw_mode(0o600)).map_err(e)?;
                self.put(*slot, fd)
            }
            Op::LinkSlot { slot, p } => {
                let to = self.p(p);
                let f = self.slot(*slot)?;
                done(rfs::linkat(f, "", rfs::CWD, to, AtFlags::EMPTY_PATH))
            }
            Op::Stat { p } => {
                let st = rfs::lstat(self.p(p)).map_err(e)?;
                Ok(Value::Attrs(Attrs::of(&st, self.norm)))
            }
            Op::Read { p } => {
                let f = rfs::open(self.p(p), OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())
                    .map_err(e)?;
                let bytes = read_all(&f)?;
                Ok(Value::Bytes(hash(&bytes), bytes.len()))
            }
            Op::List { p } => list(&self.p(p)).map(Value::Names),
            Op::Readlink { p } => rfs::readlink(self.p(p), Vec::new())
                .map(|t| Value::Target(t.into_bytes()))
                .map_err(e),
            Op::Fsync { p } => {
                let f = rfs::open(self.p(p), OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())
                    .map_err(e)?;
                done(rfs::fsync(&f))
            }
            Op::Defrag {
                p,
                start,
                len,
                flags,
                compress_type,
                ..
            } => {
                let args = wring_fs::DefragArgs {
                    start: u64::from(*start),
                    len: *len,
                    flags: *flags,
                    extent_thresh: 0,
                    compress_type: *compress_type,
                };
                defrag(&self.p(p), &args)
            }
            Op::CopyFileRange {
                from,
                off_in,
                to,
                off_out,
                len,
            } => {
                let read = OFlags::RDONLY | OFlags::NONBLOCK;
                let src = rfs::open(self.p(from), read, Mode::empty()).map_err(e)?;
                let dst = rfs::open(self.p(to), WRITE, Mode::empty()).map_err(e)?;
                copy_range(&src, *off_in, &dst, *off_out, *len)
            }
            Op::Sync => self.global.sync(&self.root),
            Op::DropCaches => std::fs::write("/proc/sys/vm/drop_caches", "2")
                .map(|()| Value::Done)
                .map_err(|err| err.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
}

/// The user xattr the tester names `name`.
pub fn xname(name: u8) -> String {
    format!("user.x{name}")
}

fn timespec(t: TimeArg) -> rfs::Timespec {
    match t {
        TimeArg::Omit => rfs::Timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        TimeArg::Now => rfs::Timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        TimeArg::At(s) => {
            let (secs, nsecs) = op::at(s);
            rfs::Timespec {
                tv_sec: secs,
                tv_nsec: nsecs,
            }
        }
    }
}

fn write_at(f: impl AsFd, off: u32, len: u32, seed: u8) -> Outcome {
    let bytes = op::data(seed, len);
    let mut done = 0usize;
    while done < bytes.len() {
        let at = u64::from(off) + done as u64;
        match rustix::io::pwrite(&f, &bytes[done..], at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(err) => return Err(e(err)),
        }
    }
    Ok(Value::Count(done as u64))
}

/// copy_file_range(2) from `off_in` of `src` to `off_out` of `dst` (flags 0), called again
/// after a short count as cp does, until `len` bytes are copied or it answers 0: how many
/// were copied, or the first error. It is called at least once, so that a length of 0 still
/// meets the kernel's checks (a directory, a node, overlapping ranges of one file).
fn copy_range(src: impl AsFd, off_in: u32, dst: impl AsFd, off_out: u32, len: u32) -> Outcome {
    let (mut at_in, mut at_out) = (u64::from(off_in), u64::from(off_out));
    let (len, mut done) = (u64::from(len), 0u64);
    loop {
        let left = (len - done) as usize;
        match rfs::copy_file_range(&src, Some(&mut at_in), &dst, Some(&mut at_out), left) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            Err(err) => return Err(e(err)),
        }
        if done >= len {
            break;
        }
    }
    Ok(Value::Count(done))
}

fn fallocate(f: impl AsFd, how: Falloc, off: u32, len: u32) -> Outcome {
    let mode = match how {
        Falloc::Alloc => FallocateFlags::empty(),
        Falloc::KeepSize => FallocateFlags::KEEP_SIZE,
        Falloc::Punch => FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        Falloc::Zero => FallocateFlags::ZERO_RANGE,
    };
    rfs::fallocate(f, mode, u64::from(off), u64::from(len))
        .map(|()| Value::Done)
        .map_err(e)
}

/// Every byte of an open file.
fn read_all(f: impl AsFd) -> Result<Vec<u8>, i32> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match rustix::io::read(&f, &mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(Errno::INTR) => {}
            Err(err) => return Err(e(err)),
        }
    }
}

/// The contents of the file at `p` (not following a symlink).
pub fn read_file(p: &Path) -> Result<Vec<u8>, i32> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW;
    let f = rfs::open(p, flags, Mode::empty()).map_err(e)?;
    read_all(&f)
}

/// A stable hash of bytes.
pub fn hash(b: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(b);
    h.finish()
}

/// The names in directory `p`, sorted, without `.` and `..`.
pub fn list(p: &Path) -> Result<Vec<Vec<u8>>, i32> {
    let rd = std::fs::read_dir(p).map_err(|err| err.raw_os_error().unwrap_or(libc::EIO))?;
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|err| err.raw_os_error().unwrap_or(libc::EIO))?;
        names.push(OsString::into_vec(entry.file_name()));
    }
    names.sort();
    Ok(names)
}

/// Run `f` as the unprivileged user, in this thread only (Linux's credentials are per
/// thread; rustix's calls change only the caller's): effective ids, no groups, so no
/// capabilities; the saved uid stays 0 to come back.
/// BTRFS_IOC_DEFRAG_RANGE on what `path` names, opened read-only as btrfs-progs opens it; a
/// node (whose open would block or be refused by nodev) is left alone, on both sides.
fn defrag(path: &Path, args: &wring_fs::DefragArgs) -> Outcome {
    let st = rfs::stat(path).map_err(e)?;
    let kind = rfs::FileType::from_raw_mode(st.st_mode);
    if !matches!(kind, rfs::FileType::RegularFile | rfs::FileType::Directory) {
        return Ok(Value::Done);
    }
    let f = rfs::open(path, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()).map_err(e)?;
    let mut arg = args.to_bytes();
    // SAFETY: `arg` is the 48-byte struct the request's size names, alive across the call;
    // the kernel only reads it (an _IOW request).
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            wring_fs::BTRFS_IOC_DEFRAG_RANGE as libc::Ioctl,
            arg.as_mut_ptr(),
        )
    };
    match r {
        0 => Ok(Value::Done),
        _ => Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)),
    }
}

fn as_user(f: impl FnOnce() -> Outcome) -> Outcome {
    let groups = rustix::process::getgroups().map_err(e)?;
    let user = |id| (Uid::from_raw(id), Gid::from_raw(id));
    let (u, g) = user(op::USER);
    rustix::thread::set_thread_groups(&[]).map_err(e)?;
    rustix::thread::set_thread_res_gid(None, g, None).map_err(e)?;
    rustix::thread::set_thread_res_uid(None, u, None).map_err(e)?;
    let out = f();
    let back = rustix::thread::set_thread_res_uid(None, Uid::ROOT, None)
        .and_then(|()| rustix::thread::set_thread_res_gid(None, Gid::ROOT, None))
        .and_then(|()| rustix::thread::set_thread_groups(&groups));
    if let Err(err) = back {
        // Nothing after this could be trusted to run as root.
        panic!("the tester could not become root again: {err}");
    }
    out
}
