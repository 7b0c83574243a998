//! The two sides: a wring mount (a store, its daemon, a mount point; mounted, synced,
//! unmounted, killed, checked with fsck) and the oracle, a kernel filesystem (tmpfs, or btrfs
//! on a loop-mounted image, or a directory the caller gives).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use wring_btrfs::scratch::ScratchFs;

use crate::exec::{Global, Norm, Outcome, Value};
use crate::Error;

/// How the wring daemon is started in the foreground (it prints `ready` once mounted when
/// [`wring_fs::daemon::NOTIFY_ENV`] is set).
#[derive(Clone, Debug)]
pub enum Daemon {
    /// `wring-fsd STORE MNT OPTIONS`.
    Fsd(PathBuf),
    /// `wring mount -f -o OPTIONS STORE MNT`.
    Wring(PathBuf),
}

/// A wring store mounted by a daemon this process started.
pub struct Mount {
    /// The store directory.
    pub store: PathBuf,
    /// The mount point.
    pub mnt: PathBuf,
    daemon: Daemon,
    options: String,
    child: Option<Child>,
}

impl Mount {
    /// A new store in `base/store`, mounted on `base/mnt` with `options` and `allow_other`
    /// (the tester's unprivileged calls are another user's, whom FUSE keeps out without it).
    pub fn new(base: &Path, daemon: Daemon, options: &str) -> Result<Mount, Error> {
        let options = match options.is_empty() {
            true => "allow_other".to_string(),
            false => format!("allow_other,{options}"),
        };
        let store = base.join("store");
        let mnt = base.join("mnt");
        let _ = std::fs::remove_dir_all(&store);
        std::fs::create_dir_all(&mnt).map_err(Error::io("making the mount point"))?;
        wring_fs::store::Store::mkfs(&store).map_err(|e| Error::Setup(format!("mkfs: {e}")))?;
        let mut m = Mount {
            store,
            mnt,
            daemon,
            options,
            child: None,
        };
        m.mount()?;
        Ok(m)
    }

    /// Start the daemon on the store; returns once the mount is live.
    pub fn mount(&mut self) -> Result<(), Error> {
        let mut cmd = match &self.daemon {
            Daemon::Fsd(exe) => {
                let mut c = Command::new(exe);
                c.arg(&self.store).arg(&self.mnt).arg(&self.options);
                c
            }
            Daemon::Wring(exe) => {
                let mut c = Command::new(exe);
                c.args(["mount", "-f", "-o", &self.options])
                    .arg(&self.store)
                    .arg(&self.mnt);
                c
            }
        };
        let mut child = cmd
            .env(wring_fs::daemon::NOTIFY_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Error::io("starting the wring daemon"))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        if line.trim() == "ready" {
            // Its log is not read: let it go nowhere rather than fill a pipe.
            drop(child.stderr.take());
            self.child = Some(child);
            return Ok(());
        }
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = child.wait();
        Err(Error::Setup(format!(
            "the mount did not start: {} {}",
            line.trim(),
            err.trim()
        )))
    }

    /// Everything durable (syncfs, then the daemon's durable commit).
    pub fn sync(&self) -> Result<(), Error> {
        wring_fs::daemon::sync(&self.mnt).map_err(|e| Error::Setup(format!("sync: {e}")))
    }

    /// A clean unmount: the final commit, then the daemon's exit.
    pub fn umount(&mut self) -> Result<(), Error> {
        let r = wring_fs::daemon::umount(&self.mnt);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
        r.map_err(|e| Error::Setup(format!("umount: {e}")))
    }

    /// The daemon's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// kill -9 the daemon and clear the dead mount.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        detach(&self.mnt);
    }

    /// `wring fsck` of the (unmounted) store: the problems it found.
    pub fn fsck(&self) -> Result<Vec<String>, Error> {
        let r =
            wring_fs::fsck::fsck(&self.store).map_err(|e| Error::Setup(format!("fsck: {e}")))?;
        Ok(r.problems)
    }

    /// Unmount cleanly, fsck, mount again: the problems fsck found.
    pub fn cycle(&mut self) -> Result<Vec<String>, Error> {
        self.umount()?;
        let problems = self.fsck()?;
        self.mount()?;
        Ok(problems)
    }

    /// What the global operations do on this mount.
    pub fn global(&self) -> MountGlobal {
        MountGlobal {
            mnt: self.mnt.clone(),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = wring_fs::daemon::umount(&self.mnt);
            self.kill();
        }
    }
}

