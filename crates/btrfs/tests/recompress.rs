//! `wring btrfs recompress` and `stat` on real btrfs (loop devices; root).
//!
//! * Corpus slices recompressed with zlib, lzo and zstd at several levels (19 and a negative
//!   one included) read back byte-identical from the kernel after a remount, decode in wring,
//!   keep their holes, and `compsize` agrees with `wring btrfs stat`; `btrfs scrub` and
//!   `btrfs check` find nothing.
//! * Files that are open, changed during the run, inline, nodatacow, NOCOMPRESS or carry file
//!   capabilities are skipped with the reason.
//! * Killing recompress with SIGKILL at random moments loses nothing.
//!
//! Without root the tests fail, unless `WRING_SKIP_ROOT=1` opts out (see `wring_testing::require`).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wring_btrfs::fsinfo::{inode_flags, FS_NOCOW_FL};
use wring_btrfs::ioctl::MAX_UNCOMPRESSED;
use wring_btrfs::recompress::{recompress, Options, Skip, Status, Summary};
use wring_btrfs::scratch::ScratchFs;
use wring_btrfs::search::{DiskCompression, ItemKind};
use wring_btrfs::stat::{file_items, stat_paths};
use wring_btrfs::verify_path;
use wring_engine::{CompressSpec, Engine, EngineConfig};
use wring_testing::{self as testing, interleave, random_bytes, samples};

/// Specs recompressed in the round-trip test, with the on-disk type they must produce.
const SPECS: [(&str, DiskCompression); 7] = [
    ("zlib:3", DiskCompression::Zlib),
    ("zlib:9", DiskCompression::Zlib),
    ("lzo", DiskCompression::Lzo),
    ("zstd:-3", DiskCompression::Zstd),
    ("zstd:1", DiskCompression::Zstd),
    ("zstd:9", DiskCompression::Zstd),
    ("zstd:19", DiskCompression::Zstd),
];

/// Corpus bytes per spec.
const BYTES_PER_SPEC: usize = 3 << 20;

fn engine(jobs: usize) -> Arc<Engine> {
    Arc::new(Engine::new(EngineConfig {
        streams: jobs,
        ..Default::default()
    }))
}

fn run(dir: &Path, spec: &str, jobs: usize) -> Summary {
    let opts = Options {
        jobs,
        ..Options::new(spec.parse::<CompressSpec>().unwrap())
    };
    recompress(&engine(jobs), &[dir.to_path_buf()], &opts, &mut |_| {})
        .unwrap_or_else(|e| panic!("recompress {spec} {}: {e}", dir.display()))
}

/// The files under a directory and their bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn assert_same(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
    when: &str,
) {
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "{when}: the set of files changed"
    );
    for (path, want) in before {
        let got = &after[path];
        assert_eq!(
            got.len(),
            want.len(),
            "{when}: {} changed size",
            path.display()
        );
        if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
            panic!("{when}: {} differs at byte {at}", path.display());
        }
    }
}

/// File ranges that are holes or prealloc (no written data), from the extent items.
fn unwritten_ranges(path: &Path) -> Vec<(u64, u64, &'static str)> {
    let file = File::open(path).unwrap();
    let size = file.metadata().unwrap().len();
    let mut out = Vec::new();
    let mut pos = 0;
    for item in file_items(&file).unwrap() {
        if item.file_offset > pos {
            out.push((pos, item.file_offset, "hole"));
        }
        match item.kind {
            ItemKind::Prealloc => out.push((item.file_offset, item.end(), "prealloc")),
            ItemKind::Regular if item.disk_bytenr == 0 => {
                out.push((item.file_offset, item.end(), "hole"))
            }
            _ => {}
        }
        pos = item.end();
    }
    if pos < size {
        out.push((pos, size, "hole"));
    }
    out
}

