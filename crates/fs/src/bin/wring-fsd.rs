//! `wring-fsd [--credentials FILE] [--break-lease] DIR MOUNTPOINT [OPTIONS]`: the mount daemon
//! alone, in the foreground (the tests and benchmarks start and kill it; users run `wring
//! mount`). For a store whose extents are in a bucket, `--credentials FILE` names the key
//! file (else the AWS_* environment) and `--break-lease` takes a stale lease.

use std::ffi::OsString;
use std::path::PathBuf;

use wring_fs::store::Access;

const USAGE: &str = "usage: wring-fsd [--credentials FILE] [--break-lease] DIR MOUNTPOINT [OPTIONS]

Mount the wring store in DIR on MOUNTPOINT in the foreground (users run `wring mount`).
OPTIONS are mount options as for wring mount -o (wring-mount-options(5)).

  --credentials FILE  the bucket's key file (owner-only) for a store whose extents are in a
                      bucket; without it, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
  --break-lease       take the bucket's lease even when another holder has it (only for a
                      holder that is gone for good)
  -h, --help          this text";

/// The parsed command line, or the text to print and the exit code.
fn parse(args: Vec<OsString>) -> Result<(Access, Vec<PathBuf>), (String, i32)> {
    let mut access = Access::default();
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("-h" | "--help") => return Err((USAGE.into(), 0)),
            Some("--break-lease") if rest.is_empty() => access.break_lease = true,
            Some("--credentials") if rest.is_empty() => match it.next() {
                Some(f) => access.credentials = Some(f.into()),
                None => return Err(("wring-fsd: --credentials needs a FILE".into(), 2)),
            },
            Some(o) if o.starts_with("--") && rest.is_empty() => {
                return Err((format!("wring-fsd: unknown option '{o}'\n{USAGE}"), 2))
            }
            _ => rest.push(PathBuf::from(a)),
        }
    }
    if !(2..=3).contains(&rest.len()) {
        return Err((USAGE.into(), 2));
    }
    Ok((access, rest))
}

fn main() {
    wring_fs::daemon::init_stderr_log();
    let (access, args) = match parse(std::env::args_os().skip(1).collect()) {
        Ok(p) => p,
        Err((text, 0)) => {
            println!("{text}");
            return;
        }
        Err((text, code)) => {
            eprintln!("{text}");
            std::process::exit(code);
        }
    };
    let opts = args
        .get(2)
        .map(|o| o.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Err(e) = wring_fs::daemon::mount_foreground(&args[0], &args[1], &opts, &access) {
        eprintln!("wring: {e}");
        std::process::exit(1);
    }
}
