//! Kernel compatibility, both ways, on real btrfs filesystems (loop devices; needs root).
//!
//! * Every extent the kernel writes decodes in wring: for each `compress-force=` option, write
//!   corpus files, remount, and check every extent's ENCODED_READ bytes decoded by wring against
//!   a normal read (fs/btrfs/compression.c's read path is the reference).
//! * Every extent wring writes decodes in the kernel: compress corpus extents with the engine,
//!   store them with ENCODED_WRITE (fs/btrfs/inode.c: btrfs_do_encoded_write), remount, and
//!   check the kernel's normal read returns the original bytes.
//!
//! Without root the tests fail, unless `WRING_SKIP_ROOT=1` opts out (see `wring_testing::require`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use wring_btrfs::extents::extents;
use wring_btrfs::ioctl::{fs_info, MAX_UNCOMPRESSED};
use wring_btrfs::scratch::{ScratchError, ScratchFs};
use wring_btrfs::{encoded_write, verify_path, BtrfsError, Compression, EncodedWrite, Report};
use wring_engine::{CompressSpec, Engine, EngineConfig, Outcome};
use wring_testing::{self as testing, interleave, random_bytes, samples, Sample};

/// Corpus bytes written per mount option.
const CORPUS_BYTES: usize = 8 << 20;
/// Compressed extents of the expected algorithm each option must produce at least.
const MIN_COMPRESSED: usize = 24;
/// Bytes compressed by wring per spec (whole 128 KiB extents), before the tail extent.
const WRING_BYTES: usize = 2 << 20;
/// An odd-sized last extent.
const TAIL_BYTES: usize = 5001;

const LZO: Compression = Compression::Lzo { sector_size: 4096 };

/// The mount options tested, with the encoding their compressed extents must carry.
const KERNEL_OPTIONS: [(&str, Compression); 9] = [
    ("zlib:1", Compression::Zlib),
    ("zlib:3", Compression::Zlib),
    ("zlib:9", Compression::Zlib),
    ("lzo", LZO),
    ("zstd:1", Compression::Zstd),
    ("zstd:3", Compression::Zstd),
    ("zstd:9", Compression::Zstd),
    ("zstd:15", Compression::Zstd),
    ("zstd:-5", Compression::Zstd),
];

/// The specs wring compresses with for the kernel (zstd:19 is past btrfs's own maximum).
const WRING_SPECS: [&str; 8] = [
    "zlib:1", "zlib:9", "lzo", "zstd:-5", "zstd:1", "zstd:3", "zstd:15", "zstd:19",
];

/// A file the test wrote and the bytes it must hold.
struct Expected {
    name: String,
    data: Vec<u8>,
}

#[test]
fn kernel_written_extents_decode_in_wring() {
    if !testing::require_root("kernel_written_extents_decode_in_wring") {
        return;
    }
    let corpus = samples(CORPUS_BYTES);
    let engine = Engine::new(EngineConfig::default());
    for (option, expected) in KERNEL_OPTIONS {
        let mount_options = format!("compress-force={option}");
        let mut scratch = match ScratchFs::new(&mount_options) {
            Ok(s) => s,
            Err(ScratchError::Mount { stderr, .. }) if option.contains('-') => {
                println!("kernel->wring {mount_options}: this kernel refuses negative zstd levels ({stderr}); not tested");
                continue;
            }
            Err(e) => panic!("setting up btrfs with {mount_options}: {e}"),
        };
        let files = write_kernel_files(scratch.path(), &corpus);
        scratch.sync().unwrap();
        scratch.remount().unwrap();
        let report = check_kernel_files(&engine, scratch.path(), &files, &mount_options);
        summarize(&mount_options, expected, &report, files.len());
        assert_compressed_as(&report, expected, &mount_options);
    }
}

