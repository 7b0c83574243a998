//! `wring blk ...`: zram in userspace — compressed RAM block devices served over NBD by nbdkit
//! with wring's plugin (crates/blk-nbdkit), driven with zram's words.
//!
//! * `start [-o OPTIONS] --size SIZE [--listen [ADDR:]PORT] [--tls-psk FILE] NAME` starts nbdkit in the
//!   background with `libwring_blk_nbdkit.so`, returns once the device serves, and prints its
//!   NBD URI. Options are zram's (`comp_algorithm=zstd:3,streams=2,mem_limit=1G`).
//! * `stop NAME`, `list`, `stat NAME [--json]`, and the live sysfs actions `compact`, `reset`,
//!   `mem-limit NAME SIZE`, `streams NAME N`, `idle NAME all|SECONDS`,
//!   `recompress NAME [type=huge|idle|huge_idle] [threshold=N] [algo=NAME]`,
//!   `writeback NAME idle|huge|huge_idle|incompressible`, `writeback-limit NAME N|off`,
//!   `train-dict NAME [size=B] [level=L] [save=FILE]`, `policy NAME SPEC|off` over the device's control socket
//!   ([`wring_blk::control`]: one request line, one JSON reply line).
//!
//! Each device lives in a runtime directory of its own, `$XDG_RUNTIME_DIR/wring/blk/NAME`
//! (`/run/wring/blk/NAME` for root without `XDG_RUNTIME_DIR`; `WRING_BLK_DIR` overrides the
//! base), every level made 0700 and checked to be the caller's own. It holds `nbd.sock` and
//! `control.sock` (0600: nbdkit runs with umask 077 and the plugin sets the mode), `nbdkit.pid`,
//! `nbdkit.log` (nbdkit's stderr) and `uri`. TCP is served only with an explicit `--listen`,
//! on 127.0.0.1 unless an address is named. `--tls-psk FILE` makes nbdkit require TLS with
//! pre-shared keys, on either ([`super::blk_tls`]).
//!
//! The plugin is found at `$WRING_BLK_PLUGIN`, else beside the `wring` binary, in its `deps/`
//! or one directory up, the most recently built of those (cargo builds it beside the binary, or
//! only in `deps/` when it is built as the CLI tests' dev-dependency).

use std::fs::DirBuilder;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use wring_blk::control::{self, Request};
use wring_blk::{BdStat, IoStat, MmStat, Options, Stat};

use super::blk_tls;

/// blk subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Start a device in the background; prints its NBD URI once it serves
    #[command(
        after_help = "A block device without the kernel's nbd driver: nbdfuse exposes the \
export as a file, losetup turns the file into /dev/loopN:\n  \
mkdir -p /mnt/fuse && nbdfuse /mnt/fuse URI &\n  \
losetup -f --show /mnt/fuse/nbd\n\
(then mkfs, mount, ...; umount, losetup -d, fusermount3 -u /mnt/fuse before `wring blk stop`). \
Where the kernel has the nbd module, nbd-client attaches the export to /dev/nbdN instead."
    )]
    Start(StartArgs),
    /// Stop a device (its data is gone)
    Stop {
        /// The device's name
        name: String,
    },
    /// List devices with their URI, size, algorithm and use
    List,
    /// zram's mm_stat and io_stat lines, then a table
    Stat {
        /// The device's name
        name: String,
        /// Print JSON instead
        #[arg(long)]
        json: bool,
    },
    /// Give free arena space back (zram's compact)
    Compact {
        /// The device's name
        name: String,
    },
    /// Free every page and zero the statistics (zram's reset; size and options stay)
    Reset {
        /// The device's name
        name: String,
    },
    /// Set mem_limit live (0 = none); writes needing more memory fail with ENOSPC
    MemLimit {
        /// The device's name
        name: String,
        /// The limit, e.g. 512M
        size: String,
    },
    /// Set the number of compression streams live
    Streams {
        /// The device's name
        name: String,
        /// Streams, 1 to 256
        streams: usize,
    },
    /// Recompress pages with the device's recomp_algorithm(s), live (zram's recompress);
    /// a page is kept recompressed only if that saves memory
    Recompress {
        /// The device's name
        name: String,
        /// type=huge|idle|huge_idle threshold=BYTES algo=NAME|priority=N max_pages=N
        words: Vec<String>,
    },
    /// Write idle, huge, huge_idle or incompressible pages to the backing file (zram's
    /// writeback); they are read back transparently
    Writeback {
        /// The device's name
        name: String,
        /// idle, huge, huge_idle or incompressible
        kind: String,
    },
    /// Set the writeback budget in 4 KiB pages live, or `off` (zram's writeback_limit)
    WritebackLimit {
        /// The device's name
        name: String,
        /// Pages, or off
        pages: String,
    },
    /// Beyond zram: train a zstd dictionary from the device's own pages, add it as a
    /// recompression algorithm and recompress every page with it
    TrainDict {
        /// The device's name
        name: String,
        /// size=BYTES level=L samples=PAGES save=FILE (save keeps it for algorithm_params dict=)
        words: Vec<String>,
    },
    /// Beyond zram: set the schedule that ages, recompresses and writes back idle pages
    /// (`every=60 age=300 [recompress=idle|huge|huge_idle|all|off]
    /// [writeback=idle|huge|huge_idle|incompressible|off]`), or `off`
    Policy {
        /// The device's name
        name: String,
        /// The policy's words, or off
        words: Vec<String>,
    },
    /// Mark pages idle (zram's idle): `all`, or those not read or written for SECONDS;
    /// a read or write clears the mark
    Idle {
        /// The device's name
        name: String,
        /// `all` or a number of seconds
        age: String,
    },
}

