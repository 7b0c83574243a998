//! The plugin under real NBD clients: nbdkit 1.32 loads `libwring_blk_nbdkit.so`, and nbdinfo,
//! qemu-io and nbdcopy (Debian packages nbdkit, libnbd-bin, qemu-utils; scripts/setup.sh
//! installs them) talk to it over a Unix socket. A raw client sends the requests no polite
//! client would (past the end, oversized). The tests fail, naming the package, when a program
//! is missing: they never skip.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wring_blk::control::{self, Request};
// The bench's nbdkit harness, compiled in (a dev-dependency on wring-bench would be a cycle).
#[allow(dead_code)]
#[path = "../../bench/src/serve.rs"]
mod serve;
use serve::Nbdkit;

const PAGE: usize = 4096;

use wring_testing::blk_plugin as plugin_path;

fn need(program: &str, package: &str) {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{program} is not installed: install the Debian package {package} (scripts/setup.sh does)"
    );
}

/// A splitmix64 generator (deterministic data and operations).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A running nbdkit with the plugin in a directory of its own, killed and cleaned up on drop
/// (also when a test fails).
struct Server {
    nbdkit: Nbdkit,
    dir: PathBuf,
    size: u64,
}

impl Server {
    fn start(size: &str, options: &[&str]) -> Server {
        need("nbdkit", "nbdkit");
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wring-blk-nbd-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut args = vec![plugin_path().display().to_string(), format!("size={size}")];
        args.extend(options.iter().map(|o| o.to_string()));
        let nbdkit = Nbdkit::start(&dir, &args, true, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut s = Server {
            nbdkit,
            dir,
            size: 0,
        };
        s.size = s.stat().disksize;
        s
    }

    fn uri(&self) -> String {
        self.nbdkit.uri()
    }

    fn control(&self) -> PathBuf {
        self.nbdkit.control()
    }

    fn stat(&self) -> wring_blk::Stat {
        control::stat(&self.control()).expect("the control socket answers stat")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // `nbdkit` is dropped (killed) after this, then the directory goes.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nbdcopy(from: &str, to: &str) {
    need("nbdcopy", "libnbd-bin");
    serve::nbdcopy(from, to, &[]).unwrap_or_else(|e| panic!("{e}"));
}

/// The whole device as bytes, copied out by nbdcopy.
fn device_bytes(s: &Server) -> Vec<u8> {
    let out = s.file("out.img");
    let _ = std::fs::remove_file(&out);
    nbdcopy(&s.uri(), out.to_str().expect("utf-8 path"));
    std::fs::read(&out).expect("nbdcopy's output")
}

/// Mixed data: text, noise, one repeated word and zeros, in page-sized runs.
fn mixed(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let text = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ";
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let n = (PAGE * (1 + rng.below(8) as usize)).min(len - v.len());
        match rng.below(4) {
            0 => v.extend((0..n).map(|i| text[(i + seed as usize) % text.len()])),
            1 => v.extend((0..n).map(|_| rng.next() as u8)),
            2 => v.extend((0..n).map(|i| [7u8, 1, 2, 3, 4, 5, 6, 9][i % 8])),
            _ => v.extend(std::iter::repeat_n(0u8, n)),
        }
    }
    v
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

#[test]
fn nbdinfo_reports_size_capabilities_and_a_map_of_holes() {
    need("nbdinfo", "libnbd-bin");
    let s = Server::start("10M", &["comp_algorithm=zstd:1"]);
    let size = run(Command::new("nbdinfo").arg("--size").arg(s.uri()));
    assert_eq!(size.trim(), (10u64 << 20).to_string());
    let info = run(Command::new("nbdinfo").arg(s.uri()));
    for cap in [
        "can_multi_conn: true",
        "can_trim: true",
        "can_zero: true",
        "base:allocation",
    ] {
        assert!(info.contains(cap), "nbdinfo lacks '{cap}':\n{info}");
    }
    // Fresh: one hole. Then data at 1 MiB..1 MiB+8 KiB, zeros written as data at 2 MiB.
    let map = run(Command::new("nbdinfo").arg("--map").arg(s.uri()));
    assert_eq!(map.lines().count(), 1, "{map}");
    assert!(map.contains("hole,zero"), "{map}");
    need("qemu-io", "qemu-utils");
    run(Command::new("qemu-io").args([
        "-f",
        "raw",
        "-c",
        "write -P 0x5a 1M 8K",
        "-c",
        "write -P 0 2M 4K",
        &s.uri(),
    ]));
    let map = run(Command::new("nbdinfo").arg("--map").arg(s.uri()));
    let rows: Vec<Vec<String>> = map
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    let data: Vec<_> = rows
        .iter()
        .filter(|r| r.get(3).map(String::as_str) == Some("data"))
        .collect();
    assert_eq!(data.len(), 1, "one data extent expected:\n{map}");
    assert_eq!(
        (data[0][0].as_str(), data[0][1].as_str()),
        ("1048576", "8192"),
        "{map}"
    );
}

/// Block status with 16 KiB slots: a 4 KiB write inside a slot makes the whole slot data (it
/// is stored as one object), a slot of zeros written as data is a hole, the rest stay holes.
#[test]
fn nbdinfo_maps_whole_16k_slots() {
    need("nbdinfo", "libnbd-bin");
    need("qemu-io", "qemu-utils");
    let s = Server::start("10M", &["comp_algorithm=zstd:1", "slot_size=16K"]);
    run(Command::new("qemu-io").args([
        "-f",
        "raw",
        "-c",
        "write -P 0x5a 1052672 4K",
        "-c",
        "write -P 0 2M 16K",
        &s.uri(),
    ]));
    let map = run(Command::new("nbdinfo").arg("--map").arg(s.uri()));
    let data: Vec<Vec<&str>> = map
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|r| r.get(3) == Some(&"data"))
        .collect();
    assert_eq!(data.len(), 1, "one data extent expected:\n{map}");
    assert_eq!((data[0][0], data[0][1]), ("1048576", "16384"), "{map}");
}

#[test]
fn qemu_io_random_writes_match_a_reference_file() {
    qemu_io_random_writes(&["comp_algorithm=lz4", "streams=2"], PAGE, 15);
}

/// The same with 16 KiB slots (beyond zram): most writes cover part of a slot, so they are
/// read-modify-writes of the slot, and discard frees whole slots only.
#[test]
fn qemu_io_random_writes_match_a_reference_file_with_16k_slots() {
    qemu_io_random_writes(
        &["comp_algorithm=zstd:1", "streams=2", "slot_size=16K"],
        16 << 10,
        16,
    );
}

/// Random qemu-io writes, write-zeroes and discards against a reference file kept in step;
/// the device copied out must equal it.
fn qemu_io_random_writes(options: &[&str], slot: usize, seed: u64) {
    need("qemu-io", "qemu-utils");
    let s = Server::start("4M", options);
    assert_eq!(s.stat().slot_size, slot);
    let size = s.size as usize;
    let mut reference = vec![0u8; size];
    let mut rng = Rng(seed);
    let mut cmds: Vec<String> = Vec::new();
    for _ in 0..120 {
        let len = 1 + rng.below(40_000) as usize;
        let off = rng.below((size - len) as u64) as usize;
        match rng.below(6) {
            0 => {
                cmds.push(format!("write -z {off} {len}"));
                reference[off..off + len].fill(0);
            }
            1 => {
                // Discard frees whole slots only; partial slots keep their bytes.
                cmds.push(format!("discard {off} {len}"));
                let first = off.div_ceil(slot) * slot;
                let end = (off + len) / slot * slot;
                if end > first {
                    reference[first..end].fill(0);
                }
            }
            _ => {
                let p = rng.below(256) as u8;
                cmds.push(format!("write -P {p} {off} {len}"));
                reference[off..off + len].fill(p);
            }
        }
    }
    // Check a few ranges through qemu-io's own pattern check too.
    cmds.push("write -P 0x33 100000 5000".into());
    reference[100_000..105_000].fill(0x33);
    cmds.push("read -P 0x33 100000 5000".into());
    let mut q = Command::new("qemu-io");
    q.args(["-f", "raw"]);
    for c in &cmds {
        q.arg("-c").arg(c);
    }
    let out = run(q.arg(s.uri()));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let back = device_bytes(&s);
    assert_eq!(back.len(), size);
    if let Some(i) = first_difference(&back, &reference) {
        panic!("the device differs from the reference at byte {i}");
    }
    let st = s.stat();
    assert_eq!(st.io_stat.failed_writes, 0);
    assert!(st.io_stat.notify_free > 0, "{:?}", st.io_stat);
}

#[test]
fn nbdcopy_in_and_out_round_trips_and_compresses() {
    nbdcopy_round_trip(&["comp_algorithm=zstd:3", "streams=2"]);
}

/// With 16 KiB slots: the same round trip, and the slots hold no more than 4 KiB pages would
/// (one zstd object per 16 KiB has more context to reuse).
#[test]
fn nbdcopy_in_and_out_round_trips_and_compresses_with_16k_slots() {
    let four = nbdcopy_round_trip(&["comp_algorithm=zstd:3", "streams=2"]);
    let sixteen = nbdcopy_round_trip(&["comp_algorithm=zstd:3", "streams=2", "slot_size=16K"]);
    assert!(
        sixteen.compr_data_size < four.compr_data_size,
        "16K slots {sixteen:?}, 4K slots {four:?}"
    );
}

/// zram's `deflate` (raw deflate) with a level, as the primary algorithm through nbdcopy, and
/// as a recompression algorithm: lz4 pages recompressed with deflate:9 live take less memory
/// and read back the same.
#[test]
fn deflate_with_levels_as_primary_and_as_recompression() {
    let m = nbdcopy_round_trip(&["comp_algorithm=deflate:1", "streams=2"]);
    assert!(m.compr_data_size > 0, "{m:?}");

    let s = Server::start(
        "8M",
        &[
            "comp_algorithm=lz4",
            "recomp_algorithm=algo=deflate:9 priority=1",
        ],
    );
    let st = s.stat();
    assert_eq!(st.recomp_algorithms.len(), 1, "{st:?}");
    assert!(st.recomp_algorithms[0].starts_with("deflate:9"), "{st:?}");
    let input = mixed(6 << 20, 9);
    let src = s.file("in.img");
    std::fs::write(&src, &input).expect("write the source");
    nbdcopy(src.to_str().expect("utf-8"), &s.uri());
    let before = s.stat().mm_stat.compr_data_size;
    control::request(&s.control(), Request::Idle(None)).expect("idle all");
    let req = wring_blk::RecompressRequest::parse("type=idle algo=deflate:9").expect("parse");
    let r = control::recompress(&s.control(), req).expect("recompress");
    assert!(
        r.recompressed > 0 && r.bytes_after < r.bytes_before,
        "{r:?}"
    );
    let after = s.stat();
    assert!(after.mm_stat.compr_data_size < before, "{after:?}");
    assert!(
        after
            .stream_stats
            .iter()
            .any(|f| f.algorithm == "deflate:9" && f.compressed > 0),
        "{after:?}"
    );
    let back = device_bytes(&s);
    if let Some(i) = first_difference(&back[..input.len()], &input) {
        panic!("recompressed with deflate, the device differs at byte {i}");
    }
}

/// nbdcopy 20 MiB of mixed data in and back out; the copy must match; the device's mm_stat.
fn nbdcopy_round_trip(options: &[&str]) -> wring_blk::MmStat {
    let s = Server::start("24M", options);
    let input = mixed(20 << 20, 2);
    let src = s.file("in.img");
    std::fs::write(&src, &input).expect("write the source");
    nbdcopy(src.to_str().expect("utf-8"), &s.uri());
    let back = device_bytes(&s);
    if let Some(i) = first_difference(&back[..input.len()], &input) {
        panic!("nbdcopy out differs from what nbdcopy wrote in at byte {i}");
    }
    assert!(back[input.len()..].iter().all(|&b| b == 0));
    let m = s.stat().mm_stat;
    assert!(m.compr_data_size < m.orig_data_size / 2, "{m:?}");
    assert!(m.mem_used_total >= m.compr_data_size, "{m:?}");
    assert!(m.huge_pages > 0 && m.same_pages > 0, "{m:?}");
    m
}

/// `qemu-img convert` into the device and back out, compared with `cmp`. The device first
/// holds noise, so the zero runs of the image (which qemu-img writes as write-zeroes or
/// trims, not as data) must really clear it.
#[test]
fn qemu_img_convert_in_and_out_compares_equal() {
    need("qemu-img", "qemu-utils");
    need("cmp", "diffutils");
    let s = Server::start("16M", &["comp_algorithm=lz4", "streams=2"]);
    let len = s.size as usize;
    let noise = s.file("noise.img");
    let mut rng = Rng(9);
    let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    std::fs::write(&noise, &bytes).expect("write the noise");
    nbdcopy(noise.to_str().expect("utf-8"), &s.uri());

    let src = s.file("in.img");
    std::fs::write(&src, mixed(len, 4)).expect("write the source");
    let (src, out) = (
        src.to_str().expect("utf-8").to_string(),
        s.file("out.img").to_str().expect("utf-8").to_string(),
    );
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw", &src])
        .arg(s.uri()));
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "raw"])
        .arg(s.uri())
        .arg(&out));
    let cmp = Command::new("cmp")
        .args([&src, &out])
        .output()
        .expect("cmp runs");
    assert!(
        cmp.status.success(),
        "qemu-img convert out differs from what qemu-img convert wrote in: {}",
        String::from_utf8_lossy(&cmp.stdout)
    );
    let m = s.stat().mm_stat;
    assert!(
        m.same_pages > 0 && m.compr_data_size < m.orig_data_size,
        "{m:?}"
    );
}

