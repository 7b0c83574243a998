//! `wring btrfs ...` (being written).

/// btrfs subcommands.
#[derive(clap::Subcommand)]
pub enum Command {}

pub fn run(c: Command) -> anyhow::Result<()> {
    match c {}
}
