//! `wring`: the command line on top of wring's library crates. Thin: parse, call, print.

mod cmd;

use clap::{Parser, Subcommand};

/// Userspace storage compression with btrfs's formats and rules.
#[derive(Parser)]
#[command(name = "wring", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Workspace memory per algorithm and level (btrfs's "Memory (KB)" column)
    Levels(cmd::levels::Args),
    /// Benchmarks: the seeds' tables, side by side with the kernel's btrfs and zram
    #[command(subcommand)]
    Bench(cmd::bench::Command),
    /// Recompress, verify and report btrfs files through encoded I/O (needs root)
    #[command(subcommand)]
    Btrfs(cmd::btrfs::Command),
    #[command(flatten)]
    Fs(cmd::fs::Command),
    /// zram in userspace: compressed RAM block devices served over NBD
    #[command(subcommand)]
    Blk(cmd::blk::Command),
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Levels(args) => cmd::levels::run(args),
        Command::Bench(c) => cmd::bench::run(c),
        Command::Btrfs(c) => cmd::btrfs::run(c),
        Command::Fs(c) => cmd::fs::run(c),
        Command::Blk(c) => cmd::blk::run(c),
    };
    if let Err(e) = result {
        eprintln!("wring: {}", plain(&e));
        std::process::exit(1);
    }
}

/// An error and its causes on one line, leaving out a cause whose words the message already
/// holds (library errors often repeat their source in their own text).
fn plain(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !msg.ends_with(&c) {
            if !msg.is_empty() {
                msg.push_str(": ");
            }
            msg.push_str(&c);
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(wring_fs::FsError::Io {
            what: "opening x".into(),
            source: io,
        })
        .context("mounting");
        assert_eq!(
            plain(&e),
            "mounting: opening x: No such file or directory (os error 2)"
        );
    }
}
