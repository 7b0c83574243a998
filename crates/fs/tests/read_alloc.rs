//! With the page pool set, the steady-state read path allocates no page-sized buffer: reads of
//! part of an extent decode it whole into pool pages for the cache of decoded extents (the
//! destination EROFS's pool serves), and evicting an extent gives its pages back. Every
//! allocation of 4 KiB or more in the process is counted while a warm volume serves 4 KiB
//! reads from the middle of more compressed extents than the cache holds, so each one
//! decodes. (Smaller allocations — the store's read transaction, the extent map's vectors —
//! are outside this test and reported only in its failure message.)
//!
//! One test in this binary, so that no other test's threads allocate during the count.
mod common;
use common::{text, Rng};

use wring_testing::alloc::{Counting, Counts};

use wring_fs::store::{Store, ROOT};
use wring_fs::{NewInode, Options, Volume};

#[global_allocator]
static ALLOC: Counting = Counting::new();

const E: usize = 128 * 1024;
/// More extents than the 32 MiB cache of decoded extents holds (256), read in a cycle: every
/// read misses the cache and decodes.
const EXTENTS: usize = 300;
/// The cache's pages plus those of the extent decoded before the oldest is evicted.
const POOL_PAGES: usize = (32 << 20) / 4096 + 2 * E / 4096;

/// Removes the store directory, also when an assertion fails.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 4 KiB from the middle of every extent, in order.
fn cycle(vol: &Volume, ino: u64, want: &[u8], out: &mut Vec<u8>) {
    for i in 0..EXTENTS {
        let at = i * E + E / 2;
        vol.read_into(ino, at as u64, 4096, out).unwrap();
        assert!(
            out[..] == want[at..at + 4096],
            "extent {i} reads back wrong"
        );
    }
}

#[test]
fn partial_reads_decode_into_the_pool_without_allocating() {
    let dir =
        TempDir(std::env::temp_dir().join(format!("wring-read-alloc-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    Store::mkfs(&dir.0).unwrap();
    let opts = format!("compress-force=zstd:1,page_pool={POOL_PAGES}");
    let vol = Volume::open(&dir.0, Options::parse(&opts).unwrap()).unwrap();
    let (ino, _) = vol.create(ROOT, b"f", NewInode::file(0o644)).unwrap();
    let data = text(&mut Rng(0x9a9e), EXTENTS * E);
    vol.write(ino, 0, &data, None).unwrap();
    vol.fsync(ino).unwrap();

    let mut out = Vec::with_capacity(4096);
    // Warm: the cache fills and cycles, the staging buffers grow, the pool's pages circulate.
    for _ in 0..2 {
        cycle(&vol, ino, &data, &mut out);
    }
    let before = vol.engine().stats().pool;
    ALLOC.start();
    cycle(&vol, ino, &data, &mut out);
    let Counts { large, small } = ALLOC.stop();
    let after = vol.engine().stats().pool;

    let pages = (EXTENTS * E / 4096) as u64;
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (pages, 0),
        "every decoded page comes from the pool: {after:?}"
    );
    assert_eq!(
        large, 0,
        "allocations of 4 KiB or more in {EXTENTS} warm reads (and {small} smaller ones)"
    );
    drop(vol);
}