#[test]
fn control_socket_actions_work_live() {
    let s = Server::start("8M", &["comp_algorithm=lz4", "streams=1"]);
    let mode = std::fs::metadata(s.control()).map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o777
    });
    assert_eq!(mode.ok(), Some(0o600), "the control socket must be 0600");
    assert_eq!(
        control::request(&s.control(), Request::Streams(2)).ok(),
        Some(2.into())
    );
    assert_eq!(s.stat().streams, 2);
    // Fill with text, discard three pages in four, compact: pages come back.
    let input: Vec<u8> = mixed(4 << 20, 5)
        .chunks(PAGE)
        .flat_map(|c| c.iter().map(|b| b | 0x20).collect::<Vec<u8>>())
        .collect();
    let src = s.file("in.img");
    std::fs::write(&src, &input).expect("write the source");
    nbdcopy(src.to_str().expect("utf-8"), &s.uri());
    let mut cmds = Command::new("qemu-io");
    cmds.args(["-f", "raw"]);
    for p in (0..1024).filter(|p| p % 4 != 0) {
        cmds.arg("-c").arg(format!("discard {} 4096", p * PAGE));
    }
    run(cmds.arg(s.uri()));
    let freed = control::request(&s.control(), Request::Compact).expect("compact");
    assert!(
        freed.as_u64().is_some_and(|n| n > 0),
        "compact freed {freed}"
    );
    assert_eq!(Some(s.stat().mm_stat.pages_compacted), freed.as_u64());
    // mem_limit below what is used: a write of new data fails, stored data stays.
    let used = s.stat().mm_stat.mem_used_total;
    control::request(&s.control(), Request::MemLimit(used)).expect("mem_limit");
    let noise: Vec<u8> = (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut c = Raw::connect(&s.dir.join("nbd.sock"));
    let (e, _) = c
        .request(1, 6 << 20, noise.len() as u32, &noise)
        .expect("write noise");
    assert_eq!(e, 28, "a write past mem_limit must fail with ENOSPC");
    assert!(s.stat().io_stat.failed_writes > 0);
    let back = device_bytes(&s);
    for p in (0..1024).filter(|p| p % 4 == 0) {
        assert_eq!(
            &back[p * PAGE..(p + 1) * PAGE],
            &input[p * PAGE..(p + 1) * PAGE],
            "page {p}"
        );
    }
    control::request(&s.control(), Request::Reset).expect("reset");
    let m = s.stat().mm_stat;
    assert_eq!((m.orig_data_size, m.mem_used_total), (0, 0), "{m:?}");
    assert!(
        control::request(&s.control(), Request::Streams(0)).is_err(),
        "streams 0 must be refused"
    );
}

