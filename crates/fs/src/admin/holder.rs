//! Who holds a store, and waiting for it to let go. A mount daemon keeps its store's database
//! locked (redb's lock: "Database already open") until its final commit is written, and after
//! a plain `umount MNT` that is after the kernel's umount(2) has returned: a mount, an fsck or
//! a repair started at once would meet the lock. They wait for it instead, up to [`WAIT`],
//! saying once why they wait, and then fail naming the process that still holds the store.
//!
//! Why the daemon cannot give the store up before umount(2) returns: the kernel sends
//! FUSE_DESTROY, and waits for its answer, only when `fc->destroy` is set, which
//! fs/fuse/inode.c does for a `fuseblk` mount (`fuse_init_fs_context`) and virtiofs sets for
//! itself; for a `fuse.wring` mount `fuse_conn_destroy` aborts the connection and umount(2)
//! returns while the daemon is still at work. btrfs's umount returns once `close_ctree` has
//! committed; this wait is what gives `umount MNT && mount …` the same outcome here.
//!
//! Mirrors the block layer's exclusive open of a device (`bdev_file_open_by_path` with a
//! holder, EBUSY while another holds it), with a bounded wait in front of it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::FsError;
use crate::store::DB_FILE;

/// How long a mount, fsck or repair waits for another process to let go of the store.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// How often the lock is tried again while waiting.
const POLL: Duration = Duration::from_millis(20);

/// How long a wait goes unsaid. A daemon's final commit after a plain umount(8) usually ends
/// within it, and `umount && mount` on btrfs prints nothing (fstests' golden output checks
/// that: generic/071, 531, 749); a wait a person would notice is said, naming the holder.
const QUIET: Duration = Duration::from_secs(1);

/// A process with a store's database open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command line, as `ps -o args` shows it.
    pub command: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "process {} ({})", self.pid, self.command)
    }
}

/// Whether `e` is redb's refusal to open a database another handle has open.
pub(crate) fn is_held(e: &FsError) -> bool {
    matches!(e, FsError::Store(redb::Error::DatabaseAlreadyOpen))
}

/// A file as /proc/PID/fdinfo names an open descriptor's: its mount's id and its inode number.
/// Looking a holder up by these reads only text the kernel keeps about each descriptor; it never
/// follows a descriptor to its file, which would be a lookup (and, on another FUSE mount, a
/// request to its daemon) holding that mount busy meanwhile: a `umount` of it at that moment
/// failed with EBUSY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    mnt_id: u64,
    ino: u64,
}

/// The store's database file's [`FileId`], if it exists (statx with STATX_MNT_ID).
fn db_id(dir: &Path) -> Option<FileId> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.join(DB_FILE).as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statx is a valid value of this plain C struct.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_INO | libc::STATX_MNT_ID;
    // SAFETY: `path` is NUL-terminated and `st` is a valid, writable statx.
    let r = unsafe { libc::statx(libc::AT_FDCWD, path.as_ptr(), 0, mask, &mut st) };
    (r == 0 && st.stx_mask & libc::STATX_MNT_ID != 0).then_some(FileId {
        mnt_id: st.stx_mnt_id,
        ino: st.stx_ino,
    })
}

/// The mount id and inode of an open descriptor, from its /proc/PID/fdinfo text.
fn fdinfo_id(text: &str) -> Option<FileId> {
    let field = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
    };
    Some(FileId {
        mnt_id: field("mnt_id")?,
        ino: field("ino")?,
    })
}

/// Whether process `pid` (a /proc entry's name) has the file `id` open.
fn has_open(pid: &str, id: FileId) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_to_string(fd.path())
            .ok()
            .and_then(|t| fdinfo_id(&t))
            .is_some_and(|f| f == id)
    })
}

