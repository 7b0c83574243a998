//! Mounting and the control channel: `mount` (background by default: a child process in the
//! foreground mode tells its parent when the mount is ready), `umount` (flush, unmount, wait for
//! the daemon to finish its last commit), `remount` and `status` through control attributes on
//! the mount root, so no socket or pid file can go stale. A mount of a store that another
//! process still holds (the daemon of a plain `umount`, finishing its final commit) waits for
//! it, saying so, up to 30 s ([`super::holder`]).
//!
//! Mirrors btrfs's mount/remount (super.c: btrfs_mount, btrfs_remount) and /proc/mounts.

use std::ffi::{CString, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::XattrFlags;
use rustix::io::Errno;

use super::{bdi, fusermount, holder, kmount, metrics};
use crate::error::{io, FsError};
use crate::options::Options;
use crate::store::Access;
use crate::transport::dev::Session;
use crate::transport::ops::Ops;
use crate::transport::uring;
use crate::volume::vfs::{check_dev_suid, vfs_flags};
use crate::volume::Volume;
use crate::{OPTIONS_XATTR, PID_XATTR, STATUS_XATTR, SYNC_XATTR};

/// Environment variable telling a foreground daemon to print `ready` once mounted.
pub const NOTIFY_ENV: &str = "WRING_FS_NOTIFY";
/// Log file of a background daemon, in the store directory.
pub use crate::store::LOG_FILE;

/// A minimal logger for the bare daemon (`wring-fsd`): info and above to stderr, which a
/// background daemon has pointed at the store's [`LOG_FILE`]. `wring` installs its own.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!("wring-fsd: {}: {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

/// Send log lines to stderr unless a logger is installed already.
pub fn init_stderr_log() {
    if log::set_logger(&StderrLog).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// The daemon allocates and frees the same extent-sized buffers (its own, redb's pages) all the
/// time; by default glibc hands large ones back to the kernel and faults them in again, zeroed.
/// Keep up to a few hundred MiB of freed memory in the process instead.
fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator tunables; called before the threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// The ready pipe's last line (a foreground daemon's stdout with [`NOTIFY_ENV`] set): `ready`
/// once the mount is live, or `failed ERRNO MESSAGE` (one line) when it could not start. Before
/// it, `waiting MESSAGE` lines say what the daemon waits for (the parent prints them).
const READY: &str = "ready";
const FAILED: &str = "failed";
/// The ready pipe's line for a wait the parent should show its user.
pub const WAITING: &str = "waiting";

/// Set once `ready` is sent: a later error belongs to the log, not to the ready pipe.
static READY_SENT: AtomicBool = AtomicBool::new(false);

/// Why a background mount did not become ready.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The daemon could not be started at all.
    #[error("could not start {exe}: {source}")]
    Spawn {
        /// The program.
        exe: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The daemon reported why it could not mount.
    #[error("{message}")]
    Failed {
        /// The errno its error maps to.
        errno: i32,
        /// Its error, in its words.
        message: String,
    },
    /// The daemon ended without saying (killed, or crashed); its last error output, if any.
    #[error("the mount daemon exited ({status}) before the mount was ready{}", tail(.stderr))]
    Exited {
        /// How it ended.
        status: String,
        /// The end of its error output.
        stderr: String,
    },
}

fn tail(stderr: &str) -> String {
    match stderr.trim().lines().last() {
        Some(l) => format!(": {l}"),
        None => String::new(),
    }
}

/// Mount in the foreground until unmounted. With [`NOTIFY_ENV`] set, tells the parent on
/// stdout whether the mount is live (`ready`) or why it failed (a typed line the parent parses
/// into [`StartError::Failed`]), then sends further log output to the store's log file.
/// `access` says how to reach a store's bucket (a credentials file, whether to break a stale
/// lease); a local store ignores it.
pub fn mount_foreground(
    dir: &Path,
    mountpoint: &Path,
    options: &str,
    access: &Access,
) -> Result<(), FsError> {
    let dir = &store_dir(dir);
    let result = mount_and_serve(dir, mountpoint, options, access);
    if let Err(e) = &result {
        if std::env::var_os(NOTIFY_ENV).is_some() && !READY_SENT.load(Ordering::SeqCst) {
            let message = e.to_string().replace('\n', " ");
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{FAILED} {} {message}", e.errno());
            let _ = out.flush();
        }
    }
    result
}

fn mount_and_serve(
    dir: &Path,
    mountpoint: &Path,
    options: &str,
    access: &Access,
) -> Result<(), FsError> {
    let opts = Options::parse(options)?;
    // The store holds every file's bytes: one other users can read is refused.
    crate::store::check_private(dir)?;
    check_mountpoint(dir, mountpoint)?;
    check_not_mounted(dir)?;
    check_dev_suid(&opts, dir)?;
    // Opened before mounting: with the store under a path the mount could reach, a lookup
    // after it would wait for this very daemon.
    let log = match std::env::var_os(NOTIFY_ENV) {
        Some(_) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(crate::store::FILE_MODE)
                .open(dir.join(LOG_FILE))
                .map_err(io("opening the log file"))?,
        ),
        None => None,
    };
    // The io_uring entries are made before mounting: once INIT has asked for them, the
    // kernel holds every request until each queue has one.
    let (prepared, transport) = uring::choose(opts.uring, opts.request_threads())?;
    keep_freed_memory();
    let allow_other = opts.allow_other;
    let n_threads = opts.request_threads();
    let uring = prepared.is_some();
    let source = format!("wring:{}", dir.display());
    let helper_options = fusermount_options(&opts, &source);
    let flags = vfs_flags(&opts);
    let vol = holder::open_waiting(dir, holder::WAIT, &mut tell_waiting, || {
        Volume::open_with(dir, opts.clone(), access)
    })?;
    let vol = Arc::new(vol);
    vol.start_writeback();
    vol.watch_rollbacks();
    vol.start_committer()?;
    vol.start_compactor()?;
    let canon = mountpoint.canonicalize().ok();
    let ops = Arc::new(Ops::new(vol.clone()));
    let _ = ops.ring.transport.set(transport);
    let at = canon.as_deref().unwrap_or(mountpoint);
    let _ = ops.mountpoint.set(at.display().to_string());
    let _metrics = match opts
        .metrics
        .as_ref()
        .map(|a| metrics::serve(a, Arc::downgrade(&ops)))
    {
        Some(Err(e)) => {
            drop(ops);
            close(vol);
            return Err(e);
        }
        Some(Ok(m)) => Some(m),
        None => None,
    };
    let spec = kmount::MountSpec {
        source: &source,
        allow_other,
        flags,
    };
    let (session, mounted) = match open_session(mountpoint, &spec, &helper_options, uring) {
        Ok(s) => s,
        Err(e) => {
            drop(ops);
            close(vol);
            return Err(io(format!("mounting on {}", mountpoint.display()))(e));
        }
    };
    let queues = match prepared.map(|p| start_uring(&session, &ops, p)) {
        Some(Err(e)) => {
            // Requests would wait for queues that never come: give the mount up.
            drop(session);
            mounted.detach(mountpoint);
            drop(ops);
            close(vol);
            return Err(e);
        }
        Some(Ok(q)) => Some(q),
        None => None,
    };
    log::info!(
        "FUSE: kernel protocol 7.{}, flags {:#x}",
        session.negotiated.kernel_minor,
        session.negotiated.flags
    );
    vol.set_notifier(Box::new(session.notifier()));
    if let Some(canon) = &canon {
        bdi::set_readahead(canon, crate::transport::READAHEAD_KB);
    }
    if let Some(log) = log {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{READY}");
        let _ = out.flush();
        READY_SENT.store(true, Ordering::SeqCst);
        // SAFETY: dup2 onto the standard descriptors of this process; `log` stays open.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::dup2(log.as_raw_fd(), 1);
            libc::dup2(log.as_raw_fd(), 2);
        }
    }
    // With the ring, /dev/fuse carries only INIT, FORGET and INTERRUPT: one thread is enough.
    let threads = if uring { 1 } else { n_threads };
    let r = session
        .run(ops.clone(), threads)
        .map_err(io("serving the mount"));
    if r.is_err() {
        mounted.detach(mountpoint);
    }
    if let Some(q) = queues {
        q.join();
    }
    drop(ops);
    close(vol);
    r
}

