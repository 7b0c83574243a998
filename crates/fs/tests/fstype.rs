//! The kernel records a wring mount as type `fuse.wring` with source `wring:STORE`, so
//! `findmnt -t fuse.wring`, mount(8) and fstab tools know it (fuser's own mount says `fuse`).
mod common;
use common::*;

/// (fstype, source) of the mount on `mnt`, from /proc/self/mountinfo.
fn mount_of(mnt: &std::path::Path) -> Option<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let want = mnt.to_string_lossy();
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if left.split(' ').nth(4)? != want {
            return None;
        }
        let mut r = right.split(' ');
        Some((r.next()?.to_string(), r.next()?.to_string()))
    })
}

#[test]
fn a_mount_is_type_fuse_wring_and_findmnt_finds_it() {
    if !require_root("a_mount_is_type_fuse_wring_and_findmnt_finds_it") {
        return;
    }
    let mut m = Mount::new("fstype");
    m.start("compress=zstd:1");
    let (fstype, source) = mount_of(&m.mnt).expect("mounted");
    assert_eq!(fstype, "fuse.wring");
    assert_eq!(source, format!("wring:{}", m.store.display()));
    let out = sh(&format!(
        "findmnt -n -o FSTYPE -t fuse.wring --target {}",
        m.mnt.display()
    ));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "fuse.wring");
    std::fs::write(m.p("f"), b"served").expect("write");
    assert_eq!(std::fs::read(m.p("f")).expect("read"), b"served");
    m.stop();
    assert!(mount_of(&m.mnt).is_none(), "still mounted after umount");
}
