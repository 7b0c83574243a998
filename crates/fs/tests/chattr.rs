//! chattr and lsattr (issue 28), side by side with a scratch btrfs: the flags btrfs
//! implements read back as set, unsupported and conflicting ones are refused the same way,
//! `c` and `m` work with the `compression` property as on btrfs (and `m` is the NOCOMPRESS
//! mark), a directory's `m` is inherited, immutable and append-only refuse the same
//! operations, and only CAP_LINUX_IMMUTABLE changes `i` and `a`. Where FUSE cannot match
//! btrfs (the kernel opens files without asking the server), a buffered write to an immutable
//! file fails at fsync instead of at open: checked here as such.
mod common;
use common::*;

use std::path::Path;

use wring_btrfs::scratch::ScratchFs;

/// Exit status and output of `cmd`.
fn out(cmd: &str) -> (bool, String) {
    let o = sh(cmd);
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), text.trim().to_string())
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

const STEPS: [&str; 27] = [
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

/// What FUSE cannot do as btrfs does: the kernel opens a file for writing without asking,
/// so a buffered write to an immutable file is refused when written back (fsync reports
/// EPERM) and the kernel is told to drop the refused bytes; nothing reaches the store.
#[test]
fn a_buffered_write_to_an_immutable_file_fails_at_fsync() {
    if !require_root("a_buffered_write_to_an_immutable_file_fails_at_fsync") {
        return;
    }
    let mut m = Mount::new("immutable");
    m.start("");
    std::fs::write(m.p("f"), b"kept\n").unwrap();
    let (ok, text) = out(&format!("chattr +i {}", m.p("f").display()));
    assert!(ok, "{text}");
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(m.p("f"))
        .expect("the kernel opens it without asking");
    let _ = f.write_all(b"refused\n");
    let e = f.sync_all().expect_err("fsync of a refused write");
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    drop(f);
    m.stop();
    m.start("");
    assert_eq!(std::fs::read(m.p("f")).unwrap(), b"kept\n");
    out(&format!("chattr -i {}", m.p("f").display()));
    m.stop();
}