/// A minimal NBD client: fixed newstyle handshake, NBD_OPT_EXPORT_NAME, simple replies.
struct Raw {
    s: UnixStream,
    handle: u64,
}

impl Raw {
    fn connect(path: &Path) -> Raw {
        let mut s = UnixStream::connect(path).expect("connect to nbdkit");
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).expect("server greeting");
        assert_eq!(&hello[..8], b"NBDMAGIC");
        assert_eq!(&hello[8..16], b"IHAVEOPT");
        s.write_all(&3u32.to_be_bytes()).expect("client flags"); // FIXED_NEWSTYLE | NO_ZEROES
        let mut opt = Vec::new();
        opt.extend(b"IHAVEOPT");
        opt.extend(1u32.to_be_bytes()); // NBD_OPT_EXPORT_NAME
        opt.extend(0u32.to_be_bytes()); // ""
        s.write_all(&opt).expect("export name");
        let mut export = [0u8; 10];
        s.read_exact(&mut export).expect("export size and flags");
        Raw { s, handle: 0 }
    }

    /// Send one request; returns the reply's error (0 = success) and read data.
    fn request(
        &mut self,
        kind: u16,
        offset: u64,
        len: u32,
        data: &[u8],
    ) -> std::io::Result<(u32, Vec<u8>)> {
        self.handle += 1;
        let mut r = Vec::new();
        r.extend(0x2560_9513u32.to_be_bytes());
        r.extend(0u16.to_be_bytes());
        r.extend(kind.to_be_bytes());
        r.extend(self.handle.to_be_bytes());
        r.extend(offset.to_be_bytes());
        r.extend(len.to_be_bytes());
        r.extend(data);
        self.s.write_all(&r)?;
        let mut reply = [0u8; 16];
        self.s.read_exact(&mut reply)?;
        assert_eq!(&reply[..4], &0x6744_6698u32.to_be_bytes());
        let error = u32::from_be_bytes([reply[4], reply[5], reply[6], reply[7]]);
        assert_eq!(
            u64::from_be_bytes(reply[8..16].try_into().expect("8 bytes")),
            self.handle
        );
        let mut payload = Vec::new();
        if kind == 0 && error == 0 {
            payload.resize(len as usize, 0);
            self.s.read_exact(&mut payload)?;
        }
        Ok((error, payload))
    }
}

