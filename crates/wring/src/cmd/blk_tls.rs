//! `wring blk start --tls-psk FILE`: NBD over TLS with pre-shared keys, done by nbdkit
//! (`--tls=require --tls-psk=FILE`, GnuTLS underneath), so the device's data and its
//! authentication come from the server qemu and libguestfs rely on. The file is nbdkit's and
//! psktool's: one `USERNAME:HEXKEY` line per client.
//!
//! Checked here before nbdkit sees it, so that a mistake is an error naming the file rather
//! than a refused handshake later: a regular file owned by the caller with no group or other
//! permission bits (it holds secrets, as ssh's keys do), opened without following a link, at
//! most 64 KiB, every line `USERNAME:HEXKEY` with an even number of hex digits. The key is
//! never printed; the URI names the file and the first username, as libnbd's URIs do
//! (`tls-psk-file=`, `USER@`).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The largest PSK file read.
const MAX_FILE: u64 = 64 << 10;

/// A checked PSK file: where it is (absolute) and the username clients connect as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PskFile {
    /// The file, absolute (nbdkit runs in another directory).
    pub path: PathBuf,
    /// The first line's username.
    pub username: String,
}

/// Check `path` as a PSK file for nbdkit.
pub fn check(path: &Path) -> Result<PskFile> {
    let path = std::path::absolute(path)
        .with_context(|| format!("--tls-psk {}: finding it", path.display()))?;
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .with_context(|| format!("--tls-psk {shown}: opening it (a symbolic link is refused)"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("--tls-psk {shown}: reading its mode"))?;
    if !meta.is_file() {
        bail!("--tls-psk {shown} is not a regular file");
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        bail!(
            "--tls-psk {shown} is owned by uid {}, not by you (uid {uid}): it holds the keys \
             to the device; `chown {uid} {shown}`",
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "--tls-psk {shown} has mode {:o}: others may read the keys to the device; \
             `chmod 600 {shown}`",
            meta.mode() & 0o7777
        );
    }
    if meta.len() > MAX_FILE {
        bail!("--tls-psk {shown} is over 64 KiB: not a PSK file");
    }
    let mut text = String::new();
    file.take(MAX_FILE)
        .read_to_string(&mut text)
        .with_context(|| format!("--tls-psk {shown}: reading it (UTF-8 text)"))?;
    let username = parse(&text).with_context(|| format!("--tls-psk {shown}"))?;
    Ok(PskFile { path, username })
}

/// The first username of a PSK file's text, every line checked (`USERNAME:HEXKEY`).
pub fn parse(text: &str) -> Result<String> {
    let mut first = None;
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let Some((user, key)) = line.split_once(':') else {
            bail!(
                "line {}: not USERNAME:HEXKEY (psktool -u USER -p FILE writes one)",
                n + 1
            );
        };
        let user_ok = !user.is_empty()
            && user
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !user_ok {
            bail!(
                "line {}: a username of letters, digits, '-', '_' and '.' is needed",
                n + 1
            );
        }
        if key.is_empty() || key.len() % 2 != 0 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!(
                "line {}: the key must be hexadecimal bytes (e.g. `openssl rand -hex 32`)",
                n + 1
            );
        }
        first.get_or_insert_with(|| user.to_string());
    }
    first.context("no USERNAME:HEXKEY line")
}

/// A URI query value, percent-encoded where a URI needs it (RFC 3986 unreserved characters and
/// `/` stay as they are).
pub fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// nbdkit's arguments that require TLS with `psk`.
pub fn nbdkit_args(psk: &PskFile) -> Vec<String> {
    vec![
        "--tls=require".into(),
        format!("--tls-psk={}", psk.path.display()),
    ]
}

/// The client's URI: `nbds+unix://USER@/?socket=…&tls-psk-file=…` for a Unix socket,
/// `nbds://USER@HOST:PORT/?tls-psk-file=…` for TCP (`host_port` as `HOST:PORT`).
pub fn uri(psk: &PskFile, socket: Option<&Path>, host_port: Option<&str>) -> String {
    let file = query_value(&psk.path.display().to_string());
    match (socket, host_port) {
        (Some(s), _) => format!(
            "nbds+unix://{}@/?socket={}&tls-psk-file={file}",
            psk.username,
            query_value(&s.display().to_string())
        ),
        (None, Some(hp)) => format!("nbds://{}@{hp}/?tls-psk-file={file}", psk.username),
        (None, None) => format!("nbds://{}@localhost/?tls-psk-file={file}", psk.username),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn lines_are_username_colon_hex() {
        assert_eq!(parse("alice:00ff\nbob:abcd\n").unwrap(), "alice");
        assert_eq!(parse("\nalice:00ff").unwrap(), "alice");
        for bad in [
            "",
            "alice",
            "alice:",
            ":00ff",
            "alice:0ff",
            "alice:zz",
            "a b:00",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("/run/wring/a b&c"), "/run/wring/a%20b%26c");
        assert_eq!(query_value("/x/y.psk"), "/x/y.psk");
    }

    #[test]
    fn files_open_to_others_links_and_garbage_are_refused() {
        let dir = std::env::temp_dir().join(format!("wring-psk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("keys.psk");
        std::fs::File::create(&f)
            .unwrap()
            .write_all(b"alice:0123456789abcdef\n")
            .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = format!("{:#}", check(&f).unwrap_err());
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let ok = check(&f).unwrap();
        assert_eq!(ok.username, "alice");
        let link = dir.join("link.psk");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(check(&link).is_err(), "a link was followed");
        let u = uri(&ok, Some(Path::new("/run/w/nbd.sock")), None);
        assert!(
            u.starts_with("nbds+unix://alice@/?socket=/run/w/nbd.sock&tls-psk-file="),
            "{u}"
        );
        assert!(
            !u.contains("0123456789abcdef"),
            "the key is in the URI: {u}"
        );
        std::fs::write(&f, b"not a psk file\n").unwrap();
        assert!(check(&f).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