/// Options of `wring blk start`.
#[derive(clap::Args)]
pub struct StartArgs {
    /// zram's options: comp_algorithm=lzo|lzo-rle|lz4|lz4hc|zstd[:L]|deflate[:L], streams=N,
    /// mem_limit=SIZE, recomp_algorithm='algo=zstd priority=1' (up to 3), backing_dev=FILE,
    /// writeback_limit=PAGES, algorithm_params='priority=N level=L dict=FILE',
    /// policy='every=S age=S recompress=T writeback=T', page_pool=PAGES, and beyond zram
    /// slot_size=4K|8K|16K|32K (bytes compressed as one object; larger slots compress better,
    /// partial writes cost a read-modify-write of the slot; not with backing_dev), and
    /// metrics=ADDR (Prometheus metrics on GET /metrics at 127.0.0.1:PORT, [::1]:PORT or an
    /// absolute Unix socket path; another IP only as public:IP:PORT) (comma-separated)
    #[arg(short = 'o', long = "options", default_value = "")]
    options: String,
    /// Device size (disksize), e.g. 1G
    #[arg(long)]
    size: String,
    /// Serve NBD over TCP on [ADDR:]PORT instead of the Unix socket (ADDR defaults to 127.0.0.1).
    /// Without --tls-psk anyone who can reach the port can read and write the device
    #[arg(long)]
    listen: Option<String>,
    /// Require TLS, with the pre-shared keys in FILE (USERNAME:HEXKEY lines, as
    /// `psktool -u USER -p FILE` writes them; owner-only, chmod 600): clients must know a key.
    /// The printed URI is nbds:// and names the file and the first username
    #[arg(long, value_name = "FILE")]
    tls_psk: Option<PathBuf>,
    /// The device's name: letters, digits, '-', '_' and '.'
    name: String,
}

