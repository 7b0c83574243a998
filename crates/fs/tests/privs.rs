//! Privileges on write, truncate and chown: the mount asks the kernel to leave killing
//! set-user-ID and set-group-ID bits to the filesystem (FUSE_HANDLE_KILLPRIV_V2). The same
//! operations on the mount and on the kernel's btrfs must leave the same modes: as root (with
//! and without CAP_FSETID), as the file's non-root owner and as another user.
mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use wring_btrfs::scratch::ScratchFs;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn run(cmd: &str) {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// What a case starts from.
#[derive(Clone, Copy)]
enum Made {
    File,
    Fifo,
    Dir,
}

/// One case: what is made, its owner (uid:gid), its mode, and the command (FILE stands for its
/// path) whose effect on the mode is compared.
struct Case {
    name: &'static str,
    made: Made,
    owner: &'static str,
    start: u32,
    cmd: String,
}

fn case(name: &'static str, made: Made, owner: &'static str, start: u32, cmd: &str) -> Case {
    Case {
        name,
        made,
        owner,
        start,
        cmd: cmd.to_string(),
    }
}

/// chown(FILE, -1, -1), whether it is allowed or not (its effect on the mode is compared).
const KEEP_IDS: &str = "perl -e 'chown(-1, -1, \"FILE\")'";

fn cases() -> Vec<Case> {
    let nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    // nobody, also a member of root's group (0) through a supplementary group only.
    let member = "setpriv --reuid=65534 --regid=65534 --groups=0";
    // root without CAP_FSETID.
    let nofsetid = "setpriv --inh-caps=-fsetid --bounding-set=-fsetid";
    let (f, root, own) = (Made::File, "0:0", "65534:65534");
    let append = "sh -c 'echo more >> FILE'";
    vec![
        // Another user, through write permission on the file.
        case("append", f, root, 0o6777, &format!("{nobody} {append}")),
        case(
            "append-nogx",
            f,
            root,
            0o6767,
            &format!("{nobody} {append}"),
        ),
        case(
            "append-nogx-member",
            f,
            root,
            0o6767,
            &format!("{member} {append}"),
        ),
        case(
            "truncate",
            f,
            root,
            0o6777,
            &format!("{nobody} truncate -s 2 FILE"),
        ),
        // Root with CAP_FSETID keeps the bits on a write or truncate, without it does not.
        case("root-append", f, root, 0o6755, append),
        case("root-truncate", f, root, 0o6755, "truncate -s 2 FILE"),
        case(
            "nofsetid-truncate",
            f,
            root,
            0o6755,
            &format!("{nofsetid} truncate -s 2 FILE"),
        ),
        case(
            "nofsetid-append",
            f,
            "0:1",
            0o6745,
            &format!("{nofsetid} {append}"),
        ),
        case(
            "nofsetid-truncate-nogx",
            f,
            "0:1",
            0o6745,
            &format!("{nofsetid} truncate -s 2 FILE"),
        ),
        // The non-root owner.
        case(
            "owner-append",
            f,
            own,
            0o6745,
            &format!("{nobody} {append}"),
        ),
        case(
            "owner-truncate",
            f,
            own,
            0o6755,
            &format!("{nobody} truncate -s 2 FILE"),
        ),
        case(
            "owner-chown-self",
            f,
            own,
            0o6745,
            &format!("{nobody} chown 65534 FILE"),
        ),
        case(
            "owner-chgrp-self",
            f,
            own,
            0o6755,
            &format!("{nobody} chgrp 65534 FILE"),
        ),
        case(
            "owner-chgrp",
            f,
            own,
            0o6745,
            &format!("{member} chgrp 0 FILE"),
        ),
        // The non-root owner in the file's group changes its contents in every other way:
        // each drops the bits as a write does (fallocate's modes, O_DIRECT, copy_file_range
        // within the mount), except a write through a shared mapping, which the kernel lets
        // keep them; visible to the stat right after, as on btrfs.
        case(
            "owner-fallocate",
            f,
            own,
            0o6666,
            &format!("{nobody} fallocate -l 8192 FILE"),
        ),
        case(
            "owner-fallocate-gx",
            f,
            own,
            0o6676,
            &format!("{nobody} fallocate -l 8192 FILE"),
        ),
        case(
            "owner-fallocate-keep",
            f,
            own,
            0o6666,
            &format!("{nobody} fallocate -n -l 16384 FILE"),
        ),
        case(
            "owner-punch",
            f,
            own,
            0o6676,
            &format!("{nobody} fallocate -p -o 0 -l 4096 FILE"),
        ),
        case(
            "owner-zero-range",
            f,
            own,
            0o6666,
            &format!("{nobody} fallocate -z -o 0 -l 4096 FILE"),
        ),
        case(
            "owner-odirect",
            f,
            own,
            0o6644,
            &format!("{nobody} xfs_io -d -c 'pwrite 0 4k' FILE"),
        ),
        case(
            "owner-append-gx",
            f,
            own,
            0o6755,
            &format!("{nobody} {append}"),
        ),
        case(
            "owner-copy-range",
            f,
            own,
            0o6676,
            &format!("{nobody} xfs_io -c 'copy_range -s 0 -d 8000 -l 5 FILE' FILE"),
        ),
        case(
            "owner-mmap",
            f,
            own,
            0o6676,
            &format!("{nobody} xfs_io -c 'mmap -w 0 4k' -c 'mwrite 0 5' -c 'msync -s 0 4k' FILE"),
        ),
        // Root's chown: to others, to the same ids, of a fifo and of a directory.
        case("chown", f, root, 0o6755, "chown 1:1 FILE"),
        case("chown-same", f, root, 0o6755, "chown 0:0 FILE"),
        case("chown-same-nogx", f, root, 0o6745, "chown 0:0 FILE"),
        case("chgrp-same", f, root, 0o6755, "chgrp 0 FILE"),
        case(
            "nofsetid-chown-nogx",
            f,
            "0:1",
            0o6745,
            &format!("{nofsetid} chown 0 FILE"),
        ),
        case("chown-fifo", Made::Fifo, root, 0o6755, "chown 1:1 FILE"),
        case("chown-dir", Made::Dir, root, 0o6755, "chown 1:1 FILE"),
        // chown(f, -1, -1) (FUSE sees a setattr of the ctime alone): root, the owner, another
        // user (EPERM: the mode stays).
        case("chown-none", f, root, 0o6755, KEEP_IDS),
        case("chown-none-nogx", f, root, 0o6745, KEEP_IDS),
        case(
            "owner-chown-none",
            f,
            own,
            0o6755,
            &format!("{nobody} {KEEP_IDS}"),
        ),
        case(
            "other-chown-none",
            f,
            root,
            0o6755,
            &format!("{nobody} {KEEP_IDS}"),
        ),
        case("chown-none-dir", Made::Dir, root, 0o6755, KEEP_IDS),
        case("chown-none-fifo", Made::Fifo, root, 0o6755, KEEP_IDS),
        case(
            "other-chown-none-fifo",
            Made::Fifo,
            root,
            0o6755,
            &format!("{nobody} {KEEP_IDS}"),
        ),
    ]
}

/// Make `c`'s file under `root`, run its command, and return the mode it leaves.
fn mode_after(root: &Path, c: &Case) -> u32 {
    let f = root.join(c.name);
    let path = f.display().to_string();
    match c.made {
        Made::File => std::fs::write(&f, b"some data\n").unwrap(),
        Made::Fifo => run(&format!("mkfifo {path}")),
        Made::Dir => std::fs::create_dir(&f).unwrap(),
    }
    // The owner first: a chown would kill the bits set next.
    run(&format!("chown {} {path}", c.owner));
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(c.start)).unwrap();
    assert_eq!(mode(&f), c.start, "{}: chmod", c.name);
    run(&c.cmd.replace("FILE", &path));
    mode(&f)
}