#[test]
fn bad_requests_get_errors_and_change_nothing() {
    let s = Server::start("1M", &[]);
    let mut c = Raw::connect(&s.dir.join("nbd.sock"));
    let page: Vec<u8> = (0..PAGE).map(|i| (i * 7) as u8).collect();
    assert_eq!(c.request(1, 8192, PAGE as u32, &page).expect("write").0, 0);
    let before = s.stat().mm_stat;
    let size = 1u64 << 20;
    // Reads and writes past the end, straddling it, and at an offset that overflows.
    assert_ne!(c.request(0, size, 512, &[]).expect("read past end").0, 0);
    assert_ne!(
        c.request(0, size - 100, 512, &[])
            .expect("read across end")
            .0,
        0
    );
    assert_ne!(
        c.request(1, size - 100, 512, &[0xEE; 512])
            .expect("write across end")
            .0,
        0
    );
    assert_ne!(
        c.request(4, size - 4096, 8192, &[])
            .expect("trim across end")
            .0,
        0
    );
    assert_ne!(
        c.request(6, u64::MAX - 10, 4096, &[])
            .expect("zero at overflow")
            .0,
        0
    );
    // An oversized read (64 MiB + 1, past nbdkit's maximum) is refused, or the server hangs up.
    if let Ok((e, _)) = c.request(0, 0, (64 << 20) + 1, &[]) {
        assert_ne!(e, 0, "an oversized read succeeded");
    }
    let mut c = Raw::connect(&s.dir.join("nbd.sock"));
    let (e, data) = c.request(0, 8192, PAGE as u32, &[]).expect("read back");
    assert_eq!(e, 0);
    assert_eq!(data, page);
    assert_eq!(
        s.stat().mm_stat,
        before,
        "a refused request changed the store"
    );
    let (e, tail) = c
        .request(0, size - 512, 512, &[])
        .expect("read the last sector");
    assert_eq!((e, tail), (0, vec![0u8; 512]));
}

#[test]
fn two_connections_write_concurrently_and_see_each_others_data() {
    let s = Server::start("2M", &["comp_algorithm=lz4", "streams=2"]);
    let sock = s.dir.join("nbd.sock");
    let half = (s.size / 2) as usize;
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let mut c = Raw::connect(&sock);
                let mut rng = Rng(100 + t);
                let base = t as usize * half;
                let mut reference = vec![0u8; half];
                for _ in 0..200 {
                    let len = 1 + rng.below(3 * PAGE as u64) as usize;
                    let off = rng.below((half - len) as u64) as usize;
                    let data: Vec<u8> = if rng.below(2) == 0 {
                        vec![rng.next() as u8; len]
                    } else {
                        (0..len).map(|_| rng.next() as u8 & 0x3f).collect()
                    };
                    let (e, _) = c
                        .request(1, (base + off) as u64, len as u32, &data)
                        .expect("write");
                    assert_eq!(e, 0);
                    reference[off..off + len].copy_from_slice(&data);
                }
                assert_eq!(c.request(3, 0, 0, &[]).expect("flush").0, 0);
                reference
            })
        })
        .collect();
    let references: Vec<Vec<u8>> = writers
        .into_iter()
        .map(|w| w.join().expect("a writer"))
        .collect();
    // Each connection reads what the other wrote.
    for (t, reference) in references.iter().enumerate() {
        let mut c = Raw::connect(&sock);
        let other = (1 - t) * half;
        let mine = t * half;
        let (e, data) = c
            .request(0, mine as u64, half as u32, &[])
            .expect("read back");
        assert_eq!(e, 0);
        assert!(data == *reference, "connection {t}'s half differs");
        let (e, _) = c.request(0, other as u64, half as u32, &[]).expect("read");
        assert_eq!(e, 0);
    }
}

