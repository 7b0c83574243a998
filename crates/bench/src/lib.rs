//! wring-bench: the experiments people choose a compression system by, run on wring's engine
//! with the kernel beside it on the same machine in the same run.
//!
//! * [`levels`] — seed 000's level table and seed 001's method table: every algorithm and level
//!   over a corpus cut into independent 128 KiB extents, through the engine's workspace managers
//!   and streams, with the bare library call timed alongside to show the managers' overhead;
//! * [`streams`] — seed 002's experiment: W concurrent writers under stream limits 1, 2, …;
//! * [`kernel`] — the same methods through the kernel's btrfs (compress-force on a loop-mounted
//!   image) and [`zram`] — the corpus through /dev/zram0, each beside wring's figures;
//! * [`recompress`] — `wring btrfs recompress` at -j1 and -j2 against the kernel's compress-force
//!   write of the same data, and [`fs`] — seed 001's experiment through a real wring-fs mount
//!   against the kernel's btrfs;
//! * [`offload`] — seed 004's table: per request size, the CPU provider of the engine's offload
//!   API against the simulated device (a test double) at a few latencies, threshold and fallback;
//! * [`pool`] — seed 003's page pool for decompression destinations: random reads through a
//!   mount, pool off and on, with and without memory pressure (a v1 memory cgroup and a hog);
//! * [`meta`] — many small files (tar -x, find + stat, cp -a, git, rm -rf) through a mount, the
//!   kernel's btrfs and a plain FUSE pass-through beside it;
//! * [`blk`] — the block device: wring's zram in userspace through nbdcopy beside nbdkit's
//!   zstd memory disk and the kernel's zram, nbdkit started and nbdcopy run by [`serve`];
//! * [`report`] renders the rows as markdown, CSV and JSON, [`plot`] as a PNG of ratio against
//!   compression speed.
//!
//! Every figure comes from the run that prints it. Sizes are in bytes, speeds in MB/s with
//! MB = 10^6 bytes (as lzbench and the seeds' tables), over wall-clock time.

pub mod blk;
pub mod corpus;
pub mod dict;
mod error;
pub mod fs;
pub mod interrupt;
pub mod kernel;
pub mod levels;
pub mod machine;
pub mod meta;
pub mod metrics;
pub mod offload;
pub mod plot;
pub mod pool;
pub mod progress;
pub mod recompress;
pub mod report;
pub mod serve;
pub mod sizes;
pub mod streams;
pub mod zram;

pub use error::BenchError;