/// Say why the mount waits: on the ready pipe for the parent to print, else on stderr.
fn tell_waiting(message: &str) {
    if std::env::var_os(NOTIFY_ENV).is_some() {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{WAITING} {}", message.replace('\n', " "));
        let _ = out.flush();
    } else {
        eprintln!("wring: {message}");
    }
}

/// The io_uring queues' threads, on a duplicate of the session's `/dev/fuse` descriptor.
fn start_uring(
    session: &Session,
    ops: &Arc<Ops>,
    prepared: uring::Prepared,
) -> Result<uring::Queues, FsError> {
    let fd = session
        .fd()
        .try_clone_to_owned()
        .map_err(io("duplicating the FUSE descriptor"))?;
    prepared.start(fd, ops.clone())
}

/// Who made the mount, and so how it is detached when serving it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mounted {
    /// This process, with mount(2) ([`kmount`]).
    Here,
    /// fusermount3 ([`fusermount`]).
    Helper,
}

impl Mounted {
    /// Detach the mount on `mountpoint`, so that no dead connection is left behind.
    fn detach(self, mountpoint: &Path) {
        match self {
            Mounted::Here => kmount::detach(mountpoint),
            Mounted::Helper => fusermount::unmount(mountpoint),
        }
    }
}

/// Mount with the kernel type `fuse.wring` ([`kmount`]), or, where this process may not
/// call mount(2), through fusermount3 with `helper_options`; then answer INIT.
fn open_session(
    mountpoint: &Path,
    spec: &kmount::MountSpec<'_>,
    helper_options: &str,
    uring: bool,
) -> std::io::Result<(Session, Mounted)> {
    let (fd, mounted) = match kmount::mount(mountpoint, spec)? {
        Some(fd) => (fd, Mounted::Here),
        None => (
            fusermount::mount(mountpoint, helper_options)?,
            Mounted::Helper,
        ),
    };
    Session::new(fd, uring)
        .map(|s| (s, mounted))
        .inspect_err(|_| mounted.detach(mountpoint))
}

