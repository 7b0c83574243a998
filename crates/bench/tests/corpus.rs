//! Corpus loading, sampling, identification and the 128 KiB extent split.

mod common;

use wring_bench::corpus::{list, split_extents, Corpus, CorpusFile, SampleSource};

const MAX: usize = 128 * 1024;

#[test]
fn extents_are_cut_per_file_with_a_short_last_one() {
    assert_eq!(split_extents(&[], MAX).count(), 0);
    let lens =
        |n: usize| -> Vec<usize> { split_extents(&vec![7u8; n], MAX).map(<[u8]>::len).collect() };
    assert_eq!(lens(1), vec![1]);
    assert_eq!(lens(MAX), vec![MAX]);
    assert_eq!(lens(MAX + 1), vec![MAX, 1]);
    assert_eq!(lens(300 * 1024), vec![MAX, MAX, 44 * 1024]);

    let corpus = common::corpus();
    let extents = corpus.extents(MAX);
    // Files sorted by name: a/exact, a/small, b/big, b/over, c/random, c/zeros.
    let got: Vec<usize> = extents.iter().map(|e| e.len()).collect();
    assert_eq!(
        got,
        vec![
            MAX,
            1000,
            MAX,
            MAX,
            44 * 1024,
            MAX,
            1,
            MAX,
            72 * 1024,
            64 * 1024
        ]
    );
    assert_eq!(
        extents.iter().map(|e| e.len() as u64).sum::<u64>(),
        corpus.bytes()
    );
    // An extent never spans two files.
    assert_eq!(extents[1], &corpus.files[1].data[..]);
}

#[test]
fn load_reads_every_file_sorted_and_skips_empty_ones() {
    let dir = common::TempDir::new("load");
    common::write_corpus(dir.path());
    std::fs::write(dir.path().join("empty"), b"").expect("write");
    let loaded = Corpus::load(dir.path()).expect("load");
    let names: Vec<&str> = loaded.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "a/exact.txt",
            "a/small.txt",
            "b/big.txt",
            "b/over.txt",
            "c/random.bin",
            "c/zeros.bin"
        ]
    );
    let made = common::corpus();
    assert_eq!(loaded.files, made.files);
    assert_eq!(loaded.list_sha256(), made.list_sha256());
    assert_eq!(loaded.content_sha256(), made.content_sha256());
}

#[test]
fn load_passes_over_the_builders_manifest_and_list_gives_every_file() {
    let dir = common::TempDir::new("manifest");
    common::write_corpus(dir.path());
    std::fs::write(dir.path().join("MANIFEST"), b"a/exact.txt 131072 0123\n").expect("write");
    std::fs::write(dir.path().join("a/MANIFEST"), b"data, not a list").expect("write");
    let loaded = Corpus::load(dir.path()).expect("load");
    let names: Vec<&str> = loaded.files.iter().map(|f| f.name.as_str()).collect();
    assert!(!names.contains(&"MANIFEST"), "{names:?}");
    assert!(names.contains(&"a/MANIFEST"), "{names:?}");
    // The listing (what `bench fs` copies) holds everything, with sizes, sorted.
    let listed = list(dir.path()).expect("list");
    let paths: Vec<String> = listed
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    assert_eq!(paths.first().map(String::as_str), Some("MANIFEST"));
    assert!(paths.windows(2).all(|w| w[0] < w[1]), "{paths:?}");
    assert_eq!(listed.len(), names.len() + 1);
    assert!(listed
        .iter()
        .any(|(p, len)| p.as_os_str() == "a/MANIFEST" && *len == 16));
}

#[test]
fn an_empty_directory_is_an_error() {
    let dir = common::TempDir::new("empty");
    assert!(Corpus::load(dir.path()).is_err());
    assert!(Corpus::load(&dir.path().join("missing")).is_err());
}

#[test]
fn identity_follows_names_and_sizes() {
    let a = common::corpus();
    let info = a.info();
    assert_eq!(info.files, 6);
    assert_eq!(info.bytes, a.bytes());
    assert_eq!(info.list_sha256.len(), 64);
    assert!(info.list_sha256.chars().all(|c| c.is_ascii_hexdigit()));

    // Same names and sizes, other bytes: same list hash, other content hash.
    let mut b = a.clone();
    b.files[0].data[0] ^= 1;
    assert_eq!(a.list_sha256(), b.list_sha256());
    assert_ne!(a.content_sha256(), b.content_sha256());

    // A renamed file changes the list hash.
    let mut c = a.clone();
    c.files[0].name.push('x');
    assert_ne!(a.list_sha256(), c.list_sha256());
}

