//! The real `wring` CLI backgrounds its mount daemon correctly: `wring mount` returns only once
//! the mount is live (and does not hold the caller's pipes open), `wring status` shows the
//! options, `wring umount` unmounts and the daemon exits. The same for a store whose extents
//! are in a bucket (a SeaweedFS started for the test), through to `mount --from`.

mod common;
use common::{ok, Scratch};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WRING: &str = env!("CARGO_BIN_EXE_wring");

fn is_mounted(p: &Path) -> bool {
    common::is_mounted(p)
}

/// Run `wring ARGS…` capturing its output, failing when it takes longer than `limit` (a
/// daemon that kept the caller's stdout or stderr pipe would make `output()` hang).
fn wring(args: &[&str], limit: Duration) -> Output {
    run(Command::new(WRING), args, limit)
}

/// [`wring`] as the user nobody (65534), without root's capabilities.
fn wring_as_nobody(args: &[&str], limit: Duration) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", WRING]);
    run(cmd, args, limit)
}

fn run(mut cmd: Command, args: &[&str], limit: Duration) -> Output {
    // A store in a bucket finds its credentials file, not the caller's environment.
    cmd.args(args)
        .stdin(Stdio::null())
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.expect("running wring"),
        Err(_) => panic!("`wring {}` did not return within {limit:?}", args.join(" ")),
    }
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn mount_status_umount_in_background() {
    if !wring_testing::require_root("mount_status_umount_in_background") {
        return;
    }
    let s = Scratch::new("fs");
    let store = s.base.join("store");
    let (st, mnt) = (store.to_str().unwrap(), s.mnt.to_str().unwrap());
    let limit = Duration::from_secs(30);

    ok(&wring(&["mkfs", st], limit), "wring mkfs");
    let started = Instant::now();
    ok(
        &wring(&["mount", "-o", "compress=zstd:1", st, mnt], limit),
        "wring mount",
    );
    // Ready on return: no waiting, no retrying.
    assert!(
        is_mounted(&s.mnt),
        "not mounted when `wring mount` returned"
    );
    let file = s.mnt.join("hello");
    std::fs::write(&file, b"hello, wring\n").expect("create a file right after mount");
    assert_eq!(std::fs::read(&file).unwrap(), b"hello, wring\n");
    eprintln!("mount returned after {:?}", started.elapsed());

    let pid: i32 =
        String::from_utf8(wring_fs::daemon::get_xattr(&s.mnt, wring_fs::PID_XATTR).unwrap())
            .unwrap()
            .parse()
            .unwrap();
    assert!(alive(pid), "daemon {pid} is not running");
    assert_ne!(pid as u32, std::process::id());

    let status = ok(&wring(&["status", mnt], limit), "wring status");
    assert!(
        status.contains("compress=zstd:1"),
        "status lacks compress=: {status}"
    );

    // -o may repeat, later ones win; a remount cannot change allow_other, and says so.
    let now = ok(
        &wring(
            &["remount", "-o", "compress=lzo", "-o", "streams=1", mnt],
            limit,
        ),
        "wring remount",
    );
    assert!(
        now.starts_with("compress=lzo,") && now.contains("streams=1"),
        "{now}"
    );
    let e = wring(&["remount", "-o", "allow_other", mnt], limit);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(
        !e.status.success() && msg.contains("allow_other can only be set when mounting"),
        "{msg}"
    );

    // A second mount on the same point fails with a message, and leaves the first alone.
    let again = wring(&["mount", st, mnt], limit);
    assert!(!again.status.success(), "a second mount succeeded");
    assert!(is_mounted(&s.mnt));

    ok(&wring(&["umount", mnt], limit), "wring umount");
    assert!(!is_mounted(&s.mnt), "still mounted after `wring umount`");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "daemon {pid} still running after umount");

    // What was written survived: fsck is clean and a new mount reads it back.
    let fsck = ok(&wring(&["fsck", st], limit), "wring fsck");
    assert!(fsck.contains("no problems found"), "{fsck}");
    assert!(
        !fsck.contains("not closed cleanly"),
        "a clean umount left the database open: {fsck}"
    );
    ok(&wring(&["mount", st, mnt], limit), "wring mount (again)");
    assert_eq!(std::fs::read(&file).unwrap(), b"hello, wring\n");
    ok(&wring(&["umount", mnt], limit), "wring umount (again)");
    assert!(!is_mounted(&s.mnt));
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `wring mkfs` makes the store its owner's alone whatever the umask (it holds every file's
/// bytes); `wring mount` refuses one others can read and says how to fix it; `wring fsck`
/// checks it anyway, with a warning.
#[test]
fn the_store_is_private_and_mount_refuses_an_open_one() {
    if !wring_testing::require_root("the_store_is_private_and_mount_refuses_an_open_one") {
        return;
    }
    let base = PathBuf::from(format!("/tmp/wring-cli-fs-private-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let s = Scratch {
        mnt: base.join("mnt"),
        base,
    };
    std::fs::create_dir_all(&s.mnt).unwrap();
    let limit = Duration::from_secs(30);
    // A new directory, and an existing one others could enter.
    let existing = s.base.join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(
        &existing,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for (umask, dir) in [
        ("000", s.base.join("wide")),
        ("277", s.base.join("narrow")),
        ("000", existing),
    ] {
        let d = dir.display();
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec {WRING} mkfs {d}"))
            .output()
            .unwrap();
        ok(&o, &format!("umask {umask}; wring mkfs {d}"));
        assert_eq!(mode(&dir), 0o700, "{d} after mkfs under umask {umask}");
        for f in ["wring.redb", "wring.data"] {
            assert_eq!(mode(&dir.join(f)), 0o600, "{d}/{f} under umask {umask}");
        }
    }

    let store = s.base.join("wide");
    let (st, mnt) = (store.to_str().unwrap(), s.mnt.to_str().unwrap());
    std::fs::set_permissions(&store, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = wring(&["mount", st, mnt], limit);
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "mounted a store open to others");
    assert!(
        msg.contains("open to other users") && msg.contains(&format!("chmod 700 {st}")),
        "{msg}"
    );
    assert!(!is_mounted(&s.mnt));
    let o = wring(&["fsck", st], limit);
    let fsck = ok(&o, "wring fsck of an open store");
    assert!(fsck.contains("no problems found"), "{fsck}");
    let warning = String::from_utf8_lossy(&o.stderr);
    assert!(
        warning.contains("warning") && warning.contains("open to other users"),
        "{warning}"
    );

    std::fs::set_permissions(&store, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    ok(&wring(&["mount", st, mnt], limit), "wring mount");
    assert_eq!(mode(&store.join("wring.log")), 0o600, "the daemon's log");
    ok(&wring(&["umount", mnt], limit), "wring umount");
}

/// A store in a bucket through the CLI a user runs: options checked with errors naming them,
/// mkfs --data recording the credentials file, a background mount that finds it (no AWS_* in
/// the environment, no key in the daemon's command line or environment), status and stat,
/// umount, fsck, and mount --from into a second directory.
#[test]
fn a_store_in_a_bucket_through_the_cli() {
    use std::os::unix::fs::OpenOptionsExt;
    use wring_testing::seaweed::{Seaweed, BUCKET};
    use wring_testing::Need;
    if !wring_testing::require(
        "a_store_in_a_bucket_through_the_cli",
        &[Need::Root, Need::Seaweed],
    ) {
        return;
    }
    let sw = Seaweed::server().expect("starting SeaweedFS");
    let base = PathBuf::from(format!("/tmp/wring-cli-s3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let s = Scratch {
        mnt: base.join("mnt"),
        base,
    };
    std::fs::create_dir_all(&s.mnt).unwrap();
    let creds = s.base.join("credentials");
    let text = format!(
        "aws_access_key_id = {}\naws_secret_access_key = {}\n",
        sw.access_key, sw.secret_key
    );
    std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&creds)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .unwrap();
    let (store, store2) = (s.base.join("store"), s.base.join("store2"));
    let (st, st2) = (store.to_str().unwrap(), store2.to_str().unwrap());
    let (mnt, c) = (s.mnt.to_str().unwrap(), creds.to_str().unwrap());
    let url = format!("s3://{BUCKET}/cli");
    let ep = sw.endpoint.as_str();
    let limit = Duration::from_secs(60);
    let refused = |args: &[&str], needle: &str| {
        let o = wring(args, limit);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains(needle), "{args:?}: {e}");
    };
    refused(
        &["mkfs", "--data", "http://b/p", st],
        "--data must be s3://BUCKET/PREFIX",
    );
    refused(
        &["mkfs", "--data", "s3://bucket", st],
        "--data must be s3://BUCKET/PREFIX",
    );
    refused(&["mkfs", "--endpoint", ep, st], "need --data");
    let bad_size = ["mkfs", "--data", &url, "--segment-size", "1K", st];
    refused(&bad_size, "--segment-size must be a size from 64K to 1G");
    refused(
        &["mkfs", "--data", &url, "--endpoint", "ftp://x", st],
        "--endpoint must be",
    );
    refused(
        &["mount", "-o", "compact_threshold=99", st, mnt],
        "compact_threshold",
    );
    assert!(!store.exists(), "a refused mkfs left {st}");
    // The fresh server's gateway learns of its bucket a moment after it was made.
    let mkfs = [
        "mkfs",
        "--data",
        &url,
        "--endpoint",
        ep,
        "--credentials",
        c,
        st,
    ];
    let deadline = Instant::now() + limit;
    loop {
        let o = wring(&mkfs, limit);
        if o.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let _ = std::fs::remove_dir_all(&store);
        std::thread::sleep(Duration::from_millis(500));
    }
    ok(
        &wring(&["mount", "-o", "compress=zstd:1", st, mnt], limit),
        "wring mount",
    );
    let pid: i32 =
        String::from_utf8(wring_fs::daemon::get_xattr(&s.mnt, wring_fs::PID_XATTR).unwrap())
            .unwrap()
            .parse()
            .unwrap();
    for what in ["cmdline", "environ"] {
        let v = std::fs::read(format!("/proc/{pid}/{what}")).unwrap();
        let v = String::from_utf8_lossy(&v);
        assert!(
            !v.contains(&sw.secret_key),
            "the secret key is in the daemon's {what}"
        );
    }
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(s.mnt.join("f"), &data).unwrap();
    let status = ok(&wring(&["status", mnt], limit), "wring status");
    assert!(status.contains("objects: bucket="), "{status}");
    assert!(status.contains("compaction: on threshold=50%"), "{status}");
    let stat = ok(&wring(&["stat", mnt], limit), "wring stat");
    assert!(stat.contains("\nBucket "), "{stat}");
    ok(&wring(&["umount", mnt], limit), "wring umount");
    let fsck = ok(&wring(&["fsck", st], limit), "wring fsck");
    assert!(
        fsck.contains("no problems found") && fsck.contains("segment object"),
        "{fsck}"
    );
    let from = [
        "mount",
        "--from",
        &url,
        "--endpoint",
        ep,
        "--credentials",
        c,
        st2,
        mnt,
    ];
    ok(&wring(&from, limit), "wring mount --from");
    assert!(
        std::fs::read(s.mnt.join("f")).unwrap() == data,
        "f differs after mount --from"
    );
    ok(&wring(&["umount", mnt], limit), "wring umount (store2)");
    drop(s);
    sw.stop_and_check().expect("clean stop");
}

/// `/dev/fuse` opened to everyone, as on a stock Debian (0666; 0600 on the CI machines), and
/// put back as it was when dropped, whatever happens.
struct OpenFuse(u32);

impl OpenFuse {
    fn widen() -> OpenFuse {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata("/dev/fuse").unwrap().permissions().mode() & 0o7777;
        std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(0o666)).unwrap();
        OpenFuse(mode)
    }
}

impl Drop for OpenFuse {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(self.0);
        if let Err(e) = std::fs::set_permissions("/dev/fuse", mode) {
            eprintln!("putting /dev/fuse back to {:o}: {e}", self.0);
        }
    }
}

