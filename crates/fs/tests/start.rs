//! A background mount learns why its daemon did not start from the daemon's ready pipe, as a
//! typed error, not by reading its error output for a prefix.

use std::ffi::OsString;
use std::path::Path;

use wring_fs::daemon::{mount_background, StartError};

#[test]
fn a_daemon_that_cannot_mount_says_why_on_its_ready_pipe() {
    let exe = Path::new(env!("CARGO_BIN_EXE_wring-fsd"));
    let args: Vec<OsString> = vec![
        "/nonexistent-store".into(),
        "/nonexistent-mnt".into(),
        "bogus=1".into(),
    ];
    match mount_background(exe, &args) {
        Err(StartError::Failed { errno, message }) => {
            assert_eq!(errno, libc::EINVAL, "{message}");
            assert!(
                message.contains("bogus") && message.contains("accepted are"),
                "{message}"
            );
            assert!(!message.starts_with("wring: "), "{message}");
        }
        other => panic!("expected a typed failure, got {other:?}"),
    }
}

#[test]
fn a_daemon_that_dies_without_a_word_is_reported_with_its_status_and_last_line() {
    let args: Vec<OsString> = vec!["-c".into(), "echo first >&2; echo boom >&2; exit 3".into()];
    match mount_background(Path::new("/bin/sh"), &args) {
        Err(e @ StartError::Exited { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("exit status: 3") && text.ends_with(": boom"),
                "{text}"
            );
        }
        other => panic!("expected Exited, got {other:?}"),
    }
    match mount_background(Path::new("/nonexistent/wring"), &[]) {
        Err(e @ StartError::Spawn { .. }) => assert!(e.to_string().contains("could not start")),
        other => panic!("expected Spawn, got {other:?}"),
    }
}
