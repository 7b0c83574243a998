//! chattr and lsattr (issue 28), side by side with a scratch btrfs: the flags btrfs
//! implements read back as set, unsupported and conflicting ones are refused the same way,
//! `c` and `m` work with the `compression` property as on btrfs (and `m` is the NOCOMPRESS
//! mark), a directory's `m` is inherited, immutable and append-only refuse the same
//! operations (opens for writing refused at open: the daemon answers OPEN), only
//! CAP_LINUX_IMMUTABLE changes `i` and `a`, and a flag's change moves ctime on.
mod common;
use common::*;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use wring_btrfs::scratch::ScratchFs;

/// Exit status and output of `cmd`.
fn out(cmd: &str) -> (bool, String) {
    let o = sh(cmd);
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text.trim().to_string())
}

/// open(2) of `path` with exactly `flags` (std's OpenOptions sets the access mode itself):
/// the errno, 0 when it opened.
fn open_errno(path: &Path, flags: i32) -> i32 {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path alive across the call; the mode is read for O_CREAT only.
    let fd = unsafe { libc::open(p.as_ptr(), flags, 0o644) };
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
    }
    // SAFETY: `fd` was just opened here and is closed once.
    unsafe { libc::close(fd) };
    0
}

/// `lsattr -d`'s flag column of `path`.
fn lsattr(path: &Path) -> String {
    let (ok, text) = out(&format!("lsattr -d {}", path.display()));
    assert!(ok, "lsattr {}: {text}", path.display());
    text.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// What each step does on `root` (relative paths): whether it succeeded, and lsattr after.
fn session(root: &Path, steps: &[&str]) -> Vec<(String, bool, String)> {
    std::fs::write(root.join("f"), b"first line\n").unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    steps
        .iter()
        .map(|s| {
            let cmd = format!("cd {} && {s}", root.display());
            let (ok, _) = out(&cmd);
            (s.to_string(), ok, lsattr(&root.join("f")))
        })
        .collect()
}

const STEPS: [&str; 29] = [
    "chattr +d f",
    "chattr +A f",
    "chattr +S f",
    "chattr +c f",
    "chattr +m f",
    "chattr -c f",
    "chattr +m f",
    "getfattr -n btrfs.compression f",
    "chattr -m +c f",
    "getfattr -n btrfs.compression f",
    "chattr -c f",
    "chattr +x f",
    "chattr +i f",
    "rm f",
    "mv f g",
    "ln f h",
    "chmod 600 f",
    "truncate -s 0 f",
    "setfattr -n user.x -v 1 f",
    "fallocate -l 1M f",
    "xfs_io -d -c 'pwrite 0 4k' f",
    "setpriv --inh-caps=-linux_immutable --bounding-set=-linux_immutable chattr -i f",
    "chattr -i +a f",
    "sh -c 'echo more >> f'",
    "sh -c 'echo over > f'",
    "touch -d @0 f",
    "touch f",
    "rm f",
    "chattr -a f",
];

#[test]
fn chattr_and_lsattr_as_btrfs() {
    if !require_root("chattr_and_lsattr_as_btrfs") {
        return;
    }
    let mut m = Mount::new("chattr");
    // compress-force: with compress, btrfs's heuristic marks some appends NOCOMPRESS (the m
    // flag) by rules of its own (crates/fs/tests/nocompress.rs), which this test leaves alone.
    m.start("compress-force=zstd:3");
    let btrfs = ScratchFs::new("compress-force=zstd:3").unwrap();
    let ours = session(&m.mnt, &STEPS);
    let theirs = session(btrfs.path(), &STEPS);
    let differ: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("{a:?} on the mount, {b:?} on btrfs"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // A directory's m goes to what is made in it; xfs's spelling of the same flags.
    for root in [m.mnt.clone(), btrfs.path().to_path_buf()] {
        out(&format!("chattr +m {}", root.join("d").display()));
        std::fs::write(root.join("d/new"), b"x").unwrap();
        assert!(
            lsattr(&root.join("d/new")).contains('m'),
            "{}",
            root.display()
        );
        out(&format!("chattr +dA {}", root.join("f").display()));
    }
    let xflags = |root: &Path| {
        out(&format!(
            "xfs_io -c 'lsattr -v' {}",
            root.join("f").display()
        ))
        .1
    };
    assert_eq!(
        xflags(&m.mnt).split(' ').next(),
        xflags(btrfs.path()).split(' ').next()
    );
    // The flags are kept across a remount.
    let before = lsattr(&m.p("f"));
    m.stop();
    m.start("compress-force=zstd:3");
    assert_eq!(lsattr(&m.p("f")), before);
    m.stop();
}

/// Changing a flag moves the ctime on, as btrfs_fileattr_set does (fstests generic/277:
/// chattr +A then -A, stat, remount, stat): on disk for a file and a directory, and in the
/// kernel's memory for a directory. A regular file's ctime in the kernel's memory is the
/// kernel's own with FUSE's writeback cache (fuse_get_cache_mask: it takes no ctime from the
/// server for a cached inode, and fuse_fileattr_set moves it on only from Linux's patch for
/// generic/277 on): until the kernel drops the inode it shows the ctime from before chattr,
/// which this test checks as such so that a kernel that does better is noticed.
#[test]
fn chattr_moves_ctime_on_as_btrfs() {
    if !require_root("chattr_moves_ctime_on_as_btrfs") {
        return;
    }
    let mut m = Mount::new("chattr-ctime");
    m.start("");
    let mut btrfs = ScratchFs::new("").unwrap();
    let ctime = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::metadata(p).unwrap();
        (md.ctime(), md.ctime_nsec())
    };
    // The file and the directory, on the mount and on btrfs.
    let paths = [
        m.p("f"),
        m.p("d"),
        btrfs.path().join("f"),
        btrfs.path().join("d"),
    ];
    for k in [0, 2] {
        std::fs::write(&paths[k], b"x").unwrap();
        std::fs::create_dir(&paths[k + 1]).unwrap();
    }
    m.stop();
    m.start("");
    btrfs.remount().unwrap();
    let before = paths.clone().map(|f| ctime(&f));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for f in &paths {
        for flag in ["+A", "-A"] {
            let (ok, text) = out(&format!("chattr {flag} {}", f.display()));
            assert!(ok, "chattr {flag} {}: {text}", f.display());
        }
    }
    let after = paths.clone().map(|f| ctime(&f));
    m.stop();
    m.start("");
    btrfs.remount().unwrap();
    let kept = paths.clone().map(|f| ctime(&f));
    let state = format!("{before:?} {after:?} {kept:?}");
    // On disk: moved on, on both, for both.
    let on_disk = kept
        .map(|k| k)
        .iter()
        .zip(&before)
        .map(|(k, b)| k > b)
        .collect::<Vec<_>>();
    assert_eq!(
        on_disk, [true; 4],
        "on disk (wring f, d, btrfs f, d): {state}"
    );
    // In memory: the directory's as btrfs's.
    assert!(
        after[1] > before[1] && after[3] > before[3],
        "directories: {state}"
    );
    assert!(after[2] > before[2], "btrfs's file: {state}");
    assert_eq!(
        after[0], before[0],
        "the kernel shows the file's ctime from before: {state}"
    );
    m.stop();
}

/// open(2) of an immutable or append-only file, beside btrfs: the VFS's may_open refuses
/// writing opens of an immutable file, and of an append-only one those without O_APPEND or
/// with O_TRUNC, with EPERM (fstests generic/079); reading opens, and appending ones of an
/// append-only file, work. FUSE does not set S_IMMUTABLE or S_APPEND on the kernel's inode,
/// so the daemon answers OPEN and refuses there.
#[test]
fn immutable_and_append_only_refuse_write_opens_as_btrfs() {
    if !require_root("immutable_and_append_only_refuse_write_opens_as_btrfs") {
        return;
    }
    let mut m = Mount::new("chattr-open");
    m.start("");
    let btrfs = ScratchFs::new("").unwrap();
    let flags = [
        ("O_RDONLY", libc::O_RDONLY),
        ("O_WRONLY", libc::O_WRONLY),
        ("O_RDWR", libc::O_RDWR),
        ("O_WRONLY|O_APPEND", libc::O_WRONLY | libc::O_APPEND),
        ("O_RDWR|O_APPEND", libc::O_RDWR | libc::O_APPEND),
        ("O_RDONLY|O_TRUNC", libc::O_RDONLY | libc::O_TRUNC),
        (
            "O_WRONLY|O_APPEND|O_TRUNC",
            libc::O_WRONLY | libc::O_APPEND | libc::O_TRUNC,
        ),
        ("O_WRONLY|O_CREAT", libc::O_WRONLY | libc::O_CREAT),
        ("O_RDONLY|O_NOATIME", libc::O_RDONLY | libc::O_NOATIME),
    ];
    let outcome = |root: &Path| {
        let mut v = Vec::new();
        for flag in ["i", "a"] {
            let f = root.join(format!("{flag}-file"));
            std::fs::write(&f, b"kept\n").unwrap();
            let (ok, text) = out(&format!("chattr +{flag} {}", f.display()));
            assert!(ok, "chattr +{flag}: {text}");
            for (name, fl) in flags {
                v.push((flag, name, open_errno(&f, fl)));
            }
            assert_eq!(std::fs::read(&f).unwrap(), b"kept\n", "+{flag}: unchanged");
            out(&format!("chattr -{flag} {}", f.display()));
        }
        v
    };
    let ours = outcome(&m.mnt);
    assert_eq!(ours, outcome(btrfs.path()), "wring, then btrfs");
    // An append-only directory's times: explicit ones refused, `now` taken (utime(2) of
    // generic/079).
    let dir_times = |root: &Path| {
        let d = root.join("a-dir");
        std::fs::create_dir(&d).unwrap();
        out(&format!("chattr +a {}", d.display()));
        let r = [
            out(&format!("touch -d @0 {}", d.display())).0,
            out(&format!("touch {}", d.display())).0,
        ];
        out(&format!("chattr -a {}", d.display()));
        r
    };
    let times = dir_times(&m.mnt);
    assert_eq!(times, dir_times(btrfs.path()), "wring, then btrfs");
    assert_eq!(times, [false, true], "touch -d @0, touch");
    assert!(ours.contains(&("i", "O_WRONLY", libc::EPERM)), "{ours:?}");
    assert!(ours.contains(&("a", "O_WRONLY|O_APPEND", 0)), "{ours:?}");
    // A write through an open made before `i` is refused too, and its bytes dropped.
    std::fs::write(m.p("g"), b"kept\n").unwrap();
    let mut g = std::fs::OpenOptions::new()
        .append(true)
        .open(m.p("g"))
        .unwrap();
    let (ok, text) = out(&format!("chattr +i {}", m.p("g").display()));
    assert!(ok, "{text}");
    use std::io::Write;
    let _ = g.write_all(b"refused\n");
    let e = g.sync_all().expect_err("fsync of a refused write");
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    drop(g);
    m.stop();
    m.start("");
    assert_eq!(std::fs::read(m.p("g")).unwrap(), b"kept\n");
    out(&format!("chattr -i {}", m.p("g").display()));
    m.stop();
}