/// Drop the volume on this thread once the threads that borrow it for a moment (committer,
/// writeback) have let go: a drop left to one of them could be cut short by the process exit,
/// and the database would not be closed cleanly. The compactor, whose pass can take longer
/// than a moment, is stopped first.
fn close(mut vol: Arc<Volume>) {
    vol.store().stop_compactor();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Arc::try_unwrap(vol) {
            Ok(v) => return drop(v),
            Err(v) if Instant::now() < deadline => {
                vol = v;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return log::warn!("the volume is still in use at exit"),
        }
    }
}

/// The options fusermount3 mounts with (`-o`): the source and type as kmount gives them,
/// `default_permissions`, and the VFS flags of `o` (fusermount3 refuses `suid` and `dev` to
/// anyone but root, as [`check_dev_suid`] does).
fn fusermount_options(o: &Options, source: &str) -> String {
    let mut v = vec![
        format!("fsname={source}"),
        "subtype=wring".to_string(),
        "default_permissions".to_string(),
    ];
    let flags = [
        (o.read_only, "ro", "rw"),
        (o.suid, "suid", "nosuid"),
        (o.dev, "dev", "nodev"),
        (o.exec, "exec", "noexec"),
    ];
    for (on, yes, no) in flags {
        v.push(if on { yes } else { no }.to_string());
    }
    match o.atime {
        crate::Atime::No => v.push("noatime".into()),
        crate::Atime::Strict => v.push("strictatime".into()),
        // The kernel's default for a new mount; fusermount3 (3.14) does not know the word
        // and would refuse the mount.
        crate::Atime::Relatime => {}
    }
    if !o.diratime {
        v.push("nodiratime".into());
    }
    if o.allow_other {
        v.push("allow_other".into());
    }
    v.join(",")
}