#[test]
fn a_client_killed_mid_write_loses_nothing_already_written() {
    let s = Server::start("1M", &[]);
    let sock = s.dir.join("nbd.sock");
    let page: Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8).collect();
    let mut c = Raw::connect(&sock);
    assert_eq!(c.request(1, 0, PAGE as u32, &page).expect("write").0, 0);
    // A second client sends a write header and half its payload, then vanishes.
    let dying = UnixStream::connect(&sock).expect("connect");
    {
        let mut raw = Raw {
            s: dying.try_clone().expect("clone"),
            handle: 0,
        };
        let mut hello = [0u8; 18];
        raw.s.read_exact(&mut hello).expect("greeting");
        raw.s.write_all(&3u32.to_be_bytes()).expect("flags");
        let mut opt = Vec::new();
        opt.extend(b"IHAVEOPT");
        opt.extend(1u32.to_be_bytes());
        opt.extend(0u32.to_be_bytes());
        raw.s.write_all(&opt).expect("export");
        let mut export = [0u8; 10];
        raw.s.read_exact(&mut export).expect("export reply");
        let mut r = Vec::new();
        r.extend(0x2560_9513u32.to_be_bytes());
        r.extend(0u16.to_be_bytes());
        r.extend(1u16.to_be_bytes());
        r.extend(1u64.to_be_bytes());
        r.extend(0u64.to_be_bytes());
        r.extend((PAGE as u32).to_be_bytes());
        r.extend(vec![0xEEu8; PAGE / 2]);
        raw.s.write_all(&r).expect("half a write");
    }
    dying.shutdown(std::net::Shutdown::Both).expect("hang up");
    drop(dying);
    let (e, data) = c.request(0, 0, PAGE as u32, &[]).expect("read back");
    assert_eq!(e, 0);
    assert_eq!(data, page, "a half-sent write changed the page");
    let mut c2 = Raw::connect(&sock);
    let (e, data) = c2
        .request(0, 0, PAGE as u32, &[])
        .expect("read on a new connection");
    assert_eq!((e, data), (0, page));
}

#[test]
fn live_actions_under_load_lose_nothing() {
    let s = Server::start("16M", &["comp_algorithm=lz4", "streams=2"]);
    let sock = s.dir.join("nbd.sock");
    // The last 4 MiB: text written first, then every other page discarded during the load,
    // so that compaction has objects to move while nbdcopy writes the first 12 MiB.
    let tail_at = 12usize << 20;
    let tail: Vec<u8> = mixed(4 << 20, 11).iter().map(|b| b | 0x40).collect();
    let mut c = Raw::connect(&sock);
    for (i, chunk) in tail.chunks(256 << 10).enumerate() {
        let off = (tail_at + i * (256 << 10)) as u64;
        assert_eq!(
            c.request(1, off, chunk.len() as u32, chunk)
                .expect("fill")
                .0,
            0
        );
    }
    let input = mixed(12 << 20, 7);
    let src = s.file("in.img");
    std::fs::write(&src, &input).expect("write the source");
    let (from, to) = (src.to_str().expect("utf-8").to_string(), s.uri());
    let copier = std::thread::spawn(move || nbdcopy(&from, &to));
    let discarder = std::thread::spawn(move || {
        for p in (0..(4 << 20) / PAGE).filter(|p| p % 2 == 1) {
            let off = (tail_at + p * PAGE) as u64;
            assert_eq!(c.request(4, off, PAGE as u32, &[]).expect("trim").0, 0);
        }
    });
    let ctl = s.control();
    let mut rounds = 0u32;
    // At least a few rounds, and on until the load is done.
    while rounds < 5 || !copier.is_finished() || !discarder.is_finished() {
        let streams = 1 + (rounds as usize % 3);
        control::request(&ctl, Request::Streams(streams)).expect("streams");
        control::request(&ctl, Request::Compact).expect("compact");
        control::request(&ctl, Request::MemLimit(0)).expect("mem_limit");
        control::stat(&ctl).expect("stat");
        rounds += 1;
    }
    copier.join().expect("nbdcopy");
    discarder.join().expect("the discarding client");
    control::request(&ctl, Request::Compact).expect("compact");
    assert!(
        s.stat().mm_stat.pages_compacted > 0,
        "compaction moved nothing"
    );
    let back = device_bytes(&s);
    if let Some(i) = first_difference(&back[..input.len()], &input) {
        panic!("the device differs from its input at byte {i} after {rounds} rounds of actions");
    }
    for p in 0..(4 << 20) / PAGE {
        let got = &back[tail_at + p * PAGE..tail_at + (p + 1) * PAGE];
        if p % 2 == 0 {
            assert!(
                got == &tail[p * PAGE..(p + 1) * PAGE],
                "kept page {p} changed"
            );
        } else {
            assert!(
                got.iter().all(|&b| b == 0),
                "discarded page {p} is not zero"
            );
        }
    }
    assert_eq!(s.stat().io_stat.failed_writes, 0);
}

/// A file removed on drop (also when the test fails).
struct RemoveFile(PathBuf);

