//! `wring --version`: the version, the commit, and the codec libraries' versions, since ratios
//! and speeds depend on them. zstd and lz4 are asked at run time (the library actually linked);
//! zlib-rs, a Rust crate, and the binding crates come from Cargo.lock at build time (build.rs).

use std::ffi::CStr;
use std::sync::OnceLock;

/// The commit the binary was built from (12 hex digits, `-dirty` after them when the tree
/// differed from it, or `unknown`).
pub const COMMIT: &str = env!("WRING_GIT_COMMIT");

/// zstd's own version string, from the linked library.
pub fn zstd() -> String {
    // SAFETY: ZSTD_versionString returns a pointer to a static NUL-terminated string.
    let p = unsafe { zstd_sys::ZSTD_versionString() };
    if p.is_null() {
        return "unknown".into();
    }
    // SAFETY: non-null, static and NUL-terminated (checked above; zstd's contract).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// lz4's version, from the linked library (LZ4_versionNumber: major*10000 + minor*100 + release).
pub fn lz4() -> String {
    // SAFETY: LZ4_versionNumber takes nothing and returns a number.
    let n = unsafe { lz4_sys::LZ4_versionNumber() };
    format!("{}.{}.{}", n / 10000, n / 100 % 100, n % 100)
}

/// The text `wring --version` prints (`-V` prints only the first line's version).
pub fn long() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{} (commit {COMMIT})\n\
             zstd {} (zstd-sys {})\n\
             zlib-rs {} (flate2 {})\n\
             lz4 {} (lz4-sys {})\n\
             lzo wring-lzo {} (LZO1X-1 in safe Rust)",
            env!("CARGO_PKG_VERSION"),
            zstd(),
            env!("WRING_ZSTD_SYS_VERSION"),
            env!("WRING_ZLIB_RS_VERSION"),
            env!("WRING_FLATE2_VERSION"),
            lz4(),
            env!("WRING_LZ4_SYS_VERSION"),
            env!("CARGO_PKG_VERSION"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_commit_and_codec_versions() {
        let v = long();
        // The library versions look like versions, and the crates' match them.
        let zstd = zstd();
        assert!(zstd.split('.').count() == 3, "{zstd}");
        assert!(
            env!("WRING_ZSTD_SYS_VERSION").ends_with(&format!("+zstd.{zstd}")),
            "{v}"
        );
        assert!(
            env!("WRING_LZ4_SYS_VERSION").ends_with(&format!("+lz4-{}", lz4())),
            "{v}"
        );
        assert!(!env!("WRING_ZLIB_RS_VERSION").contains("unknown"), "{v}");
        let hash = COMMIT.strip_suffix("-dirty").unwrap_or(COMMIT);
        assert!(COMMIT == "unknown" || hash.len() == 12, "{COMMIT}");
        for word in ["commit", "zstd 1.", "zlib-rs 0.", "lz4 1."] {
            assert!(v.contains(word), "{word} missing from {v}");
        }
    }
}
