//! `wring bench ...` (being written).

/// Benchmark subcommands.
#[derive(clap::Subcommand)]
pub enum Command {}

pub fn run(c: Command) -> anyhow::Result<()> {
    match c {}
}
