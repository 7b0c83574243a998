//! Requests through the shared dispatch to the bodies, on a volume in a fresh store, with
//! the answers read back as the kernel reads them: what wring answers where the kernel may
//! not pass all of it on (STATX's `stx_attributes`, which Linux 6.18 drops), beside what the
//! kernel's btrfs reports.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use super::dispatch::{dispatch, Answer, Reply};
use super::ops::Ops;
use super::wire::{self, Header, Request};
use crate::store::{Store, ROOT};
use crate::{Options, Volume};

/// `FS_IOC_SETFLAGS` as the kernel's fileattr_set sends it.
const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
/// `STATX_ATTR_COMPRESSED | _IMMUTABLE | _APPEND | _NODUMP`.
const FOUR: u64 = 0x74;

struct Scratch {
    dir: std::path::PathBuf,
    ops: Ops,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("wring-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let vol = Volume::open(&dir, Options::default()).unwrap();
        Scratch {
            dir,
            ops: Ops::new(Arc::new(vol)),
        }
    }

    /// Ask `r` of node `ino` as root: the errno (0 for success) and the answer's bytes.
    fn ask(&self, ino: u64, r: Request) -> (i32, Vec<u8>) {
        let h = Header {
            unique: 1,
            opcode: 0,
            nodeid: ino,
            uid: 0,
            gid: 0,
            pid: 1,
        };
        let mut buf = vec![0u8; 1 << 16];
        let mut a = Answer::new(&mut buf);
        assert_eq!(dispatch(&self.ops, &h, r, &mut a), Reply::Send);
        (-a.error, a.bytes_written().to_vec())
    }

    /// CREATE `name` in the root: its node id.
    fn create(&self, name: &[u8]) -> u64 {
        let r = Request::Create {
            name,
            mode: libc::S_IFREG | 0o644,
            umask: 0o022,
            flags: libc::O_WRONLY as u32,
        };
        let (e, b) = self.ask(ROOT, r);
        assert_eq!(e, 0);
        assert_eq!(b.len(), wire::ENTRY_OUT + wire::OPEN_OUT);
        let open_flags = u32::from_le_bytes(b[wire::ENTRY_OUT + 8..][..4].try_into().unwrap());
        assert_eq!(open_flags, wire::FOPEN_KEEP_CACHE);
        u64::from_le_bytes(b[..8].try_into().unwrap())
    }

    fn set_flags(&self, ino: u64, flags: u32) {
        let input = flags.to_le_bytes();
        let r = Request::Ioctl {
            cmd: FS_IOC_SETFLAGS,
            input: &input,
        };
        assert_eq!(self.ask(ino, r).0, 0);
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `stx_attributes` and `stx_attributes_mask` of `path` on a kernel filesystem.
fn kernel_statx(path: &Path) -> (u64, u64) {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: statx is plain data; all zeroes is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statx buffer, both alive across the call.
    let r = unsafe { libc::statx(libc::AT_FDCWD, p.as_ptr(), 0, libc::STATX_ALL, &mut stx) };
    assert_eq!(r, 0, "statx {}", path.display());
    (stx.stx_attributes, stx.stx_attributes_mask)
}

/// The flags chattr spells `a`, `c`, `d`, `i` (FS_*_FL).
fn fs_flags(letters: &str) -> u32 {
    letters
        .chars()
        .map(|c| match c {
            'a' => 0x20,
            'c' => 0x04,
            'd' => 0x40,
            'i' => 0x10,
            _ => 0,
        })
        .fold(0, |f, x| f | x)
}

/// STATX answers `stx_attributes` and `stx_attributes_mask` as btrfs_getattr reports them for
/// each combination of `a`, `c`, `d` and `i` (fstests generic/424's), with the basic fields.
#[test]
fn statx_answers_the_attributes_btrfs_reports() {
    if !wring_testing::require_root("statx_answers_the_attributes_btrfs_reports") {
        return;
    }
    let btrfs = wring_btrfs::scratch::ScratchFs::new("").unwrap();
    let theirs = btrfs.path().join("f");
    std::fs::write(&theirs, b"").unwrap();
    let s = Scratch::new("statx");
    let ino = s.create(b"f");
    for letters in ["", "a", "c", "d", "i", "ac", "di", "acdi"] {
        let chattr = |args: &str| {
            let o = std::process::Command::new("chattr")
                .args(args.split(' '))
                .arg(&theirs)
                .output()
                .unwrap();
            assert!(o.status.success(), "chattr {args}: {o:?}");
        };
        chattr("-a -c -d -i");
        if !letters.is_empty() {
            chattr(&format!("+{letters}"));
        }
        let (k_attrs, k_mask) = kernel_statx(&theirs);
        s.set_flags(ino, fs_flags(letters));
        let (e, b) = s.ask(ino, Request::Statx);
        assert_eq!((e, b.len()), (0, wire::STATX_OUT), "{letters}");
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        // struct fuse_statx at 32: mask, blksize, attributes (8), …, attributes_mask (56).
        let (attrs, mask) = (u64_at(32 + 8), u64_at(32 + 56));
        assert_eq!(
            (attrs & FOUR, mask & FOUR),
            (k_attrs & FOUR, k_mask & FOUR),
            "+{letters}: wring, then btrfs"
        );
        assert_eq!(u32_at(32), wire::STATX_BASIC_STATS, "no birth time");
        assert_eq!(u64_at(32 + 32), ino);
        s.set_flags(ino, 0);
    }
}

/// OPEN of an immutable or append-only file as the VFS's may_open: EPERM for writing opens,
/// FOPEN_KEEP_CACHE otherwise (the full table beside btrfs is tests/chattr.rs's).
#[test]
fn open_refuses_writing_an_immutable_file_and_keeps_the_cache() {
    let s = Scratch::new("open");
    let ino = s.create(b"f");
    let open = |flags: i32| {
        s.ask(
            ino,
            Request::Open {
                flags: flags as u32,
            },
        )
    };
    let (e, b) = open(libc::O_RDWR);
    assert_eq!(e, 0);
    assert_eq!(
        u32::from_le_bytes(b[8..12].try_into().unwrap()),
        wire::FOPEN_KEEP_CACHE
    );
    s.set_flags(ino, fs_flags("i"));
    assert_eq!(open(libc::O_WRONLY).0, libc::EPERM);
    assert_eq!(open(libc::O_RDONLY).0, 0);
    s.set_flags(ino, fs_flags("a"));
    assert_eq!(open(libc::O_WRONLY).0, libc::EPERM);
    assert_eq!(open(libc::O_WRONLY | libc::O_APPEND).0, 0);
    s.set_flags(ino, 0);
}
