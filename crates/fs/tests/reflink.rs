//! copy_file_range through the volume: whole extents shared (the store keeps their bytes
//! once, with a reference each), the unaligned ends copied, copy-on-write after a share,
//! space back with the last reference, and fsck's counts right after each step — on the
//! data file and, with the compactor moving shared extents, in a bucket (tests/s3.rs).

mod common;
use common::{text, Rng};

use std::path::Path;
use std::sync::Arc;

use wring_fs::store::{Store, ROOT};
use wring_fs::{fsck, CopyRange, NewInode, Options, Volume};

const E: u64 = 128 << 10;

fn volume(name: &str) -> (std::path::PathBuf, Arc<Volume>) {
    let dir = std::env::temp_dir().join(format!("wring-reflink-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, Options::parse("compress=zstd:3").unwrap()).unwrap();
    (dir, Arc::new(vol))
}

fn file(vol: &Volume, name: &str) -> u64 {
    vol.create(ROOT, name.as_bytes(), NewInode::file(0o644))
        .unwrap()
        .0
}

fn read_all(vol: &Volume, ino: u64) -> Vec<u8> {
    let size = vol.inode(ino).unwrap().size;
    vol.read(ino, 0, size as u32).unwrap()
}

fn copy(vol: &Volume, (from, off_in): (u64, u64), (to, off_out): (u64, u64), len: u64) -> u64 {
    let req = CopyRange {
        ino_in: from,
        off_in,
        ino_out: to,
        off_out,
        len,
    };
    vol.copy_range(req, None).unwrap()
}

/// The store's stored bytes (the `used` counter, as df counts them).
fn used(vol: &Volume) -> u64 {
    vol.sync().unwrap();
    let (total, free, _) = vol.statfs().unwrap();
    (total - free) * 4096
}

fn fsck_clean(dir: &Path) -> u64 {
    let report = fsck::fsck(dir).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    report.shared
}

#[test]
fn a_whole_file_copy_shares_every_extent_and_takes_no_new_space() {
    let (dir, vol) = volume("whole");
    let src = file(&vol, "src");
    let data = text(&mut Rng(3), (20 * E + 777) as usize);
    vol.write(src, 0, &data, None).unwrap();
    vol.fsync(src).unwrap();
    let before = used(&vol);
    let dst = file(&vol, "dst");
    assert_eq!(copy(&vol, (src, 0), (dst, 0), u64::MAX), data.len() as u64);
    assert_eq!(read_all(&vol, dst), data);
    let after = used(&vol);
    assert!(after - before < 64 << 10, "{before} → {after}");
    // compsize's view: shared extents' disk usage once, the references twice (the last,
    // 777-byte extent is inline: copied, so two extents).
    let report = vol.stat_report(ROOT).unwrap();
    assert_eq!(report.total.referenced, 2 * data.len() as u64);
    assert_eq!(
        (report.total.refs, report.total.extents, report.inline),
        (42, 22, 2)
    );
    let disk = |ino| vol.inode(ino).unwrap().disk;
    let held = |ino| vol.stat_report(ino).unwrap().total.disk;
    assert_eq!((disk(src), disk(dst)), (held(src), held(dst)));
    assert_eq!(disk(dst), disk(src));
    vol.sync().unwrap();
    drop(vol);
    assert_eq!(fsck_clean(&dir), 20);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writes_after_a_share_change_only_their_own_file() {
    let (dir, vol) = volume("cow");
    let src = file(&vol, "src");
    let data = text(&mut Rng(5), (8 * E) as usize);
    vol.write(src, 0, &data, None).unwrap();
    let dst = file(&vol, "dst");
    assert_eq!(copy(&vol, (src, 0), (dst, 0), 8 * E), 8 * E);
    vol.write(dst, E + 10, b"written into the copy", None)
        .unwrap();
    vol.write(src, 3 * E, b"written into the source", None)
        .unwrap();
    vol.fallocate(src, (5 * E, 2 * E, 3), None).unwrap(); // punch hole
    vol.fsync(dst).unwrap();
    let mut want_src = data.clone();
    want_src[3 * E as usize..][..23].copy_from_slice(b"written into the source");
    want_src[5 * E as usize..7 * E as usize].fill(0);
    let mut want_dst = data.clone();
    want_dst[(E + 10) as usize..][..21].copy_from_slice(b"written into the copy");
    assert_eq!(read_all(&vol, src), want_src);
    assert_eq!(read_all(&vol, dst), want_dst);
    vol.sync().unwrap();
    drop(vol);
    // Extents 0, 2, 4 and 7 are still shared; 1 and 3 were written, 5 and 6 punched.
    assert_eq!(fsck_clean(&dir), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unaligned_copies_share_the_middle_and_copy_the_ends() {
    let (dir, vol) = volume("ends");
    let src = file(&vol, "src");
    let data = text(&mut Rng(9), (10 * E) as usize);
    vol.write(src, 0, &data, None).unwrap();
    let dst = file(&vol, "dst");
    let old = text(&mut Rng(11), (12 * E) as usize);
    vol.write(dst, 0, &old, None).unwrap();
    // Same phase: extents 1 to 4 of the source land on 3 to 6 of the destination.
    let (off_in, off_out, len) = (E / 3, 2 * E + E / 3, 5 * E + 1000);
    assert_eq!(copy(&vol, (src, off_in), (dst, off_out), len), len);
    // Out of phase: nothing shared, all copied.
    let other = file(&vol, "other");
    assert_eq!(copy(&vol, (src, 4096), (other, 0), 3 * E), 3 * E);
    // Past the source's end: cut short at it; from past it: nothing.
    let tail = file(&vol, "tail");
    assert_eq!(copy(&vol, (src, 9 * E), (tail, 0), 5 * E), E);
    assert_eq!(copy(&vol, (src, 10 * E), (tail, 0), 5 * E), 0);
    vol.fsync(dst).unwrap();
    let mut want = old.clone();
    want[off_out as usize..][..len as usize]
        .copy_from_slice(&data[off_in as usize..][..len as usize]);
    assert_eq!(read_all(&vol, dst), want);
    assert_eq!(read_all(&vol, other), data[4096..][..(3 * E) as usize]);
    assert_eq!(read_all(&vol, tail), data[(9 * E) as usize..]);
    vol.sync().unwrap();
    drop(vol);
    assert_eq!(fsck_clean(&dir), 4 + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_last_reference_frees_the_bytes_and_truncate_drops_references() {
    let (dir, vol) = volume("free");
    let empty = used(&vol);
    let src = file(&vol, "src");
    let data = text(&mut Rng(13), (6 * E + 5) as usize);
    vol.write(src, 0, &data, None).unwrap();
    let copies: Vec<u64> = (0..3)
        .map(|i| {
            let c = file(&vol, &format!("c{i}"));
            assert_eq!(copy(&vol, (src, 0), (c, 0), u64::MAX), data.len() as u64);
            c
        })
        .collect();
    let full = used(&vol);
    vol.remove(ROOT, b"src", false).unwrap();
    let cut = wring_fs::SetAttr {
        size: Some(2 * E),
        ..Default::default()
    };
    vol.setattr(copies[0], &cut).unwrap();
    assert_eq!(used(&vol), full, "copies still name every extent");
    assert_eq!(read_all(&vol, copies[2]), data);
    assert_eq!(read_all(&vol, copies[0]), data[..(2 * E) as usize]);
    vol.remove(ROOT, b"c1", false).unwrap();
    vol.remove(ROOT, b"c2", false).unwrap();
    let left = used(&vol);
    assert!(left < full / 2, "{left} of {full}");
    vol.remove(ROOT, b"c0", false).unwrap();
    assert!(used(&vol) <= empty + 8192, "all back: {}", used(&vol));
    vol.sync().unwrap();
    drop(vol);
    assert_eq!(fsck_clean(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_copy_within_one_file_shares_and_overlaps_are_refused() {
    let (dir, vol) = volume("self");
    let f = file(&vol, "f");
    let data = text(&mut Rng(17), (4 * E) as usize);
    vol.write(f, 0, &data, None).unwrap();
    assert_eq!(copy(&vol, (f, 0), (f, 4 * E), 4 * E), 4 * E);
    let req = CopyRange {
        ino_in: f,
        off_in: 0,
        ino_out: f,
        off_out: E,
        len: 2 * E,
    };
    assert_eq!(vol.copy_range(req, None).unwrap_err().errno(), libc::EINVAL);
    let got = read_all(&vol, f);
    assert_eq!(got[..(4 * E) as usize], data[..]);
    assert_eq!(got[(4 * E) as usize..], data[..]);
    vol.sync().unwrap();
    drop(vol);
    assert_eq!(fsck_clean(&dir), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes the mount's df counts as used.
fn df_used(p: &Path) -> u64 {
    let s = nix_statvfs(p);
    (s.0 - s.1) * s.2
}

/// (blocks, free blocks, fragment size) of statvfs(2) on `p`.
fn nix_statvfs(p: &Path) -> (u64, u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: statvfs is plain integers, for which all zeros is a value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs the call fills.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (s.f_blocks, s.f_bfree, s.f_frsize)
}

#[test]
fn cp_on_a_mount_shares_extents_and_fsck_counts_them() {
    if !common::require_root("cp_on_a_mount_shares_extents_and_fsck_counts_them") {
        return;
    }
    let mut m = common::Mount::new("reflink");
    m.start("compress=zstd:3");
    let data = text(&mut Rng(23), 24 << 20);
    std::fs::write(m.p("src"), &data).unwrap();
    m.sync();
    let before = df_used(&m.mnt);
    // Plain cp, cp -a and python's os.copy_file_range all reach copy_file_range(2); the
    // kernel sends it to the daemon, which shares. (cp takes it only for a file that does not
    // look sparse: st_blocks counts the bytes the extents cover, as btrfs's does, not the
    // fewer they store.)
    let run = |c: &str| {
        let o = common::sh(c);
        assert!(o.status.success(), "{c}: {o:?}");
    };
    let mnt = m.mnt.display().to_string();
    run(&format!("cp {mnt}/src {mnt}/cp"));
    run(&format!("cp -a {mnt}/src {mnt}/cpa"));
    run(&format!(
        "python3 -c 'import os; a=os.open(\"{mnt}/src\", os.O_RDONLY); \
         b=os.open(\"{mnt}/py\", os.O_WRONLY|os.O_CREAT, 0o644); n=0\nwhile True:\n    \
         k=os.copy_file_range(a, b, 1<<40)\n    n+=k\n    if k==0: break\nassert n=={}'",
        data.len()
    ));
    m.sync();
    let after = df_used(&m.mnt);
    assert!(after - before < 1 << 20, "df grew {before} → {after}");
    assert!(std::fs::read(m.p("cp")).unwrap() == data);
    assert!(std::fs::read(m.p("cpa")).unwrap() == data);
    assert!(std::fs::read(m.p("py")).unwrap() == data);
    // Copy-on-write: a write into a copy leaves the others.
    run(&format!(
        "printf changed | dd of={mnt}/cp bs=1 seek=1000000 conv=notrunc 2>/dev/null"
    ));
    run(&format!("rm {mnt}/src"));
    let mut want = data.clone();
    want[1_000_000..][..7].copy_from_slice(b"changed");
    assert!(std::fs::read(m.p("cp")).unwrap() == want);
    assert!(std::fs::read(m.p("py")).unwrap() == data);
    let stat = common::sh(&format!(
        "{} stat {mnt}",
        env!("CARGO_BIN_EXE_wring-fsd").replace("wring-fsd", "wring")
    ));
    let stat = String::from_utf8_lossy(&stat.stdout).to_string();
    m.stop();
    let report = fsck::fsck(&m.store).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // 192 extents, each shared by three files, then by two once src is gone.
    assert!(
        report.shared >= 190,
        "{} shared; wring stat: {stat}",
        report.shared
    );
}

/// `st_blocks` on the mount is what the kernel's btrfs reports for the same files: the bytes
/// their extents cover (a written 4 KiB block counts whole, a hole not at all), before the
/// writeback commits and after, not the fewer bytes compression stores.
#[test]
fn st_blocks_are_what_btrfs_reports() {
    if !common::require_root("st_blocks_are_what_btrfs_reports") {
        return;
    }
    let btrfs = wring_btrfs::scratch::ScratchFs::new("compress=zstd:3").unwrap();
    let mut m = common::Mount::new("reflink-blocks");
    m.start("compress=zstd:3");
    let text_file = std::env::temp_dir().join(format!("wring-blocks-{}", std::process::id()));
    std::fs::write(&text_file, text(&mut Rng(31), (3 << 20) + 100)).unwrap();
    let t = text_file.display();
    // Each writes the same files on the mount and on btrfs, and prints their st_blocks.
    let script = |d: &Path| {
        let d = d.display();
        format!(
            "cd {d} && cp --sparse=never {t} big && printf 0123456789 > small && : > empty && \
             dd if={t} of=holes bs=4096 count=1 2>/dev/null && \
             dd if={t} of=holes bs=4096 count=1 seek=256 conv=notrunc 2>/dev/null && \
             truncate -s 2M holes && stat -c '%n %b' big small empty holes"
        )
    };
    let blocks = |d: &Path| {
        let o = common::sh(&script(d));
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    let stat = |d: &Path| {
        let o = common::sh(&format!(
            "cd {} && stat -c '%n %b' big small empty holes",
            d.display()
        ));
        String::from_utf8(o.stdout).unwrap()
    };
    let want = blocks(btrfs.path());
    let before_commit = blocks(&m.mnt);
    btrfs.sync().unwrap();
    m.sync();
    let (want_after, after) = (stat(btrfs.path()), stat(&m.mnt));
    let _ = std::fs::remove_file(&text_file);
    m.stop();
    assert_eq!(want, want_after, "btrfs before and after its commit");
    assert_eq!(before_commit, want, "before the writeback commits");
    assert_eq!(after, want, "after it commits");
    assert!(want.contains("big 6152\n"), "{want}");
}

#[test]
fn kill_9_during_shared_copies_loses_nothing_and_keeps_the_counts() {
    if !common::require_root("kill_9_during_shared_copies_loses_nothing_and_keeps_the_counts") {
        return;
    }
    let mut m = common::Mount::new("reflink-kill");
    m.start("compress=zstd:1");
    let data = text(&mut Rng(29), 16 << 20);
    std::fs::write(m.p("src"), &data).unwrap();
    m.sync();
    let mnt = m.mnt.display().to_string();
    for round in 0..6 {
        // Copies and writes into them run while the daemon is killed.
        let script = format!(
            "i=0; while true; do i=$((i+1)); cp {mnt}/src {mnt}/c$i || exit 0; \
             printf x | dd of={mnt}/c$i bs=1 seek=$((i*4099)) conv=notrunc 2>/dev/null || exit 0; \
             rm -f {mnt}/c$((i-2)); done"
        );
        let mut worker = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300 + 150 * round));
        m.kill();
        let _ = worker.kill();
        let _ = worker.wait();
        let report = fsck::fsck(&m.store).unwrap();
        assert!(
            report.problems.is_empty(),
            "round {round}: {:?}",
            report.problems
        );
        m.start("compress=zstd:1");
        assert!(
            std::fs::read(m.p("src")).unwrap() == data,
            "round {round}: the source changed"
        );
    }
    m.stop();
    let report = fsck::fsck(&m.store).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn random_copies_writes_and_truncates_match_a_model_and_fsck() {
    let shared: Vec<u64> = (31..37).map(random_run).collect();
    assert!(
        shared.iter().all(|&n| n >= 3),
        "little was shared: {shared:?}"
    );
}

/// One run of [`random_copies_writes_and_truncates_match_a_model_and_fsck`]: the most
/// extents shared at once.
fn random_run(seed: u64) -> u64 {
    let (dir, vol) = volume(&format!("random{seed}"));
    let mut rng = Rng(seed);
    let names: Vec<String> = (0..4).map(|i| format!("f{i}")).collect();
    let inos: Vec<u64> = names.iter().map(|n| file(&vol, n)).collect();
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); inos.len()];
    let mut most_shared = 0;
    // Offsets in quarter extents, so that copies are often in phase and often not.
    let at = |rng: &mut Rng| rng.below(24) * (E / 4) + [0, 0, 0, 100][rng.below(4) as usize];
    for step in 0..400 {
        let f = rng.below(inos.len() as u64) as usize;
        match rng.below(10) {
            0..=2 => {
                let (off, n) = (at(&mut rng), 1 + rng.below(3 * E));
                let data = text(&mut rng, n as usize);
                vol.write(inos[f], off, &data, None).unwrap();
                let m = &mut model[f];
                let end = (off + n) as usize;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[off as usize..end].copy_from_slice(&data);
            }
            3..=7 => {
                let g = rng.below(inos.len() as u64) as usize;
                let off_in = at(&mut rng);
                // Half in phase, so that whole extents line up.
                let off_out = match rng.below(2) {
                    0 => off_in % E + rng.below(12) * E,
                    _ => at(&mut rng),
                };
                let len = rng.below(6 * E);
                let req = CopyRange {
                    ino_in: inos[f],
                    off_in,
                    ino_out: inos[g],
                    off_out,
                    len,
                };
                // As the kernel checks it: with the length cut at the source's end.
                let count = (model[f].len() as u64).saturating_sub(off_in).min(len);
                let overlap = f == g && off_in < off_out + count && off_out < off_in + count;
                match vol.copy_range(req, None) {
                    Err(e) => assert!(overlap && e.errno() == libc::EINVAL, "step {step}: {e}"),
                    Ok(n) => {
                        assert!(!overlap, "step {step}");
                        let src = model[f].clone();
                        let want = (src.len() as u64).saturating_sub(off_in).min(len);
                        assert_eq!(n, want, "step {step}: {req:?}");
                        let m = &mut model[g];
                        let end = (off_out + n) as usize;
                        let t = vol.stat_report(ROOT).unwrap().total;
                        most_shared = most_shared.max(t.refs - t.extents);
                        if n > 0 {
                            if m.len() < end {
                                m.resize(end, 0);
                            }
                            m[off_out as usize..end]
                                .copy_from_slice(&src[off_in as usize..][..n as usize]);
                        }
                    }
                }
            }
            8 => {
                let size = rng.below(12 * E);
                let cut = wring_fs::SetAttr {
                    size: Some(size),
                    ..Default::default()
                };
                vol.setattr(inos[f], &cut).unwrap();
                model[f].resize(size as usize, 0);
            }
            _ => vol.fsync(inos[f]).unwrap(),
        }
    }
    for (i, &ino) in inos.iter().enumerate() {
        assert!(read_all(&vol, ino) == model[i], "file {i}");
    }
    vol.sync().unwrap();
    drop(vol);
    fsck_clean(&dir);
    let vol = Volume::open(&dir, Options::parse("compress=zstd:3").unwrap()).unwrap();
    for (i, &ino) in inos.iter().enumerate() {
        assert!(read_all(&vol, ino) == model[i], "file {i} after a reopen");
    }
    for n in &names {
        vol.remove(ROOT, n.as_bytes(), false).unwrap();
    }
    vol.sync().unwrap();
    drop(vol);
    assert_eq!(fsck_clean(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
    most_shared
}

#[test]
fn a_source_cut_short_during_copies_never_touches_bytes_outside_the_range() {
    let (dir, vol) = volume("racing-truncate");
    let src = file(&vol, "src");
    let dst = file(&vol, "dst");
    let data = text(&mut Rng(37), (80 * E) as usize);
    let old = text(&mut Rng(41), (96 * E) as usize);
    vol.write(dst, 0, &old, None).unwrap();
    let (off, len) = (32 * E, 32 * E);
    vol.write(src, 0, &data, None).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the truncating thread however the copying one ends (a panic too).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let _stop = Stop(&stop);
        s.spawn(|| {
            let mut rng = Rng(43);
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if n % 64 == 63 {
                    vol.write(src, 0, &data, None).unwrap();
                }
                n += 1;
                // Cut short, then long again (a hole): the copies race both.
                for size in [rng.below(80 * E), 80 * E] {
                    let cut = wring_fs::SetAttr {
                        size: Some(size),
                        ..Default::default()
                    };
                    vol.setattr(src, &cut).unwrap();
                }
            }
        });
        let mut counts = [0u32; 3];
        let t = std::time::Instant::now();
        let secs = std::time::Duration::from_secs;
        // Two seconds, and on until every outcome was seen often (a busy machine gives
        // fewer partial copies), up to twenty.
        while t.elapsed() < secs(2) || (counts.iter().any(|&n| n <= 10) && t.elapsed() < secs(20)) {
            let n = copy(&vol, (src, off), (dst, off), len);
            counts[usize::from(n > 0) + usize::from(n == len)] += 1;
        }
        eprintln!("copies of nothing, of part, of all: {counts:?}");
        assert!(
            counts.iter().all(|&n| n > 10),
            "the race was not run: {counts:?}"
        );
    });
    let got = read_all(&vol, dst);
    assert_eq!(got.len(), old.len());
    assert!(
        got[..off as usize] == old[..off as usize],
        "bytes before the range changed"
    );
    assert!(
        got[(off + len) as usize..] == old[(off + len) as usize..],
        "bytes after the range changed"
    );
    vol.sync().unwrap();
    drop(vol);
    fsck_clean(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_copy_by_a_user_without_cap_fsetid_drops_the_set_id_bits_as_the_kernel_does() {
    if !common::require_root(
        "a_copy_by_a_user_without_cap_fsetid_drops_the_set_id_bits_as_the_kernel_does",
    ) {
        return;
    }
    let mut m = common::Mount::new("reflink-setid");
    m.start("compress=zstd:1,allow_other");
    let mnt = m.mnt.display().to_string();
    let run = |c: &str| {
        let o = common::sh(c);
        assert!(o.status.success(), "{c}: {o:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    run(&format!(
        "chmod 755 {} {mnt}; head -c 300000 /dev/urandom > {mnt}/src; chmod 644 {mnt}/src; \
         for f in user root; do \
         head -c 300000 /dev/urandom > {mnt}/$f; chown nobody {mnt}/$f; chmod 6755 {mnt}/$f; done",
        m.base.display()
    ));
    let copy = |to: &str| {
        format!(
            "/usr/bin/python3 -c 'import os; a=os.open(\"{mnt}/src\", os.O_RDONLY); \
             b=os.open(\"{mnt}/{to}\", os.O_WRONLY); os.copy_file_range(a, b, 262144, 0, 0)'"
        )
    };
    // As the owner without CAP_FSETID (setpriv drops every capability), then as root.
    run(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all {}",
        copy("user")
    ));
    run(&copy("root"));
    assert_eq!(
        run(&format!("stat -c %a {mnt}/user {mnt}/root")),
        "755\n6755"
    );
    m.stop();
}
