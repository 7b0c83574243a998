//! Holding a file still while wring rewrites it: a write lease plus a before/after stamp.
//!
//! Mirrors fs/locks.c's leases (fcntl `F_SETLEASE`/`F_GETLEASE`: generic_setlease,
//! check_conflicting_open, __break_lease, lease_break_time), as Samba and NFS servers use them.
//!
//! * `F_SETLEASE F_WRLCK` on our `O_RDWR` descriptor succeeds only when no other descriptor of
//!   the file is open anywhere (readers, writers, shared mappings, running executables): the
//!   kernel checks i_writecount/i_readcount against our own open. So a file open for writing
//!   is refused up front.
//! * Once held, any other `open()` of the file, and any `truncate()` by path, must first break
//!   the lease: the opener blocks in __break_lease, and `F_GETLEASE` on our descriptor stops
//!   answering `F_WRLCK` at once. wring asks before every write it makes, so nobody can write the
//!   file between wring's read of a range and wring's rewrite of it without wring seeing it.
//! * The kernel also sends SIGIO to the lease holder; [`ignore_sigio`] sets it to ignored
//!   (its default action would end the process), as wring polls instead.
//!
//! The race that remains: the breaker waits only `/proc/sys/fs/lease-break-time` seconds (45 by
//! default) before the kernel revokes the lease by itself. If wring were stopped for longer than
//! that *between* its last check and the encoded write that follows it (SIGSTOP, a debugger,
//! extreme memory pressure), a concurrent writer could slip in and wring's write of the old
//! bytes would win. wring measures that interval and reports it (see
//! [`WriteLease::check_window`]); it cannot undo it. Changes that need no open (chmod, utimes,
//! xattrs) are caught by the [`Stamp`] (ctime) comparison instead.
//!
//! The leases are raw `libc::fcntl` calls: neither rustix (1.1) nor nix (0.31) wraps
//! `F_SETLEASE`/`F_GETLEASE`. They pass ints only, no pointers.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::Once;
use std::time::{Duration, Instant};

use rustix::fs::{Timespec, Timestamps};

use crate::error::{BtrfsError, Op};

/// What `F_GETLEASE` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// The write lease is held and nobody has asked to break it.
    Held,
    /// A break is pending (someone opened or truncated the file), or the lease is gone.
    Broken,
}

/// Set SIGIO to ignored, once per process (a lease break would otherwise kill it).
pub fn ignore_sigio() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: installing SIG_IGN has no handler code to be async-signal-safe; the only
        // effect is that SIGIO is discarded for the whole process, which wring wants.
        unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    });
}

/// The kernel's lease-break time: how long a breaker waits before the lease is revoked.
pub fn lease_break_time() -> Duration {
    std::fs::read_to_string("/proc/sys/fs/lease-break-time")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(45), Duration::from_secs)
}

/// A write lease on an open file, released on drop.
#[derive(Debug)]
pub struct WriteLease<'f> {
    file: &'f File,
    checked: Instant,
    break_time: Duration,
    released: bool,
}

/// Why a lease could not be taken.
#[derive(Debug)]
pub enum LeaseRefused {
    /// EAGAIN: another descriptor of the file is open (or it is being executed).
    InUse,
    /// Leases are not available (e.g. /proc/sys/fs/leases-enable is 0).
    Unavailable(io::Error),
}

impl<'f> WriteLease<'f> {
    /// Take a write lease on `file`, which must be open read-write.
    pub fn take(file: &'f File) -> Result<Self, LeaseRefused> {
        ignore_sigio();
        // SAFETY: fcntl(F_SETLEASE) takes an int argument and no pointers.
        let ret = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            return Err(match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ETXTBSY) => LeaseRefused::InUse,
                _ => LeaseRefused::Unavailable(err),
            });
        }
        Ok(WriteLease {
            file,
            checked: Instant::now(),
            break_time: lease_break_time(),
            released: false,
        })
    }

    /// Ask the kernel whether the lease is still unbroken; remembers when it last said so.
    pub fn state(&mut self) -> Result<LeaseState, BtrfsError> {
        // SAFETY: fcntl(F_GETLEASE) takes no argument and no pointers.
        let ret = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GETLEASE) };
        if ret < 0 {
            return Err(BtrfsError::io(Op::Lease, 0, io::Error::last_os_error()));
        }
        if ret == libc::F_WRLCK {
            self.checked = Instant::now();
            Ok(LeaseState::Held)
        } else {
            Ok(LeaseState::Broken)
        }
    }

    /// Whether the time since the last successful [`state`](Self::state) check stayed well
    /// inside the lease-break time, so that a break begun after the check cannot have timed out
    /// (and let a writer in) before the operation that followed it. Call right after that
    /// operation.
    pub fn check_window(&self) -> Result<(), Duration> {
        let elapsed = self.checked.elapsed();
        if elapsed < self.break_time / 2 {
            Ok(())
        } else {
            Err(elapsed)
        }
    }

    /// Give the lease back (lets a blocked opener proceed).
    pub fn release(&mut self) {
        if !self.released {
            // SAFETY: fcntl(F_SETLEASE, F_UNLCK) takes an int argument and no pointers.
            unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
            self.released = true;
        }
    }
}