/// `umount -l` of a mount point (a dead FUSE mount answers ENOTCONN to everything).
fn detach(mnt: &Path) {
    let _ = Command::new("umount").arg("-l").arg(mnt).output();
}

/// The mount's global operations: syncfs, then the daemon's durable commit.
pub struct MountGlobal {
    mnt: PathBuf,
}

impl Global for MountGlobal {
    fn sync(&self, _root: &Path) -> Outcome {
        match wring_fs::daemon::sync(&self.mnt) {
            Ok(()) => Ok(Value::Done),
            Err(e) => Err(e.errno()),
        }
    }
}

/// Which kernel filesystem answers for the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OracleKind {
    /// A tmpfs mounted for the run.
    Tmpfs,
    /// btrfs on a loop-mounted image made for the run.
    Btrfs,
    /// A directory the caller gives (on whatever filesystem it is).
    Dir(PathBuf),
}

/// The oracle: a kernel filesystem's directory the tester works in (tmpfs or btrfs mounted
/// `nosuid,nodev`, as wring mounts by default).
pub struct Oracle {
    /// Where the tester works.
    pub root: PathBuf,
    /// How its stat results compare with the mount's.
    pub norm: Norm,
    /// Whether it has fallocate's FALLOC_FL_ZERO_RANGE (tmpfs answers EOPNOTSUPP; btrfs,
    /// like wring, has it).
    pub zero_range: bool,
    /// Whether it answers BTRFS_IOC_DEFRAG_RANGE (btrfs).
    pub defrag: bool,
    /// Whether a hole punch may leave its times alone (btrfs; see
    /// [`crate::gen::Pool::touch_after_punch`]).
    pub punch_keeps_times: bool,
    mounted: Option<PathBuf>,
    /// The btrfs scratch filesystem, unmounted and deleted on drop.
    _btrfs: Option<ScratchFs>,
}

impl Oracle {
    /// Make the oracle of `kind` under `base`.
    pub fn new(base: &Path, kind: &OracleKind) -> Result<Oracle, Error> {
        let mnt = base.join("oracle");
        std::fs::create_dir_all(&mnt).map_err(Error::io("making the oracle's mount point"))?;
        match kind {
            OracleKind::Tmpfs => {
                // wring's own mount defaults are nosuid,nodev: the oracle's are the same.
                let opts = "size=2g,mode=755,nosuid,nodev";
                run("mount", &["-t", "tmpfs", "-o", opts, "tmpfs"], &mnt)?;
                Ok(Oracle {
                    root: mnt.clone(),
                    norm: Norm { dir_nlink: true },
                    zero_range: false,
                    defrag: false,
                    punch_keeps_times: false,
                    mounted: Some(mnt),
                    _btrfs: None,
                })
            }
            OracleKind::Btrfs => {
                // wring's own mount defaults are nosuid,nodev: the oracle's are the same.
                let fs = ScratchFs::with_size("nosuid,nodev", 4 << 30)
                    .map_err(|e| Error::Setup(format!("btrfs for the oracle: {e}")))?;
                Ok(Oracle {
                    root: fs.path().to_path_buf(),
                    norm: Norm { dir_nlink: false },
                    zero_range: true,
                    defrag: true,
                    punch_keeps_times: true,
                    mounted: None,
                    _btrfs: Some(fs),
                })
            }
            OracleKind::Dir(d) => Ok(Oracle {
                root: d.clone(),
                norm: Norm { dir_nlink: false },
                zero_range: true,
                defrag: false,
                punch_keeps_times: true,
                mounted: None,
                _btrfs: None,
            }),
        }
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        if let Some(m) = &self.mounted {
            // A loop mount's device goes with it (mount -o loop sets autoclear).
            let _ = Command::new("umount").arg(m).output();
        }
    }
}

/// Run `prog args… last`, failing with its error output.
fn run(prog: &str, args: &[&str], last: &Path) -> Result<(), Error> {
    let out = Command::new(prog)
        .args(args)
        .arg(last)
        .output()
        .map_err(Error::io(format!("running {prog}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::Setup(format!(
        "{prog} {} {}: {}",
        args.join(" "),
        last.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}
