//! Privileges on write, truncate and chown: the mount asks the kernel to leave killing
//! set-user-ID and set-group-ID bits to the filesystem (FUSE_HANDLE_KILLPRIV_V2). The same
//! operations on the mount and on a plain directory beside it must leave the same modes.
mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn run(cmd: &str) {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn set_id_bits_are_killed_as_the_kernel_does() {
    if !require_root("set_id_bits_are_killed_as_the_kernel_does") {
        return;
    }
    let mut m = Mount::new("privs");
    m.start("compress-force=zstd:1,allow_other");
    let reference = m.base.join("ref");
    std::fs::create_dir_all(&reference).unwrap();
    // Others must reach both trees.
    run(&format!("chmod 755 {}", m.base.display()));
    let nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    let member = "setpriv --reuid=65534 --regid=65534 --groups=0";
    // FILE stands for the file's path.
    let cases: &[(&str, u32, String)] = &[
        (
            "append",
            0o6777,
            format!("{nobody} sh -c 'echo more >> FILE'"),
        ),
        (
            "append-nogx",
            0o6767,
            format!("{nobody} sh -c 'echo more >> FILE'"),
        ),
        (
            // A member of the file's group (root's, 0) through a supplementary group only.
            "append-nogx-member",
            0o6767,
            format!("{member} sh -c 'echo more >> FILE'"),
        ),
        ("truncate", 0o6777, format!("{nobody} truncate -s 2 FILE")),
        ("chown", 0o6755, "chown 1:1 FILE".to_string()),
        (
            "root-append",
            0o6755,
            "sh -c 'echo more >> FILE'".to_string(),
        ),
    ];
    for (name, start, cmd) in cases {
        let mut modes = Vec::new();
        for root in [m.mnt.as_path(), reference.as_path()] {
            let f = root.join(name);
            std::fs::write(&f, b"some data\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(*start)).unwrap();
            run(&cmd.replace("FILE", &f.display().to_string()));
            modes.push(mode(&f));
        }
        assert_eq!(
            modes[0], modes[1],
            "{name}: mode {:o} on the mount, {:o} on a plain directory",
            modes[0], modes[1]
        );
    }
    // And after a remount (what was written down, not what the kernel cached).
    let before: Vec<u32> = cases.iter().map(|c| mode(&m.mnt.join(c.0))).collect();
    m.stop();
    m.start("compress=lzo");
    let after: Vec<u32> = cases.iter().map(|c| mode(&m.mnt.join(c.0))).collect();
    assert_eq!(before, after);
}
