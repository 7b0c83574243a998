//! FUSE over io_uring (`uring=1`, and `uring=auto`, the default, where the kernel offers it)
//! on this kernel: the requests go through the ring, and what they do is what the `/dev/fuse`
//! loop does (`scripts/test.sh` runs the fs suite with `uring=0` and again with `uring=1`).

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::{require_root, status_figure, Mount};

/// Switch the kernel's FUSE over io_uring on (root; `scripts/test.sh` switches it back).
fn enable_uring() {
    let p = wring_fs::uring::ENABLE_URING;
    if fs::read_to_string(p)
        .map(|v| v.trim() == "Y")
        .unwrap_or(false)
    {
        return;
    }
    fs::write(p, "Y").unwrap_or_else(|e| panic!("switching on {p}: {e}"));
}

#[test]
fn every_request_but_forget_goes_through_the_ring() {
    if !require_root("every_request_but_forget_goes_through_the_ring") {
        return;
    }
    enable_uring();
    let mut m = Mount::new("uring-ring");
    m.start("compress=zstd:1,uring=1");
    let root = m.p("");
    let big: Vec<u8> = (0..3_000_000u32)
        .flat_map(|i| (i / 7).to_le_bytes())
        .collect();
    fs::write(root.join("big"), &big).unwrap();
    fs::create_dir(root.join("d")).unwrap();
    for i in 0..200 {
        fs::write(root.join(format!("d/f{i}")), format!("file {i}")).unwrap();
    }
    std::os::unix::fs::symlink("big", root.join("link")).unwrap();
    fs::rename(root.join("d/f0"), root.join("d/g0")).unwrap();
    fs::hard_link(root.join("d/f1"), root.join("h1")).unwrap();
    fs::set_permissions(root.join("h1"), fs::Permissions::from_mode(0o600)).unwrap();
    m.sync();
    // Read back cold, through the ring, what the writes left.
    common::sh("echo 3 > /proc/sys/vm/drop_caches");
    assert_eq!(fs::read(root.join("big")).unwrap(), big);
    assert_eq!(fs::read_link(root.join("link")).unwrap(), Path::new("big"));
    assert_eq!(fs::read(root.join("d/g0")).unwrap(), b"file 0");
    assert_eq!(fs::metadata(root.join("d/f1")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(root.join("h1")).unwrap().mode() & 0o777, 0o600);
    let mut names: Vec<_> = fs::read_dir(root.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 200);
    assert!(names.contains(&"g0".to_string()) && !names.contains(&"f0".to_string()));
    fs::remove_dir_all(root.join("d")).unwrap();

    let (total, forgets) = (
        status_figure(&root, "fuse:", "total="),
        status_figure(&root, "fuse:", "forget="),
    );
    let ring = status_figure(&root, "uring:", "requests=");
    assert_eq!(status_figure(&root, "uring:", "refused="), 0);
    // Every request the daemon counted came through the ring but the FORGETs, which the
    // kernel still sends through /dev/fuse (and the requests the ring answers ENOSYS,
    // which are not counted, may add to it).
    assert!(
        ring >= total - forgets,
        "{ring} ring requests for {total} requests, {forgets} of them forgets"
    );
    m.stop();
}

/// Who may use a mount is the kernel's check (`allow_other`), on either transport: the ring
/// serves nobody (65534) no more than `/dev/fuse` does without it, and the same with it.
#[test]
fn another_user_gets_in_only_with_allow_other_on_either_transport() {
    if !require_root("another_user_gets_in_only_with_allow_other_on_either_transport") {
        return;
    }
    enable_uring();
    for transport in ["uring=0", "uring=1"] {
        for allow_other in [false, true] {
            let mut m = Mount::new(&format!("uring-owner-{transport}-{allow_other}"));
            fs::set_permissions(&m.base, fs::Permissions::from_mode(0o755)).unwrap();
            let extra = if allow_other { ",allow_other" } else { "" };
            m.start(&format!("compress=zstd:1,{transport}{extra}"));
            fs::write(m.p("f"), b"for everyone").unwrap();
            let cat = format!(
                "setpriv --reuid=65534 --regid=65534 --clear-groups cat {}",
                m.p("f").display()
            );
            let o = common::sh(&cat);
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            match allow_other {
                true => assert_eq!(o.stdout, b"for everyone", "{transport}: {err}"),
                false => assert!(
                    !o.status.success() && err.contains("Permission denied"),
                    "{transport}: nobody read a file without allow_other: {err}"
                ),
            }
            m.stop();
        }
    }
}

#[test]
fn uring_is_refused_in_plain_words_when_the_kernel_has_it_off() {
    let dir = tempdir();
    let off = dir.join("enable_uring");
    fs::write(&off, "N\n").unwrap();
    let e = wring_fs::uring::check_enabled_at(&off)
        .unwrap_err()
        .to_string();
    assert!(e.contains("uring=1") && e.contains("echo Y >"), "{e}");
    let e = wring_fs::uring::check_enabled_at(&dir.join("missing"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no FUSE over io_uring") && e.contains("6.14"),
        "{e}"
    );
    fs::write(&off, "Y\n").unwrap();
    assert!(wring_fs::uring::check_enabled_at(&off).is_ok());
    let _ = fs::remove_dir_all(&dir);
}

/// `uring=auto`, the default: the ring when the kernel's switch is Y, `/dev/fuse` when it is
/// not, and `wring status` says which and why; `uring=1` refuses where `auto` falls back.
#[test]
fn the_default_takes_the_ring_when_the_kernel_offers_it() {
    use wring_fs::Uring;
    let dir = tempdir();
    let off = dir.join("enable_uring_auto");
    fs::write(&off, "N\n").unwrap();
    let (ring, why) = wring_fs::uring::choose_at(Uring::Auto, 4, &off).unwrap();
    assert!(ring.is_none());
    assert!(
        why.starts_with("/dev/fuse (uring=auto:") && why.contains("is N"),
        "{why}"
    );
    let (ring, why) = wring_fs::uring::choose_at(Uring::Off, 4, &off).unwrap();
    assert!(ring.is_none() && why == "/dev/fuse (uring=0)", "{why}");
    assert!(wring_fs::uring::choose_at(Uring::On, 4, &off).is_err());
    let _ = fs::remove_file(&off);
    if !require_root("the_default_takes_the_ring_when_the_kernel_offers_it") {
        return;
    }
    enable_uring();
    let mut m = Mount::new("uring-auto");
    // Exactly these options: the suite's `uring=` would decide the transport instead.
    m.start_exactly("compress=zstd:1");
    let root = m.p("");
    fs::write(root.join("f"), b"through the ring").unwrap();
    assert_eq!(fs::read(root.join("f")).unwrap(), b"through the ring");
    let status = wring_fs::daemon::status(&root).unwrap();
    assert!(
        status.contains("transport: io_uring (uring=auto)"),
        "{status}"
    );
    assert!(status_figure(&root, "uring:", "requests=") > 0, "{status}");
    // The default is not spelled out, as /proc/mounts leaves btrfs's defaults out.
    let options = status.lines().next().unwrap();
    assert!(!options.contains("uring"), "{options}");
    m.stop();
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("wring-uring-{}", std::process::id()));
    fs::create_dir_all(&d).unwrap();
    d
}
