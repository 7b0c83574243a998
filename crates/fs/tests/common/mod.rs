//! A real mount for tests: a store and a mount point under /tmp, the daemon as a child process,
//! always unmounted and killed on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[allow(unused_imports)]
pub use wring_testing::require_root;

pub mod ledger;
pub mod lockstep;

pub struct Mount {
    pub base: PathBuf,
    pub store: PathBuf,
    pub mnt: PathBuf,
    pub child: Option<Child>,
    /// What the daemons started so far said they waited for (`waiting` lines of the ready
    /// pipe: a store another process still held).
    pub waits: Vec<String>,
    /// Daemons let go of without waiting (see [`Mount::umount_plain`]), reaped on drop.
    pub closing: Vec<Child>,
}

pub fn sh(cmd: &str) -> std::process::Output {
    Command::new("sh").arg("-c").arg(cmd).output().expect("sh")
}

pub fn is_mounted(p: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let p = p.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

impl Mount {
    pub fn new(name: &str) -> Mount {
        let m = Mount::unmade(name);
        wring_fs::store::Store::mkfs(&m.store).unwrap();
        m
    }

    /// A mount point and where the store goes, without the store (the test makes it).
    pub fn unmade(name: &str) -> Mount {
        let base = PathBuf::from(format!("/tmp/wring-fs-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let store = base.join("store");
        let mnt = base.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        Mount {
            base,
            store,
            mnt,
            child: None,
            waits: Vec::new(),
            closing: Vec::new(),
        }
    }

    /// Start the daemon; Err(stderr) when it does not get the mount ready.
    pub fn try_start(&mut self, opts: &str) -> Result<(), String> {
        self.try_start_with(&[], opts)
    }

    /// [`Mount::try_start`] with options of wring-fsd before its paths (`--credentials FILE`,
    /// `--break-lease`). No AWS_* reaches it: a store in a bucket finds its credentials file.
    pub fn try_start_with(&mut self, pre: &[std::ffi::OsString], opts: &str) -> Result<(), String> {
        self.try_start_exactly(pre, &with_suite_options(opts))
    }

    /// Start the daemon with exactly `opts`, without the suite's options (a test about one
    /// transport).
    pub fn start_exactly(&mut self, opts: &str) {
        self.try_start_exactly(&[], opts).expect("mount");
    }

    fn try_start_exactly(&mut self, pre: &[std::ffi::OsString], opts: &str) -> Result<(), String> {
        assert!(self.child.is_none(), "the daemon runs already");
        let mut child = Command::new(env!("CARGO_BIN_EXE_wring-fsd"))
            .args(pre)
            .arg(&self.store)
            .arg(&self.mnt)
            .arg(opts)
            .env(wring_fs::daemon::NOTIFY_ENV, "1")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        while out.read_line(&mut line).is_ok_and(|n| n > 0) {
            match line.trim().strip_prefix(wring_fs::daemon::WAITING) {
                Some(why) => self.waits.push(why.trim().to_string()),
                None => break,
            }
            line.clear();
        }
        if line.trim() == "ready" {
            self.child = Some(child);
            return Ok(());
        }
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        let _ = child.wait();
        Err(err)
    }

    /// Start the daemon (see [`SUITE_OPTIONS`]).
    pub fn start(&mut self, opts: &str) {
        self.try_start(opts).expect("mount");
    }

    /// Clean unmount (flush, unmount, wait for the daemon).
    pub fn stop(&mut self) {
        if self.child.is_some() {
            // Keep the child until unmounted, so a failure here still cleans up on drop.
            wring_fs::daemon::umount(&self.mnt).expect("umount");
            if let Some(mut c) = self.child.take() {
                let _ = c.wait();
            }
        }
    }

    /// A plain `umount MNT` (umount(8), as fstests and scripts unmount): the kernel's
    /// umount(2) returns while the daemon may still be writing its final commit; it is not
    /// waited for (it is reaped on drop).
    pub fn umount_plain(&mut self) {
        let out = Command::new("umount")
            .arg(&self.mnt)
            .output()
            .expect("umount");
        assert!(
            out.status.success(),
            "umount {}: {}",
            self.mnt.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(c) = self.child.take() {
            self.closing.push(c);
        }
    }

    /// kill -9 the daemon and clear the dead mount.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let p = self.mnt.display();
        sh(&format!(
            "fusermount3 -u -z {p} 2>/dev/null || umount -l {p} 2>/dev/null"
        ));
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// A durable commit of everything written so far (`sync -f` alone leaves the daemon's
    /// commit to its timer: syncfs does not reach a FUSE daemon).
    pub fn sync(&self) {
        wring_fs::daemon::sync(&self.mnt).expect("syncfs and wring.sync on the mount");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.child.is_some() {
            let p = self.mnt.display();
            sh(&format!(
                "fusermount3 -u {p} 2>/dev/null || umount -l {p} 2>/dev/null"
            ));
            self.kill();
        }
        for mut c in self.closing.drain(..) {
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Compressible but varied bytes from a seed: words (about half), random runs (a third, so
/// most 128 KiB extents store more than an inline item holds) and rare long zero runs (holes).
pub fn text(rng: &mut Rng, len: usize) -> Vec<u8> {
    const WORDS: [&[u8]; 8] = [
        b"extent ",
        b"btrfs ",
        b"zstd ",
        b"wring ",
        b"inode\n",
        b"0123 ",
        b"lzo ",
        b"compress ",
    ];
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        match rng.below(20_000) {
            0 => v.extend(std::iter::repeat_n(0u8, rng.below(1 << 16) as usize)),
            1..2000 => v.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
            _ => v.extend_from_slice(WORDS[rng.below(8) as usize]),
        }
    }
    v.truncate(len);
    v
}

/// The corpus directory `WRING_CORPUS` names (which must be a directory), else
/// /tmp/wring-corpus when it exists, else a system directory.
pub fn corpus() -> PathBuf {
    match std::env::var_os("WRING_CORPUS") {
        Some(d) => {
            assert!(
                Path::new(&d).is_dir(),
                "WRING_CORPUS={} is not a directory: build the corpus with \
                 ../shared/corpus/build.sh DIR, or unset WRING_CORPUS",
                Path::new(&d).display()
            );
            d.into()
        }
        None if Path::new("/tmp/wring-corpus").is_dir() => "/tmp/wring-corpus".into(),
        None => "/usr/share/common-licenses".into(),
    }
}

/// Mount options every mount of a test run gets before its own: `scripts/test.sh` runs the
/// suite with `uring=0` and again with `uring=1`, so each test holds over both transports
/// (the default, `uring=auto`, would pick the ring on both runs with the kernel's switch on).
pub const SUITE_OPTIONS: &str = "WRING_TEST_MOUNT_OPTIONS";

fn with_suite_options(opts: &str) -> String {
    match std::env::var(SUITE_OPTIONS) {
        Ok(extra) if !extra.is_empty() && opts.is_empty() => extra,
        // The test's own options last: one that names a transport keeps it.
        Ok(extra) if !extra.is_empty() => format!("{extra},{opts}"),
        _ => opts.to_string(),
    }
}

/// The figure `key` (as `name=`) on the `wring status` line that starts with `line`; 0 when
/// the line lacks it.
pub fn status_figure(mnt: &Path, line: &str, key: &str) -> u64 {
    let status = wring_fs::daemon::status(mnt).unwrap();
    let found = status.lines().find(|l| l.starts_with(line));
    let found = found.unwrap_or_else(|| panic!("no '{line}' line in:\n{status}"));
    found
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key))
        .map_or(0, |v| v.parse().unwrap())
}