impl Drop for RemoveFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `idle`, `recompress` and `writeback` run in a loop over the control socket while nbdcopy
/// writes and a raw client rewrites and reads back pages: nothing is lost, pages end up on
/// the secondary algorithm and on the backing file, and nbdcopy reads them all back.
#[test]
fn idle_recompress_and_writeback_run_live_under_load() {
    let backing = std::env::temp_dir().join(format!("wring-blk-live-{}.img", std::process::id()));
    let _ = std::fs::remove_file(&backing);
    let _guard = RemoveFile(backing.clone());
    // zram's default primary, lzo-rle, under the load.
    let s = Server::start(
        "16M",
        &[
            "comp_algorithm=lzo-rle",
            "streams=2",
            "recomp_algorithm=algo=zstd:6 priority=1",
            &format!("backing_dev={}", backing.display()),
        ],
    );
    let input = mixed(12 << 20, 21);
    let src = s.file("in.img");
    std::fs::write(&src, &input).expect("write the source");
    let (from, to) = (src.to_str().expect("utf-8").to_string(), s.uri());
    let copier = std::thread::spawn(move || nbdcopy(&from, &to));
    // The last 4 MiB: a client writes pages and reads each back at once, under the actions.
    let sock = s.dir.join("nbd.sock");
    let tail_at = 12u64 << 20;
    let rewriter = std::thread::spawn(move || {
        let mut c = Raw::connect(&sock);
        let mut rng = Rng(77);
        let mut reference = vec![0u8; 4 << 20];
        for _ in 0..400 {
            let page = rng.below(1024) as usize;
            let d: Vec<u8> = (0..PAGE)
                .map(|i| b"wring blk recompress "[(i + page) % 21] ^ (rng.below(2) as u8))
                .collect();
            let off = tail_at + (page * PAGE) as u64;
            assert_eq!(c.request(1, off, PAGE as u32, &d).expect("write").0, 0);
            let (e, back) = c.request(0, off, PAGE as u32, &[]).expect("read");
            assert_eq!(e, 0);
            assert!(
                back == d,
                "page {page} read back differs under recompression"
            );
            reference[page * PAGE..(page + 1) * PAGE].copy_from_slice(&d);
        }
        reference
    });
    let ctl = s.control();
    let (mut rounds, mut written, mut recompressed) = (0u32, 0u64, 0u64);
    while rounds < 5 || !copier.is_finished() || !rewriter.is_finished() {
        control::request(&ctl, Request::Idle(None)).expect("idle all");
        let kind = ["type=idle", "type=huge", ""][rounds as usize % 3];
        recompressed += control::recompress(
            &ctl,
            wring_blk::RecompressRequest::parse(kind).expect("a request"),
        )
        .expect("recompress")
        .recompressed;
        let kind = [
            wring_blk::WritebackType::Huge,
            wring_blk::WritebackType::Idle,
            wring_blk::WritebackType::Incompressible,
        ][rounds as usize % 3];
        written += control::writeback(&ctl, kind).expect("writeback").written;
        rounds += 1;
    }
    copier.join().expect("nbdcopy");
    let tail = rewriter.join().expect("the rewriting client");
    let r = control::recompress(&ctl, wring_blk::RecompressRequest::default()).expect("recompress");
    recompressed += r.recompressed;
    let st = s.stat();
    // Counted over the rounds: a later `writeback idle` may move every recompressed page to
    // the backing file, so the live `recompressed_pages` can end at 0.
    assert!(recompressed > 0, "{st:?} {r:?}");
    assert!(written > 0 && st.bd_stat.bd_count > 0, "{st:?}");
    assert_eq!(st.io_stat.failed_writes + st.io_stat.failed_reads, 0);
    let back = device_bytes(&s);
    if let Some(i) = first_difference(&back[..input.len()], &input) {
        panic!("the device differs from its input at byte {i} after {rounds} rounds");
    }
    if let Some(i) = first_difference(&back[tail_at as usize..], &tail) {
        panic!("the rewritten tail differs at byte {i}");
    }
}

/// A tmpfs mounted for one test, unmounted and removed on drop (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(tag: &str, size: &str) -> Tmpfs {
        let dir = std::env::temp_dir().join(format!("wring-blk-{tag}-{}", std::process::id()));
        let _ = Command::new("umount")
            .arg(&dir)
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a mount point");
        let t = Tmpfs(dir);
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&t.0));
        t
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The backing file lives on a 16 KiB tmpfs: writeback of 64 huge pages fills the file
/// system, the reply says so, and every page — written back or not — reads back.
#[test]
fn writeback_to_a_full_file_system_is_a_clear_error_and_loses_nothing() {
    if !wring_testing::require_root("writeback_to_a_full_file_system_is_a_clear_error") {
        return;
    }
    let fs = Tmpfs::mount("wbfull", "16k");
    let backing = fs.0.join("backing");
    let s = Server::start(
        "1M",
        &[
            "comp_algorithm=lz4",
            &format!("backing_dev={}", backing.display()),
        ],
    );
    let mut rng = Rng(31);
    let noise: Vec<u8> = (0..64 * PAGE).map(|_| rng.next() as u8).collect();
    let mut c = Raw::connect(&s.dir.join("nbd.sock"));
    assert_eq!(
        c.request(1, 0, noise.len() as u32, &noise)
            .expect("write")
            .0,
        0
    );
    assert_eq!(s.stat().mm_stat.huge_pages, 64);
    let e = control::writeback(&s.control(), wring_blk::WritebackType::Huge)
        .expect_err("a 16 KiB file system cannot take 64 pages")
        .to_string();
    assert!(e.contains("is full") && e.contains("stay in RAM"), "{e}");
    let st = s.stat();
    assert!(
        (1..=4).contains(&st.bd_stat.bd_count),
        "pages on the backing file: {:?}",
        st.bd_stat
    );
    assert_eq!(st.mm_stat.huge_pages + st.bd_stat.bd_count, 64);
    let back = device_bytes(&s);
    if let Some(i) = first_difference(&back[..noise.len()], &noise) {
        panic!("the device differs at byte {i} after writeback filled its file system");
    }
    assert!(st.bd_stat.bd_reads == 0 && s.stat().bd_stat.bd_reads == st.bd_stat.bd_count);
}

/// One page of the lockstep reference, under the lock the test holds while a request on
/// that page is in flight.
type RefPage = std::sync::Mutex<Vec<u8>>;

fn lock_pages(
    reference: &[RefPage],
    first: usize,
    end: usize,
) -> Vec<std::sync::MutexGuard<'_, Vec<u8>>> {
    reference[first..end].iter().map(wring_sync::lock).collect()
}