/// Run a blk subcommand.
pub fn run(cmd: Command) -> Result<()> {
    match cmd {
        Command::Start(a) => start(a),
        Command::Stop { name } => stop(&name),
        Command::List => list(),
        Command::Stat { name, json } => stat(&name, json),
        Command::Compact { name } => {
            let v = control::request(&device(&name)?.join("control.sock"), Request::Compact)?;
            println!("{name}: compacted, {v} pages freed");
            Ok(())
        }
        Command::Reset { name } => {
            control::request(&device(&name)?.join("control.sock"), Request::Reset)?;
            println!("{name}: reset");
            Ok(())
        }
        Command::MemLimit { name, size } => {
            let bytes = wring_blk::parse_size("mem_limit", &size)?;
            let v = control::request(
                &device(&name)?.join("control.sock"),
                Request::MemLimit(bytes),
            )?;
            println!("{name}: mem_limit {v}");
            Ok(())
        }
        Command::Streams { name, streams } => {
            let v = control::request(
                &device(&name)?.join("control.sock"),
                Request::Streams(streams),
            )?;
            println!("{name}: streams {v}");
            Ok(())
        }
        Command::Recompress { name, words } => {
            let req = wring_blk::RecompressRequest::parse(&words.join(" "))?;
            let r = control::recompress(&device(&name)?.join("control.sock"), req)?;
            println!(
                "{name}: {} pages looked at, {} recompressed ({} -> {} bytes), {} incompressible",
                r.scanned, r.recompressed, r.bytes_before, r.bytes_after, r.incompressible
            );
            Ok(())
        }
        Command::Writeback { name, kind } => {
            let kind = wring_blk::WritebackType::parse(&kind)?;
            let r = control::writeback(&device(&name)?.join("control.sock"), kind)?;
            println!("{name}: {} pages written back", r.written);
            if r.limit_reached {
                println!(
                    "{name}: writeback_limit reached; raise it with `wring blk writeback-limit {name} N`"
                );
            }
            Ok(())
        }
        Command::WritebackLimit { name, pages } => {
            let limit = wring_blk::parse_wb_limit(&pages)?;
            let v = control::request(
                &device(&name)?.join("control.sock"),
                Request::WritebackLimit(limit),
            )?;
            let v = v.as_u64().map_or("off".to_string(), |n| n.to_string());
            println!("{name}: writeback_limit {v}");
            Ok(())
        }
        Command::TrainDict { name, words } => {
            let mut req = wring_blk::TrainRequest::parse(&words.join(" "))?;
            if let Some(p) = req.save.as_mut() {
                *p = absolute(p)?;
            }
            let r = control::train_dict(&device(&name)?.join("control.sock"), req)?;
            println!(
                "{name}: a {}-byte dictionary from {} pages, recomp priority {}; {} pages \
                 recompressed ({} -> {} bytes)",
                r.dict_bytes,
                r.samples,
                r.priority,
                r.recompress.recompressed,
                r.recompress.bytes_before,
                r.recompress.bytes_after
            );
            Ok(())
        }
        Command::Policy { name, words } => {
            let text = words.join(" ");
            let p = match text.trim() {
                "off" => None,
                spec => Some(wring_blk::Schedule::parse(spec)?),
            };
            let v = control::request(&device(&name)?.join("control.sock"), Request::Policy(p))?;
            println!("{name}: policy {}", v.as_str().unwrap_or("off"));
            Ok(())
        }
        Command::Idle { name, age } => {
            let older_than = control::parse_idle(&age)?;
            let v = control::request(
                &device(&name)?.join("control.sock"),
                Request::Idle(older_than),
            )?;
            println!("{name}: {v} pages idle");
            Ok(())
        }
    }
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !ok {
        bail!(
            "'{name}' is not a device name: use up to 64 letters, digits, '-', '_' or '.', \
             not starting with '.'"
        );
    }
    Ok(())
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The base directory devices live in (not created).
fn base_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("WRING_BLK_DIR") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return Ok(PathBuf::from(d).join("wring").join("blk"));
    }
    if euid() == 0 {
        return Ok(PathBuf::from("/run/wring/blk"));
    }
    bail!("XDG_RUNTIME_DIR is not set: set it (or WRING_BLK_DIR) to a directory only you can enter")
}

/// Make `dir` and its missing parents 0700, and check that `dir` is ours and closed to others.
fn private_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let m = std::fs::metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    if m.uid() != euid() || m.mode() & 0o077 != 0 {
        bail!(
            "{} must belong to you and be closed to others (chmod 700); it is uid {} mode {:o}",
            dir.display(),
            m.uid(),
            m.mode() & 0o777
        );
    }
    Ok(())
}