#[test]
fn wring_written_extents_decode_in_kernel() {
    if !testing::require_root("wring_written_extents_decode_in_kernel") {
        return;
    }
    let data = interleave(
        &samples(4 << 20),
        MAX_UNCOMPRESSED,
        WRING_BYTES + TAIL_BYTES,
    );
    assert_eq!(data.len(), WRING_BYTES + TAIL_BYTES, "not enough test data");
    let engine = Engine::new(EngineConfig::default());
    let mut scratch = ScratchFs::new("").unwrap();
    let mut written = Vec::new();
    for text in WRING_SPECS {
        let spec: CompressSpec = text.parse().unwrap();
        written.push(write_with_wring(&engine, scratch.path(), spec, text, &data));
        written.push(write_partial_extent(
            &engine,
            scratch.path(),
            spec,
            text,
            &data,
        ));
    }
    scratch.sync().unwrap();
    scratch.remount().unwrap();
    let problems: Vec<String> = written
        .iter()
        .filter_map(|(file, compressed)| {
            check_wring_file(&engine, scratch.path(), file, *compressed).err()
        })
        .collect();
    for (file, compressed) in written.iter().step_by(2) {
        println!(
            "wring->kernel {}: {} extents ({} compressed), {} bytes{}",
            file.name,
            file.data.len().div_ceil(MAX_UNCOMPRESSED),
            compressed,
            file.data.len(),
            if problems
                .iter()
                .any(|p| p.contains(&format!("{}:", file.name)))
            {
                " FAILED"
            } else {
                " read back intact"
            }
        );
    }
    assert!(
        problems.is_empty(),
        "extents written by wring that the kernel does not read back:\n{}",
        problems.join("\n")
    );
}

/// The kernel reads back what wring wrote, kept wring's encoding, and wring decodes what the
/// kernel's encoded read hands back.
fn check_wring_file(
    engine: &Engine,
    dir: &Path,
    file: &Expected,
    compressed: usize,
) -> Result<(), String> {
    let path = dir.join(&file.name);
    let report =
        verify_path(engine, &path).map_err(|e| format!("{}: encoded read: {e}", file.name))?;
    let wring = if report.is_ok() {
        String::new()
    } else {
        format!(" (wring: {})", failures(&report))
    };
    kernel_read_matches(&path, &file.data).map_err(|e| format!("{}: {e}{wring}", file.name))?;
    if !wring.is_empty() {
        return Err(format!("{}:{wring}", file.name));
    }
    if report.compressed_extents() != compressed {
        return Err(format!(
            "{}: {} compressed extents on disk, {compressed} written",
            file.name,
            report.compressed_extents()
        ));
    }
    Ok(())
}

#[test]
fn encoded_read_reports_holes_prealloc_and_inline_extents() {
    if !testing::require_root("encoded_read_reports_holes_prealloc_and_inline_extents") {
        return;
    }
    let scratch = ScratchFs::new("compress-force=zstd:3").unwrap();
    let dir = scratch.path();
    let text = b"btrfs keeps small files inline in the metadata tree. ".repeat(1300);
    fs::write(dir.join("inline.txt"), &text[..1500]).unwrap();
    fs::write(dir.join("inline-random.bin"), random_bytes(7, 1000)).unwrap();
    let sparse = File::create(dir.join("sparse.bin")).unwrap();
    sparse.write_all_at(&text, 1 << 20).unwrap();
    let prealloc = File::create(dir.join("prealloc.bin")).unwrap();
    fallocate(&prealloc, 256 << 10);
    scratch.sync().unwrap();

    let read = |name: &str| extents(&File::open(dir.join(name)).unwrap()).unwrap();
    let inline = read("inline.txt");
    assert_eq!(inline.len(), 1, "{inline:?}");
    assert_eq!(
        (
            inline[0].compression,
            inline[0].len,
            inline[0].unencoded_len
        ),
        (Compression::Zstd, 1500, 1500)
    );
    assert!(inline[0].data.len() < 1500);
    let raw_inline = read("inline-random.bin");
    assert_eq!(raw_inline.len(), 1);
    assert_eq!(
        (raw_inline[0].compression, raw_inline[0].len),
        (Compression::None, 1000)
    );
    assert_eq!(raw_inline[0].data, random_bytes(7, 1000));

    let sparse = read("sparse.bin");
    let hole = &sparse[0];
    assert_eq!((hole.offset, hole.compression), (0, Compression::None));
    assert!(hole.data.iter().all(|&b| b == 0) && hole.len as usize == hole.data.len());
    let data = sparse.last().unwrap();
    assert_eq!(
        (data.offset, data.compression),
        (1 << 20, Compression::Zstd)
    );
    assert_eq!(
        sparse.iter().map(|e| e.len).sum::<u64>(),
        (1 << 20) + text.len() as u64
    );

    let prealloc = read("prealloc.bin");
    assert!(prealloc
        .iter()
        .all(|e| e.compression == Compression::None && e.data.iter().all(|&b| b == 0)));
    assert_eq!(prealloc.iter().map(|e| e.len).sum::<u64>(), 256 << 10);
    println!(
        "holes: {} pieces of at most {} bytes; prealloc: {} pieces; inline zstd extent: {} bytes for 1500",
        sparse.len() - 1,
        hole.len,
        prealloc.len(),
        inline[0].data.len()
    );
}

