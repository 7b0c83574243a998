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
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Levels(args) => cmd::levels::run(args),
        Command::Bench(c) => cmd::bench::run(c),
        Command::Btrfs(c) => cmd::btrfs::run(c),
        Command::Fs(c) => cmd::fs::run(c),
    };
    if let Err(e) = result {
        eprintln!("wring: {e:#}");
        std::process::exit(1);
    }
}