/// Files of every shape under `dir`: corpus slices, a sparse file, a preallocated one, one the
/// kernel compressed (compression property), one whose extents were overwritten in the middle,
/// and a tiny inline one.
fn write_shapes(dir: &Path, data: &[u8], seed: u64) {
    fs::create_dir_all(dir).unwrap();
    let third = data.len() / 3;
    fs::write(dir.join("slice-a"), &data[..third + 1001]).unwrap();
    fs::write(dir.join("slice-b"), &data[third + 1001..]).unwrap();
    let sparse = File::create(dir.join("sparse")).unwrap();
    sparse.write_all_at(&data[..300_001], 1 << 20).unwrap();
    sparse.write_all_at(&data[..50_000], 4 << 20).unwrap();
    sparse.set_len((6 << 20) + 123).unwrap();
    let pre = File::create(dir.join("prealloc")).unwrap();
    pre.write_all_at(&data[..200_000], 0).unwrap();
    fallocate(&pre, 0, 1 << 20, 512 << 10);
    let kernel = dir.join("kernel-zlib");
    File::create(&kernel).unwrap();
    let prop = Command::new("btrfs")
        .args(["property", "set"])
        .arg(&kernel)
        .args(["compression", "zlib"])
        .output()
        .unwrap();
    assert!(prop.status.success(), "btrfs property set: {prop:?}");
    fs::write(&kernel, &data[..700_000]).unwrap();
    let over = File::create(dir.join("overwritten")).unwrap();
    over.write_all_at(&data[..1 << 20], 0).unwrap();
    over.sync_data().unwrap();
    over.write_all_at(&random_bytes(seed, 8192), 40960).unwrap();
    over.write_all_at(&random_bytes(seed + 1, 4096), 300 << 10)
        .unwrap();
    fs::write(dir.join("tiny"), &data[..900]).unwrap();
    fs::write(dir.join("random"), random_bytes(seed + 2, 700_001)).unwrap();
}

fn fallocate(file: &File, mode: i32, offset: i64, len: i64) {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the call; fallocate takes no pointers.
    let ret = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) };
    assert_eq!(ret, 0, "fallocate: {}", std::io::Error::last_os_error());
}

