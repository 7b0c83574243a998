//! A throwaway btrfs: sparse image → mkfs.btrfs → loop device → mount, undone by `Drop`.
//!
//! Mirrors what fstests does for btrfs (a scratch device made with mkfs.btrfs and mounted with
//! the options under test), scaled down to a sparse image file. Production code: the
//! benchmarks' kernel runs (`wring bench kernel`, `recompress`, `fs`) measure the kernel's btrfs
//! on one, and tests use it too. Everything here needs root and the `mkfs.btrfs`, `losetup`,
//! `mount` and `umount` programs (Debian packages `btrfs-progs` and `mount`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::Duration;

/// Why a scratch filesystem could not be set up, checked or taken down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScratchError {
    /// A program could not be started at all.
    #[error("could not run {program}: {source}{hint}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: io::Error,
        /// What to install, when the program is missing.
        hint: &'static str,
    },
    /// A program ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Mounting with the requested options failed (the kernel may not accept them).
    #[error("mounting btrfs with -o {options} failed: {stderr}")]
    Mount {
        /// The options.
        options: String,
        /// What mount printed.
        stderr: String,
    },
    /// A file operation on the scratch area failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
}

/// Size of the sparse image file (1 GiB: roomy, yet only written blocks use disk).
pub const DEFAULT_IMAGE_SIZE: u64 = 1 << 30;

/// Sector size the scratch filesystems use (so LZO is btrfs's LZO_4K framing).
const SECTOR_SIZE: &str = "4096";

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// A mounted scratch btrfs. Dropping it unmounts, detaches the loop device and deletes the
/// image, also when a test panics.
#[derive(Debug)]
pub struct ScratchFs {
    dir: PathBuf,
    image: PathBuf,
    mount_point: PathBuf,
    options: String,
    loop_dev: Option<String>,
    mounted: bool,
}

impl ScratchFs {
    /// Make and mount a fresh btrfs with mount `options` (e.g. `compress-force=zstd:3`; empty
    /// for none).
    pub fn new(options: &str) -> Result<ScratchFs, ScratchError> {
        ScratchFs::with_size(options, DEFAULT_IMAGE_SIZE)
    }

