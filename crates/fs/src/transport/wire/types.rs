//! The protocol's values as Rust types, for the bodies in `ops` and the encoders in
//! [`super::out`]: `struct fuse_attr` ([`FileAttr`]), the file types of `S_IF*`
//! ([`FileType`]), an errno ([`Errno`]), `struct fuse_kstatfs` ([`Statfs`]), and the attributes
//! an inode record reports ([`attr`]).
//!
//! Mirrors include/uapi/linux/fuse.h's structures as fs/fuse/inode.c (fuse_fill_attr,
//! fuse_change_attributes) reads them.

use std::time::SystemTime;

use crate::store::records::{Inode, Kind};

/// A file's type, as `st_mode`'s `S_IF*` bits say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// `S_IFIFO`.
    NamedPipe,
    /// `S_IFCHR`.
    CharDevice,
    /// `S_IFBLK`.
    BlockDevice,
    /// `S_IFDIR`.
    Directory,
    /// `S_IFREG`.
    RegularFile,
    /// `S_IFLNK`.
    Symlink,
    /// `S_IFSOCK`.
    Socket,
}

impl FileType {
    /// The `S_IF*` bits.
    pub fn bits(self) -> u32 {
        match self {
            FileType::NamedPipe => libc::S_IFIFO,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::BlockDevice => libc::S_IFBLK,
            FileType::Directory => libc::S_IFDIR,
            FileType::RegularFile => libc::S_IFREG,
            FileType::Symlink => libc::S_IFLNK,
            FileType::Socket => libc::S_IFSOCK,
        }
    }
}

/// What `struct fuse_attr` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileAttr {
    /// Node id: the store's inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks.
    pub blocks: u64,
    /// Access time.
    pub atime: SystemTime,
    /// Modification time.
    pub mtime: SystemTime,
    /// Change time.
    pub ctime: SystemTime,
    /// Type.
    pub kind: FileType,
    /// Permission bits (07777).
    pub perm: u16,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number (`new_encode_dev`'s 32 bits).
    pub rdev: u32,
    /// Preferred I/O size.
    pub blksize: u32,
    /// `FUSE_ATTR_*` flags.
    pub flags: u32,
}

/// An errno a request is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(i32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(libc::EPERM);
    /// I/O error: also what a malformed request gets.
    pub const EIO: Errno = Errno(libc::EIO);
    /// Function not implemented: the kernel stops sending some requests on it.
    pub const ENOSYS: Errno = Errno(libc::ENOSYS);

    /// The errno `code` (positive).
    pub const fn from_i32(code: i32) -> Errno {
        Errno(code)
    }

    /// The errno's number (positive).
    pub fn code(self) -> i32 {
        self.0
    }
}

/// A STATFS answer, as `statvfs` has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statfs {
    /// Blocks of `frsize` bytes.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Blocks free to unprivileged users.
    pub bavail: u64,
    /// Inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Preferred I/O size.
    pub bsize: u32,
    /// Longest name.
    pub namelen: u32,
    /// Fragment size.
    pub frsize: u32,
}

/// The FUSE type of a stored kind.
pub fn kind(k: Kind) -> FileType {
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

/// The attributes FUSE reports for inode `ino`, its record `i`.
pub fn attr(ino: u64, i: &Inode, blksize: u32) -> FileAttr {
    FileAttr {
        ino,
        size: i.size,
        // btrfs_getattr: the bytes its extents cover, not what they store.
        blocks: i.bytes.div_ceil(512),
        atime: i.atime.to_system(),
        mtime: i.mtime.to_system(),
        ctime: i.ctime.to_system(),
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