impl Drop for WriteLease<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// The parts of an inode that change when anyone changes the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Inode number.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// Size.
    pub size: u64,
    /// Modification time (s, ns).
    pub mtime: (i64, i64),
    /// Change time (s, ns).
    pub ctime: (i64, i64),
    /// Access time (s, ns), for restoring; not compared.
    pub atime: (i64, i64),
}

impl Stamp {
    /// fstat `file`.
    pub fn of(file: &File) -> Result<Stamp, BtrfsError> {
        let m = file
            .metadata()
            .map_err(|e| BtrfsError::io(Op::Open, 0, e))?;
        Ok(Stamp {
            ino: m.ino(),
            dev: m.dev(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            atime: (m.atime(), m.atime_nsec()),
        })
    }

    /// Whether `other` shows the same inode unchanged (size, mtime and ctime equal).
    pub fn unchanged(&self, other: &Stamp) -> bool {
        (self.ino, self.dev, self.size, self.mtime, self.ctime)
            == (other.ino, other.dev, other.size, other.mtime, other.ctime)
    }
}

/// Set the file's access and modification times back to those in `stamp` (a write moves
/// mtime: btrfs_write_check() calls file_update_time() for encoded writes too). ctime cannot be
/// set from userspace and moves.
pub fn restore_times(file: &File, stamp: &Stamp) -> Result<(), BtrfsError> {
    let ts = |(sec, nsec): (i64, i64)| Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    };
    let times = Timestamps {
        last_access: ts(stamp.atime),
        last_modification: ts(stamp.mtime),
    };
    rustix::fs::futimens(file, &times)
        .map_err(|errno| BtrfsError::io(Op::Times, 0, io::Error::from(errno)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn temp_file(name: &str) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!("wring-guard-{}-{name}", std::process::id()));
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        (path, file)
    }

    #[test]
    fn a_lease_is_refused_while_another_descriptor_is_open_and_breaks_on_open() {
        // F_SETLEASE needs the file's owner or CAP_LEASE; a temp file is ours either way, but
        // the test is kept to the setup CI uses.
        if !wring_testing::require_root(
            "a_lease_is_refused_while_another_descriptor_is_open_and_breaks_on_open",
        ) {
            return;
        }
        let (path, file) = temp_file("lease");
        let other = File::open(&path).unwrap();
        match WriteLease::take(&file) {
            Err(LeaseRefused::InUse) => {}
            other => panic!(
                "a write lease with a second descriptor open must be refused as in use, got {other:?} \
                 (leases disabled? /proc/sys/fs/leases-enable must be 1)"
            ),
        }
        drop(other);
        let mut lease = match WriteLease::take(&file) {
            Ok(lease) => lease,
            Err(e) => panic!(
                "no write lease on {} with no other descriptor open: {e:?} \
                 (leases disabled? /proc/sys/fs/leases-enable must be 1)",
                path.display()
            ),
        };
        assert_eq!(lease.state().unwrap(), LeaseState::Held);
        // A non-blocking open of a leased file fails with EWOULDBLOCK but starts the break.
        let opener = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path);
        assert!(opener.is_err());
        assert_eq!(lease.state().unwrap(), LeaseState::Broken);
        lease.release();
        assert!(lease.check_window().is_ok());
        std::fs::remove_file(&path).unwrap();
    }

    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn times_are_restored_and_stamps_compare() {
        let (path, file) = temp_file("times");
        let before = Stamp::of(&file).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        use std::io::Write;
        (&file).write_all(b"changed").unwrap();
        let after = Stamp::of(&file).unwrap();
        assert!(!before.unchanged(&after));
        restore_times(&file, &before).unwrap();
        assert_eq!(Stamp::of(&file).unwrap().mtime, before.mtime);
        std::fs::remove_file(&path).unwrap();
    }
}
