//! `wring mkfs|mount|umount|remount|status|property|stat|fsck`: the wring filesystem's
//! commands. Thin: parse, call wring-fs, print.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use wring_fs::{daemon, fsck, store::Store, Options, PROP_XATTR, STAT_XATTR};

/// Filesystem commands (flattened into wring's top level).
#[derive(clap::Subcommand)]
pub enum Command {
    /// Create a wring filesystem store in DIR
    Mkfs {
        /// Store directory (created if missing)
        dir: PathBuf,
    },
    /// Mount the store DIR on MOUNTPOINT (in the background unless -f)
    Mount {
        /// Options, comma-separated, -o may repeat (later ones win). btrfs's spelling:
        /// compress=ALG[:LEVEL] (zstd:-15..22, default 3; zlib:1..9, default 3; lzo; lz4;
        /// lz4hc:1..12), compress-force=ALG[:LEVEL], compress=no; and wring's:
        /// max_extent=SIZE (4K..4M, default 128K), streams=N (1..1024), reclaim=SECONDS,
        /// workspace_mem=BYTES|unlimited, page_pool=PAGES (0..1048576), threads=N (1..64),
        /// allow_other
        #[arg(short = 'o')]
        options: Vec<String>,
        /// Stay in the foreground
        #[arg(short = 'f')]
        foreground: bool,
        /// Store directory
        dir: PathBuf,
        /// Where to mount it
        mountpoint: PathBuf,
    },
    /// Flush everything and unmount
    Umount {
        /// The mount point
        mountpoint: PathBuf,
    },
    /// Change options on a live mount
    Remount {
        /// Options to change (as for mount, except allow_other), -o may repeat
        #[arg(short = 'o', required = true)]
        options: Vec<String>,
        /// The mount point
        mountpoint: PathBuf,
    },
    /// Live options (as /proc/mounts shows btrfs's) and engine statistics of a mount
    Status {
        /// The mount point
        mountpoint: PathBuf,
    },
    /// Get or set the per-file/per-directory compression property
    #[command(subcommand)]
    Property(PropertyCommand),
    /// compsize's report for files under a mount, with the per-level breakdown
    Stat {
        /// Files or directories on a wring mount
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Check a store that is not mounted
    Fsck {
        /// Store directory
        dir: PathBuf,
    },
}

/// `wring property`.
#[derive(clap::Subcommand)]
pub enum PropertyCommand {
    /// Show a property
    Get {
        /// File or directory
        path: PathBuf,
        /// Property name (only `compression`)
        #[arg(default_value = "compression")]
        name: String,
    },
    /// Set a property (`none` stores data uncompressed; an empty value removes it)
    Set {
        /// File or directory
        path: PathBuf,
        /// Property name (only `compression`)
        name: String,
        /// Value: zstd:9, zlib, lzo, none, …
        value: String,
    },
}

fn check_prop(name: &str) -> Result<()> {
    if name != "compression" {
        bail!("unknown property '{name}': accepted is compression");
    }
    Ok(())
}

/// Run a filesystem command.
pub fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Mkfs { dir } => {
            Store::mkfs(&dir).with_context(|| format!("mkfs {}", dir.display()))?;
            println!("created a wring store in {}", dir.display());
        }
        Command::Mount {
            options,
            foreground,
            dir,
            mountpoint,
        } => {
            let options = options.join(",");
            Options::parse(&options)?;
            if foreground {
                daemon::mount_foreground(&dir, &mountpoint, &options)?;
            } else {
                let exe = std::env::current_exe().context("finding the wring executable")?;
                let args: Vec<OsString> = vec![
                    "mount".into(),
                    "-f".into(),
                    "-o".into(),
                    options.into(),
                    dir.into_os_string(),
                    mountpoint.into_os_string(),
                ];
                daemon::mount_background(&exe, &args).map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Command::Umount { mountpoint } => daemon::umount(&mountpoint)?,
        Command::Remount {
            options,
            mountpoint,
        } => {
            println!("{}", daemon::remount(&mountpoint, &options.join(","))?);
        }
        Command::Status { mountpoint } => print!("{}", daemon::status(&mountpoint)?),
        Command::Property(PropertyCommand::Get { path, name }) => {
            check_prop(&name)?;
            match daemon::get_xattr(&path, PROP_XATTR) {
                Ok(v) => println!("compression={}", String::from_utf8_lossy(&v)),
                Err(wring_fs::FsError::Io { source, .. })
                    if source.raw_os_error() == Some(libc::ENODATA) =>
                {
                    println!("compression=")
                }
                Err(e) => return Err(e.into()),
            }
        }
        Command::Property(PropertyCommand::Set { path, name, value }) => {
            check_prop(&name)?;
            if !value.is_empty() {
                wring_fs::options::parse_spec("compression", &value)?;
            }
            daemon::set_xattr(&path, PROP_XATTR, value.as_bytes())?;
        }
        Command::Stat { paths } => {
            for p in paths {
                let v = match daemon::get_xattr(&p, STAT_XATTR) {
                    // Only a wring mount answers its control attribute.
                    Err(wring_fs::FsError::Io { source, .. })
                        if source.raw_os_error() == Some(libc::ENODATA)
                            || source.raw_os_error() == Some(libc::EOPNOTSUPP) =>
                    {
                        anyhow::bail!("{} is not on a wring mount", p.display())
                    }
                    r => r.with_context(|| format!("wring stat {}", p.display()))?,
                };
                print!("{}", String::from_utf8_lossy(&v));
            }
        }
        Command::Fsck { dir } => {
            if let Some(why) = wring_fs::store::exposure(&dir) {
                eprintln!(
                    "warning: the store {}: {why} (a mount refuses it; fsck only reads it)",
                    dir.display()
                );
            }
            let r = fsck::fsck(&dir)?;
            println!("checked {} inodes, {} extents", r.inodes, r.extents);
            for n in &r.notes {
                println!("note: {n}");
            }
            for p in &r.problems {
                println!("problem: {p}");
            }
            if !r.problems.is_empty() {
                bail!("{} problem(s) found in {}", r.problems.len(), dir.display());
            }
            println!("no problems found");
        }
    }
    Ok(())
}