#[test]
fn truncation_keeps_file_order_and_cuts_the_last_file() {
    let a = common::corpus();
    let t = a.truncated(128 * 1024 + 500);
    assert_eq!(t.bytes(), 128 * 1024 + 500);
    assert_eq!(t.files.len(), 2);
    assert_eq!(t.files[1].data.len(), 500);
    assert_eq!(a.truncated(u64::MAX).bytes(), a.bytes());
}

#[test]
fn concatenation_is_padded_to_whole_pages() {
    let a = Corpus::from_files(
        "x",
        vec![
            CorpusFile {
                name: "b".into(),
                data: vec![2; 10],
            },
            CorpusFile {
                name: "a".into(),
                data: vec![1; 4095],
            },
        ],
    );
    let c = a.concatenated(4096);
    assert_eq!(c.len(), 8192);
    assert_eq!(&c[..4095], &[1u8; 4095][..]);
    assert_eq!(&c[4095..4105], &[2u8; 10][..]);
    assert!(c[4105..].iter().all(|&b| b == 0));
}

fn txt(name: &str) -> bool {
    name.ends_with(".txt")
}

fn any(_: &str) -> bool {
    true
}

#[test]
fn sampling_is_deterministic_capped_and_sorted() {
    let root = common::TempDir::new("sample");
    let docs = root.path().join("usr/share/doc");
    let libs = root.path().join("usr/lib/python3.99");
    for (dir, n) in [(&docs, 5), (&libs, 4)] {
        std::fs::create_dir_all(dir).expect("mkdir");
        for i in 0..n {
            std::fs::write(dir.join(format!("f{i}.txt")), vec![b'a' + i as u8; 3000])
                .expect("write");
        }
    }
    std::fs::write(docs.join("skip.gz"), b"compressed").expect("write");
    std::fs::write(docs.join("e-tiny.txt"), b"too small").expect("write");
    let multiarch = root.path().join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&multiarch).expect("mkdir");
    std::fs::write(multiarch.join("libz.so.1"), vec![7u8; 5000]).expect("write");
    let plan = [
        SampleSource {
            label: "docs",
            dirs: &["usr/share/doc"],
            accept: txt,
            cap: 7000,
            file_cap: 2500,
            min_size: 1000,
        },
        SampleSource {
            label: "libs",
            dirs: &["usr/lib/*-linux-gnu"],
            accept: any,
            cap: 100_000,
            file_cap: 100_000,
            min_size: 1,
        },
        SampleSource {
            label: "python",
            dirs: &["usr/lib/python3*", "usr/lib/missing"],
            accept: any,
            cap: 100_000,
            file_cap: 100_000,
            min_size: 1,
        },
    ];
    let a = Corpus::sample(root.path(), &plan).expect("sample");
    let b = Corpus::sample(root.path(), &plan).expect("sample");
    assert_eq!(a.files, b.files);
    assert_eq!(a.list_sha256(), b.list_sha256());
    let docs_taken: Vec<&CorpusFile> = a
        .files
        .iter()
        .filter(|f| f.name.starts_with("usr/share/doc/"))
        .collect();
    // 2500 + 2500 + 2000 = the 7000-byte cap, files in sorted order, none of the .gz.
    assert_eq!(docs_taken.len(), 3);
    assert_eq!(
        docs_taken.iter().map(|f| f.data.len()).collect::<Vec<_>>(),
        vec![2500, 2500, 2000]
    );
    assert_eq!(docs_taken[0].name, "usr/share/doc/f0.txt");
    assert!(!a.files.iter().any(|f| f.name.ends_with(".gz")));
    assert!(!a.files.iter().any(|f| f.name.ends_with("e-tiny.txt")));
    // A `*` inside the last component matches the multiarch directory.
    assert!(a
        .files
        .iter()
        .any(|f| f.name == "usr/lib/x86_64-linux-gnu/libz.so.1"));
    assert_eq!(
        a.files
            .iter()
            .filter(|f| f.name.starts_with("usr/lib/python3.99/"))
            .count(),
        4
    );
    assert!(a.source.contains("docs, libs, python"));
}
