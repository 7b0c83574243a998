//! The mount's backing-device info (`/sys/class/bdi/MAJOR:MINOR`): readahead; and which
//! mount a path is (mountinfo).
//!
//! Mirrors btrfs_fill_super, which raises its bdi's readahead to at least 4 MiB. A FUSE mount
//! keeps the kernel's 128 KiB default whatever the daemon asks for in FUSE_INIT (the kernel takes
//! the smaller of the two), so sequential reads reach the daemon one extent at a time and the
//! decompression cannot run ahead of the reader. Raising it needs root; without, the mount
//! works with the default and a log line says so.

use std::path::Path;

/// Undo the octal escapes /proc/self/mountinfo uses for blanks and backslashes.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], oct) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |a, c| a.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The fields of the last mount on `mountpoint` in a mountinfo text.
fn mount_on<'a>(mountinfo: &'a str, mountpoint: &Path) -> Option<Vec<&'a str>> {
    let want = mountpoint.as_os_str().as_encoded_bytes();
    mountinfo.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.len() > 4 && unescape(f[4]) == want).then_some(f)
    })
}

/// The `MAJOR:MINOR` of the last mount on `mountpoint` in a mountinfo text.
pub(crate) fn device_of(mountinfo: &str, mountpoint: &Path) -> Option<String> {
    mount_on(mountinfo, mountpoint).map(|f| f[2].to_string())
}

/// The filesystem type (`fuse`, `ext4`…) and source (`wring:/store`, `/dev/vda`…) of the
/// last mount on `mountpoint`.
pub(crate) fn fs_of(mountinfo: &str, mountpoint: &Path) -> Option<(String, String)> {
    let f = mount_on(mountinfo, mountpoint)?;
    let sep = f.iter().position(|x| *x == "-")?;
    let source = unescape(f.get(sep + 2)?);
    Some((
        f.get(sep + 1)?.to_string(),
        String::from_utf8_lossy(&source).into_owned(),
    ))
}

/// Set the readahead of the mount on `canon`, the mount point's canonical path taken before
/// mounting: resolving it now would ask the daemon itself (best effort, logged).
pub(crate) fn set_readahead(canon: &Path, kb: u32) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(dev) = device_of(&info, canon) else {
        log::warn!("readahead: {} not found in mountinfo", canon.display());
        return;
    };
    let path = format!("/sys/class/bdi/{dev}/read_ahead_kb");
    if let Err(e) = std::fs::write(&path, kb.to_string()) {
        log::info!("readahead left at the kernel's default: {path}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_mount_on_a_path() {
        let info = "22 1 0:21 / /tmp rw - tmpfs tmpfs rw\n\
                    40 22 0:39 / /tmp/a\\040b rw - fuse.wring wring:/s rw\n\
                    41 40 0:40 / /tmp/a\\040b rw - fuse.wring wring:/t rw\n";
        assert_eq!(
            device_of(info, Path::new("/tmp/a b")).as_deref(),
            Some("0:40")
        );
        assert_eq!(device_of(info, Path::new("/tmp")).as_deref(), Some("0:21"));
        assert_eq!(device_of(info, Path::new("/tmp/a")), None);
    }

    #[test]
    fn finds_the_type_and_source_after_the_optional_fields() {
        let info = "22 1 0:21 / /tmp rw shared:1 master:2 - tmpfs tmpfs rw\n\
                    41 22 0:40 / /tmp/m rw - fuse wring:/t\\040u rw\n";
        let fs = |p: &str| fs_of(info, Path::new(p));
        assert_eq!(fs("/tmp"), Some(("tmpfs".into(), "tmpfs".into())));
        assert_eq!(fs("/tmp/m"), Some(("fuse".into(), "wring:/t u".into())));
        assert_eq!(fs("/x"), None);
    }

    #[test]
    fn unescapes_octal() {
        assert_eq!(unescape("a\\134b\\011"), b"a\\b\t");
        assert_eq!(unescape("x\\9"), b"x\\9");
    }
}
