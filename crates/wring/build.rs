//! Build facts for `wring --version`: the git commit the binary was built from and the versions
//! of the codec crates in Cargo.lock (the libraries' own versions are asked at run time).
//!
//! `WRING_GIT_COMMIT` overrides the commit (a build from a tarball without `.git`); without
//! either the commit reads `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates whose locked versions `--version` names.
const CRATES: [(&str, &str); 5] = [
    ("zstd-sys", "WRING_ZSTD_SYS_VERSION"),
    ("zlib-rs", "WRING_ZLIB_RS_VERSION"),
    ("flate2", "WRING_FLATE2_VERSION"),
    ("lz4-sys", "WRING_LZ4_SYS_VERSION"),
    ("clap", "WRING_CLAP_VERSION"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-env-changed=WRING_GIT_COMMIT");
    let commit = std::env::var("WRING_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git_commit(&manifest))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=WRING_GIT_COMMIT={commit}");
    // The commit's date dates the man pages (reproducibly; empty without git).
    let date = git(&manifest, &["log", "-1", "--format=%cs"]).unwrap_or_default();
    println!("cargo:rustc-env=WRING_GIT_DATE={date}");

    let lock = manifest.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    for (name, var) in CRATES {
        let v = locked_version(&text, name).unwrap_or_else(|| "unknown".into());
        println!("cargo:rustc-env={var}={v}");
    }
}

/// `git ARGS` in `dir`: its trimmed output, if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `git rev-parse --short=12 HEAD` in the source tree, and rerun when HEAD moves.
fn git_commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| git(dir, args);
    let git_dir = PathBuf::from(git(&["rev-parse", "--absolute-git-dir"])?);
    // Only files that exist: cargo reruns a build script every time for a missing one.
    let mut watch = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git_dir.join(r));
    }
    for p in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty())
}

/// The version of the first `[[package]]` named `name` in Cargo.lock's text.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let want = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == want {
            let v = lines.next()?.trim().strip_prefix("version = \"")?;
            return Some(v.trim_end_matches('"').to_string());
        }
    }
    None
}
