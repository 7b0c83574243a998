//! FUSE requests and replies as a ring entry holds them (include/uapi/linux/fuse.h,
//! fs/fuse/dev_uring.c): the `fuse_in_header` in the header buffer's `in_out`, the
//! operation's own header (`fuse_mknod_in`, `fuse_write_in`, …) in `op_in`, and what follows
//! it on `/dev/fuse` (names, a write's data) in the payload buffer. A reply is a
//! `fuse_out_header` in `in_out` and the operation's answer at the start of the payload.
//!
//! Differs from the `/dev/fuse` layout fuser parses in one way that matters: `op_in` is not
//! cleared between requests, so a field is read only where the opcode's header has it (a
//! RENAME's 8-byte header leaves a RENAME2's flags behind it stale).
//!
//! Only the requests wring answers are decoded; the rest get ENOSYS, as fuser answers them.
//! Everything is bounds-checked: a short or unterminated request is an error, never a panic.

use std::time::{Duration, SystemTime};

use fuser::{FileAttr, FileType};

use crate::transport::ops::Statfs;
use crate::volume::SetAttr;

/// FUSE_WRITE, the one request whose payload is large.
pub const WRITE: u32 = 16;
/// FUSE_READ's opcode.
pub const READ: u32 = 15;
/// `struct fuse_in_header`.
pub const IN_HEADER: usize = 40;
/// `struct fuse_out_header`.
pub const OUT_HEADER: usize = 16;
/// `fuse_uring_req_header.in_out` and `.op_in` (FUSE_URING_IN_OUT_HEADER_SZ, _OP_IN_OUT_SZ).
pub const IN_OUT: usize = 128;
/// `struct fuse_uring_ent_in_out`.
pub const ENT_IN_OUT: usize = 32;
/// `struct fuse_uring_req_header`: in_out, op_in, ring_ent_in_out.
pub const REQ_HEADER: usize = IN_OUT * 2 + ENT_IN_OUT;
/// `struct fuse_attr`.
const ATTR: usize = 88;
/// `struct fuse_entry_out`.
pub const ENTRY_OUT: usize = 40 + ATTR;
/// `struct fuse_attr_out`.
pub const ATTR_OUT: usize = 16 + ATTR;
/// `struct fuse_dirent` without its name.
const DIRENT: usize = 24;

const FATTR_MODE: u32 = 1 << 0;
const FATTR_UID: u32 = 1 << 1;
const FATTR_GID: u32 = 1 << 2;
const FATTR_SIZE: u32 = 1 << 3;
const FATTR_ATIME: u32 = 1 << 4;
const FATTR_MTIME: u32 = 1 << 5;
const FATTR_ATIME_NOW: u32 = 1 << 7;
const FATTR_MTIME_NOW: u32 = 1 << 8;
const FATTR_CTIME: u32 = 1 << 10;
const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// Why a request could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the layout needs.
    #[error("FUSE request opcode {opcode}: {what} needs {need} bytes, has {got}")]
    Short {
        /// The request's opcode.
        opcode: u32,
        /// The part that is short.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes there are.
        got: usize,
    },
    /// A name without its terminating NUL.
    #[error("FUSE request opcode {opcode}: a name is not NUL-terminated")]
    Unterminated {
        /// The request's opcode.
        opcode: u32,
    },
    /// A time no `SystemTime` holds.
    #[error("FUSE request opcode {opcode}: time {secs}.{nsecs} is out of range")]
    Time {
        /// The request's opcode.
        opcode: u32,
        /// Seconds since the epoch.
        secs: i64,
        /// Nanoseconds.
        nsecs: u32,
    },
}

/// `struct fuse_in_header`, the fields wring uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The request's number, echoed in the reply.
    pub unique: u64,
    /// What is asked.
    pub opcode: u32,
    /// The inode it is about.
    pub nodeid: u64,
    /// The caller's user.
    pub uid: u32,
    /// The caller's group.
    pub gid: u32,
    /// The caller's thread.
    pub pid: u32,
}

