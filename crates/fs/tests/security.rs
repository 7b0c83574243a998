//! Who can do what: the store is its owner's alone (mkfs makes it so, a mount refuses one
//! that is not), and on an `allow_other` mount another user may not sync or remount, and
//! `wring.stat` shows it only what it could read itself. "Another user" is nobody (65534),
//! run through setpriv.
mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

const NOBODY: &str = "setpriv --reuid=65534 --regid=65534 --clear-groups";

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn as_nobody(cmd: &str) -> Output {
    sh(&format!("{NOBODY} sh -c '{cmd}'"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A mount with allow_other whose base directory others may enter (the store's own mode is
/// what keeps them out of it).
fn open_mount(name: &str) -> Mount {
    let mut m = Mount::new(name);
    chmod(&m.base, 0o755);
    m.start("compress-force=zstd:1,allow_other");
    m
}

#[test]
fn the_store_is_its_owners_alone() {
    if !require_root("the_store_is_its_owners_alone") {
        return;
    }
    let m = open_mount("sec-store");
    let secret = m.p("secret");
    std::fs::write(&secret, b"the password is swordfish\n".repeat(1000)).unwrap();
    chmod(&secret, 0o600);
    wring_fs::daemon::get_xattr(&m.mnt, wring_fs::SYNC_XATTR).unwrap();

    // Nobody reads the secret, neither through the mount nor from the store.
    let data = m.store.join("wring.data").display().to_string();
    let db = m.store.join("wring.redb").display().to_string();
    for cmd in [
        format!("cat {}", secret.display()),
        format!("cat {data}"),
        format!("cat {db}"),
        format!("ls {}", m.store.display()),
    ] {
        let o = as_nobody(&cmd);
        assert!(!o.status.success(), "nobody could `{cmd}`");
        assert!(
            text(&o).contains("Permission denied"),
            "{cmd}: {}",
            text(&o)
        );
    }
    // The same command works for a user the modes let in (the check is not vacuous).
    assert!(sh(&format!("cat {data} >/dev/null")).status.success());
    assert_eq!(mode(&m.store), 0o700, "store directory");
    for f in ["wring.redb", "wring.data", "wring.log"] {
        assert_eq!(mode(&m.store.join(f)), 0o600, "{f}");
    }
}

#[test]
fn a_mount_refuses_a_store_open_to_others() {
    if !require_root("a_mount_refuses_a_store_open_to_others") {
        return;
    }
    let mut m = Mount::new("sec-refuse");
    let dir = m.store.display().to_string();
    chmod(&m.store, 0o755);
    let e = m.try_start("").expect_err("mounted a store open to others");
    assert!(
        e.contains(&format!("store {dir}"))
            && e.contains("open to other users")
            && e.contains("0755")
            && e.contains(&format!("chmod 700 {dir}")),
        "{e}"
    );
    chmod(&m.store, 0o700);
    for (f, bad) in [("wring.data", 0o644), ("wring.redb", 0o640)] {
        let path = m.store.join(f);
        chmod(&path, bad);
        let e = m
            .try_start("")
            .expect_err("mounted a store with a file open to others");
        assert!(
            e.contains(&format!("{f} mode {bad:04o}"))
                && e.contains(&format!("chmod 600 {}", path.display())),
            "{e}"
        );
        chmod(&path, 0o600);
    }
    // An old log file others could read (it may name files) is refused too.
    let log = m.store.join("wring.log");
    std::fs::write(&log, b"").unwrap();
    chmod(&log, 0o604);
    let e = m
        .try_start("")
        .expect_err("mounted a store with an open log");
    assert!(e.contains("wring.log mode 0604"), "{e}");
    chmod(&log, 0o600);
    m.start("");
    m.stop();
}

#[test]
fn a_non_owner_may_not_sync_or_remount() {
    if !require_root("a_non_owner_may_not_sync_or_remount") {
        return;
    }
    let m = open_mount("sec-ctl");
    // A root anyone may write: the kernel's permission check lets nobody's setxattr through,
    // so the daemon's own check is what refuses it.
    chmod(&m.mnt, 0o777);
    let mnt = m.mnt.display();
    let sync = format!("getfattr --only-values -n wring.sync {mnt}");
    let remount = format!("setfattr -n wring.options -v compress=lzo {mnt}");
    for cmd in [&sync, &remount] {
        let o = as_nobody(cmd);
        assert!(!o.status.success(), "nobody could `{cmd}`: {}", text(&o));
        assert!(
            text(&o).contains("Operation not permitted"),
            "{cmd}: {}",
            text(&o)
        );
    }
    let options = wring_fs::daemon::get_xattr(&m.mnt, wring_fs::OPTIONS_XATTR).unwrap();
    assert!(String::from_utf8_lossy(&options).contains("compress-force=zstd:1"));
    // The mount's owner (root here) may.
    for cmd in [&sync, &remount] {
        let o = sh(cmd);
        assert!(o.status.success(), "root: `{cmd}`: {}", text(&o));
    }
    let options = wring_fs::daemon::get_xattr(&m.mnt, wring_fs::OPTIONS_XATTR).unwrap();
    assert!(String::from_utf8_lossy(&options).contains("compress=lzo"));
}

/// `Processed N files` of a `wring.stat` report.
fn processed(report: &str) -> u64 {
    report
        .strip_prefix("Processed ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a stat report: {report}"))
}

#[test]
fn stat_shows_a_non_owner_only_what_it_could_read() {
    if !require_root("stat_shows_a_non_owner_only_what_it_could_read") {
        return;
    }
    let m = open_mount("sec-stat");
    let data = b"some compressible words ".repeat(4096);
    let mk = |rel: &str, mode: u32| {
        let p = m.p(rel);
        if rel.ends_with('/') {
            std::fs::create_dir(&p).unwrap();
        } else {
            std::fs::write(&p, &data).unwrap();
        }
        chmod(&p, mode);
    };
    // Visible to nobody: open/a, open/b (0644 in a 0755 directory).
    mk("open/", 0o755);
    mk("open/a", 0o644);
    mk("open/b", 0o644);
    // Not visible: under a 0700 directory, a 0600 file, under a directory nobody may list
    // but not search, under one it may search but not list, under one an ACL closes.
    mk("private/", 0o755);
    mk("private/x", 0o644);
    mk("private/y", 0o644);
    chmod(&m.p("private"), 0o700);
    mk("open/secret", 0o600);
    mk("noexec/", 0o755);
    mk("noexec/x", 0o644);
    chmod(&m.p("noexec"), 0o744);
    mk("noread/", 0o755);
    mk("noread/x", 0o644);
    chmod(&m.p("noread"), 0o711);
    mk("acl/", 0o755);
    mk("acl/x", 0o644);
    let o = sh(&format!("setfacl -m u:65534:--- {}", m.p("acl").display()));
    assert!(o.status.success(), "setfacl: {}", text(&o));

    let stat = |who: &str, rel: &str| {
        let cmd = format!(
            "getfattr --only-values -n wring.stat {}",
            m.p(rel).display()
        );
        let o = match who {
            "root" => sh(&cmd),
            _ => as_nobody(&cmd),
        };
        assert!(o.status.success(), "{who}: {cmd}: {}", text(&o));
        processed(&String::from_utf8_lossy(&o.stdout))
    };
    assert_eq!(stat("root", ""), 8, "root sees every file");
    assert_eq!(stat("nobody", ""), 2, "nobody sees open/a and open/b only");
    assert_eq!(stat("nobody", "open"), 2);
    assert_eq!(stat("root", "private"), 2);
}
