//! Mounting where this process may not call mount(2) (a user without root): fusermount3,
//! set-user-ID root, opens /dev/fuse, mounts it with the options given and passes the
//! descriptor back over a socket; `fusermount3 -u` unmounts.
//!
//! Mirrors libfuse's lib/mount.c (fuse_mount_fusermount, receive_fd, fuse_kern_unmount) and
//! fusermount's `_FUSE_COMMFD` protocol; fuser did the same before the daemon served
//! `/dev/fuse` itself.

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

/// The helper.
const FUSERMOUNT: &str = "fusermount3";
/// The environment variable naming the socket the descriptor comes back on.
const COMM_ENV: &str = "_FUSE_COMMFD";

/// Mount `mountpoint` through fusermount3 with `options` (comma-separated, as `-o` takes
/// them); the connection's descriptor.
pub(super) fn mount(mountpoint: &Path, options: &str) -> io::Result<OwnedFd> {
    let (ours, theirs) = UnixStream::pair()?;
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(FUSERMOUNT);
    cmd.arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env(COMM_ENV, fd.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec and only calls fcntl, which
    // is async-signal-safe, on a descriptor number the child inherited.
    unsafe {
        cmd.pre_exec(move || {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("running {FUSERMOUNT} (package fuse3): {e}"),
        )
    })?;
    drop(theirs);
    let received = receive_fd(&ours);
    drop(ours);
    let out = child.wait_with_output()?;
    match received {
        Ok(fd) => Ok(fd),
        Err(e) => {
            let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let why = if said.is_empty() { e.to_string() } else { said };
            let kind = match why.contains("user_allow_other") {
                true => io::ErrorKind::PermissionDenied,
                false => io::ErrorKind::Other,
            };
            Err(io::Error::new(kind, format!("{FUSERMOUNT}: {why}")))
        }
    }
}

/// The one descriptor fusermount3 sends (SCM_RIGHTS).
fn receive_fd(sock: &UnixStream) -> io::Result<OwnedFd> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let got = loop {
        let mut iov = [IoSliceMut::new(&mut byte)];
        match rustix::net::recvmsg(sock.as_fd(), &mut iov, &mut control, RecvFlags::empty()) {
            Ok(r) => break r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if got.bytes == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "it exited without sending the /dev/fuse descriptor",
        ));
    }
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = msg {
            if let Some(fd) = fds.next() {
                return Ok(fd);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "no descriptor in its message",
    ))
}

/// `fusermount3 -u -q -z MOUNTPOINT`: detach a mount it made, when serving it failed.
/// Best effort.
pub(super) fn unmount(mountpoint: &Path) {
    let r = Command::new(FUSERMOUNT)
        .args(["-u", "-q", "-z", "--"])
        .arg(mountpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = r {
        log::warn!("{FUSERMOUNT} -u {}: {e}", mountpoint.display());
    }
}