/// A user without root mounts a store of theirs through fusermount3 (where /dev/fuse is open
/// to users, as Debian ships it), on either transport, uses it and unmounts it.
#[test]
fn a_user_mounts_without_root_through_fusermount3() {
    if !wring_testing::require_root("a_user_mounts_without_root_through_fusermount3") {
        return;
    }
    let _fuse = OpenFuse::widen();
    let base = PathBuf::from(format!("/tmp/wring-cli-user-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let s = Scratch {
        mnt: base.join("mnt"),
        base,
    };
    std::fs::create_dir_all(&s.mnt).unwrap();
    let chown = |p: &Path| std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    chown(&s.base);
    chown(&s.mnt);
    let limit = Duration::from_secs(30);
    let mnt = s.mnt.to_str().unwrap();
    // The default (the ring where the kernel offers it) and /dev/fuse.
    for (n, extra) in ["", ",uring=0"].into_iter().enumerate() {
        let store = s.base.join(format!("store{n}"));
        let st = store.to_str().unwrap();
        ok(&wring_as_nobody(&["mkfs", st], limit), "mkfs as nobody");
        let opts = format!("compress=zstd:1{extra}");
        ok(
            &wring_as_nobody(&["mount", "-o", &opts, st, mnt], limit),
            &format!("mount -o {opts} as nobody"),
        );
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        let line = mounts.lines().find(|l| l.split(' ').nth(1) == Some(mnt));
        let line = line.unwrap_or_else(|| panic!("-o {opts}: not mounted:\n{mounts}"));
        assert!(
            line.contains("fuse.wring") && line.contains("user_id=65534"),
            "{line}"
        );
        let sh = format!("echo by nobody > {mnt}/f && cat {mnt}/f");
        let o = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                &sh,
            ])
            .output()
            .unwrap();
        assert_eq!(
            o.stdout,
            b"by nobody\n",
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let status = ok(
            &wring_as_nobody(&["status", mnt], limit),
            "status as nobody",
        );
        let transport = status.lines().find(|l| l.starts_with("transport: "));
        let transport = transport.unwrap_or_else(|| panic!("no transport line:\n{status}"));
        if extra.is_empty() {
            assert!(transport.contains("uring=auto"), "{transport}");
        } else {
            assert_eq!(transport, "transport: /dev/fuse (uring=0)");
        }
        ok(
            &wring_as_nobody(&["umount", mnt], limit),
            "umount as nobody",
        );
        assert!(!is_mounted(&s.mnt), "-o {opts}: still mounted after umount");
    }
}

