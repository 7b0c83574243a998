//! The volume's write path with writeback threads, driven directly (no kernel page cache in
//! between): writes, reads, truncates, fsyncs and syncs from several threads against an
//! in-memory model, so reads hit dirty extents, extents under writeback and committed ones;
//! then a reopen must give back the model. Needs no root.
mod common;
use common::Rng;

use std::path::PathBuf;
use std::sync::Arc;

use wring_fs::{NewInode, Options, SetAttr, Volume};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wring-delalloc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    wring_fs::store::Store::mkfs(&d).unwrap();
    d
}

fn file(vol: &Volume, name: &str) -> u64 {
    let new = NewInode::file(0o644);
    vol.create(wring_fs::store::ROOT, name.as_bytes(), new)
        .unwrap()
        .0
}

fn model_write(m: &mut Vec<u8>, off: usize, data: &[u8]) {
    if m.len() < off + data.len() {
        m.resize(off + data.len(), 0);
    }
    m[off..off + data.len()].copy_from_slice(data);
}

/// Random steps on `ino` against a model; with `synchronous`, no write may leave dirty extents
/// behind it. Returns the model and how many writes left dirty extents behind.
fn run(vol: &Volume, ino: u64, seed: u64, steps: usize, synchronous: bool) -> (Vec<u8>, usize) {
    let mut rng = Rng(seed);
    let mut model = Vec::new();
    let mut left_dirty = 0;
    for step in 0..steps {
        let off = rng.below(600_000) as usize;
        let big = rng.below(4) == 0;
        let len = 1 + rng.below(if big { 400_000 } else { 5000 }) as usize;
        match rng.below(10) {
            0..=4 => {
                // Text, zeros (holes) or a mix.
                let data = match rng.below(3) {
                    0 => vec![0u8; len],
                    _ => common::text(&mut rng, len),
                };
                vol.write(ino, off as u64, &data, None).unwrap();
                model_write(&mut model, off, &data);
                let dirty = vol.delalloc_totals();
                if synchronous {
                    assert_eq!(dirty, (0, 0), "seed {seed} step {step}");
                }
                left_dirty += usize::from(dirty.1 > 0);
            }
            5..=7 => {
                let got = vol.read(ino, off as u64, len as u32).unwrap();
                let want = model.get(off..(off + len).min(model.len())).unwrap_or(&[]);
                assert!(
                    got == want,
                    "seed {seed} step {step}: read {off}+{len} differs"
                );
            }
            8 => {
                let set = SetAttr {
                    size: Some(off as u64),
                    ..Default::default()
                };
                vol.setattr(ino, &set).unwrap();
                model.resize(off, 0);
            }
            _ => vol.fsync(ino).unwrap(),
        }
        let size = vol.inode(ino).unwrap().size as usize;
        assert_eq!(size, model.len(), "seed {seed} step {step}: size");
    }
    (model, left_dirty)
}

#[test]
fn threads_against_a_model_then_reopen() {
    let dir = scratch("model");
    let opts = "compress-force=zstd:1,max_extent=64K,streams=2";
    let vol = Arc::new(Volume::open(&dir, Options::parse(opts).unwrap()).unwrap());
    vol.start_writeback();
    let inos: Vec<u64> = (0..4).map(|t| file(&vol, &format!("f{t}"))).collect();
    let models: Vec<Vec<u8>> = std::thread::scope(|s| {
        let hs: Vec<_> = inos
            .iter()
            .enumerate()
            .map(|(t, &ino)| {
                let vol = vol.clone();
                s.spawn(move || run(&vol, ino, 0x5eed + t as u64 * 104729, 300, false))
            })
            .collect();
        // Meanwhile: syncs of everything.
        for _ in 0..20 {
            vol.sync().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let runs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let left_dirty: usize = runs.iter().map(|r| r.1).sum();
        assert!(left_dirty > 0, "no write was left to writeback");
        runs.into_iter().map(|r| r.0).collect()
    });
    close(vol);
    let vol = Volume::open(&dir, Options::parse("compress=lzo").unwrap()).unwrap();
    for (ino, model) in inos.iter().zip(&models) {
        let got = vol.read(*ino, 0, model.len() as u32 + 10).unwrap();
        assert!(&got == model, "inode {ino} differs after reopen");
        assert_eq!(vol.inode(*ino).unwrap().size, model.len() as u64);
    }
    drop(vol);
    let r = wring_fs::fsck::fsck(&dir).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_asynchronous_writeback_writes_are_synchronous() {
    let dir = scratch("sync");
    let vol = Volume::open(&dir, Options::parse("compress-force=lzo").unwrap()).unwrap();
    let ino = file(&vol, "a");
    let (model, _) = run(&vol, ino, 7, 120, true);
    drop(vol);
    let vol = Volume::open(&dir, Options::default()).unwrap();
    assert_eq!(vol.read(ino, 0, model.len() as u32).unwrap(), model);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader racing one writer that rewrites the whole file with a new non-zero byte and then
/// truncates it: every read must come from one state of the file, so it never holds a zero
/// (a read mixing dirty extents from before a truncate with a snapshot from after it would
/// return the truncated part as a hole).
#[test]
fn reads_racing_rewrites_and_truncates_see_one_state() {
    const E: u64 = 64 * 1024;
    let dir = scratch("race");
    let opts = "compress-force=lzo,max_extent=64K,streams=2";
    let vol = Arc::new(Volume::open(&dir, Options::parse(opts).unwrap()).unwrap());
    vol.start_writeback();
    let ino = file(&vol, "r");
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let got = vol.read(ino, 0, 8 * E as u32).unwrap();
                if let Some(at) = got.iter().position(|&b| b == 0) {
                    panic!("read {reads}: a zero at {at} of {} bytes", got.len());
                }
                reads += 1;
            }
            reads
        });
        for round in 0..400u64 {
            let byte = 1 + (round % 255) as u8;
            vol.write(ino, 0, &vec![byte; 8 * E as usize], None)
                .unwrap();
            let set = SetAttr {
                size: Some(E + round * 997 % (6 * E)),
                ..Default::default()
            };
            vol.setattr(ino, &set).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Drop the volume once the writeback threads, which hold it for a moment at a time, have let
/// go (as the daemon closes it): reopening before that finds the database still open.
fn close(mut vol: Arc<Volume>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match Arc::try_unwrap(vol) {
            Ok(v) => return drop(v),
            Err(v) if std::time::Instant::now() < deadline => {
                vol = v;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(_) => panic!("the volume is still in use after 10 s"),
        }
    }
}