/// The store directory a mount source names: `wring:DIR` (as findmnt and /proc/mounts show
/// it) or DIR.
pub fn store_dir(source: &Path) -> PathBuf {
    match source.as_os_str().as_bytes().strip_prefix(b"wring:") {
        Some(rest) => PathBuf::from(std::ffi::OsStr::from_bytes(rest)),
        None => source.to_path_buf(),
    }
}

/// A store is mounted once: a second mount says where the first is (redb's lock would only
/// say "Database already open").
fn check_not_mounted(dir: &Path) -> Result<(), FsError> {
    match holder::mounted_on(dir) {
        Some(at) => Err(FsError::Refused {
            why: format!("{} is already mounted on {at}", dir.display()),
            errno: libc::EBUSY,
        }),
        None => Ok(()),
    }
}

/// A mount point must be a directory and must not hide the store it serves.
fn check_mountpoint(dir: &Path, mountpoint: &Path) -> Result<(), FsError> {
    let what = format!("cannot mount on {}", mountpoint.display());
    let meta = std::fs::metadata(mountpoint).map_err(io(what.clone()))?;
    if !meta.is_dir() {
        return Err(io(what)(std::io::Error::from_raw_os_error(libc::ENOTDIR)));
    }
    if let (Ok(m), Ok(d)) = (mountpoint.canonicalize(), dir.canonicalize()) {
        if d.starts_with(&m) {
            let why = format!("{what}: the store {} is under it", dir.display());
            return Err(io(why)(std::io::Error::from_raw_os_error(libc::EINVAL)));
        }
    }
    Ok(())
}

/// Start `exe args…` (a `mount -f` of this program) in the background and wait until its
/// ready pipe says the mount is live, or why it is not; what it says it waits for meanwhile
/// goes to stderr.
pub fn mount_background(exe: &Path, args: &[OsString]) -> Result<u32, StartError> {
    let mut child = Command::new(exe)
        .args(args)
        .env(NOTIFY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| StartError::Spawn {
            exe: exe.to_path_buf(),
            source,
        })?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let mut out = BufReader::new(out);
        while out.read_line(&mut line).is_ok_and(|n| n > 0) {
            match line.trim_end().strip_prefix(WAITING) {
                Some(why) => eprintln!("wring: {}", why.trim_start()),
                None => break,
            }
            line.clear();
        }
    }
    let line = line.trim_end();
    if line == READY {
        drop(child.stderr.take());
        return Ok(child.id());
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child
        .wait()
        .map_or_else(|e| e.to_string(), |s| s.to_string());
    let failed = line.strip_prefix(FAILED).and_then(|rest| {
        let (errno, message) = rest.trim_start().split_once(' ')?;
        Some(StartError::Failed {
            errno: errno.parse().ok()?,
            message: message.to_string(),
        })
    });
    Err(failed.unwrap_or(StartError::Exited { status, stderr }))
}

fn cpath(p: &Path) -> Result<CString, FsError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| FsError::Errno(libc::EINVAL))
}

/// Read an extended attribute of `path` (control attributes included).
pub fn get_xattr(path: &Path, name: &str) -> Result<Vec<u8>, FsError> {
    let p = cpath(path)?;
    let n = CString::new(name).map_err(|_| FsError::Errno(libc::EINVAL))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match rustix::fs::getxattr(p.as_c_str(), n.as_c_str(), &mut buf[..]) {
            Ok(len) => {
                buf.truncate(len);
                return Ok(buf);
            }
            Err(Errno::RANGE) if buf.len() < 1 << 26 => buf.resize(buf.len() * 4, 0),
            Err(errno) => {
                return Err(FsError::Io {
                    what: format!("{name} on {}", path.display()),
                    source: errno.into(),
                })
            }
        }
    }
}