/// `wring defrag -c zstd:19` (a level btrfs-progs 6.2 cannot send) and `-r`: the files are
/// stored at that level after, their bytes unchanged; an algorithm the ioctl cannot carry, a
/// directory without -r and a file off the mount are refused, each saying why.
#[test]
fn wring_defrag_recompresses_at_any_zstd_level() {
    if !wring_testing::require_root("wring_defrag_recompresses_at_any_zstd_level") {
        return;
    }
    let s = Scratch::new("defrag");
    let store = s.base.join("store");
    let (st, mnt) = (store.to_str().unwrap(), s.mnt.to_str().unwrap());
    let limit = Duration::from_secs(60);
    ok(&wring(&["mkfs", st], limit), "wring mkfs");
    ok(
        &wring(&["mount", "-o", "compress=lzo", st, mnt], limit),
        "wring mount",
    );
    let text: Vec<u8> = (0..600_000u32)
        .flat_map(|i| format!("line {} of a text file\n", i % 997).into_bytes())
        .take(600_000)
        .collect();
    std::fs::create_dir_all(s.mnt.join("d/e")).unwrap();
    for f in ["a", "d/b", "d/e/c"] {
        std::fs::write(s.mnt.join(f), &text).unwrap();
    }
    let a = s.mnt.join("a");
    let out = ok(
        &wring(&["defrag", "-c", "zstd:19", a.to_str().unwrap()], limit),
        "wring defrag -c zstd:19",
    );
    assert!(out.contains("defragmented 1 of 1 files"), "{out}");
    let stat = ok(&wring(&["stat", a.to_str().unwrap()], limit), "wring stat");
    assert!(stat.contains("zstd:19") && !stat.contains("lzo"), "{stat}");

    let d = s.mnt.join("d");
    let o = wring(&["defrag", "-c", "zstd:-3", d.to_str().unwrap()], limit);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("-r descends"),
        "{o:?}"
    );
    let out = ok(
        &wring(
            &["defrag", "-r", "-c", "zstd:-3", d.to_str().unwrap()],
            limit,
        ),
        "wring defrag -r",
    );
    assert!(out.contains("defragmented 2 of 2 files"), "{out}");
    let stat = ok(&wring(&["stat", d.to_str().unwrap()], limit), "wring stat");
    assert!(stat.contains("zstd:-3") && !stat.contains("lzo"), "{stat}");
    for f in ["a", "d/b", "d/e/c"] {
        assert_eq!(std::fs::read(s.mnt.join(f)).unwrap(), text, "{f}");
    }

    let o = wring(&["defrag", "-c", "lz4", a.to_str().unwrap()], limit);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("zlib, lzo and zstd"),
        "{o:?}"
    );
    let outside = s.base.join("outside");
    std::fs::write(&outside, &text).unwrap();
    let o = wring(&["defrag", "-c", "zstd", outside.to_str().unwrap()], limit);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("not on a wring mount"),
        "{o:?}"
    );
    ok(&wring(&["umount", mnt], limit), "wring umount");
    let fsck = ok(&wring(&["fsck", st], limit), "wring fsck");
    assert!(fsck.contains("no problems found"), "{fsck}");
}