/// The directory of an existing device.
pub(crate) fn device(name: &str) -> Result<PathBuf> {
    check_name(name)?;
    let dir = base_dir()?.join(name);
    if !dir.join("nbdkit.pid").exists() {
        bail!(
            "no device '{name}' (looked in {}); `wring blk list` shows the devices",
            dir.display()
        );
    }
    Ok(dir)
}

/// The plugin nbdkit loads.
pub(crate) fn plugin() -> Result<PathBuf> {
    const LIB: &str = "libwring_blk_nbdkit.so";
    if let Some(p) = std::env::var_os("WRING_BLK_PLUGIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("finding the wring binary")?;
    let mut tried = Vec::new();
    if let Some(dir) = exe.parent() {
        for d in [
            Some(dir.to_path_buf()),
            Some(dir.join("deps")),
            dir.parent().map(Path::to_path_buf),
        ]
        .into_iter()
        .flatten()
        {
            tried.push(d.join(LIB));
        }
    }
    // The most recently built of those that exist (cargo leaves a copy in deps/ too).
    let newest = tried
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t);
    if let Some((_, p)) = newest {
        return Ok(p.clone());
    }
    bail!(
        "wring's nbdkit plugin {LIB} is not at {}; build it (cargo build -p wring-blk-nbdkit) \
         or name it in WRING_BLK_PLUGIN",
        tried
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    )
}