    /// As [`ScratchFs::new`] with an image of `size` bytes.
    pub fn with_size(options: &str, size: u64) -> Result<ScratchFs, ScratchError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wring-btrfs-{}-{id}", std::process::id()));
        let mount_point = dir.join("mnt");
        fs::create_dir_all(&mount_point).map_err(|source| ScratchError::Io {
            what: format!("creating {}", mount_point.display()),
            source,
        })?;
        // From here on, Drop undoes whatever was done.
        let mut scratch = ScratchFs {
            image: dir.join("btrfs.img"),
            dir,
            mount_point,
            options: options.to_string(),
            loop_dev: None,
            mounted: false,
        };
        scratch.make_image(size)?;
        scratch.attach()?;
        scratch.mount()?;
        Ok(scratch)
    }

    /// Where the filesystem is mounted.
    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    /// The mount options it was created with.
    pub fn options(&self) -> &str {
        &self.options
    }

    /// The loop device backing it.
    pub fn device(&self) -> Option<&str> {
        self.loop_dev.as_deref()
    }

    /// Write everything out (`sync -f` on the mount point).
    pub fn sync(&self) -> Result<(), ScratchError> {
        run("sync", &["-f".as_ref(), self.mount_point.as_os_str()]).map(drop)
    }

    /// Unmount and mount again, so later reads come from disk rather than the page cache.
    pub fn remount(&mut self) -> Result<(), ScratchError> {
        self.unmount()?;
        self.mount()
    }

    /// `btrfs scrub start -B`: read every block and check it against its checksum. Returns the
    /// report; an error when scrub failed or found errors.
    pub fn scrub(&self) -> Result<String, ScratchError> {
        let out = run(
            "btrfs",
            &[
                "scrub".as_ref(),
                "start".as_ref(),
                "-B".as_ref(),
                self.mount_point.as_os_str(),
            ],
        )?;
        if !out.contains("no errors found") {
            return Err(ScratchError::Command {
                command: "btrfs scrub start -B".into(),
                status: "errors reported".into(),
                stderr: out,
            });
        }
        Ok(out)
    }

    /// Unmount, run `btrfs check --readonly` on the device, and mount again. Returns check's
    /// output; an error when it found problems.
    pub fn check(&mut self) -> Result<String, ScratchError> {
        self.unmount()?;
        let dev = self.loop_dev.clone().unwrap_or_default();
        let mut cmd = Command::new(program_path("btrfs"));
        cmd.args(["check", "--readonly", &dev]);
        let out = output(cmd, "btrfs");
        self.mount()?;
        let out = out?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return Err(ScratchError::Command {
                command: format!("btrfs check --readonly {dev}"),
                status: out.status.to_string(),
                stderr: text,
            });
        }
        Ok(text)
    }

    fn make_image(&self, size: u64) -> Result<(), ScratchError> {
        let file = fs::File::create(&self.image).map_err(|source| ScratchError::Io {
            what: format!("creating {}", self.image.display()),
            source,
        })?;
        file.set_len(size).map_err(|source| ScratchError::Io {
            what: format!("sizing {}", self.image.display()),
            source,
        })?;
        run(
            "mkfs.btrfs",
            &[
                "-q".as_ref(),
                "-f".as_ref(),
                "-s".as_ref(),
                SECTOR_SIZE.as_ref(),
                self.image.as_os_str(),
            ],
        )
        .map(drop)
    }

    fn attach(&mut self) -> Result<(), ScratchError> {
        let out = run(
            "losetup",
            &["--find".as_ref(), "--show".as_ref(), self.image.as_os_str()],
        )?;
        self.loop_dev = Some(out.trim().to_string());
        Ok(())
    }

    fn mount(&mut self) -> Result<(), ScratchError> {
        let dev = self.loop_dev.clone().unwrap_or_default();
        let mut cmd = Command::new(program_path("mount"));
        cmd.args(["-t", "btrfs"]);
        if !self.options.is_empty() {
            cmd.args(["-o", &self.options]);
        }
        cmd.arg(&dev).arg(&self.mount_point);
        let out = output(cmd, "mount")?;
        if !out.status.success() {
            return Err(ScratchError::Mount {
                options: self.options.clone(),
                stderr: stderr_of(&out),
            });
        }
        self.mounted = true;
        Ok(())
    }

    fn unmount(&mut self) -> Result<(), ScratchError> {
        if !self.mounted {
            return Ok(());
        }
        let mut last = None;
        for attempt in 0..10 {
            if attempt > 0 {
                sleep(Duration::from_millis(100 * attempt));
            }
            match run("umount", &[self.mount_point.as_os_str()]) {
                Ok(_) => {
                    self.mounted = false;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ScratchError::Io {
            what: "umount".into(),
            source: io::Error::other("gave up"),
        }))
    }

    fn detach(&mut self) -> Result<(), ScratchError> {
        let Some(dev) = self.loop_dev.clone() else {
            return Ok(());
        };
        let mut last = None;
        for attempt in 0..10 {
            if attempt > 0 {
                sleep(Duration::from_millis(100 * attempt));
            }
            match run("losetup", &["-d".as_ref(), dev.as_ref()]) {
                Ok(_) => {
                    self.loop_dev = None;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ScratchError::Io {
            what: "losetup -d".into(),
            source: io::Error::other("gave up"),
        }))
    }
}

impl Drop for ScratchFs {
    fn drop(&mut self) {
        if let Err(e) = self.unmount() {
            eprintln!("scratch btrfs: {e}; detaching lazily");
            let _ = run("umount", &["-l".as_ref(), self.mount_point.as_os_str()]);
            self.mounted = false;
        }
        if let Err(e) = self.detach() {
            eprintln!("scratch btrfs: could not detach the loop device: {e}");
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!(
                "scratch btrfs: could not remove {}: {e}",
                self.dir.display()
            );
        }
    }
}

/// Where to find `program`: on PATH, else in the sbin/bin directories (a CI's PATH may lack
/// /usr/sbin, where mkfs.btrfs and losetup live).
fn program_path(program: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    let fallback = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .into_iter()
        .map(PathBuf::from);
    on_path
        .chain(fallback)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| program.into())
}

/// Run a program to completion; stdout on success.
fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<String, ScratchError> {
    let mut cmd = Command::new(program_path(program));
    cmd.args(args);
    let line = format!(
        "{program} {}",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = output(cmd, program)?;
    if !out.status.success() {
        return Err(ScratchError::Command {
            command: line,
            status: out.status.to_string(),
            stderr: stderr_of(&out),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `cmd` to completion; an error only when it cannot start.
fn output(mut cmd: Command, program: &str) -> Result<Output, ScratchError> {
    cmd.output().map_err(|source| ScratchError::Spawn {
        program: program.to_string(),
        hint: match (source.kind(), program) {
            (std::io::ErrorKind::NotFound, "mkfs.btrfs" | "btrfs") => " (install btrfs-progs)",
            (std::io::ErrorKind::NotFound, _) => " (install util-linux/mount)",
            _ => "",
        },
        source,
    })
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}
