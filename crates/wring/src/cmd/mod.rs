//! One module per subcommand.

pub mod levels;