/// The pid in a pid file, if that process is a live nbdkit (not a zombie: an init that does
/// not reap leaves stopped daemons as zombies).
fn live_pid(dir: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(dir.join("nbdkit.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE ...": COMM may hold spaces, so split at the last ')'.
    let (head, tail) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1;
    let state = tail.split_whitespace().next()?;
    (comm == "nbdkit" && state != "Z" && state != "X").then_some(pid)
}

/// nbdkit's arguments for `--listen` and the `HOST:PORT` clients connect to.
fn listen_args(listen: &str) -> Result<(Vec<String>, String)> {
    let (addr, port) = match listen.rsplit_once(':') {
        Some((a, p)) => (a.trim_matches(['[', ']']).to_string(), p),
        None => ("127.0.0.1".to_string(), listen),
    };
    let port: u16 = port.parse().ok().filter(|&p| p != 0).with_context(|| {
        format!("--listen {listen}: give [ADDR:]PORT with PORT from 1 to 65535")
    })?;
    let host = if addr.contains(':') {
        format!("[{addr}]")
    } else {
        addr.clone()
    };
    Ok((
        vec!["-i".into(), addr, "-p".into(), port.to_string()],
        format!("{host}:{port}"),
    ))
}

fn start(a: StartArgs) -> Result<()> {
    check_name(&a.name)?;
    let (zram, metrics) = super::blk_metrics::split(&a.options)?;
    let mut options = Options::parse(&zram)?;
    // nbdkit runs from another directory: name the files absolutely.
    if let Some(b) = options.backing_dev.as_mut() {
        *b = absolute(b)?;
    }
    for (_, d) in options.dicts.iter_mut() {
        *d = absolute(d)?;
    }
    let size = wring_blk::parse_size("--size", &a.size)?;
    if size == 0 {
        bail!("--size must be at least one page (4096 bytes)");
    }
    let listen = a.listen.as_deref().map(listen_args).transpose()?;
    let psk = a.tls_psk.as_deref().map(blk_tls::check).transpose()?;
    let plugin = plugin()?;
    let base = base_dir()?;
    private_dir(&base)?;
    let dir = base.join(&a.name);
    if live_pid(&dir).is_some() {
        bail!(
            "device '{}' is already running; `wring blk stop {}` first",
            a.name,
            a.name
        );
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing the stale {}", dir.display()))?;
    }
    private_dir(&dir)?;
    let sock = dir.join("nbd.sock");
    let (listen, uri) = match (listen, &psk) {
        (Some((args, hp)), Some(psk)) => (args, blk_tls::uri(psk, None, Some(&hp))),
        (Some((args, hp)), None) => (args, format!("nbd://{hp}/")),
        (None, Some(psk)) => (
            vec!["-U".into(), sock.display().to_string()],
            blk_tls::uri(psk, Some(&sock), None),
        ),
        (None, None) => (
            vec!["-U".into(), sock.display().to_string()],
            format!(
                "nbd+unix:///?socket={}",
                blk_tls::query_value(&sock.display().to_string())
            ),
        ),
    };
    let tls: Vec<String> = psk.as_ref().map(blk_tls::nbdkit_args).unwrap_or_default();
    let log = match std::fs::File::create(dir.join("nbdkit.log")) {
        Ok(f) => f,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(anyhow::Error::new(e).context("creating nbdkit.log"));
        }
    };
    // nbdkit forks into the background itself: in the foreground it would die with its parent
    // (it sets PR_SET_PDEATHSIG), and the daemon it forks has no parent to die with. Its
    // messages go to nbdkit.log (--log=stderr), or, under a systemd unit (stderr is the
    // journal), to syslog(3), which journald keeps with each message's priority; nbdkit.log
    // still catches what it prints before its logging is set up.
    let log_to = if crate::journal::stderr_is_journal() {
        "--log=syslog"
    } else {
        "--log=stderr"
    };
    let mut cmd = Process::new("nbdkit");
    cmd.arg(log_to)
        .arg("-P")
        .arg(dir.join("nbdkit.pid"))
        .args(&listen)
        .args(&tls)
        .arg(BLOCK_SIZE_FILTER)
        .arg(&plugin)
        .arg(format!("size={size}"))
        .arg(format!("blocksize-preferred={}", options.slot_size))
        .arg(format!("control={}", dir.join("control.sock").display()))
        .args(metrics.iter().map(|m| format!("metrics={m}")))
        .arg(format!("name={}", a.name))
        .args(options.pairs().iter().map(|(k, v)| format!("{k}={v}")))
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("duplicating the log")?)
        .stderr(log)
        .process_group(0);
    // SAFETY: umask only sets this process's file mode mask; it cannot fail. nbdkit inherits
    // 077, so the files it creates are closed to others.
    let old = unsafe { libc::umask(0o077) };
    let status = cmd.status();
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let status = status.context("running nbdkit (install the nbdkit package)")?;
    let fail = |why: String| -> anyhow::Error {
        let mut text = String::new();
        let _ = std::fs::File::open(dir.join("nbdkit.log"))
            .and_then(|mut f| f.read_to_string(&mut text));
        if let Some(pid) = live_pid(&dir) {
            // SAFETY: kill has no memory preconditions; the pid is nbdkit's (checked in /proc).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let _ = std::fs::remove_dir_all(&dir);
        anyhow::anyhow!("{why}: {}", text.trim())
    };
    if !status.success() {
        return Err(fail(format!("nbdkit failed to start ({status})")));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pid_written = std::fs::metadata(dir.join("nbdkit.pid")).is_ok_and(|m| m.len() > 0);
        if pid_written && live_pid(&dir).is_none() {
            return Err(fail("nbdkit exited before serving".into()));
        }
        if pid_written && control::stat(&dir.join("control.sock")).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            return Err(fail("nbdkit did not start serving within 60 s".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if a.listen.is_none() {
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))
            .context("making the NBD socket 0600")?;
    }
    std::fs::write(dir.join("uri"), format!("{uri}\n")).context("writing the uri file")?;
    println!("{uri}");
    Ok(())
}

/// nbdkit's filter that advertises the slot as the preferred block size
/// (`blocksize-preferred=SLOT` after the plugin); the plugin cannot itself, as nbdkit's Rust
/// binding has no `block_size` callback. Clients that honour it send whole slots; smaller and
/// unaligned requests still work (the minimum stays 1, the error policy `allow`).
const BLOCK_SIZE_FILTER: &str = "--filter=blocksize-policy";

/// `p` made absolute against the current directory (the daemon runs elsewhere).
fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("finding the current directory")?
        .join(p))
}

