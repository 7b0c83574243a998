//! cp -a and tar -x of corpus slices into a real mount, diff -r against the source, again after
//! unmount and mount; fsck afterwards.
mod common;
use common::*;

#[test]
fn cp_tar_diff_remount() {
    if !require_root("cp_tar_diff_remount") {
        return;
    }
    let mut m = Mount::new("copy");
    m.start("compress=zstd:3");
    let src = m.base.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let corpus = corpus();
    // A slice: the first 6 MiB of each corpus file (or a copy of a doc tree), with a symlink,
    // a hard link, a sparse file and odd permissions.
    let prep = format!(
        "set -e; cd {s}; for f in {c}/*; do [ -f \"$f\" ] && head -c 6291456 \"$f\" > \"$(basename \"$f\")\" || true; done; \
         mkdir -p sub/deep; cp -a /usr/share/doc/bash sub/deep/ 2>/dev/null || true; ln -s sparse sub/link; \
         ln sub/link sub/hard 2>/dev/null || true; truncate -s 5M sub/sparse; printf x | dd of=sub/sparse bs=1 seek=3000000 conv=notrunc 2>/dev/null; \
         chmod 640 sub/sparse; touch -d 2001-02-03 sub/sparse; seq 1 60000 > sub/dense",
        s = src.display(),
        c = corpus.display()
    );
    assert!(sh(&prep).status.success(), "{:?}", sh(&prep));
    let tarball = m.base.join("src.tar");
    let mnt = m.mnt.display().to_string();
    let run = |c: &str| {
        let o = sh(c);
        assert!(
            o.status.success(),
            "{c}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(&format!(
        "tar -C {} -cf {} .",
        src.display(),
        tarball.display()
    ));
    run(&format!("cp -a {} {mnt}/cp", src.display()));
    run(&format!(
        "mkdir {mnt}/tar && tar -C {mnt}/tar -xpf {}",
        tarball.display()
    ));
    run(&format!("diff -r {} {mnt}/cp", src.display()));
    run(&format!("diff -r {} {mnt}/tar", src.display()));
    let st = sh(&format!("stat -c '%a %Y %s' {mnt}/cp/sub/sparse"));
    assert_eq!(
        String::from_utf8_lossy(&st.stdout).trim(),
        "640 981158400 5242880"
    );
    m.stop();
    assert!(!is_mounted(&m.mnt));
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    m.start("compress=zstd:3");
    run(&format!("diff -r {} {mnt}/cp", src.display()));
    run(&format!("diff -r {} {mnt}/tar", src.display()));
    // du shows what btrfs's shows: the bytes the extents cover, however few they are stored
    // in (`wring stat` shows those); a hole counts nothing.
    let du = |flags: &str, path: &str| -> u64 {
        let o = sh(&format!("du -s {flags} {mnt}/cp/{path}"));
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        du("-k", "sub/sparse") < du("-k --apparent-size", "sub/sparse"),
        "a hole takes nothing"
    );
    // Compressible text, stored in far fewer bytes, counts whole.
    let size = std::fs::metadata(src.join("sub/dense")).unwrap().len();
    assert_eq!(du("-B1", "sub/dense"), size.next_multiple_of(4096));
    run(&format!("rm -r {mnt}/cp {mnt}/tar"));
    m.stop();
    let r = wring_fs::fsck::fsck(&m.store).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}
