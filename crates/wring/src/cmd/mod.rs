//! One module per subcommand.

pub mod bench;
pub mod bench_dict;
pub mod bench_fs;
pub mod bench_meta;
pub mod bench_recompress;
pub mod blk;
pub mod blk_metrics;
pub mod blk_tls;
pub mod btrfs;
pub mod defrag;
pub mod difftest;
pub mod fs;
pub mod levels;
pub mod top;
pub mod top_view;