#[test]
fn encoded_write_errors_are_plain_words() {
    if !testing::require_root("encoded_write_errors_are_plain_words") {
        return;
    }
    let scratch = ScratchFs::new("").unwrap();
    let path = scratch.path().join("f");
    fs::write(&path, b"x").unwrap();
    let data = [0u8; 100];
    let extent = EncodedWrite::whole(&data, 8192, Compression::Zstd);
    let read_only = File::open(&path).unwrap();
    assert!(matches!(
        encoded_write(&read_only, 0, &extent),
        Err(BtrfsError::NotOpenForWriting)
    ));
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    match encoded_write(&file, 100, &extent) {
        Err(BtrfsError::WriteRejected { reason, .. }) => {
            assert!(
                matches!(reason, wring_btrfs::Refusal::MisalignedOffset { .. }),
                "{reason}"
            )
        }
        other => panic!("misaligned write gave {other:?}"),
    }
    let tmp = File::open("/proc/self/status").unwrap();
    let mut buf = [0u8; 64];
    assert!(matches!(
        wring_btrfs::encoded_read(&tmp, 0, &mut buf),
        Err(BtrfsError::NotBtrfs { .. })
    ));
}

// ---- kernel -> wring -------------------------------------------------------------------------

/// Write the samples plus files shaped to produce partial, inline, hole and prealloc extents.
fn write_kernel_files(dir: &Path, corpus: &[Sample]) -> Vec<Expected> {
    let mut files: Vec<Expected> = corpus
        .iter()
        .map(|s| write_file(dir, &s.name, s.data.clone()))
        .collect();
    let text = &corpus[0].data;
    files.push(write_appended(dir, &text[..text.len().min(700_001)]));
    files.push(write_overwritten(dir, text));
    files.push(write_sparse(dir, text));
    files.push(write_file(
        dir,
        "tiny.txt",
        text[..1501.min(text.len())].to_vec(),
    ));
    files
}

fn write_file(dir: &Path, name: &str, data: Vec<u8>) -> Expected {
    fs::write(dir.join(name), &data).unwrap();
    Expected {
        name: name.to_string(),
        data,
    }
}

/// Small appends of varying size with an fsync every few, so extents end mid-sector and get
/// cut short by the next append (len < unencoded_len).
fn write_appended(dir: &Path, text: &[u8]) -> Expected {
    let name = "appended.log";
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .unwrap();
    let (mut pos, mut n) = (0, 0usize);
    while pos < text.len() {
        let size = (1000 + (n * 7919) % 9000).min(text.len() - pos);
        file.write_all(&text[pos..pos + size]).unwrap();
        pos += size;
        n += 1;
        if n % 13 == 0 {
            file.sync_data().unwrap();
        }
    }
    Expected {
        name: name.into(),
        data: text.to_vec(),
    }
}

/// A file whose compressed extents are overwritten in the middle after being written, so the
/// kernel must report ranges starting inside extents (unencoded_offset > 0).
fn write_overwritten(dir: &Path, base: &[u8]) -> Expected {
    let name = "overwritten.bin";
    let mut data = base[..base.len().min(1 << 20)].to_vec();
    let file = File::create(dir.join(name)).unwrap();
    file.write_all_at(&data, 0).unwrap();
    file.sync_data().unwrap();
    let patch = random_bytes(99, 4096);
    for offset in [20480usize, 204800, 401408, 700416] {
        if offset + patch.len() <= data.len() {
            file.write_all_at(&patch, offset as u64).unwrap();
            data[offset..offset + patch.len()].copy_from_slice(&patch);
        }
    }
    file.sync_data().unwrap();
    Expected {
        name: name.into(),
        data,
    }
}