fn stop(name: &str) -> Result<()> {
    let dir = device(name)?;
    if let Some(pid) = live_pid(&dir) {
        // SAFETY: kill has no memory preconditions; the pid is nbdkit's (checked in /proc).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while live_pid(&dir) == Some(pid) {
            if Instant::now() > deadline {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    println!("{name}: stopped");
    Ok(())
}

fn list() -> Result<()> {
    let base = base_dir()?;
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Ok(());
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    println!(
        "{:<16} {:>12} {:<10} {:>12} {:>12}  URI",
        "NAME", "DISKSIZE", "ALGORITHM", "DATA", "COMPR"
    );
    for name in names {
        let dir = base.join(&name);
        let uri = std::fs::read_to_string(dir.join("uri")).unwrap_or_default();
        match (live_pid(&dir), control::stat(&dir.join("control.sock"))) {
            (Some(_), Ok(s)) => println!(
                "{:<16} {:>12} {:<10} {:>12} {:>12}  {}",
                name,
                s.disksize,
                s.comp_algorithm,
                s.mm_stat.orig_data_size,
                s.mm_stat.compr_data_size,
                uri.trim()
            ),
            _ => println!("{name:<16} (not running; `wring blk stop {name}` cleans up)"),
        }
    }
    Ok(())
}

fn stat(name: &str, json: bool) -> Result<()> {
    let dir = device(name)?;
    let s: Stat = control::stat(&dir.join("control.sock"))?;
    if json {
        println!("{}", serde_json_text(&s)?);
        return Ok(());
    }
    println!("mm_stat: {}", s.mm_stat_line());
    println!("io_stat: {}", s.io_stat_line());
    println!("bd_stat: {}", s.bd_stat_line());
    println!("(mm_stat: {})", MmStat::FIELDS.join(" "));
    println!("(io_stat: {})", IoStat::FIELDS.join(" "));
    println!("(bd_stat: {})", BdStat::FIELDS.join(" "));
    println!();
    print!("{}", s.table());
    Ok(())
}

fn serde_json_text(s: &Stat) -> Result<String> {
    Ok(wring_blk::to_json(s)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    fn parse(args: &[&str]) -> Command {
        use clap::Parser;
        match Cli::try_parse_from(std::iter::once("blk").chain(args.iter().copied())) {
            Ok(c) => c.command,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    #[test]
    fn the_live_actions_parse_with_zrams_words() {
        match parse(&["recompress", "swap0", "type=huge_idle", "threshold=3000"]) {
            Command::Recompress { name, words } => {
                assert_eq!(name, "swap0");
                let r = wring_blk::RecompressRequest::parse(&words.join(" ")).unwrap();
                assert_eq!(r.threshold, 3000);
            }
            _ => panic!("not recompress"),
        }
        assert!(matches!(
            parse(&["writeback", "swap0", "huge_idle"]),
            Command::Writeback { kind, .. } if kind == "huge_idle"
        ));
        assert!(matches!(
            parse(&["writeback-limit", "swap0", "off"]),
            Command::WritebackLimit { pages, .. } if pages == "off"
        ));
        assert!(matches!(
            parse(&["idle", "swap0", "all"]),
            Command::Idle { age, .. } if age == "all"
        ));
        assert!(matches!(
            parse(&["train-dict", "swap0", "size=16K", "save=d"]),
            Command::TrainDict { words, .. } if words.len() == 2
        ));
        match parse(&["policy", "swap0", "every=60", "age=300"]) {
            Command::Policy { words, .. } => {
                assert!(wring_blk::Schedule::parse(&words.join(" ")).is_ok());
            }
            _ => panic!("not policy"),
        }
    }

    #[test]
    fn names_and_listen_addresses() {
        assert!(check_name("swap0").is_ok());
        assert!(check_name("../x").is_err());
        assert!(check_name(".hidden").is_err());
        assert!(check_name("").is_err());
        let (args, hp) = listen_args("10809").unwrap();
        assert_eq!(args, ["-i", "127.0.0.1", "-p", "10809"]);
        assert_eq!(hp, "127.0.0.1:10809");
        let (_, hp) = listen_args("[::1]:10810").unwrap();
        assert_eq!(hp, "[::1]:10810");
        assert!(listen_args("0").is_err());
        assert!(listen_args("host:port").is_err());
    }
}
