//! One module per subcommand.

pub mod bench;
pub mod btrfs;
pub mod levels;