/// Data of one of four kinds: text, noise (huge), one repeated word, zeros.
fn op_data(rng: &mut Rng, len: usize) -> Vec<u8> {
    match rng.below(4) {
        0 => (0..len)
            .map(|i| b"multi-conn lockstep reference page "[(i + len) % 35])
            .collect(),
        1 => (0..len).map(|_| rng.next() as u8).collect(),
        2 => {
            let w = rng.next().to_ne_bytes();
            (0..len).map(|i| w[i % 8]).collect()
        }
        _ => vec![0u8; len],
    }
}

/// One client's seeded operations on the shared pages: each request runs with the test's
/// locks on the pages it touches held (ascending), and the reference is updated under them,
/// so requests on different pages run concurrently and the reference stays in lockstep. A
/// write refused at mem_limit may have written some of its pages (NBD gives no atomicity):
/// each page must then read back as either its old or its new bytes, and that becomes the
/// reference.
fn lockstep_client(sock: &Path, seed: u64, ops: usize, reference: &[RefPage]) -> u64 {
    let mut c = Raw::connect(sock);
    let mut rng = Rng(seed);
    let size = reference.len() * PAGE;
    let mut refused = 0;
    for _ in 0..ops {
        let len = 1 + rng.below(3 * PAGE as u64) as usize;
        let off = rng.below((size - len) as u64) as usize;
        let (first, end) = (off / PAGE, (off + len).div_ceil(PAGE));
        let mut pages = lock_pages(reference, first, end);
        let base = first * PAGE;
        match rng.below(10) {
            kind @ (0..=3 | 8) => {
                // A write, or write-zeroes (whose partial ends are rewritten pages too).
                let (cmd, d) = if kind == 8 {
                    (6, vec![0u8; len])
                } else {
                    (1, op_data(&mut rng, len))
                };
                let payload: &[u8] = if cmd == 1 { &d } else { &[] };
                let (e, _) = c
                    .request(cmd, off as u64, len as u32, payload)
                    .expect("write");
                if e == 0 {
                    for (i, b) in d.iter().enumerate() {
                        let at = off + i - base;
                        pages[at / PAGE][at % PAGE] = *b;
                    }
                    continue;
                }
                assert_eq!(e, 28, "a write failed with errno {e}, not ENOSPC");
                refused += 1;
                let (e, got) = c.request(0, off as u64, len as u32, &[]).expect("read");
                assert_eq!(e, 0);
                // Each page is wholly old or wholly new, and becomes the reference.
                for (pi, page) in pages.iter_mut().enumerate() {
                    let p0 = (base + pi * PAGE).max(off);
                    let p1 = (base + (pi + 1) * PAGE).min(off + len);
                    let (got, new) = (&got[p0 - off..p1 - off], &d[p0 - off..p1 - off]);
                    let old = &mut page[p0 - base - pi * PAGE..p1 - base - pi * PAGE];
                    assert!(
                        got == &old[..] || got == new,
                        "page {} is neither its old nor its new bytes after a refused write",
                        first + pi
                    );
                    old.copy_from_slice(got);
                }
            }
            4..=6 => {
                let (e, got) = c.request(0, off as u64, len as u32, &[]).expect("read");
                assert_eq!(e, 0, "read failed");
                for (i, b) in got.iter().enumerate() {
                    let at = off + i - base;
                    assert_eq!(
                        *b,
                        pages[at / PAGE][at % PAGE],
                        "client {seed}: byte {} differs from the reference",
                        off + i
                    );
                }
            }
            7 => {
                let (e, _) = c.request(4, off as u64, len as u32, &[]).expect("trim");
                assert_eq!(e, 0, "trim failed");
                // Trim frees whole pages only.
                for p in off.div_ceil(PAGE)..(off + len) / PAGE {
                    pages[p - first].fill(0);
                }
            }
            _ => assert_eq!(c.request(3, 0, 0, &[]).expect("flush").0, 0),
        }
    }
    refused
}