#[test]
fn set_id_bits_are_killed_as_the_kernel_does() {
    if !require_root("set_id_bits_are_killed_as_the_kernel_does") {
        return;
    }
    let mut m = Mount::new("privs");
    m.start("compress-force=zstd:1,allow_other");
    let btrfs = ScratchFs::new("").expect("a scratch btrfs");
    // Others must reach both trees.
    run(&format!("chmod 755 {}", m.base.display()));
    let reference = btrfs.path();
    let parent = reference.parent().unwrap_or(reference);
    run(&format!(
        "chmod 755 {} {}",
        parent.display(),
        reference.display()
    ));
    let cases = cases();
    let mut wrong = Vec::new();
    for c in &cases {
        let (ours, kernel) = (mode_after(&m.mnt, c), mode_after(reference, c));
        if ours != kernel {
            wrong.push(format!(
                "{}: {:04o} on the mount, {kernel:04o} on btrfs (from {:04o}, `{}`)",
                c.name, ours, c.start, c.cmd
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // And after a remount (what was written down, not what the kernel cached).
    let before: Vec<u32> = cases.iter().map(|c| mode(&m.mnt.join(c.name))).collect();
    m.stop();
    m.start("compress=lzo");
    let after: Vec<u32> = cases.iter().map(|c| mode(&m.mnt.join(c.name))).collect();
    assert_eq!(before, after);
}
