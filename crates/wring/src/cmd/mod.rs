//! One module per subcommand.

pub mod bench;
pub mod btrfs;
pub mod fs;
pub mod levels;
