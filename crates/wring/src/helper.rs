//! `mount.fuse.wring`: the mount(8) helper, the same binary under another name (the package
//! links /usr/sbin/mount.fuse.wring to it). mount(8) runs `/sbin/mount.TYPE` for `-t TYPE`
//! and fstab's type field, so `mount -t fuse.wring DIR MNT -o compress=zstd:3`, `mount -a` and
//! systemd's mount units reach `wring mount` without fuse3's generic mount.fuse3, which would
//! run `wring DIR MNT -o …` instead.
//!
//! The interface is mount(8)'s EXTERNAL HELPERS section:
//! `mount.TYPE SOURCE DIR [-sfnv] [-N NAMESPACE] [-o OPTIONS] [-t TYPE.SUBTYPE]`.
//! mount(8) hands on its own and systemd's options too (nofail, _netdev, …); wring-fs accepts
//! and ignores those (crates/fs/src/options.rs), so fstab lines need nothing special.
//!
//! Exit status as mount(8)'s EXIT STATUS (which mount passes on from its helper): 1 for an
//! incorrect invocation (arguments mount(8) would not send), 32 for a mount failure, a bad
//! `-o` option included (the kernel's "bad option" is a mount failure for mount(8) too).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The names under which `wring` acts as mount(8)'s helper.
pub const NAMES: [&str; 2] = ["mount.fuse.wring", "mount.wring"];

/// The FUSE kernel's mount options mountinfo lists for a wring mount (and `allow_other`,
/// which a remount cannot change): what mount(8) hands back on a remount, left out of it.
const KERNEL_OPTIONS: [&str; 8] = [
    "user_id",
    "group_id",
    "default_permissions",
    "fd",
    "rootmode",
    "max_read",
    "blksize",
    "allow_other",
];

/// mount(8)'s exit status for an incorrect invocation.
pub const EXIT_USAGE: i32 = 1;
/// mount(8)'s exit status for a mount failure.
pub const EXIT_MOUNT_FAILED: i32 = 32;

/// Arguments mount(8) would not have sent: exit status [`EXIT_USAGE`].
#[derive(Debug)]
pub struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn usage(msg: String) -> anyhow::Error {
    anyhow::Error::new(Usage(msg))
}

/// The exit status for a failed [`run`], as mount(8) documents it.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<Usage>().is_some() {
        EXIT_USAGE
    } else {
        EXIT_MOUNT_FAILED
    }
}

/// A helper invocation, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct MountArgs {
    /// The store directory (fstab's first field).
    pub source: PathBuf,
    /// The mount point.
    pub target: PathBuf,
    /// `-o` text, comma-separated, in order.
    pub options: Vec<String>,
    /// `-f`: mount(8)'s fake mode; do everything but mount.
    pub fake: bool,
}

/// Parse `SOURCE DIR [-sfnv] [-N NS] [-o OPTS] [-t TYPE]` (options may come first too).
pub fn parse(args: &[OsString]) -> Result<MountArgs> {
    let mut positional = Vec::new();
    let mut options = Vec::new();
    let mut fake = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        match s.as_ref() {
            "-o" | "-t" | "-N" => {
                let v = it.next().ok_or_else(|| {
                    usage(format!("{s} needs a value (mount(8) helper arguments)"))
                })?;
                if s == "-o" {
                    options.push(v.to_string_lossy().into_owned());
                }
            }
            _ if s.starts_with("-o") && s.len() > 2 => options.push(s[2..].to_string()),
            _ if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        'f' => fake = true,
                        's' | 'n' | 'v' => {}
                        _ => {
                            return Err(usage(format!(
                                "unknown flag -{c}: mount(8) helpers take -s, -f, -n, -v, -N, \
                                 -o and -t"
                            )))
                        }
                    }
                }
            }
            _ => positional.push(PathBuf::from(a)),
        }
    }
    let [source, target]: [PathBuf; 2] = positional.try_into().map_err(|p: Vec<PathBuf>| {
        usage(format!(
            "mount.fuse.wring takes the store directory and the mount point, got {} path(s); \
             use: mount -t fuse.wring DIR MOUNTPOINT [-o OPTIONS]",
            p.len()
        ))
    })?;
    Ok(MountArgs {
        source,
        target,
        options,
        fake,
    })
}