/// A decoded request; names and data borrow the ring's buffers.
#[derive(Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Request<'a> {
    Lookup {
        name: &'a [u8],
    },
    Getattr,
    Setattr(SetAttr),
    Readlink,
    Symlink {
        name: &'a [u8],
        target: &'a [u8],
    },
    Mknod {
        name: &'a [u8],
        mode: u32,
        rdev: u32,
        umask: u32,
    },
    Mkdir {
        name: &'a [u8],
        mode: u32,
        umask: u32,
    },
    Unlink {
        name: &'a [u8],
    },
    Rmdir {
        name: &'a [u8],
    },
    Rename {
        newdir: u64,
        name: &'a [u8],
        newname: &'a [u8],
        flags: u32,
    },
    Link {
        ino: u64,
        newname: &'a [u8],
    },
    Open,
    Read {
        offset: u64,
        size: u32,
    },
    Write {
        offset: u64,
        kill_suidgid: bool,
        data: &'a [u8],
    },
    Statfs,
    Release,
    Fsync {
        dir: bool,
    },
    Setxattr {
        name: &'a [u8],
        value: &'a [u8],
        flags: i32,
    },
    Getxattr {
        name: &'a [u8],
        size: u32,
    },
    Listxattr {
        size: u32,
    },
    Removexattr {
        name: &'a [u8],
    },
    Ioctl {
        cmd: u32,
        input: &'a [u8],
    },
    Tmpfile {
        mode: u32,
        umask: u32,
    },
    Flush,
    Opendir,
    Readdir {
        fh: u64,
        offset: u64,
        size: u32,
        plus: bool,
    },
    Releasedir {
        fh: u64,
    },
    Access,
    Create,
    Fallocate {
        offset: u64,
        length: u64,
        mode: i32,
    },
    Destroy,
    /// Not one wring answers: ENOSYS.
    Unsupported,
}

/// Little-endian fields of one buffer, each read checked.
struct Fields<'a> {
    opcode: u32,
    what: &'static str,
    b: &'a [u8],
}

impl<'a> Fields<'a> {
    fn need(&self, n: usize) -> Result<(), WireError> {
        if self.b.len() < n {
            return Err(WireError::Short {
                opcode: self.opcode,
                what: self.what,
                need: n,
                got: self.b.len(),
            });
        }
        Ok(())
    }
    fn u32(&self, at: usize) -> Result<u32, WireError> {
        self.need(at + 4)?;
        let mut a = [0; 4];
        a.copy_from_slice(&self.b[at..at + 4]);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&self, at: usize) -> Result<u64, WireError> {
        self.need(at + 8)?;
        let mut a = [0; 8];
        a.copy_from_slice(&self.b[at..at + 8]);
        Ok(u64::from_le_bytes(a))
    }
}

/// The payload read front to back: NUL-terminated names, then bytes.
struct Payload<'a> {
    opcode: u32,
    rest: &'a [u8],
}

impl<'a> Payload<'a> {
    fn name(&mut self) -> Result<&'a [u8], WireError> {
        let end = self
            .rest
            .iter()
            .position(|&c| c == 0)
            .ok_or(WireError::Unterminated {
                opcode: self.opcode,
            })?;
        let (name, rest) = (&self.rest[..end], &self.rest[end + 1..]);
        self.rest = rest;
        Ok(name)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.rest.len() < n {
            return Err(WireError::Short {
                opcode: self.opcode,
                what: "payload",
                need: n,
                got: self.rest.len(),
            });
        }
        let (b, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(b)
    }
}

/// The size a READ asks for, read from its op_in without decoding the rest; `None` for any
/// other request (or one too short to say).
pub fn read_size(in_out: &[u8], op_in: &[u8]) -> Option<u32> {
    let h = Fields {
        opcode: 0,
        what: "fuse_in_header",
        b: in_out,
    };
    if h.u32(4).ok()? != READ {
        return None;
    }
    let op = Fields {
        opcode: READ,
        what: "fuse_read_in",
        b: op_in,
    };
    op.u32(16).ok()
}