/// Set an extended attribute of `path`.
pub fn set_xattr(path: &Path, name: &str, value: &[u8]) -> Result<(), FsError> {
    let p = cpath(path)?;
    let n = CString::new(name).map_err(|_| FsError::Errno(libc::EINVAL))?;
    rustix::fs::setxattr(p.as_c_str(), n.as_c_str(), value, XattrFlags::empty()).map_err(|errno| {
        FsError::Io {
            what: format!("setting {name} on {}", path.display()),
            source: errno.into(),
        }
    })
}

/// Change options on a live mount; the text is checked here first so errors name the option.
///
/// The VFS flags (ro, nosuid, nodev, noexec, the atime options) are the kernel's to enforce
/// on the mount and are changed here, around the daemon's part, because the daemon cannot:
/// a remount to `ro` fails with EBUSY while a writer holds the mount, and the setxattr that
/// reaches the daemon is one. So: a mount the kernel has read-only is made rw first (the
/// daemon's store, still read-only, refuses writes meanwhile); the daemon applies the options
/// (going read-only it writes everything back and makes it durable first); then the kernel's
/// flags are set as the options say. Changing the kernel's flags needs root (CAP_SYS_ADMIN);
/// without it a mount fusermount3 made keeps its flags, and the daemon alone refuses writes
/// when read-only.
pub fn remount(mountpoint: &Path, options: &str) -> Result<String, FsError> {
    if Options::parse(options)?.allow_other {
        return Err(crate::options::OptionError::MountOnly("allow_other".into()).into());
    }
    let live = String::from_utf8_lossy(&get_xattr(mountpoint, OPTIONS_XATTR)?).into_owned();
    let old = Options::parse(&live)?;
    let new = old.apply(options)?;
    // The daemon refuses it too, but only an errno comes back through the attribute.
    if new.metrics != old.metrics {
        return Err(crate::options::OptionError::MountOnly("metrics".into()).into());
    }
    let flags = vfs_flags(&new);
    let rdonly = rustix::mount::MountFlags::RDONLY;
    let may = rustix::process::geteuid().is_root();
    let kernel = |f| {
        kmount::remount(mountpoint, f).map_err(|e| FsError::Refused {
            why: format!("remounting {}: {e}", mountpoint.display()),
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        })
    };
    if old.read_only && may {
        // rw first: the setxattr below cannot reach the daemon through a read-only mount.
        kernel(flags.difference(rdonly))?;
    }
    // Everything but ro: the daemon takes it while the mount is writable.
    let text = match new.read_only && !old.read_only {
        true => format!("{options},rw"),
        false => options.to_string(),
    };
    let applied = set_xattr(mountpoint, OPTIONS_XATTR, text.as_bytes());
    if let Err(e) = applied {
        if old.read_only && may {
            let _ = kernel(vfs_flags(&old));
        }
        if old.read_only && !new.read_only && e.errno() == libc::EROFS {
            return Err(FsError::Refused {
                why: format!(
                    "{} was mounted read-only, its store opened without writing to its files \
                     (as on read-only media): unmount it and mount it rw",
                    mountpoint.display()
                ),
                errno: libc::EROFS,
            });
        }
        return Err(e);
    }
    if may {
        // Going read-only, the kernel writes its dirty pages back to the still writable
        // daemon first, and refuses (EBUSY) while a file is open for writing.
        kernel(flags)?;
    }
    if new.read_only && !old.read_only {
        // The last step: everything durable, then the daemon's store takes no commit.
        get_xattr(mountpoint, crate::READ_ONLY_XATTR)?;
    }
    Ok(String::from_utf8_lossy(&get_xattr(mountpoint, OPTIONS_XATTR)?).into_owned())
}

/// The live options and statistics of a mount.
pub fn status(mountpoint: &Path) -> Result<String, FsError> {
    Ok(String::from_utf8_lossy(&get_xattr(mountpoint, STATUS_XATTR)?).into_owned())
}