/// compsize -b's TOTAL row: (disk, uncompressed, referenced). compsize must be installed
/// (Debian package btrfs-compsize; scripts/setup.sh installs it).
fn compsize_total(path: &Path) -> (u64, u64, u64) {
    let out = Command::new("compsize")
        .arg("-b")
        .arg(path)
        .output()
        .unwrap_or_else(|e| {
            panic!("could not run compsize (install the Debian package btrfs-compsize): {e}")
        });
    assert!(out.status.success(), "compsize: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("TOTAL"))
        .unwrap_or_else(|| panic!("compsize printed no TOTAL row:\n{text}"));
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(2)
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

#[test]
fn recompressed_files_read_back_identical_at_every_level() {
    if !testing::require_root("recompressed_files_read_back_identical_at_every_level") {
        return;
    }
    let started = Instant::now();
    let corpus = samples(BYTES_PER_SPEC * 2);
    let data = interleave(&corpus, 3 * MAX_UNCOMPRESSED + 4096, BYTES_PER_SPEC);
    let mut scratch = ScratchFs::new("").unwrap();
    for (i, (spec, _)) in SPECS.iter().enumerate() {
        write_shapes(
            &scratch.path().join(spec.replace(':', "_")),
            &data,
            i as u64,
        );
    }
    scratch.sync().unwrap();
    let before = snapshot(scratch.path());
    let holes: BTreeMap<PathBuf, _> = before
        .keys()
        .map(|p| (p.clone(), unwritten_ranges(p)))
        .collect();
    for (spec, _) in SPECS {
        let dir = scratch.path().join(spec.replace(':', "_"));
        let summary = run(&dir, spec, 2);
        for f in &summary.files {
            let name = f.path.file_name().unwrap().to_string_lossy();
            match (&*name, &f.status) {
                ("tiny", Status::Skipped(Skip::Inline)) => {}
                (_, Status::Done) => {}
                (n, s) => panic!("{spec} {n}: {s:?}"),
            }
        }
        let after = summary.after.as_ref().unwrap().total();
        assert!(
            after.disk < summary.before.total().disk,
            "{spec}: disk usage did not shrink: {:?} -> {after:?}",
            summary.before.total()
        );
        println!(
            "{spec}: {} -> {} disk bytes for {} ({} compressed extents)",
            summary.before.total().disk,
            after.disk,
            after.uncompressed,
            summary
                .files
                .iter()
                .map(|f| f.compressed_extents)
                .sum::<u64>()
        );
    }
    // Holes and prealloc stayed where they were.
    for (path, ranges) in &holes {
        assert_eq!(
            &unwritten_ranges(path),
            ranges,
            "{}: holes moved",
            path.display()
        );
    }
    scratch.sync().unwrap();
    scratch.remount().unwrap();
    assert_same(&before, &snapshot(scratch.path()), "after remount");
    let engine = engine(2);
    for (spec, disk_type) in SPECS {
        let dir = scratch.path().join(spec.replace(':', "_"));
        let mut compressed = 0;
        for name in ["slice-a", "slice-b", "sparse", "overwritten", "kernel-zlib"] {
            let report = verify_path(&engine, &dir.join(name)).unwrap();
            assert!(
                report.is_ok(),
                "{spec} {name}: {:?}",
                report.failures().next()
            );
            compressed += report.compressed_extents();
        }
        assert!(
            compressed > 10,
            "{spec}: only {compressed} compressed extents"
        );
        let (stat, _) = stat_paths(std::slice::from_ref(&dir)).unwrap();
        assert!(
            stat.by_kind
                .keys()
                .any(|k| *k == wring_btrfs::stat::Kind::Data(disk_type)),
            "{spec}: no {disk_type} extents: {:?}",
            stat.by_kind
        );
    }
    // compsize and wring btrfs stat agree, byte for byte.
    let (stat, _) = stat_paths(&[scratch.path().to_path_buf()]).unwrap();
    let t = stat.total();
    assert_eq!(
        compsize_total(scratch.path()),
        (t.disk, t.uncompressed, t.referenced),
        "compsize vs wring stat"
    );
    print!("{}", stat.render(false));
    let scrub = scratch.scrub().unwrap();
    assert!(scrub.contains("no errors found"), "{scrub}");
    scratch.check().unwrap();
    assert_same(&before, &snapshot(scratch.path()), "after btrfs check");
    println!("round trip took {:.1}s", started.elapsed().as_secs_f64());
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated and live for the call; value is a valid slice.
    let ret = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(
        ret,
        0,
        "setxattr {name}: {}",
        std::io::Error::last_os_error()
    );
}

fn chattr(flag: &str, path: &Path) {
    let out = Command::new("chattr").arg(flag).arg(path).output().unwrap();
    assert!(out.status.success(), "chattr {flag}: {out:?}");
}

#[test]
fn files_that_must_not_be_touched_are_skipped_with_the_reason() {
    if !testing::require_root("files_that_must_not_be_touched_are_skipped_with_the_reason") {
        return;
    }
    let scratch = ScratchFs::new("").unwrap();
    let dir = scratch.path();
    let data = interleave(&samples(2 << 20), 65536, 1 << 20);
    let put = |name: &str| {
        let p = dir.join(name);
        fs::write(&p, &data).unwrap();
        p
    };
    put("plain");
    let open = put("open-for-writing");
    let nocow = dir.join("nocow");
    File::create(&nocow).unwrap();
    chattr("+C", &nocow);
    fs::write(&nocow, &data).unwrap();
    assert_ne!(
        inode_flags(&File::open(&nocow).unwrap()).unwrap() & FS_NOCOW_FL,
        0
    );
    let nocomp = put("nocompress");
    chattr("+m", &nocomp);
    let caps = put("with-capabilities");
    // VFS_CAP_REVISION_2, no effective bit, CAP_NET_RAW permitted.
    let mut cap = vec![0u8; 20];
    cap[..4].copy_from_slice(&0x0200_0000u32.to_le_bytes());
    cap[4..8].copy_from_slice(&(1u32 << 13).to_le_bytes());
    set_xattr(&caps, "security.capability", &cap);
    fs::write(dir.join("inline"), &data[..500]).unwrap();
    scratch.sync().unwrap();
    let before = snapshot(dir);

    let holder = OpenOptions::new().append(true).open(&open).unwrap();
    let summary = run(dir, "zstd:3", 2);
    drop(holder);
    let status = |name: &str| -> &Status {
        &summary
            .files
            .iter()
            .find(|f| f.path.file_name().unwrap() == name)
            .unwrap()
            .status
    };
    assert!(matches!(status("plain"), Status::Done));
    assert!(
        matches!(status("open-for-writing"), Status::Skipped(Skip::InUse)),
        "{:?}",
        status("open-for-writing")
    );
    assert!(matches!(status("nocow"), Status::Skipped(Skip::NoDataCow)));
    assert!(matches!(
        status("nocompress"),
        Status::Skipped(Skip::NoCompress)
    ));
    assert!(matches!(
        status("with-capabilities"),
        Status::Skipped(Skip::FileCapabilities)
    ));
    assert!(matches!(status("inline"), Status::Skipped(Skip::Inline)));
    for f in &summary.files {
        if let Status::Skipped(s) = &f.status {
            println!("{}: skipped: {s}", f.path.display());
        }
    }
    let caps_file = File::open(&caps).unwrap();
    assert!(wring_btrfs::fsinfo::has_xattr(&caps_file, "security.capability").unwrap());

    // --force: NOCOMPRESS is overridden; nodatacow is refused by the kernel, and said so.
    let forced = Options {
        force: true,
        ..Options::new("zstd:3".parse().unwrap())
    };
    let summary = recompress(&engine(1), &[dir.to_path_buf()], &forced, &mut |_| {}).unwrap();
    let status = |name: &str| -> String {
        format!(
            "{:?}",
            summary
                .files
                .iter()
                .find(|f| f.path.file_name().unwrap() == name)
                .unwrap()
                .status
        )
    };
    assert_eq!(status("nocompress"), "Done");
    assert_eq!(
        status("nocow"),
        format!("{:?}", Status::Skipped(Skip::NoDataSum))
    );
    scratch.sync().unwrap();
    assert_same(&before, &snapshot(dir), "after the skips");

    // Not btrfs: a clear error.
    match recompress(
        &engine(1),
        &[PathBuf::from("/proc")],
        &Options::new("zstd:3".parse().unwrap()),
        &mut |_| {},
    ) {
        Err(e) => assert!(e.to_string().contains("not on btrfs"), "{e}"),
        Ok(_) => panic!("/proc was accepted"),
    }
    // lz4 cannot be stored by btrfs.
    assert!(recompress(
        &engine(1),
        &[dir.to_path_buf()],
        &Options::new("lz4".parse().unwrap()),
        &mut |_| {}
    )
    .is_err());
}

#[test]
fn a_file_modified_during_the_run_is_skipped_and_keeps_both_writes() {
    if !testing::require_root("a_file_modified_during_the_run_is_skipped_and_keeps_both_writes") {
        return;
    }
    let scratch = ScratchFs::new("").unwrap();
    let path = scratch.path().join("busy");
    let data = interleave(&samples(24 << 20), 65536, 12 << 20);
    fs::write(&path, &data).unwrap();
    scratch.sync().unwrap();
    let dir = scratch.path().to_path_buf();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let opts = Options::new("zstd:19".parse().unwrap());
        let mut sent = false;
        recompress(&engine(1), &[dir], &opts, &mut |e| {
            if let wring_btrfs::recompress::Event::Bytes(_) = e {
                if !sent {
                    sent = true;
                    let _ = started_tx.send(());
                }
            }
        })
        .unwrap()
    });
    started_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    // Another process appends: its open() breaks wring's lease and waits for wring to let go.
    let appended = b"written by someone else while wring worked\n";
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' \"$1\" >> '{}'", path.display()))
        .arg("sh")
        .arg(std::str::from_utf8(appended).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let summary = worker.join().unwrap();
    let status = &summary.files[0].status;
    assert!(
        matches!(status, Status::Skipped(Skip::ChangedDuringRun(_))),
        "{status:?}"
    );
    println!(
        "{}: {status:?} after {} extents",
        path.display(),
        summary.files[0].compressed_extents
    );
    let mut want = data;
    want.extend_from_slice(appended);
    scratch.sync().unwrap();
    let mut scratch = scratch;
    scratch.remount().unwrap();
    assert_eq!(
        fs::read(&path).unwrap(),
        want,
        "content after a concurrent append"
    );
    assert!(verify_path(&engine(1), &path).unwrap().is_ok());
}

/// The child side of the kill test: recompress the directory in `WRING_KILL_CHILD_DIR`. Ignored,
/// so a normal run never counts it as a pass; the kill test runs it with `--ignored --exact`.
/// Run by hand without that variable it fails.
#[test]
#[ignore = "the child process of killing_recompress_at_random_moments_loses_nothing, which runs it"]
fn zz_kill_test_child() {
    let Some(dir) = std::env::var_os("WRING_KILL_CHILD_DIR") else {
        panic!(
            "zz_kill_test_child is the child of killing_recompress_at_random_moments_loses_nothing \
             and needs WRING_KILL_CHILD_DIR; run that test instead"
        );
    };
    let spec = std::env::var("WRING_KILL_CHILD_SPEC").unwrap_or_else(|_| "zstd:9".into());
    let opts = Options {
        jobs: 2,
        ..Options::new(spec.parse().unwrap())
    };
    recompress(&engine(2), &[PathBuf::from(dir)], &opts, &mut |_| {}).unwrap();
}

#[test]
fn killing_recompress_at_random_moments_loses_nothing() {
    if !testing::require_root("killing_recompress_at_random_moments_loses_nothing") {
        return;
    }
    let mut scratch = ScratchFs::new("").unwrap();
    let dir = scratch.path().join("data");
    fs::create_dir_all(&dir).unwrap();
    let corpus = samples(40 << 20);
    for (i, s) in corpus.iter().enumerate() {
        fs::write(dir.join(format!("{i}-{}", s.name)), &s.data).unwrap();
    }
    let mixed = interleave(&corpus, 3 * MAX_UNCOMPRESSED, 8 << 20);
    fs::write(dir.join("mixed"), &mixed).unwrap();
    scratch.sync().unwrap();
    let before = snapshot(&dir);
    let exe = std::env::current_exe().unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let specs = ["zstd:9", "zlib:6", "zstd:15", "lzo", "zstd:19"];
    let mut killed_mid_run = 0;
    for (round, spec) in specs.iter().enumerate() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let wait = Duration::from_millis(150 + rng % 1200);
        let mut child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "zz_kill_test_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("WRING_KILL_CHILD_DIR", &dir)
            .env("WRING_KILL_CHILD_SPEC", spec)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(wait);
        let finished = child.try_wait().unwrap().is_some();
        child.kill().ok(); // SIGKILL
        child.wait().unwrap();
        killed_mid_run += usize::from(!finished);
        println!(
            "round {round}: {spec}, SIGKILL after {} ms{}",
            wait.as_millis(),
            if finished { " (it had finished)" } else { "" }
        );
        assert_same(&before, &snapshot(&dir), &format!("after kill {round}"));
    }
    assert!(
        killed_mid_run >= 3,
        "only {killed_mid_run} kills landed mid-run"
    );
    scratch.sync().unwrap();
    scratch.remount().unwrap();
    assert_same(&before, &snapshot(&dir), "after the kills and a remount");
    let engine = engine(2);
    let mut compressed = 0;
    for path in before.keys() {
        let report = verify_path(&engine, path).unwrap();
        assert!(
            report.is_ok(),
            "{}: {:?}",
            path.display(),
            report.failures().next()
        );
        compressed += report.compressed_extents();
    }
    assert!(compressed > 0, "no kill left any recompressed extent");
    scratch.scrub().unwrap();
    scratch.check().unwrap();
    println!("{compressed} recompressed extents survived; scrub and check clean");
}

