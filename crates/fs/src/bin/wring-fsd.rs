//! `wring-fsd [--credentials FILE] [--break-lease] DIR MOUNTPOINT [OPTIONS]`: the mount daemon
//! alone, in the foreground (the tests and benchmarks start and kill it; users run `wring
//! mount`). For a store whose extents are in a bucket, `--credentials FILE` names the key
//! file (else the AWS_* environment) and `--break-lease` takes a stale lease.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use wring_fs::store::Access;

/// Mount the wring store in DIR on MOUNTPOINT in the foreground (users run `wring mount`).
#[derive(Parser)]
#[command(
    name = "wring-fsd",
    override_usage = "wring-fsd [--credentials FILE] [--break-lease] DIR MOUNTPOINT [OPTIONS]"
)]
struct Args {
    /// The bucket's key file (owner-only) for a store whose extents are in a bucket; without
    /// it, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
    #[arg(long, value_name = "FILE")]
    credentials: Option<PathBuf>,
    /// Take the bucket's lease even when another holder has it (only for a holder that is
    /// gone for good)
    #[arg(long)]
    break_lease: bool,
    /// The store directory
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Where to mount it
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Mount options, comma-separated, as for wring mount -o (wring-mount-options(5))
    #[arg(value_name = "OPTIONS")]
    options: Option<OsString>,
}

fn main() {
    wring_fs::daemon::init_stderr_log();
    let args = Args::parse();
    let access = Access {
        credentials: args.credentials,
        break_lease: args.break_lease,
    };
    let opts = args
        .options
        .map(|o| o.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Err(e) = wring_fs::daemon::mount_foreground(&args.dir, &args.mountpoint, &opts, &access)
    {
        eprintln!("wring: {e}");
        std::process::exit(1);
    }
}
