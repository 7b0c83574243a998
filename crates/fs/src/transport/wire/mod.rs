//! FUSE requests and replies (include/uapi/linux/fuse.h), decoded and encoded once for both
//! transports. A request is a `fuse_in_header`, the operation's own header (`fuse_mknod_in`,
//! `fuse_write_in`, …) and what follows it (names, a write's data). [`parse`] takes the three
//! apart as a ring entry holds them (`in_out`, `op_in`, the payload buffer, fs/fuse/dev_uring.c);
//! [`split`] cuts a request read from `/dev/fuse`, where they lie one after the other
//! (fs/fuse/dev.c's fuse_copy_args), into the same three. A reply is a `fuse_out_header` and the
//! operation's answer ([`out`]); the values in it are [`types`].
//!
//! On a ring entry `op_in` is not cleared between requests, so a field is read only where the
//! opcode's header has it (a RENAME's 8-byte header leaves a RENAME2's flags behind it stale);
//! from `/dev/fuse` `op_in` is exactly the header the opcode has, so the same rule keeps a read
//! inside it.
//!
//! Only the requests wring answers are decoded; the rest get ENOSYS. Everything is
//! bounds-checked: a short or unterminated request is an error, never a panic.

pub mod out;
pub mod types;

use std::time::{Duration, SystemTime};

pub use out::*;
pub use types::*;

use crate::volume::SetAttr;

/// The protocol's major version (FUSE_KERNEL_VERSION).
pub const KERNEL_VERSION: u32 = 7;
/// FUSE_FORGET: no reply.
pub const FORGET: u32 = 2;
/// FUSE_READ's opcode.
pub const READ: u32 = 15;
/// FUSE_WRITE, the one request whose payload is large.
pub const WRITE: u32 = 16;
/// FUSE_INIT, the first request of a connection.
pub const INIT: u32 = 26;
/// FUSE_BATCH_FORGET: no reply.
pub const BATCH_FORGET: u32 = 42;
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
/// `struct fuse_open_out`.
pub const OPEN_OUT: usize = 16;
/// `struct fuse_statx_out`: 32 bytes, then a 256-byte `struct fuse_statx`.
pub const STATX_OUT: usize = 32 + 256;
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
/// FUSE_INIT_EXT: `fuse_init_in.flags2` holds the high 32 flags.
pub const FUSE_INIT_EXT: u64 = 1 << 30;

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
    /// A request read from `/dev/fuse` whose header says another length than was read.
    #[error("FUSE request opcode {opcode}: its header says {said} bytes, {got} were read")]
    Length {
        /// The request's opcode.
        opcode: u32,
        /// `fuse_in_header.len`.
        said: usize,
        /// Bytes read.
        got: usize,
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

/// `struct fuse_init_in`: what the kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitIn {
    /// The kernel's major version.
    pub major: u32,
    /// The kernel's minor version.
    pub minor: u32,
    /// The readahead the kernel's mount has.
    pub max_readahead: u32,
    /// `FUSE_*` capabilities: `flags`, and `flags2` as the high 32 when FUSE_INIT_EXT is set.
    pub flags: u64,
}

/// A decoded request; names and data borrow the buffers it was read into.
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
    Open {
        /// `open(2)`'s flags (O_CREAT, O_EXCL and O_NOCTTY taken out; O_TRUNC too unless
        /// FUSE_ATOMIC_O_TRUNC was agreed, which wring does not ask for).
        flags: u32,
    },
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
    /// RELEASE of the handle OPEN or CREATE gave.
    Release {
        fh: u64,
    },
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
    Create {
        name: &'a [u8],
        mode: u32,
        umask: u32,
        /// `open(2)`'s flags.
        flags: u32,
    },
    Fallocate {
        offset: u64,
        length: u64,
        mode: i32,
    },
    /// `fuse_copy_file_range_in`: from this node (open as `fh_in`) at `off_in` to
    /// `nodeid_out` at `off_out`.
    CopyFileRange {
        off_in: u64,
        nodeid_out: u64,
        off_out: u64,
        len: u64,
        flags: u64,
    },
    Destroy,
    Statx,
    Forget {
        nlookup: u64,
    },
    /// `struct fuse_forget_one`s (node id, lookups), 16 bytes each: see [`forgets`].
    BatchForget {
        items: &'a [u8],
    },
    Interrupt,
    Init(InitIn),
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
    fn short(&self, need: usize) -> WireError {
        WireError::Short {
            opcode: self.opcode,
            what: self.what,
            need,
            got: self.b.len(),
        }
    }
    fn need(&self, n: usize) -> Result<(), WireError> {
        if self.b.len() < n {
            return Err(self.short(n));
        }
        Ok(())
    }
    /// The `N` bytes at `at`.
    fn array<const N: usize>(&self, at: usize) -> Result<[u8; N], WireError> {
        let bytes = self.b.get(at..).and_then(<[u8]>::first_chunk::<N>);
        bytes.copied().ok_or_else(|| self.short(at + N))
    }
    fn u32(&self, at: usize) -> Result<u32, WireError> {
        self.array(at).map(u32::from_le_bytes)
    }
    fn u64(&self, at: usize) -> Result<u64, WireError> {
        self.array(at).map(u64::from_le_bytes)
    }
}