/// Data, a hole, data, and a trailing hole up to an odd size.
fn write_sparse(dir: &Path, text: &[u8]) -> Expected {
    let name = "sparse.bin";
    let chunk = &text[..text.len().min(100_003)];
    let mut data = vec![0u8; (3 << 20) + 7];
    data[..chunk.len()].copy_from_slice(chunk);
    data[1 << 20..(1 << 20) + chunk.len()].copy_from_slice(chunk);
    let file = File::create(dir.join(name)).unwrap();
    file.write_all_at(chunk, 0).unwrap();
    file.write_all_at(chunk, 1 << 20).unwrap();
    file.set_len(data.len() as u64).unwrap();
    Expected {
        name: name.into(),
        data,
    }
}

/// Kernel read == what was written, and wring's decode == kernel read, for every file.
fn check_kernel_files(engine: &Engine, dir: &Path, files: &[Expected], options: &str) -> Report {
    let mut total = Report::default();
    for file in files {
        let path = dir.join(&file.name);
        assert_kernel_reads(&path, &file.data);
        let report =
            verify_path(engine, &path).unwrap_or_else(|e| panic!("{options} {}: {e}", file.name));
        assert!(
            report.is_ok(),
            "{options} {}: {}",
            file.name,
            failures(&report)
        );
        assert_eq!(
            report.file_bytes(),
            file.data.len() as u64,
            "{options} {}: extents do not tile the file",
            file.name
        );
        total.merge(report);
    }
    total
}

fn assert_compressed_as(report: &Report, expected: Compression, options: &str) {
    let ours = report.extents_of(expected);
    assert!(
        ours >= MIN_COMPRESSED,
        "{options}: only {ours} {expected} extents were checked"
    );
    assert_eq!(
        report.compressed_extents(),
        ours,
        "{options}: extents of another algorithm: {:?}",
        report.tally
    );
    let (inner, _) = partial_extents(report);
    assert!(
        inner > 0,
        "{options}: no compressed extent was checked from inside (unencoded_offset > 0)"
    );
}

/// Compressed extents the file uses from inside (unencoded_offset > 0), and ones it uses only
/// in part (len < unencoded_len).
fn partial_extents(report: &Report) -> (usize, usize) {
    let compressed = || {
        report
            .checks
            .iter()
            .filter(|c| c.compression.is_compressed())
    };
    let inner = compressed().filter(|c| c.unencoded_offset > 0).count();
    let cut = compressed().filter(|c| c.len < c.unencoded_len).count();
    (inner, cut)
}

fn summarize(options: &str, expected: Compression, report: &Report, files: usize) {
    let t = report.tally.get(&expected).copied().unwrap_or_default();
    let (inner, cut) = partial_extents(report);
    println!(
        "kernel->wring {options}: {} extents checked in {files} files: {} {expected} ({} bytes stored for {}; {inner} used from inside, {cut} in part), {} unencoded; {} file bytes",
        report.extents(),
        t.extents,
        t.encoded_bytes,
        t.file_bytes,
        report.extents_of(Compression::None),
        report.file_bytes()
    );
}

// ---- wring -> kernel -------------------------------------------------------------------------