/// The `key=value` figure `key` on the line of `text` that starts with `line`.
fn figure(text: &str, line: &str, key: &str) -> String {
    let l = text.lines().find(|l| l.starts_with(line));
    let l = l.unwrap_or_else(|| panic!("no `{line}` line in:\n{text}"));
    let kv = l
        .split(' ')
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='));
    kv.unwrap_or_else(|| panic!("no {key}= on `{l}`"))
        .to_string()
}

/// `wring status --json` and `wring stat --json` parse as JSON and show the figures the text
/// versions show: the options, the page pool, the FUSE writes, inodes, the filesystem's size;
/// each path's totals, levels and file count.
#[test]
fn status_and_stat_print_json_with_the_texts_figures() {
    if !wring_testing::require_root("status_and_stat_print_json_with_the_texts_figures") {
        return;
    }
    let s = Scratch::new("json");
    let store = s.base.join("store");
    let (st, mnt) = (store.to_str().unwrap(), s.mnt.to_str().unwrap());
    let limit = Duration::from_secs(60);
    ok(&wring(&["mkfs", st], limit), "wring mkfs");
    ok(
        &wring(&["mount", "-o", "compress=zstd:5", st, mnt], limit),
        "wring mount",
    );
    let text: Vec<u8> = (0..400_000u32)
        .flat_map(|i| format!("line {} of a text file\n", i % 499).into_bytes())
        .collect();
    std::fs::create_dir_all(s.mnt.join("d")).unwrap();
    std::fs::write(s.mnt.join("d/a"), &text).unwrap();
    std::fs::write(s.mnt.join("b"), &text[..5000]).unwrap();

    // stat: one object per path, the same totals as the raw: line.
    let (d, b) = (s.mnt.join("d"), s.mnt.join("b"));
    let (d, b) = (d.to_str().unwrap(), b.to_str().unwrap());
    let json = ok(
        &wring(&["stat", "--json", d, b], limit),
        "wring stat --json",
    );
    let v: serde_json::Value = serde_json::from_str(&json).expect("stat --json is JSON");
    let reports = v.as_array().expect("an array");
    assert_eq!(reports.len(), 2, "{json}");
    for (r, p) in reports.iter().zip([d, b]) {
        assert_eq!(r["path"], p);
        let t = ok(&wring(&["stat", p], limit), "wring stat");
        let total = &r["total"];
        for (key, field) in [
            ("disk", "disk_bytes"),
            ("uncompressed", "uncompressed_bytes"),
            ("referenced", "referenced_bytes"),
            ("extents", "extents"),
            ("refs", "refs"),
        ] {
            let n: u64 = figure(&t, "raw:", key).parse().unwrap();
            assert_eq!(total[field].as_u64(), Some(n), "{p} {key}:\n{t}\n{json}");
        }
        assert_eq!(r["files"], 1, "{json}");
        assert!(r["by_level"]["zstd:5"]["disk_bytes"].as_u64() > Some(0));
        assert!(t.contains("zstd:5"), "{t}");
    }

    // status: the same options, page pool, writes, inodes and filesystem size.
    let t = ok(&wring(&["status", mnt], limit), "wring status");
    let json = ok(
        &wring(&["status", "--json", mnt], limit),
        "wring status --json",
    );
    let v: serde_json::Value = serde_json::from_str(&json).expect("status --json is JSON");
    let options = t.lines().next().and_then(|l| l.strip_prefix("options: "));
    assert_eq!(v["options"].as_str(), options, "{json}");
    let size: u64 = figure(&t, "page_pool:", "size").parse().unwrap();
    assert_eq!(v["page_pool"]["size_pages"].as_u64(), Some(size));
    let fuse = v["fuse"].as_array().expect("fuse: an array");
    let writes = fuse
        .iter()
        .find(|o| o["op"] == "write")
        .expect("a write entry");
    let n: u64 = figure(&t, "fuse:", "write").parse().unwrap();
    assert_eq!(writes["requests"].as_u64(), Some(n), "{json}");
    assert!(writes["seconds"].as_f64() > Some(0.0), "{json}");
    let inodes: u64 = figure(&t, "store:", "inodes").parse().unwrap();
    assert_eq!(v["store"]["inodes"].as_u64(), Some(inodes));
    let fs_total: u64 = figure(&t, "space raw:", "fs_total").parse().unwrap();
    assert_eq!(v["space"]["fs_total_bytes"].as_u64(), Some(fs_total));
    assert!(v["transactions"]["commits"].as_u64() > Some(0), "{json}");
    assert!(
        v["objects"].is_null() && v["compaction"].is_null(),
        "{json}"
    );
    let zstd = v["workspaces"].as_array().and_then(|w| w.first());
    assert!(zstd.is_some_and(|w| w["mem_bytes"].is_u64()), "{json}");

    ok(&wring(&["umount", mnt], limit), "wring umount");
}