/// The payload read front to back: NUL-terminated names, then bytes.
struct Payload<'a> {
    opcode: u32,
    rest: &'a [u8],
}

impl<'a> Payload<'a> {
    fn name(&mut self) -> Result<&'a [u8], WireError> {
        let mut parts = self.rest.splitn(2, |&c| c == 0);
        let (Some(name), Some(rest)) = (parts.next(), parts.next()) else {
            return Err(WireError::Unterminated {
                opcode: self.opcode,
            });
        };
        self.rest = rest;
        Ok(name)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let Some((b, rest)) = self.rest.split_at_checked(n) else {
            return Err(WireError::Short {
                opcode: self.opcode,
                what: "payload",
                need: n,
                got: self.rest.len(),
            });
        };
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

/// `struct fuse_init_in`: 16 bytes up to 7.35, 64 with `flags2` from 7.36 on.
fn init_in(op: &Fields) -> Result<InitIn, WireError> {
    let low = u64::from(op.u32(12)?);
    let high = match low & FUSE_INIT_EXT != 0 {
        true => u64::from(op.u32(16)?) << 32,
        false => 0,
    };
    Ok(InitIn {
        major: op.u32(0)?,
        minor: op.u32(4)?,
        max_readahead: op.u32(8)?,
        flags: low | high,
    })
}

/// The (node id, lookups) pairs of a BATCH_FORGET.
pub fn forgets(items: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    // 8-byte words, then pairs of them: the bytes past the last whole 16 are left.
    let (words, _) = items.as_chunks::<8>();
    let (pairs, _) = words.as_chunks::<2>();
    pairs
        .iter()
        .map(|[node, lookups]| (u64::from_le_bytes(*node), u64::from_le_bytes(*lookups)))
}

/// The size of the header an opcode's request has after `fuse_in_header` on `/dev/fuse`
/// (the kernel's `in_args[0]`, include/uapi/linux/fuse.h's `fuse_*_in`), for the opcodes
/// wring decodes; 0 for those with names only and those it does not know. INIT's is at most
/// this (older kernels send 16 bytes).
fn op_len(opcode: u32) -> usize {
    match opcode {
        FORGET => 8,
        3 => 16, // fuse_getattr_in
        4 => 88, // fuse_setattr_in
        8 => 16, // fuse_mknod_in
        9 => 8,  // fuse_mkdir_in
        12 => 8, // fuse_rename_in
        13 => 8, // fuse_link_in
        14 => 8, // fuse_open_in
        READ | WRITE => 40,
        18 | 25 | 29 => 24, // fuse_release_in, fuse_flush_in
        20 | 30 => 16,      // fuse_fsync_in
        21..=23 => 8,       // fuse_setxattr_in (no FUSE_SETXATTR_EXT), fuse_getxattr_in
        INIT => 64,
        27 | 34 | 36 => 8, // fuse_open_in, fuse_access_in, fuse_interrupt_in
        28 | 44 => 40,     // fuse_read_in
        35 | 51 => 16,     // fuse_create_in
        39 => 32,          // fuse_ioctl_in
        BATCH_FORGET => 8,
        43 => 32, // fuse_fallocate_in
        45 => 16, // fuse_rename2_in
        47 => 56, // fuse_copy_file_range_in
        52 => 24, // fuse_statx_in
        _ => 0,
    }
}

/// A request's `fuse_in_header`, its operation's header, and its payload.
pub type Parts<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// Cut a request read from `/dev/fuse` into what [`parse`] takes: its `fuse_in_header`, its
/// operation's header, and the rest. The length its header gives must be what was read.
pub fn split(request: &[u8]) -> Result<Parts<'_>, WireError> {
    let h = header(request)?;
    let said = Fields {
        opcode: h.opcode,
        what: "fuse_in_header",
        b: request,
    }
    .u32(0)? as usize;
    if said != request.len() {
        return Err(WireError::Length {
            opcode: h.opcode,
            said,
            got: request.len(),
        });
    }
    let Some((in_header, rest)) = request.split_at_checked(IN_HEADER) else {
        return Err(WireError::Short {
            opcode: h.opcode,
            what: "fuse_in_header",
            need: IN_HEADER,
            got: request.len(),
        });
    };
    let n = match h.opcode {
        INIT => op_len(INIT).min(rest.len()),
        op => op_len(op),
    };
    let Some((op, payload)) = rest.split_at_checked(n) else {
        return Err(WireError::Short {
            opcode: h.opcode,
            what: "operation header",
            need: n,
            got: rest.len(),
        });
    };
    Ok((in_header, op, payload))
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
        FORGET => Request::Forget {
            nlookup: op.u64(0)?,
        },
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
        14 => Request::Open { flags: op.u32(0)? },
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
        18 => Request::Release { fh: op.u64(0)? },
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
        INIT => Request::Init(init_in(&op)?),
        27 => Request::Opendir,
        28 | 44 => Request::Readdir {
            fh: op.u64(0)?,
            offset: op.u64(8)?,
            size: op.u32(16)?,
            plus: opcode == 44,
        },
        29 => Request::Releasedir { fh: op.u64(0)? },
        34 => Request::Access,
        35 => Request::Create {
            flags: op.u32(0)?,
            mode: op.u32(4)?,
            umask: op.u32(8)?,
            name: p.name()?,
        },
        36 => Request::Interrupt,
        38 => Request::Destroy,
        39 => {
            let size = op.u32(24)? as usize;
            Request::Ioctl {
                cmd: op.u32(12)?,
                input: p.bytes(size)?,
            }
        }
        BATCH_FORGET => {
            let count = op.u32(0)? as usize;
            Request::BatchForget {
                items: p.bytes(count.saturating_mul(16))?,
            }
        }
        43 => Request::Fallocate {
            offset: op.u64(8)?,
            length: op.u64(16)?,
            mode: op.u32(24)? as i32,
        },
        47 => Request::CopyFileRange {
            off_in: op.u64(8)?,
            nodeid_out: op.u64(16)?,
            off_out: op.u64(32)?,
            len: op.u64(40)?,
            flags: op.u64(48)?,
        },
        51 => Request::Tmpfile {
            mode: op.u32(4)?,
            umask: op.u32(8)?,
        },
        // struct fuse_statx_in: getattr_flags, reserved, fh, sx_flags, sx_mask. The kernel
        // asks for every basic field and the birth time whatever statx(2) asked.
        52 => {
            op.need(24)?;
            Request::Statx
        }
        _ => Request::Unsupported,
    };
    Ok((h, r))
}