/// The command line of process `pid`, its arguments joined by spaces; `None` when it has none.
fn command_of(pid: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The processes other than this one that have the database of the store in `dir` open (those
/// this process may look at: all of them for root).
pub(crate) fn holders(dir: &Path) -> Vec<Holder> {
    let Some(id) = db_id(dir) else {
        return Vec::new();
    };
    let me = std::process::id().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Holder> = procs
        .flatten()
        .filter_map(|p| p.file_name().into_string().ok())
        .filter(|pid| pid != &me && pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| has_open(pid, id))
        .filter_map(|pid| {
            // No command line: a process past exit_mm() in do_exit() (its descriptors close
            // next), or a fork of another thread here that has not reached its exec (which
            // closes the copy of our descriptor): neither holds the store for long.
            let command = command_of(&pid)?;
            Some(Holder {
                pid: pid.parse().ok()?,
                command,
            })
        })
        .collect();
    found.sort_by_key(|h| h.pid);
    found
}

/// Whether this process itself has the store's database open (a second open in one process
/// would wait for itself).
fn held_here(dir: &Path) -> bool {
    db_id(dir).is_some_and(|id| has_open("self", id))
}

/// Who holds the store, in words: the processes, or that none is visible from here.
fn named(h: &[Holder]) -> String {
    match h {
        [] => "a process not visible from here".into(),
        [one] => one.to_string(),
        many => many
            .iter()
            .map(Holder::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Run `open` until it stops failing because another process holds the store in `dir`, for up
/// to `limit`. `waiting` is told once, in words, who is waited for, if the wait lasts past
/// [`QUIET`]. After `limit` the error names the holder; a store this very process holds is
/// refused at once.
pub(crate) fn open_waiting<T>(
    dir: &Path,
    limit: Duration,
    waiting: &mut dyn FnMut(&str),
    mut open: impl FnMut() -> Result<T, FsError>,
) -> Result<T, FsError> {
    let start = Instant::now();
    let mut told = false;
    loop {
        let e = match open() {
            Err(e) if is_held(&e) => e,
            other => return other,
        };
        if held_here(dir) {
            return Err(refused(
                dir,
                "this process, which has it open already".into(),
                e,
            ));
        }
        if start.elapsed() >= limit {
            let who = format!(
                "{} after waiting {} s",
                named(&holders(dir)),
                limit.as_secs()
            );
            return Err(refused(dir, who, e));
        }
        if !told && start.elapsed() >= QUIET {
            told = true;
            waiting(&format!(
                "{} is in use by {}: waiting up to {} s for it to close the store (a mount \
                 daemon writes its final commit after umount returns)",
                dir.display(),
                named(&holders(dir)),
                limit.as_secs()
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// The error for a store still held by `who`.
fn refused(dir: &Path, who: String, e: FsError) -> FsError {
    FsError::Refused {
        why: format!(
            "{} is in use by {who} ({e}): a mount daemon still closing it, an fsck, or a mount \
             elsewhere (one detached with umount -l lives on until its last open file is closed)",
            dir.display()
        ),
        errno: libc::EBUSY,
    }
}

/// Where the store in `dir` is mounted, from this mount namespace's mountinfo.
pub(crate) fn mounted_on(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let source = format!("wring:{}", dir.display());
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    super::kmount::mounted_at(&info, &source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("wring-holder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A store held by another process is waited for, and the error after the limit names
    /// that process; one this process holds is refused at once, without waiting.
    #[test]
    fn an_fdinfo_text_names_its_mount_and_inode() {
        let text = "pos:\t0\nflags:\t0100002\nmnt_id:\t31\nino:\t4242\n";
        assert_eq!(
            fdinfo_id(text),
            Some(FileId {
                mnt_id: 31,
                ino: 4242
            })
        );
        assert_eq!(fdinfo_id("pos:\t0\nflags:\t02\nmnt_id:\t31\n"), None);
    }

    /// The database this process opens is found among its own descriptors by fdinfo alone.
    #[test]
    fn an_open_database_is_found_by_its_fdinfo() {
        let dir = scratch("fdinfo");
        Store::mkfs(&dir).unwrap();
        assert!(!held_here(&dir));
        let f = std::fs::File::open(dir.join(DB_FILE)).unwrap();
        assert!(held_here(&dir));
        drop(f);
        assert!(!held_here(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn waits_for_another_holder_and_names_it() {
        let dir = scratch("other");
        Store::mkfs(&dir).unwrap();
        // Another process with the database open (and no lock: what is waited for is
        // redb's refusal, faked here, and who has the file open).
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::fs::File::open(dir.join(DB_FILE)).unwrap())
            .spawn()
            .unwrap();
        let mut told = Vec::new();
        let start = Instant::now();
        let e = open_waiting(
            &dir,
            Duration::from_millis(1500),
            &mut |m| told.push(m.to_string()),
            || Err::<(), _>(FsError::Store(redb::Error::DatabaseAlreadyOpen)),
        )
        .unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(1500));
        let _ = child.kill();
        let _ = child.wait();
        let pid = format!("process {} (sleep 30)", child.id());
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(
            told[0].contains(&pid) && told[0].contains("waiting up to"),
            "{told:?}"
        );
        assert!(e.to_string().contains(&pid), "{e}");
        assert_eq!(e.errno(), libc::EBUSY);

        let _held = std::fs::File::open(dir.join(DB_FILE)).unwrap();
        let start = Instant::now();
        let e = open_waiting(&dir, WAIT, &mut |_| panic!("waited"), || {
            Err::<(), _>(FsError::Store(redb::Error::DatabaseAlreadyOpen))
        })
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(e.to_string().contains("this process"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Once the holder lets go the open goes through, and a wait shorter than [`QUIET`] goes
    /// unsaid; other errors pass at once.
    #[test]
    fn opens_once_let_go_and_passes_other_errors() {
        let dir = scratch("let-go");
        Store::mkfs(&dir).unwrap();
        let mut tries = 0;
        let r = open_waiting(&dir, WAIT, &mut |m| panic!("said {m}"), || {
            tries += 1;
            match tries {
                1..3 => Err(FsError::Store(redb::Error::DatabaseAlreadyOpen)),
                _ => Ok(tries),
            }
        });
        assert_eq!(r.unwrap(), 3);
        let e = open_waiting(&dir, WAIT, &mut |_| panic!("waited"), || {
            Err::<(), _>(FsError::Errno(libc::ENOENT))
        });
        assert_eq!(e.unwrap_err().errno(), libc::ENOENT);
        let _ = std::fs::remove_dir_all(dir);
    }
}