/// The header of a request in `in_out`.
pub fn header(in_out: &[u8]) -> Result<Header, WireError> {
    let f = Fields {
        opcode: 0,
        what: "fuse_in_header",
        b: in_out,
    };
    f.need(IN_HEADER)?;
    Ok(Header {
        opcode: f.u32(4)?,
        unique: f.u64(8)?,
        nodeid: f.u64(16)?,
        uid: f.u32(24)?,
        gid: f.u32(28)?,
        pid: f.u32(32)?,
    })
}

fn time(opcode: u32, secs: u64, nsecs: u32) -> Result<SystemTime, WireError> {
    let secs = secs as i64;
    let bad = WireError::Time {
        opcode,
        secs,
        nsecs,
    };
    if nsecs >= 1_000_000_000 {
        return Err(bad);
    }
    let base = if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    };
    base.and_then(|t| t.checked_add(Duration::from_nanos(nsecs.into())))
        .ok_or(bad)
}

fn setattr(op: &Fields) -> Result<SetAttr, WireError> {
    op.need(88)?;
    let valid = op.u32(0)?;
    let has = |bit: u32| valid & bit != 0;
    let when = |set: u32, now: u32, at: usize, nsat: usize| -> Result<_, WireError> {
        if !has(set) {
            return Ok(None);
        }
        if has(now) {
            return Ok(Some(None));
        }
        Ok(Some(Some(time(op.opcode, op.u64(at)?, op.u32(nsat)?)?)))
    };
    Ok(SetAttr {
        mode: has(FATTR_MODE).then(|| op.u32(68)).transpose()?,
        uid: has(FATTR_UID).then(|| op.u32(76)).transpose()?,
        gid: has(FATTR_GID).then(|| op.u32(80)).transpose()?,
        size: has(FATTR_SIZE).then(|| op.u64(16)).transpose()?,
        atime: when(FATTR_ATIME, FATTR_ATIME_NOW, 32, 56)?,
        mtime: when(FATTR_MTIME, FATTR_MTIME_NOW, 40, 60)?,
        ctime: match has(FATTR_CTIME) {
            true => Some(time(op.opcode, op.u64(48)?, op.u32(64)?)?),
            false => None,
        },
        caller: None,
    })
}

