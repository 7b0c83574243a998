//! Credentials for the bucket: the usual AWS environment variables, or a file that only its
//! owner can read — never the command line, never the log (the secret's Debug prints a
//! placeholder). Mirrors the kernel's keyring in spirit: a secret is held, used, never shown.
//!
//! The file takes the AWS shared-credentials form: `key = value` lines with
//! `aws_access_key_id` and `aws_secret_access_key` (and optionally `aws_session_token`),
//! `#`/`;` comments, section headers ignored. Its mode must be 0600 (or stricter) and its owner
//! the caller.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, FormatError, Result};

/// The largest credentials file read (a key pair and a session token fit many times over).
pub const MAX_FILE: u64 = 64 << 10;

/// Environment variable with the access key id.
pub const ACCESS_KEY_ENV: &str = "AWS_ACCESS_KEY_ID";
/// Environment variable with the secret access key.
pub const SECRET_KEY_ENV: &str = "AWS_SECRET_ACCESS_KEY";
/// Environment variable with an optional session token.
pub const TOKEN_ENV: &str = "AWS_SESSION_TOKEN";

/// A string that never shows in Debug or Display output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a secret.
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret itself, for the request signer only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// An access key pair.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: Secret,
    /// A session token, when the keys are temporary.
    pub session_token: Option<Secret>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key id is not secret but is still an account name: show its first four chars.
        let id: String = self.access_key_id.chars().take(4).collect();
        f.debug_struct("Credentials")
            .field("access_key_id", &format_args!("{id}…"))
            .field("secret_access_key", &self.secret_access_key)
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl Credentials {
    /// A key pair given directly (tests, or a caller that got them elsewhere).
    pub fn new(access_key_id: impl Into<String>, secret: impl Into<String>) -> Credentials {
        Credentials {
            access_key_id: access_key_id.into(),
            secret_access_key: Secret::new(secret),
            session_token: None,
        }
    }

    /// From `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`), when
    /// both keys are set; an error when only one is.
    pub fn from_env() -> Result<Option<Credentials>> {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        match (get(ACCESS_KEY_ENV), get(SECRET_KEY_ENV)) {
            (Some(id), Some(secret)) => Ok(Some(Credentials {
                access_key_id: id,
                secret_access_key: Secret::new(secret),
                session_token: get(TOKEN_ENV).map(Secret::new),
            })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(Error::Credentials(format!(
                "{ACCESS_KEY_ENV} is set but {SECRET_KEY_ENV} is not; set both or neither"
            ))),
            (None, Some(_)) => Err(Error::Credentials(format!(
                "{SECRET_KEY_ENV} is set but {ACCESS_KEY_ENV} is not; set both or neither"
            ))),
        }
    }

    /// From the file at `path`, which must be a regular file (not a symbolic link) owned by
    /// the caller with no permission bits for group or others, of at most [`MAX_FILE`] bytes.
    /// It is opened once (`O_NOFOLLOW`, `O_NONBLOCK` so a FIFO cannot hang the open) and the
    /// checks look at that open file (`fstat`), so it cannot be swapped between check and read.
    pub fn from_file(path: &Path) -> Result<Credentials> {
        let p = path.display();
        let cannot = |e: std::io::Error| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                Error::Credentials(format!(
                    "{p} is a symbolic link; name the credentials file itself"
                ))
            } else {
                Error::Credentials(format!("cannot read {p}: {e}"))
            }
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        check_file(path, meta.is_file(), meta.mode(), meta.uid(), me)?;
        let too_big = |n: u64| {
            Error::Credentials(format!(
                "{p} is {n} bytes or more, more than a credentials file's {MAX_FILE}; is it the \
                 right file?"
            ))
        };
        if meta.len() > MAX_FILE {
            return Err(too_big(meta.len()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(cannot)?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(too_big(bytes.len() as u64));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Credentials(format!("{p} is not UTF-8 text")))?;
        parse(&text).map_err(|e| Error::Credentials(format!("{p}: {e}")))
    }
}

/// Whether a credentials file with this type, mode and owner may be used by user `me`.
fn check_file(path: &Path, is_file: bool, mode: u32, owner: u32, me: u32) -> Result<()> {
    let p = path.display();
    if !is_file {
        return Err(Error::Credentials(format!("{p} is not a regular file")));
    }
    if owner != me {
        return Err(Error::Credentials(format!(
            "{p} is owned by uid {owner}, not by you (uid {me}); a credentials file must be \
             your own: chown {me} {p}"
        )));
    }
    if mode & 0o077 != 0 {
        return Err(Error::Credentials(format!(
            "{p} has mode {:04o}: others than its owner may read or change it; refusing to use \
             it. Fix: chmod 600 {p}",
            mode & 0o7777
        )));
    }
    Ok(())
}

/// Parse the shared-credentials form (see the module header).
pub fn parse(text: &str) -> Result<Credentials, FormatError> {
    let (mut id, mut secret, mut token) = (None, None, None);
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(FormatError(format!(
                "line {} is not `key = value` (nor a comment or [section])",
                n + 1
            )));
        };
        let (k, v) = (k.trim(), v.trim().to_string());
        let slot = match k.to_ascii_lowercase().as_str() {
            "aws_access_key_id" => &mut id,
            "aws_secret_access_key" => &mut secret,
            "aws_session_token" => &mut token,
            _ => continue,
        };
        if slot.is_some() {
            return Err(FormatError(format!("line {}: {k} is given twice", n + 1)));
        }
        if v.is_empty() {
            return Err(FormatError(format!("line {}: {k} is empty", n + 1)));
        }
        *slot = Some(v);
    }
    match (id, secret) {
        (Some(id), Some(secret)) => Ok(Credentials {
            access_key_id: id,
            secret_access_key: Secret::new(secret),
            session_token: token.map(Secret::new),
        }),
        _ => Err(FormatError(
            "needs both aws_access_key_id and aws_secret_access_key lines".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_shared_form() {
        let c = parse("[default]\n# c\naws_access_key_id = AK\n aws_secret_access_key=SK \n")
            .expect("valid");
        assert_eq!(c.access_key_id, "AK");
        assert_eq!(c.secret_access_key.expose(), "SK");
        assert!(parse("aws_access_key_id = AK\n").is_err());
        assert!(parse("aws_access_key_id = AK\naws_access_key_id = B\n").is_err());
        assert!(parse("garbage\n").is_err());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let mut c = Credentials::new("AKIAEXAMPLEKEY", "very-secret-value");
        c.session_token = Some(Secret::new("token-value"));
        let shown = format!("{c:?} {:?}", c.secret_access_key);
        assert!(!shown.contains("very-secret-value"), "{shown}");
        assert!(!shown.contains("token-value"), "{shown}");
        assert!(!shown.contains("AKIAEXAMPLEKEY"), "{shown}");
    }

    #[test]
    fn modes_and_owners() {
        let p = Path::new("/x/creds");
        assert!(check_file(p, true, 0o100600, 5, 5).is_ok());
        assert!(check_file(p, true, 0o100400, 5, 5).is_ok());
        let e = check_file(p, true, 0o100644, 5, 5).unwrap_err().to_string();
        assert!(
            e.contains("/x/creds") && e.contains("0644") && e.contains("chmod 600"),
            "{e}"
        );
        let e = check_file(p, true, 0o100600, 6, 5).unwrap_err().to_string();
        assert!(e.contains("owned by uid 6") && e.contains("chown"), "{e}");
        assert!(check_file(p, false, 0o040700, 5, 5).is_err());
    }

    /// A fresh directory under the system's temp dir, removed on drop.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let d = std::env::temp_dir().join(format!("wring-creds-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir(&d).expect("temp dir");
            TempDir(d)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write_0600(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    #[test]
    fn files_are_opened_once_without_following_links_and_capped() {
        let d = TempDir::new("files");
        let good = d.0.join("creds");
        write_0600(
            &good,
            "aws_access_key_id = AK\naws_secret_access_key = SK\n",
        );
        assert_eq!(
            Credentials::from_file(&good)
                .expect("a 0600 file")
                .access_key_id,
            "AK"
        );
        // A symbolic link to a good file is refused: the link is what was named.
        let link = d.0.join("link");
        std::os::unix::fs::symlink(&good, &link).expect("symlink");
        let e = Credentials::from_file(&link)
            .expect_err("followed a symbolic link")
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // A huge file is refused, not read whole (valid keys, then comments past the cap).
        let big = d.0.join("big");
        let pad = "# padding\n".repeat((MAX_FILE as usize / 10) + 10);
        write_0600(
            &big,
            &format!("aws_access_key_id = AK\naws_secret_access_key = SK\n{pad}"),
        );
        let e = Credentials::from_file(&big)
            .expect_err("read a file over the cap")
            .to_string();
        assert!(e.contains("bytes or more"), "{e}");
        // A directory is not a regular file.
        assert!(Credentials::from_file(&d.0).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "(?s).{0,200}") {
            let _ = parse(&s);
        }
    }
}
