//! Build facts for `wring --version`: the git commit the binary was built from and the versions
//! of the codec crates in Cargo.lock (the libraries' own versions are asked at run time).
//!
//! `WRING_GIT_COMMIT` overrides the commit (a build from a tarball without `.git`); without
//! either the commit reads `unknown`. A build from a tree whose tracked files under `crates/`,
//! `Cargo.toml` or `Cargo.lock` differ from the commit gets `-dirty` after it, as `git describe
//! --dirty` marks it. The man pages are dated by `SOURCE_DATE_EPOCH` when it is set (reproducible
//! builds), else by the commit's date.

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
    // SOURCE_DATE_EPOCH, else the commit's date, dates the man pages (empty without either).
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let date = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(epoch) => epoch_date(&epoch).unwrap_or_else(|| {
            println!("cargo:warning=SOURCE_DATE_EPOCH='{epoch}' is not seconds since 1970");
            String::new()
        }),
        Err(_) => git(&manifest, &["log", "-1", "--format=%cs"]).unwrap_or_default(),
    };
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
        // `git status` would otherwise take .git/index.lock to refresh the index, racing a
        // `git commit` running beside the build.
        .env("GIT_OPTIONAL_LOCKS", "0")
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
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    // What the binary is built from: a change there reruns this script, to mark it dirty.
    for p in SOURCES.map(|p| top.join(p)).iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty())?;
    let paths = SOURCES.map(|p| format!(":(top){p}"));
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(paths.iter().map(String::as_str));
    let dirty = git(&status).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

/// The paths of the source tree the binary is built from (for the `-dirty` mark).
const SOURCES: [&str; 3] = ["crates", "Cargo.toml", "Cargo.lock"];

/// `SOURCE_DATE_EPOCH` (seconds since 1970, UTC) as YYYY-MM-DD.
fn epoch_date(epoch: &str) -> Option<String> {
    let days = epoch.trim().parse::<i64>().ok()?.div_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Some(format!("{year:04}-{month:02}-{day:02}"))
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