/// Flush everything, unmount, and wait for the daemon to finish. Only a wring mount (a live
/// one, or one whose daemon died); an error from the final flush is reported after unmounting.
pub fn umount(mountpoint: &Path) -> Result<(), FsError> {
    let what = format!("unmounting {}", mountpoint.display());
    let canon = canonical_mountpoint(mountpoint);
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    match bdi::fs_of(&info, &canon) {
        Some((t, src)) if t.starts_with("fuse") && src.starts_with("wring:") => {}
        Some((t, src)) => {
            let why = format!("{what}: it is a {t} mount of {src}, not wring's");
            return Err(io(why)(einval()));
        }
        None => return Err(io(format!("{what}: nothing is mounted there"))(einval())),
    }
    let pid: Option<i32> = get_xattr(mountpoint, PID_XATTR)
        .ok()
        .and_then(|v| String::from_utf8_lossy(&v).parse().ok());
    let flushed = match pid {
        // A dead daemon has nothing left to flush.
        None => Ok(()),
        Some(_) => sync(mountpoint),
    };
    detach(mountpoint, &what)?;
    if let Some(pid) = pid {
        wait_exit(pid, &what)?;
    }
    flushed.map_err(|e| {
        io(format!("{what}: the final flush failed"))(std::io::Error::other(e.to_string()))
    })
}

/// The absolute path mountinfo lists for `mountpoint`; a mount whose daemon died cannot be
/// resolved itself (ENOTCONN), so its parent is.
fn canonical_mountpoint(mountpoint: &Path) -> std::path::PathBuf {
    mountpoint.canonicalize().unwrap_or_else(|_| {
        match (mountpoint.parent(), mountpoint.file_name()) {
            (Some(p), Some(n)) => {
                let p = if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                };
                p.canonicalize()
                    .map_or(mountpoint.to_path_buf(), |p| p.join(n))
            }
            _ => mountpoint.to_path_buf(),
        }
    })
}

fn einval() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::EINVAL)
}

/// syncfs (the kernel's dirty pages go to the daemon), then the daemon's durable commit: what
/// sync(1) gives on btrfs. syncfs alone does not reach a FUSE daemon (the kernel sends
/// FUSE_SYNCFS to virtiofs only), so after it the data may still wait for the 5 s commit.
pub fn sync(mountpoint: &Path) -> Result<(), FsError> {
    if let Ok(f) = std::fs::File::open(mountpoint) {
        use std::os::fd::AsRawFd;
        // SAFETY: syncfs on an open descriptor: writes back the kernel's dirty pages.
        unsafe { libc::syncfs(f.as_raw_fd()) };
    }
    get_xattr(mountpoint, SYNC_XATTR).map(|_| ())
}

/// `fusermount3 -u`, or `umount` when that is not available (root).
fn detach(mountpoint: &Path, what: &str) -> Result<(), FsError> {
    let out = Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .output();
    if matches!(&out, Ok(o) if o.status.success()) {
        return Ok(());
    }
    let o = Command::new("umount")
        .arg(mountpoint)
        .output()
        .map_err(io("running umount"))?;
    if o.status.success() {
        return Ok(());
    }
    let first = match out {
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    let second = String::from_utf8_lossy(&o.stderr).trim().to_string();
    Err(io(what.to_string())(std::io::Error::other(format!(
        "{first}; {second}"
    ))))
}

/// Wait (up to 2 minutes) for the daemon to finish its final commit and exit.
fn wait_exit(pid: i32, what: &str) -> Result<(), FsError> {
    let start = Instant::now();
    // SAFETY: kill with signal 0 only probes whether the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid) {
        if start.elapsed() >= Duration::from_secs(120) {
            let why = format!("{what}: unmounted, but daemon {pid} has not exited after 2 minutes (its final commit may still be running)");
            return Err(io(why)(std::io::Error::from_raw_os_error(libc::ETIMEDOUT)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Whether `pid` has exited and waits to be reaped by its parent.
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}
