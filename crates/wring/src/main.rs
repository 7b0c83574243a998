//! `wring`: the command line on top of wring's library crates. Thin: parse, call, print.
//! Called as `mount.fuse.wring` it is mount(8)'s helper ([`helper`]).

mod blk_config;
mod cmd;
mod gen;
mod helper;
mod journal;
mod version;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

/// Userspace storage compression with btrfs's formats and rules.
#[derive(Parser)]
#[command(
    name = "wring",
    version,
    long_version = version::long(),
    about,
    long_about = None,
    after_long_help = "Mount options: wring-mount-options(5). mount -t fuse.wring and fstab \
lines (DIR MOUNTPOINT fuse.wring OPTIONS 0 0) work through mount.fuse.wring. Block devices \
from /etc/wring/blk.conf: wring-blk-config(1) and wring-blk@NAME.service."
)]
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
    /// Block devices from a config file, one section per device (/etc/wring/blk.conf)
    #[command(subcommand, after_long_help = blk_config::FORMAT)]
    BlkConfig(blk_config::Command),
    /// A live view of a mount or a blk device: throughput, ratio, requests per second,
    /// commit latency and where the time goes, refreshed every second
    Top(cmd::top::Args),
    /// Compress files on a wring mount again with another algorithm or level, in place, as
    /// `btrfs filesystem defragment -c` does (the same ioctl), with a progress bar
    Defrag(cmd::defrag::Args),
    /// Check the filesystem against the kernel: the same seeded operations on a fresh wring
    /// mount and on tmpfs or btrfs, every answer and tree compared (needs root)
    Difftest(cmd::difftest::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Write the man pages into DIR (packaging)
    #[command(hide = true)]
    GenMan {
        /// Output directory
        dir: PathBuf,
    },
}

fn main() {
    journal::init();
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let name = args
        .first()
        .and_then(|a| PathBuf::from(a).file_name().map(|n| n.to_owned()))
        .unwrap_or_default();
    let is_helper = helper::NAMES.iter().any(|n| name == *n);
    let (who, result) = if is_helper {
        let rest = args.split_off(1);
        (name.to_string_lossy().into_owned(), helper::run(&rest))
    } else {
        ("wring".to_string(), run(Cli::parse()))
    };
    if let Err(e) = result {
        eprintln!("{who}: {}", plain(&e));
        // mount(8) passes its helper's status on: 1 for usage, 32 for a mount failure.
        std::process::exit(if is_helper { helper::exit_code(&e) } else { 1 });
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Levels(args) => cmd::levels::run(args),
        Command::Bench(c) => cmd::bench::run(c),
        Command::Btrfs(c) => cmd::btrfs::run(c),
        Command::Fs(c) => cmd::fs::run(c),
        Command::Blk(c) => cmd::blk::run(c),
        Command::Top(args) => cmd::top::run(args),
        Command::Defrag(args) => cmd::defrag::run(args),
        Command::Difftest(args) => cmd::difftest::run(args),
        Command::BlkConfig(blk_config::Command::Start { name, config }) => {
            // The section becomes a `wring blk start` command line, parsed as typed, so
            // every option `wring blk start` has is checked by it.
            let argv = blk_config::command_for(&name, &config)?;
            log::info!("{}", argv.join(" "));
            run(Cli::try_parse_from(argv)?)
        }
        Command::BlkConfig(blk_config::Command::Show { name, config }) => {
            blk_config::show(name.as_deref(), &config)
        }
        Command::Completions { shell } => gen::completions(Cli::command(), shell),
        Command::GenMan { dir } => {
            for page in gen::man_pages(Cli::command(), &dir)? {
                println!("{}", dir.join(page).display());
            }
            Ok(())
        }
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