/// Mount as `wring mount` does (in the background, returning once the mount is live). The
/// store's path is made absolute, so findmnt and /proc/mounts name it (`wring:/srv/store`)
/// the same way whatever the directory mount(8) ran in.
pub fn run(args: &[OsString]) -> Result<()> {
    let m = parse(args)?;
    // `wring:DIR`, as findmnt shows the source, is DIR.
    let source = wring_fs::daemon::store_dir(&m.source);
    let source =
        std::path::absolute(&source).with_context(|| format!("resolving {}", source.display()))?;
    let source = source.canonicalize().unwrap_or(source);
    if m.fake {
        wring_fs::Options::parse(&m.options.join(","))?;
        return Ok(());
    }
    // `mount -o remount,…`: the live mount takes the options (ro and rw included), as
    // `wring remount` gives them.
    let items = || m.options.iter().flat_map(|o| o.split(',')).map(str::trim);
    if items().any(|o| o == "remount") {
        // mount(8) sends the mount's options as /proc/self/mountinfo lists them, then the
        // new ones: the kernel's own FUSE options (and allow_other, which only a mount sets)
        // are not the daemon's to change.
        let kernel = |o: &str| KERNEL_OPTIONS.contains(&o.split('=').next().unwrap_or(o));
        let text: Vec<&str> = items().filter(|o| !kernel(o)).collect();
        wring_fs::daemon::remount(&m.target, &text.join(","))?;
        return Ok(());
    }
    // mount(8) cannot tell that an fstab line is mounted already: the kernel lists a wring
    // mount as type `fuse` with source `wring:DIR` (fuser, which served wring once, mounted
    // `fuse`, not `fuse.wring`).
    // Mounting the same store on the same place again is what `mount -a` asks for then, and
    // it is already done.
    let target = m.target.canonicalize().unwrap_or_else(|_| m.target.clone());
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    if is_mounted(&info, &source, &target) {
        log::info!(
            "{} is already mounted on {}",
            source.display(),
            target.display()
        );
        return Ok(());
    }
    spare_from_sigterm();
    crate::cmd::fs::run(crate::cmd::fs::Command::Mount {
        options: m.options,
        foreground: false,
        objects: Default::default(),
        dir: source,
        mountpoint: m.target,
    })
}

/// Ignore SIGTERM here and so in the daemon, which inherits it (an ignored signal stays ignored
/// across exec). systemd stops a mount unit by unmounting it and then sends SIGTERM to what is
/// left in the unit: the daemon, still writing its final commit, which SIGTERM would cut short.
/// Ignoring it, the daemon finishes and exits by itself once unmounted, as it does after a
/// plain `umount`; what stops it is unmounting (or SIGKILL).
fn spare_from_sigterm() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler and touches no
    // memory; this process is single-threaded here.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
}

/// Whether mountinfo's text lists a wring mount of `source` on `target`.
pub fn is_mounted(mountinfo: &str, source: &Path, target: &Path) -> bool {
    let want = format!("wring:{}", source.display());
    wring_fs::kmount::mounted_at(mountinfo, &want).is_some_and(|at| Path::new(&at) == target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn mount8_helper_arguments() {
        let m = parse(&args(
            "/srv/s /mnt/w -o rw,compress=zstd:3,nofail -t fuse.wring",
        ))
        .unwrap();
        assert_eq!(m.source, PathBuf::from("/srv/s"));
        assert_eq!(m.target, PathBuf::from("/mnt/w"));
        assert_eq!(m.options, ["rw,compress=zstd:3,nofail"]);
        assert!(!m.fake);
        let m = parse(&args("-sfnv -N 1234 -ostreams=2 /srv/s /mnt/w")).unwrap();
        assert!(m.fake);
        assert_eq!(m.options, ["streams=2"]);
        assert!(parse(&args("/srv/s")).is_err());
        assert!(parse(&args("/srv/s /mnt/w /x")).is_err());
        assert!(parse(&args("/srv/s /mnt/w -o")).is_err());
        assert!(parse(&args("-x /srv/s /mnt/w")).is_err());
    }

    #[test]
    fn exit_status_is_mount8s() {
        for bad in [
            "/srv/s",
            "/srv/s /mnt/w /x",
            "/srv/s /mnt/w -o",
            "-x /srv/s /mnt/w",
        ] {
            let e = parse(&args(bad)).unwrap_err();
            assert_eq!(exit_code(&e), EXIT_USAGE, "{bad}: {e}");
        }
        // -f: everything but the mount, so a bad option fails here without a store.
        let e = run(&args("/nonexistent/s /nonexistent/m -f -o compress=zstdd")).unwrap_err();
        assert!(e.to_string().contains("zstdd"), "{e}");
        assert_eq!(exit_code(&e), EXIT_MOUNT_FAILED, "{e}");
    }

    #[test]
    fn finds_the_same_store_mounted_on_the_same_place() {
        let info = "27 1 0:25 / / rw - ext4 /dev/sda1 rw\n\
                    44 27 0:40 / /mnt/my\\040w rw,nosuid - fuse wring:/srv/s rw,user_id=0\n";
        let (s, w) = (Path::new("/srv/s"), Path::new("/mnt/my w"));
        assert!(is_mounted(info, s, w));
        assert!(!is_mounted(info, Path::new("/srv/t"), w));
        assert!(!is_mounted(info, s, Path::new("/mnt/my")));
        assert!(!is_mounted(info, Path::new("/dev/sda1"), Path::new("/")));
    }
}
