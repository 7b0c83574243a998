//! `wring-fsd DIR MOUNTPOINT [OPTIONS]`: the mount daemon alone, in the foreground (the tests
//! start and kill it; users run `wring mount`).

fn main() {
    wring_fs::daemon::init_stderr_log();
    let args: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    if args.len() < 2 {
        eprintln!("usage: wring-fsd DIR MOUNTPOINT [OPTIONS]");
        std::process::exit(2);
    }
    let opts = args
        .get(2)
        .map(|o| o.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Err(e) = wring_fs::daemon::mount_foreground(&args[0], &args[1], &opts) {
        eprintln!("wring: {e}");
        std::process::exit(1);
    }
}