/// Two connections (multi-conn) run seeded random writes, reads, trims, write-zeroes and
/// flushes on the same pages against a reference kept in lockstep, while a third thread runs
/// every live action in turn — idle, recompress, writeback (idle and huge), compact, streams,
/// a tight mem_limit and back, and reset (holding every page, then zeroing the reference).
/// Each read is checked against the reference; at the end nbdcopy reads the whole device.
#[test]
fn two_clients_in_lockstep_with_every_action_live() {
    let backing =
        std::env::temp_dir().join(format!("wring-blk-lockstep-{}.img", std::process::id()));
    let _ = std::fs::remove_file(&backing);
    let _guard = RemoveFile(backing.clone());
    let s = Server::start(
        "2M",
        &[
            "comp_algorithm=lz4",
            "streams=2",
            "recomp_algorithm=algo=zstd:3 priority=1",
            &format!("backing_dev={}", backing.display()),
        ],
    );
    let pages = (s.size as usize) / PAGE;
    let reference: std::sync::Arc<Vec<RefPage>> = std::sync::Arc::new(
        (0..pages)
            .map(|_| std::sync::Mutex::new(vec![0u8; PAGE]))
            .collect(),
    );
    let sock = s.dir.join("nbd.sock");
    let clients: Vec<_> = (0..2u64)
        .map(|t| {
            let (sock, reference) = (sock.clone(), std::sync::Arc::clone(&reference));
            std::thread::spawn(move || lockstep_client(&sock, 1500 + t, 1500, &reference))
        })
        .collect();
    let ctl = s.control();
    let mut rounds = 0usize;
    let mut counts = [0u32; 9];
    let (mut written, mut recompressed) = (0u64, 0u64);
    // Every action in turn; reset (which empties the device) only once in 50 rounds.
    while rounds < 100 || clients.iter().any(|c| !c.is_finished()) {
        let step = if rounds % 50 == 49 { 8 } else { rounds % 8 };
        match step {
            0 => control::request(&ctl, Request::Idle(None)).map(|_| ()),
            1 => control::recompress(&ctl, wring_blk::RecompressRequest::default())
                .map(|r| recompressed += r.recompressed),
            2 => control::writeback(&ctl, wring_blk::WritebackType::Idle)
                .map(|r| written += r.written),
            3 => control::writeback(&ctl, wring_blk::WritebackType::Huge)
                .map(|r| written += r.written),
            4 => control::request(&ctl, Request::Compact).map(|_| ()),
            5 => control::request(&ctl, Request::Streams(1 + rounds % 3)).map(|_| ()),
            6 => {
                let used = s.stat().mm_stat.mem_used_total;
                control::request(&ctl, Request::MemLimit(used.max(PAGE as u64))).map(|_| ())
            }
            7 => control::request(&ctl, Request::MemLimit(0)).map(|_| ()),
            _ => {
                let mut all = lock_pages(&reference, 0, pages);
                let r = control::request(&ctl, Request::Reset).map(|_| ());
                for p in all.iter_mut() {
                    p.fill(0);
                }
                r
            }
        }
        .unwrap_or_else(|e| panic!("action {step} failed in round {rounds}: {e}"));
        counts[step] += 1;
        rounds += 1;
    }
    let refused: u64 = clients
        .into_iter()
        .map(|c| c.join().expect("a lockstep client"))
        .sum();
    control::request(&ctl, Request::MemLimit(0)).expect("mem_limit 0");
    let back = device_bytes(&s);
    for (p, page) in reference.iter().enumerate() {
        let want = wring_sync::lock(page);
        assert!(
            back[p * PAGE..(p + 1) * PAGE] == want[..],
            "page {p} differs from the reference at the end ({rounds} rounds of actions, \
             {refused} writes refused at mem_limit)"
        );
    }
    assert!(counts.iter().all(|&n| n >= 2), "{counts:?}");
    assert!(
        written > 0 && recompressed > 0,
        "writeback ({written} pages) or recompression ({recompressed}) did nothing"
    );
    let st = s.stat();
    assert_eq!(st.io_stat.failed_reads, 0, "{:?}", st.io_stat);
}

/// `train_dict` runs while nbdcopy is still writing: the dictionary is trained on the pages
/// written so far, installed at priority 2 beside the configured one, and every page — those
/// recompressed with it and those written after — reads back.
#[test]
fn train_dict_runs_live_under_load() {
    let s = Server::start(
        "16M",
        &[
            "comp_algorithm=lz4",
            "streams=2",
            "recomp_algorithm=algo=zstd:1 priority=1",
        ],
    );
    let input: Vec<u8> = mixed(12 << 20, 33);
    let src = s.file("in.img");
    std::fs::write(&src, &input).expect("write the source");
    let (from, to) = (src.to_str().expect("utf-8").to_string(), s.uri());
    let copier = std::thread::spawn(move || nbdcopy(&from, &to));
    let ctl = s.control();
    let mut tries = 0u32;
    while s.stat().mm_stat.orig_data_size < (1 << 20) && !copier.is_finished() {
        tries += 1;
        std::thread::yield_now();
    }
    let r = control::train_dict(
        &ctl,
        wring_blk::TrainRequest::parse("size=8K level=3").expect("a request"),
    )
    .expect("train_dict");
    copier.join().expect("nbdcopy");
    assert_eq!(r.priority, 2, "{r:?}");
    assert!(r.recompress.recompressed > 0, "{r:?} after {tries} polls");
    let st = s.stat();
    assert_eq!(
        st.recomp_algorithms,
        ["zstd:1 priority=1", "zstd:3+dict priority=2"]
    );
    let back = device_bytes(&s);
    if let Some(i) = first_difference(&back[..input.len()], &input) {
        panic!("the device differs from its input at byte {i} after train_dict");
    }
}

/// A policy set live over the control socket runs in the server's own thread: pages written
/// by a client end up on the backing file without any further request, and read back.
#[test]
fn a_policy_set_live_runs_in_the_server() {
    let backing = std::env::temp_dir().join(format!("wring-blk-policy-{}.img", std::process::id()));
    let _ = std::fs::remove_file(&backing);
    let _guard = RemoveFile(backing.clone());
    let s = Server::start(
        "4M",
        &[
            "comp_algorithm=lz4",
            &format!("backing_dev={}", backing.display()),
        ],
    );
    let data = mixed(2 << 20, 41);
    let mut c = Raw::connect(&s.dir.join("nbd.sock"));
    for (i, chunk) in data.chunks(256 << 10).enumerate() {
        let off = (i * (256 << 10)) as u64;
        assert_eq!(
            c.request(1, off, chunk.len() as u32, chunk)
                .expect("write")
                .0,
            0
        );
    }
    let policy = wring_blk::Schedule::parse("every=1 age=0 recompress=off writeback=idle")
        .expect("a policy");
    let v = control::request(&s.control(), Request::Policy(Some(policy))).expect("policy");
    assert_eq!(v, "every=1 age=0 recompress=off writeback=idle");
    // The server's policy thread checks once a second; wait for its first round.
    let deadline = Instant::now() + Duration::from_secs(60);
    let st = loop {
        let st = s.stat();
        if st.policy.as_ref().is_some_and(|p| p.rounds > 0) {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "the policy never ran: {:?}",
            st.policy
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(st.bd_stat.bd_count > 0, "{:?} {:?}", st.bd_stat, st.policy);
    let (e, back) = c.request(0, 0, data.len() as u32, &[]).expect("read back");
    assert_eq!(e, 0);
    assert!(
        back == data,
        "the data differs after the policy wrote it back"
    );
    control::request(&s.control(), Request::Policy(None)).expect("policy off");
    assert!(s.stat().policy.is_none());
}
