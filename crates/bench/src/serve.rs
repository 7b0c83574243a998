//! nbdkit in the foreground serving one export on a Unix socket, and nbdcopy against it: what
//! `wring bench blk` runs (the CLI's `wring blk start` runs nbdkit as a daemon in a private
//! runtime directory instead). No kernel counterpart: this is the harness around the device,
//! so it lives with the benchmark, not in the blk library. The plugin's tests
//! (crates/blk-nbdkit/tests) compile this one file into themselves with `#[path]`: a
//! dev-dependency on the bench would close a cycle (the bench's tests build the plugin). It
//! therefore names no crate type; its errors are `std::io::Error`s that say what failed.
//!
//! [`Nbdkit::start`] runs `nbdkit -f -U DIR/nbd.sock -P DIR/nbdkit.pid ARGS…` (with
//! `control=DIR/control.sock` appended for wring's plugin) and returns once nbdkit has written
//! its pid file — it does so when it serves — and, for the plugin, bound its control socket.
//! Dropping it kills nbdkit, reaps it and removes those three files, also when a test fails.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `what: why` as an error of its own.
fn failed(what: impl std::fmt::Display, why: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {why}"))
}

/// `what: source`, keeping the source's kind.
fn io_failed(what: impl std::fmt::Display, source: io::Error) -> io::Error {
    io::Error::new(source.kind(), format!("{what}: {source}"))
}

/// A foreground nbdkit serving `DIR/nbd.sock`; killed on drop.
#[derive(Debug)]
pub struct Nbdkit {
    child: Child,
    dir: PathBuf,
}

impl Nbdkit {
    /// Start nbdkit in `dir` with `args` (a plugin and its keys: `memory size=1G`, or wring's
    /// plugin path and its options). With `control`, the plugin is wring's: its control
    /// socket is `DIR/control.sock` and the start waits for it too. Fails, with nbdkit's
    /// stderr, when nbdkit exits first or does not serve within `timeout`.
    pub fn start(
        dir: &Path,
        args: &[String],
        control: bool,
        timeout: Duration,
    ) -> Result<Nbdkit, io::Error> {
        let sock = dir.join("nbd.sock");
        let pid = dir.join("nbdkit.pid");
        let ctl = dir.join("control.sock");
        for p in [&sock, &pid, &ctl] {
            drop(fs::remove_file(p));
        }
        let mut cmd = Command::new("nbdkit");
        cmd.arg("-f")
            .arg("-U")
            .arg(&sock)
            .arg("-P")
            .arg(&pid)
            .args(args);
        if control {
            cmd.arg(format!("control={}", ctl.display()));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io_failed("running nbdkit (install the Debian package nbdkit)", e))?;
        let mut server = Nbdkit {
            child,
            dir: dir.to_path_buf(),
        };
        server.wait_ready(control, timeout)?;
        Ok(server)
    }

    fn wait_ready(&mut self, control: bool, timeout: Duration) -> Result<(), io::Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let pid = fs::metadata(self.dir.join("nbdkit.pid")).is_ok_and(|m| m.len() > 0);
            if pid && (!control || self.control().exists()) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    drop(e.read_to_string(&mut err));
                }
                return Err(failed(
                    "starting nbdkit",
                    format!("it exited ({status}) before serving: {}", err.trim()),
                ));
            }
            if Instant::now() > deadline {
                return Err(failed(
                    "starting nbdkit",
                    format!("it did not serve within {} s", timeout.as_secs()),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The export's URI (`nbd+unix:///?socket=DIR/nbd.sock`).
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket().display())
    }

    /// The NBD socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("nbd.sock")
    }

    /// wring's control socket (meaningful when started with `control`).
    pub fn control(&self) -> PathBuf {
        self.dir.join("control.sock")
    }

    /// nbdkit's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// nbdkit's CPU seconds so far (user + system, all its threads).
    pub fn cpu_secs(&self) -> Result<f64, io::Error> {
        cpu_secs(self.child.id())
    }

    /// nbdkit's resident set in bytes (VmRSS).
    pub fn rss(&self) -> Result<u64, io::Error> {
        let path = format!("/proc/{}/status", self.child.id());
        let text =
            fs::read_to_string(&path).map_err(|e| io_failed(format!("reading {path}"), e))?;
        text.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .ok_or_else(|| failed(format!("reading {path}"), "it has no VmRSS line"))
    }
}

/// CPU seconds (user + system) process `pid` has used: fields 14 and 15 of /proc/PID/stat,
/// in clock ticks.
pub fn cpu_secs(pid: u32) -> Result<f64, io::Error> {
    let path = format!("/proc/{pid}/stat");
    let text = fs::read_to_string(&path).map_err(|e| io_failed(format!("reading {path}"), e))?;
    // The command name (field 2) may hold spaces: count from the last ')'.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    // Fields 14 and 15 are the 12th and 13th after the name (state is field 3).
    match (tick(11), tick(12)) {
        (Some(u), Some(s)) => Ok((u + s) as f64 / clock_ticks()),
        _ => Err(failed(format!("reading {path}"), "no utime/stime fields")),
    }
}

/// The kernel's clock ticks per second (USER_HZ).
fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant of the system; no memory is involved.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU seconds (user + system) of this process's children that have been waited for.
pub fn children_cpu_secs() -> f64 {
    // SAFETY: getrusage fills the struct it is given; a zeroed rusage is a valid one.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut r) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(r.ru_utime) + secs(r.ru_stime)
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        drop(self.child.kill());
        drop(self.child.wait());
        for name in ["nbd.sock", "nbdkit.pid", "control.sock"] {
            drop(fs::remove_file(self.dir.join(name)));
        }
    }
}

/// Run `nbdcopy [EXTRA…] SRC DST` (files or NBD URIs); its wall-clock time. Fails with
/// nbdcopy's stderr.
pub fn nbdcopy(src: &str, dst: &str, extra: &[String]) -> Result<Duration, io::Error> {
    let start = Instant::now();
    let out = Command::new("nbdcopy")
        .args(extra)
        .arg(src)
        .arg(dst)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io_failed("running nbdcopy (install the Debian package libnbd-bin)", e))?;
    let took = start.elapsed();
    if !out.status.success() {
        return Err(failed(
            format!("nbdcopy {src} {dst}"),
            format!(
                "it failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(took)
}