/// Decode a request: `in_out` and `op_in` from the header buffer, `payload` the first
/// `payload_sz` bytes of the payload buffer.
pub fn parse<'a>(
    in_out: &[u8],
    op_in: &[u8],
    payload: &'a [u8],
) -> Result<(Header, Request<'a>), WireError> {
    let h = header(in_out)?;
    let opcode = h.opcode;
    let op = Fields {
        opcode,
        what: "operation header",
        b: op_in,
    };
    let mut p = Payload {
        opcode,
        rest: payload,
    };
    let r = match opcode {
        1 => Request::Lookup { name: p.name()? },
        3 => Request::Getattr,
        4 => Request::Setattr(setattr(&op)?),
        5 => Request::Readlink,
        6 => Request::Symlink {
            name: p.name()?,
            target: p.name()?,
        },
        8 => Request::Mknod {
            mode: op.u32(0)?,
            rdev: op.u32(4)?,
            umask: op.u32(8)?,
            name: p.name()?,
        },
        9 => Request::Mkdir {
            mode: op.u32(0)?,
            umask: op.u32(4)?,
            name: p.name()?,
        },
        10 => Request::Unlink { name: p.name()? },
        11 => Request::Rmdir { name: p.name()? },
        12 | 45 => Request::Rename {
            newdir: op.u64(0)?,
            flags: if opcode == 45 { op.u32(8)? } else { 0 },
            name: p.name()?,
            newname: p.name()?,
        },
        13 => Request::Link {
            ino: op.u64(0)?,
            newname: p.name()?,
        },
        14 => Request::Open,
        READ => Request::Read {
            offset: op.u64(8)?,
            size: op.u32(16)?,
        },
        WRITE => {
            let size = op.u32(16)? as usize;
            Request::Write {
                offset: op.u64(8)?,
                kill_suidgid: op.u32(20)? & FUSE_WRITE_KILL_SUIDGID != 0,
                data: p.bytes(size)?,
            }
        }
        17 => Request::Statfs,
        18 => Request::Release,
        20 | 30 => Request::Fsync { dir: opcode == 30 },
        21 => {
            let size = op.u32(0)? as usize;
            Request::Setxattr {
                flags: op.u32(4)? as i32,
                name: p.name()?,
                value: p.bytes(size)?,
            }
        }
        22 => Request::Getxattr {
            size: op.u32(0)?,
            name: p.name()?,
        },
        23 => Request::Listxattr { size: op.u32(0)? },
        24 => Request::Removexattr { name: p.name()? },
        25 => Request::Flush,
        27 => Request::Opendir,
        28 | 44 => Request::Readdir {
            fh: op.u64(0)?,
            offset: op.u64(8)?,
            size: op.u32(16)?,
            plus: opcode == 44,
        },
        29 => Request::Releasedir { fh: op.u64(0)? },
        34 => Request::Access,
        35 => Request::Create,
        38 => Request::Destroy,
        39 => {
            let size = op.u32(24)? as usize;
            Request::Ioctl {
                cmd: op.u32(12)?,
                input: p.bytes(size)?,
            }
        }
        51 => Request::Tmpfile {
            mode: op.u32(4)?,
            umask: op.u32(8)?,
        },
        43 => Request::Fallocate {
            offset: op.u64(8)?,
            length: op.u64(16)?,
            mode: op.u32(24)? as i32,
        },
        _ => Request::Unsupported,
    };
    Ok((h, r))
}

/// `struct fuse_ioctl_out` (result, no retry, no iovecs) and the data after it; the bytes
/// written.
pub fn put_ioctl_out(b: &mut [u8], result: i32, data: &[u8]) -> usize {
    b[..16].fill(0);
    b[..4].copy_from_slice(&result.to_le_bytes());
    b[16..16 + data.len()].copy_from_slice(data);
    16 + data.len()
}

/// The reply's header into `in_out`: `error` is 0 or a negative errno.
pub fn put_out_header(in_out: &mut [u8], unique: u64, error: i32, payload_len: usize) {
    let len = (OUT_HEADER + payload_len) as u32;
    in_out[0..4].copy_from_slice(&len.to_le_bytes());
    in_out[4..8].copy_from_slice(&error.to_le_bytes());
    in_out[8..16].copy_from_slice(&unique.to_le_bytes());
}

/// How many payload bytes the reply has, into `ring_ent_in_out.payload_sz`, and the commit
/// id a request came with.
pub fn ent_in_out(headers: &[u8]) -> &[u8] {
    &headers[IN_OUT * 2..REQ_HEADER]
}

/// `ring_ent_in_out.commit_id` and `.payload_sz` of a request.
pub fn commit_id_and_size(ent: &[u8]) -> Result<(u64, usize), WireError> {
    let f = Fields {
        opcode: 0,
        what: "fuse_uring_ent_in_out",
        b: ent,
    };
    Ok((f.u64(8)?, f.u32(16)? as usize))
}

/// Set `ring_ent_in_out.payload_sz` for a reply.
pub fn put_payload_size(ent: &mut [u8], n: usize) {
    ent[16..20].copy_from_slice(&(n as u32).to_le_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Seconds (negative before 1970) and nanoseconds of a time, as `struct fuse_attr` has it.
fn secs_nsecs(t: SystemTime) -> (u64, u32) {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs(), d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (mut s, mut n) = (-(d.as_secs() as i64), d.subsec_nanos());
            if n > 0 {
                s -= 1;
                n = 1_000_000_000 - n;
            }
            (s as u64, n)
        }
    }
}