/// Compress `data` extent by extent with wring and store it with encoded writes (raw writes for
/// incompressible extents). Returns the file and how many extents went in compressed.
fn write_with_wring(
    engine: &Engine,
    dir: &Path,
    spec: CompressSpec,
    text: &str,
    data: &[u8],
) -> (Expected, usize) {
    let name = format!("wring-{}", text.replace(':', "-"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(dir.join(&name))
        .unwrap();
    let sector = fs_info(&file).unwrap().block_size as u32;
    let mut dst = vec![0u8; MAX_UNCOMPRESSED];
    let mut compressed = 0;
    for (i, chunk) in data.chunks(MAX_UNCOMPRESSED).enumerate() {
        let offset = (i * MAX_UNCOMPRESSED) as u64;
        match engine.compress(spec, chunk, &mut dst).unwrap() {
            Outcome::Compressed(n) => {
                let compression =
                    Compression::for_algorithm(spec.algorithm.unwrap(), sector).unwrap();
                let extent = EncodedWrite::whole(&dst[..n], chunk.len() as u64, compression);
                let took = encoded_write(&file, offset, &extent)
                    .unwrap_or_else(|e| panic!("{name} at {offset}: {e}"));
                assert_eq!(took, n);
                compressed += 1;
            }
            Outcome::Incompressible | Outcome::Skipped => file.write_all_at(chunk, offset).unwrap(),
        }
    }
    assert!(
        compressed >= data.len() / MAX_UNCOMPRESSED / 2,
        "{name}: only {compressed} extents compressed"
    );
    (
        Expected {
            name,
            data: data.to_vec(),
        },
        compressed,
    )
}

/// One compressed extent of which the file uses only the middle (unencoded_offset 32 KiB,
/// len 64 KiB), then a short whole extent at the end.
fn write_partial_extent(
    engine: &Engine,
    dir: &Path,
    spec: CompressSpec,
    text: &str,
    data: &[u8],
) -> (Expected, usize) {
    let name = format!("wring-{}-partial", text.replace(':', "-"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(dir.join(&name))
        .unwrap();
    let compression = Compression::for_algorithm(spec.algorithm.unwrap(), 4096).unwrap();
    let mut dst = vec![0u8; MAX_UNCOMPRESSED];
    let chunk = &data[..MAX_UNCOMPRESSED];
    let Outcome::Compressed(n) = engine.compress(spec, chunk, &mut dst).unwrap() else {
        panic!("{name}: the first extent did not compress")
    };
    let (skip, len) = (32 << 10, 64 << 10);
    let partial = EncodedWrite {
        data: &dst[..n],
        len,
        unencoded_len: chunk.len() as u64,
        unencoded_offset: skip,
        compression,
    };
    encoded_write(&file, 0, &partial).unwrap_or_else(|e| panic!("{name}: {e}"));
    let tail = &data[data.len() - TAIL_BYTES..];
    let Outcome::Compressed(m) = engine.compress(spec, tail, &mut dst).unwrap() else {
        panic!("{name}: the tail did not compress")
    };
    encoded_write(
        &file,
        len,
        &EncodedWrite::whole(&dst[..m], tail.len() as u64, compression),
    )
    .unwrap_or_else(|e| panic!("{name} tail: {e}"));
    let mut expected = chunk[skip as usize..(skip + len) as usize].to_vec();
    expected.extend_from_slice(tail);
    (
        Expected {
            name,
            data: expected,
        },
        2,
    )
}

// ---- shared ----------------------------------------------------------------------------------

/// A normal (page-cache) read of the whole file equals `expected`; an I/O error names the
/// 128 KiB piece the kernel could not read.
fn assert_kernel_reads(path: &Path, expected: &[u8]) {
    if let Err(msg) = kernel_read_matches(path, expected) {
        panic!("{msg}");
    }
}

fn kernel_read_matches(path: &Path, expected: &[u8]) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
    let size = file.metadata().unwrap().len();
    if size != expected.len() as u64 {
        return Err(format!(
            "{}: size {size}, expected {}",
            path.display(),
            expected.len()
        ));
    }
    let mut buf = vec![0u8; MAX_UNCOMPRESSED];
    for (i, want) in expected.chunks(MAX_UNCOMPRESSED).enumerate() {
        let offset = (i * MAX_UNCOMPRESSED) as u64;
        let got = &mut buf[..want.len()];
        file.read_exact_at(got, offset)
            .map_err(|e| format!("kernel read of {} at {offset}: {e}", path.display()))?;
        if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
            return Err(format!(
                "{}: the kernel's read differs from what was written at offset {}",
                path.display(),
                offset + at as u64
            ));
        }
    }
    Ok(())
}

fn failures(report: &Report) -> String {
    report
        .failures()
        .take(5)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

fn fallocate(file: &File, len: i64) {
    // SAFETY: the descriptor is open for the call; fallocate takes no pointers.
    let ret = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    assert_eq!(ret, 0, "fallocate: {}", std::io::Error::last_os_error());
}

#[test]
fn scratch_fs_reports_a_refused_mount_and_cleans_up() {
    if !testing::require_root("scratch_fs_reports_a_refused_mount_and_cleans_up") {
        return;
    }
    match ScratchFs::new("compress-force=nosuchalgorithm") {
        Err(ScratchError::Mount { options, .. }) => {
            assert_eq!(options, "compress-force=nosuchalgorithm")
        }
        other => panic!("a bogus option gave {other:?}"),
    }
}
