//! POSIX ACLs (setfacl/getfacl, cp -a): the same steps on the mount and on a plain ext4
//! directory beside it must leave the same ACLs and modes, inherit default ACLs the same way,
//! let `nobody` do the same things, and survive a remount.
mod common;
use common::*;

use std::path::Path;

/// Run `cmd` under `sh` with the umask 022; returns whether it succeeded.
fn ok(cmd: &str) -> bool {
    sh(&format!("umask 022; {cmd}")).status.success()
}

fn run(cmd: &str) {
    let o = sh(&format!("umask 022; {cmd}"));
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Mode and ACL of every path under `root`, in a form that does not name `root`.
fn snapshot(root: &Path) -> String {
    let o = sh(&format!(
        "cd '{}' && find . -mindepth 1 | sort | while read -r p; do \
           echo \"== $p $(stat -c %a \"$p\")\"; getfacl -n --omit-header -- \"$p\"; done",
        root.display()
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The steps, with R standing for the tree's root.
const STEPS: &[&str] = &[
    "mkdir R/d R/plain",
    "setfacl -m u:65534:rwx,g::rx R/d",
    "setfacl -d -m u::rwx,u:65534:rw,g::r,o::- R/d",
    "touch R/d/f",
    "mkdir R/d/sub",
    "echo hello > R/d/f2",
    "chmod 640 R/d/f2",
    "touch R/plain/g",
    "umask 077; touch R/plain/private; mkdir R/plain/privdir",
    "setfacl -m u:65534:r R/plain/g",
    "setfacl -x u:65534 R/plain/g",
    "setfacl -m g:65534:rw R/plain/private",
    "chmod 2770 R/plain/privdir",
    "setfacl -m u:65534:rx R/plain/privdir",
    "mkdir R/d/sub/deeper",
    "setfacl -b R/d/f",
    "setfacl -k R/d/sub",
];

/// What `nobody` tries; each outcome must match.
const AS_NOBODY: &[&str] = &[
    "cat R/d/f2",
    "sh -c 'echo more >> R/d/f2'",
    "ls R/d",
    "touch R/d/by-nobody",
    "cat R/plain/private",
    "ls R/plain/privdir",
    "touch R/plain/privdir/x",
];

#[test]
fn acls_behave_as_on_ext4() {
    if !require_root("acls_behave_as_on_ext4") {
        return;
    }
    let mut m = Mount::new("acl");
    m.start("compress=zstd:1,allow_other");
    let reference = m.base.join("ref");
    std::fs::create_dir_all(&reference).unwrap();
    run(&format!("chmod 755 '{}'", m.base.display()));
    let roots = [m.mnt.clone(), reference.clone()];
    for step in STEPS {
        for r in &roots {
            run(&step.replace('R', &r.display().to_string()));
        }
        assert_eq!(snapshot(&roots[0]), snapshot(&roots[1]), "after `{step}`");
    }
    let nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    for cmd in AS_NOBODY {
        let got: Vec<bool> = roots
            .iter()
            .map(|r| {
                ok(&format!(
                    "{nobody} {}",
                    cmd.replace('R', &r.display().to_string())
                ))
            })
            .collect();
        assert_eq!(
            got[0], got[1],
            "`{cmd}` as nobody: mount {} ext4 {}",
            got[0], got[1]
        );
    }
    assert_eq!(
        snapshot(&roots[0]),
        snapshot(&roots[1]),
        "after nobody's steps"
    );
    // cp -a carries ACLs over.
    run(&format!(
        "cp -a '{}/d' '{}/copied'",
        reference.display(),
        m.mnt.display()
    ));
    run(&format!(
        "cp -a '{}/d' '{}/copied'",
        reference.display(),
        reference.display()
    ));
    let before = snapshot(&roots[0]);
    assert_eq!(before, snapshot(&roots[1]), "after cp -a");
    assert!(before.contains("user:65534:rw"), "{before}");
    // Written down, not only cached by the kernel.
    m.stop();
    m.start("compress=lzo");
    assert_eq!(snapshot(&m.mnt), before, "after a remount");
}