/// The `S_IF*` bits of a file type.
pub fn type_bits(k: FileType) -> u32 {
    match k {
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Directory => libc::S_IFDIR,
        FileType::RegularFile => libc::S_IFREG,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// `struct fuse_attr` at the start of `b` (88 bytes).
fn put_attr(b: &mut [u8], a: &FileAttr) {
    put_u64(b, 0, a.ino.0);
    put_u64(b, 8, a.size);
    put_u64(b, 16, a.blocks);
    let times = [a.atime, a.mtime, a.ctime].map(secs_nsecs);
    for (k, (s, n)) in times.into_iter().enumerate() {
        put_u64(b, 24 + 8 * k, s);
        put_u32(b, 48 + 4 * k, n);
    }
    put_u32(b, 60, type_bits(a.kind) | u32::from(a.perm));
    put_u32(b, 64, a.nlink);
    put_u32(b, 68, a.uid);
    put_u32(b, 72, a.gid);
    put_u32(b, 76, a.rdev);
    put_u32(b, 80, a.blksize);
    put_u32(b, 84, a.flags);
}

/// `struct fuse_entry_out` (128 bytes).
pub fn put_entry_out(b: &mut [u8], ttl: &Duration, a: &FileAttr) {
    put_u64(b, 0, a.ino.0);
    put_u64(b, 8, 0);
    put_u64(b, 16, ttl.as_secs());
    put_u64(b, 24, ttl.as_secs());
    put_u32(b, 32, ttl.subsec_nanos());
    put_u32(b, 36, ttl.subsec_nanos());
    put_attr(&mut b[40..ENTRY_OUT], a);
}

/// `struct fuse_attr_out` (104 bytes).
pub fn put_attr_out(b: &mut [u8], ttl: &Duration, a: &FileAttr) {
    put_u64(b, 0, ttl.as_secs());
    put_u32(b, 8, ttl.subsec_nanos());
    put_u32(b, 12, 0);
    put_attr(&mut b[16..ATTR_OUT], a);
}

/// `struct fuse_open_out` (16 bytes).
pub fn put_open_out(b: &mut [u8], fh: u64) -> usize {
    put_u64(b, 0, fh);
    put_u64(b, 8, 0);
    16
}

/// A 4-byte answer padded to 8 (`fuse_write_out`, `fuse_getxattr_out`).
pub fn put_u32_out(b: &mut [u8], v: u32) -> usize {
    put_u32(b, 0, v);
    put_u32(b, 4, 0);
    8
}

/// `struct fuse_statfs_out` (80 bytes).
pub fn put_statfs_out(b: &mut [u8], s: &Statfs) -> usize {
    b[..80].fill(0);
    for (k, v) in [s.blocks, s.bfree, s.bavail, s.files, s.ffree]
        .into_iter()
        .enumerate()
    {
        put_u64(b, 8 * k, v);
    }
    put_u32(b, 40, s.bsize);
    put_u32(b, 44, s.namelen);
    put_u32(b, 48, s.frsize);
    80
}

/// A `fuse_dirent` (`plus`: a `fuse_direntplus`, the entry first) at the start of `b`, if
/// it fits: its length, or `None`.
pub fn put_dirent(
    b: &mut [u8],
    ino: u64,
    next: u64,
    kind: FileType,
    name: &[u8],
    plus: Option<(&Duration, &FileAttr)>,
) -> Option<usize> {
    let entry = if plus.is_some() { ENTRY_OUT } else { 0 };
    let len = (entry + DIRENT + name.len()).next_multiple_of(8);
    if len > b.len() {
        return None;
    }
    if let Some((ttl, a)) = plus {
        put_entry_out(b, ttl, a);
    }
    let d = &mut b[entry..len];
    put_u64(d, 0, ino);
    put_u64(d, 8, next);
    put_u32(d, 16, name.len() as u32);
    put_u32(d, 20, type_bits(kind) >> 12);
    d[DIRENT..DIRENT + name.len()].copy_from_slice(name);
    d[DIRENT + name.len()..].fill(0);
    Some(len)
}

#[cfg(test)]
mod tests;