/// The three parts of a ring entry's header buffer (`struct fuse_uring_req_header`):
/// `in_out`, `op_in`, and `ring_ent_in_out` (the commit id a request came with, and where a
/// reply's payload size goes).
pub type RingHeaders<'a> = (
    &'a mut [u8; IN_OUT],
    &'a mut [u8; IN_OUT],
    &'a mut [u8; ENT_IN_OUT],
);

/// A ring entry's header buffer cut into its [`RingHeaders`].
pub fn ring_headers(headers: &mut [u8]) -> Result<RingHeaders<'_>, WireError> {
    let got = headers.len();
    let short = || WireError::Short {
        opcode: 0,
        what: "fuse_uring_req_header",
        need: REQ_HEADER,
        got,
    };
    let (in_out, rest) = headers.split_first_chunk_mut().ok_or_else(short)?;
    let (op_in, rest) = rest.split_first_chunk_mut().ok_or_else(short)?;
    let ent = rest.first_chunk_mut().ok_or_else(short)?;
    Ok((in_out, op_in, ent))
}

/// `ring_ent_in_out.commit_id` and `.payload_sz` of a request on a ring entry.
pub fn commit_id_and_size(ent: &[u8]) -> Result<(u64, usize), WireError> {
    let f = Fields {
        opcode: 0,
        what: "fuse_uring_ent_in_out",
        b: ent,
    };
    Ok((f.u64(8)?, f.u32(16)? as usize))
}

/// Set `ring_ent_in_out.payload_sz` for a reply on a ring entry.
pub fn put_payload_size(ent: &mut [u8; ENT_IN_OUT], n: usize) {
    ent[16..20].copy_from_slice(&(n as u32).to_le_bytes());
}

#[cfg(test)]
mod tests;