/// Fill `dir`'s filesystem with incompressible data in 1 MiB, then 4 KiB writes, each
/// fsync'ed, until the filesystem refuses them three times over.
fn fill_up(dir: &Path) {
    let mut seed = 7u64;
    let mut refusals = 0;
    for i in 0.. {
        let len = if refusals == 0 { 1 << 20 } else { 4096 };
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let data = random_bytes(seed, len);
        let wrote = fs::write(dir.join(format!("filler-{i}")), &data)
            .and_then(|()| File::open(dir.join(format!("filler-{i}")))?.sync_all());
        match wrote {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                let _ = fs::remove_file(dir.join(format!("filler-{i}")));
                refusals += 1;
                if refusals == 3 {
                    return;
                }
            }
            Err(e) => panic!("filling up: {e}"),
        }
    }
}

/// A full filesystem (issue 27): the first encoded write meets ENOSPC, the run stops there
/// instead of trying every other file, says so, and no file's content changes; scrub and
/// check are clean.
#[test]
fn a_full_filesystem_stops_the_run_and_changes_no_file() {
    if !testing::require_root("a_full_filesystem_stops_the_run_and_changes_no_file") {
        return;
    }
    let mut scratch = ScratchFs::with_size("compress-force=lzo", 256 << 20).unwrap();
    let dir = scratch.path().join("data");
    fs::create_dir_all(&dir).unwrap();
    for (i, s) in samples(12 << 20).iter().enumerate() {
        fs::write(dir.join(format!("{i}-{}", s.name)), &s.data).unwrap();
    }
    scratch.sync().unwrap();
    let before = snapshot(&dir);
    fill_up(scratch.path());
    scratch.sync().unwrap();
    let opts = Options::new("zstd:19".parse::<CompressSpec>().unwrap());
    let summary = recompress(&engine(2), std::slice::from_ref(&dir), &opts, &mut |_| {}).unwrap();
    let left = summary.full.expect("the run met a full filesystem");
    let failed: Vec<&Status> = summary
        .files
        .iter()
        .map(|f| &f.status)
        .filter(|s| matches!(s, Status::Failed(_)))
        .collect();
    assert!(
        !failed.is_empty() && failed.len() <= 2,
        "it stops at the first full write (one per lane at most): {failed:?}"
    );
    assert!(
        summary.files.len() + left == before.len(),
        "{} reported and {left} left of {}",
        summary.files.len(),
        before.len()
    );
    println!(
        "stopped: {} files reported, {left} not started, {:?}",
        summary.files.len(),
        failed
    );
    assert_same(&before, &snapshot(&dir), "after the full run");
    scratch.remount().unwrap();
    assert_same(&before, &snapshot(&dir), "after a remount");
    scratch.scrub().unwrap();
    scratch.check().unwrap();
}
