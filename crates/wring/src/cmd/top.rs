//! `wring top MNT|DEVICE`: a live view of a mount or a blk device, refreshed every
//! `--interval` seconds, as `juicefs stats` and `watch zramctl` give theirs.
//!
//! A mount's figures are the ones `wring status --json` prints (the `wring.status_json`
//! control attribute); a blk device's are `wring blk stat --json`'s (its control socket).
//! Rates are the difference of two samples over the time between them. On a terminal each
//! refresh clears the screen first; otherwise the refreshes are plain lines one after another.
//! A directory names a mount; anything else, a blk device.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use wring_blk::{control, Stat};
use wring_fs::{daemon, STATUS_JSON_XATTR};

use super::top_view::{blk_lines, mount_lines, MountSample};

/// `wring top` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Seconds between refreshes (0.1 to 3600; fractions allowed)
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    interval: f64,
    /// Stop after N refreshes (the first comes one interval after the start)
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// A wring mount point, or the name of a `wring blk` device
    target: String,
}

/// What is watched.
enum Source {
    Mount(PathBuf),
    Blk { name: String, control: PathBuf },
}

/// One sample of either.
enum Sample {
    Mount(MountSample),
    Blk(Box<Stat>),
}

impl Source {
    fn of(target: &str) -> Result<Source> {
        let p = Path::new(target);
        if p.is_dir() {
            return Ok(Source::Mount(p.to_path_buf()));
        }
        let dir = super::blk::device(target).with_context(|| {
            format!("'{target}' is neither a directory (a wring mount) nor a blk device")
        })?;
        Ok(Source::Blk {
            name: target.to_string(),
            control: dir.join("control.sock"),
        })
    }

    fn sample(&self) -> Result<Sample> {
        match self {
            Source::Mount(m) => {
                let v = daemon::get_xattr(m, STATUS_JSON_XATTR).with_context(|| {
                    format!("reading {}'s status (a wring mount?)", m.display())
                })?;
                Ok(Sample::Mount(MountSample::parse(&v)?))
            }
            Source::Blk { name, control } => {
                let s = control::stat(control).with_context(|| format!("blk device {name}"))?;
                Ok(Sample::Blk(Box::new(s)))
            }
        }
    }

    fn title(&self) -> String {
        match self {
            Source::Mount(m) => format!("mount {}", m.display()),
            Source::Blk { name, .. } => format!("blk {name}"),
        }
    }
}

/// The lines for the interval between `a` and `b`.
fn lines(a: &Sample, b: &Sample, dt: f64) -> Vec<String> {
    match (a, b) {
        (Sample::Mount(a), Sample::Mount(b)) => mount_lines(a, b, dt),
        (Sample::Blk(a), Sample::Blk(b)) => blk_lines(a, b, dt),
        // One source gives one kind of sample.
        _ => Vec::new(),
    }
}

/// The time of day, UTC, as HH:MM:SS.
fn clock() -> String {
    let s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

pub fn run(a: Args) -> Result<()> {
    if !(0.1..=3600.0).contains(&a.interval) {
        bail!("--interval must be 0.1 to 3600 seconds, not {}", a.interval);
    }
    let src = Source::of(&a.target)?;
    let tty = std::io::stdout().is_terminal();
    let mut prev = (Instant::now(), src.sample()?);
    let mut shown = 0u64;
    while a.count.is_none_or(|n| shown < n) {
        std::thread::sleep(Duration::from_secs_f64(a.interval));
        let now = (Instant::now(), src.sample()?);
        let dt = now.0.duration_since(prev.0).as_secs_f64().max(1e-3);
        let mut out = String::new();
        if tty {
            out += "\x1b[H\x1b[2J";
        }
        out += &format!(
            "--- wring top: {}  {}  over {dt:.2} s\n",
            src.title(),
            clock()
        );
        for l in lines(&prev.1, &now.1, dt) {
            out += &l;
            out.push('\n');
        }
        let mut stdout = std::io::stdout().lock();
        // A closed pipe (`wring top | head`) ends the view quietly.
        if stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return Ok(());
        }
        prev = now;
        shown += 1;
    }
    Ok(())
}
