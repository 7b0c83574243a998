//! Seeded random operations on two roots in lockstep, the mount and a plain reference
//! directory (writes, some fsync'ed; truncates, renames in and out of a subdirectory, hard
//! links, unlinks, fallocate modes on four files a thread, and the subdirectory removed when
//! empty and made again), and the comparison of the two.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::{text, Rng};

/// A file's bytes, None when it cannot be read.
pub fn read_all(p: &Path) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    fs::File::open(p).ok()?.read_to_end(&mut v).ok()?;
    Some(v)
}

/// Make thread `t`'s directories under `root` (`tT/d`).
pub fn dirs(root: &Path, t: usize) {
    fs::create_dir_all(root.join(format!("t{t}/d"))).unwrap();
}

/// One seeded operation on both roots, which must answer alike (the same success, or the
/// same errno); returns what it did.
pub fn step(rng: &mut Rng, roots: [&Path; 2], t: usize) -> String {
    let f = |root: &Path, i: u64| root.join(format!("t{t}/f{i}"));
    let d = |root: &Path, i: u64| root.join(format!("t{t}/d/f{i}"));
    let (a, b) = (rng.below(4), rng.below(4));
    let op = rng.below(12);
    let off = rng.below(700_000);
    let big = rng.below(4) == 0;
    let len = 1 + rng.below(if big { 1_500_000 } else { 9000 }) as usize;
    let data = text(rng, len);
    let mut answers = Vec::with_capacity(2);
    for root in roots {
        let answer = match op {
            0..=2 => OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(f(root, a))
                .and_then(|mut h| {
                    h.seek(SeekFrom::Start(off))?;
                    h.write_all(&data)?;
                    if op == 2 {
                        h.sync_data()?;
                    }
                    Ok(())
                }),
            3 => OpenOptions::new()
                .write(true)
                .open(f(root, a))
                .and_then(|h| h.set_len(off)),
            4 => fs::rename(f(root, a), f(root, b)),
            5 => fs::rename(f(root, a), d(root, b)),
            6 => fs::hard_link(d(root, a), f(root, b)),
            7 => fs::remove_file(f(root, a)),
            8 => fs::rename(d(root, a), f(root, b)),
            // rmdir of the subdirectory when it is empty, and mkdir again.
            11 => {
                let sub = root.join(format!("t{t}/d"));
                let _ = fs::remove_dir(&sub);
                fs::create_dir_all(&sub)
            }
            // fallocate: punch a hole, zero a range (maybe extending), or extend.
            _ => OpenOptions::new()
                .write(true)
                .open(f(root, a))
                .and_then(|h| {
                    let mode = match b {
                        0 => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        1 => libc::FALLOC_FL_ZERO_RANGE,
                        2 => libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                        _ => 0,
                    };
                    use std::os::fd::AsRawFd;
                    // SAFETY: fallocate on an open descriptor.
                    let r = unsafe { libc::fallocate(h.as_raw_fd(), mode, off as i64, len as i64) };
                    match r {
                        0 => Ok(()),
                        _ => Err(std::io::Error::last_os_error()),
                    }
                }),
        };
        answers.push(answer.map_err(|e| e.raw_os_error()));
    }
    let what = format!("t{t} op {op} a {a} b {b} off {off} len {len}");
    assert_eq!(
        answers[0], answers[1],
        "{what}: the mount and the reference answered differently"
    );
    what
}

/// Thread `t`'s files must read the same under both roots.
pub fn compare(m: &Path, r: &Path, t: usize, what: &str) {
    for i in 0..4 {
        for sub in ["", "d/"] {
            let rel = format!("t{t}/{sub}f{i}");
            let (x, y) = (read_all(&m.join(&rel)), read_all(&r.join(&rel)));
            assert!(
                x == y,
                "{rel} differs after {what}: {:?} vs {:?} bytes",
                x.map(|v| v.len()),
                y.map(|v| v.len())
            );
        }
    }
}

/// `threads` threads, each doing `steps` seeded random operations (seeds from `seed`) on its
/// own files of both roots and comparing the two after each.
pub fn run(mnt: &Path, reference: &Path, threads: usize, steps: usize, seed: u64) {
    for t in 0..threads {
        for root in [mnt, reference] {
            dirs(root, t);
        }
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = Rng(seed + t as u64 * 7919);
                for _ in 0..steps {
                    let what = step(&mut rng, [mnt, reference], t);
                    compare(mnt, reference, t, &what);
                }
            });
        }
    });
}
