//! Man pages and shell completions, generated from the clap definitions (clap_mangen,
//! clap_complete) so they cannot drift from `--help`: `wring completions SHELL` prints a
//! completion script, the hidden `wring gen-man DIR` writes wring.1, one page per subcommand
//! (wring-mount.1, wring-blk-start.1, …) and wring-mount-options.5, the filesystem's mount
//! options as btrfs(5) lists btrfs's. The packaging runs both on the binary it packages.
//!
//! The mount options page is rendered from [`MOUNT_OPTIONS`], a table the tests check against
//! wring-fs's parser: the same names, every default as a fresh mount shows it, every example
//! value accepted or refused as the page says.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use roff::{bold, italic, roman, Inline, Roff};

/// One mount option as wring-mount-options(5) describes it.
pub struct MountOption {
    /// The name (`compress`).
    pub name: &'static str,
    /// What follows the name (`[=ALG[:LEVEL]]`, `=SIZE`), empty for a flag.
    pub value: &'static str,
    /// What it does, with its range.
    pub text: &'static str,
    /// The default in words.
    pub default: &'static str,
    /// `name=value` as `wring status` shows the default, when it shows it.
    #[cfg_attr(not(test), allow(dead_code))] // checked against the parser by the tests
    pub shown: Option<&'static str>,
    /// Spellings the parser accepts (the range's ends among them).
    #[cfg_attr(not(test), allow(dead_code))] // checked against the parser by the tests
    pub accepted: &'static [&'static str],
    /// Spellings it refuses (just past the range).
    #[cfg_attr(not(test), allow(dead_code))] // checked against the parser by the tests
    pub refused: &'static [&'static str],
}

/// The filesystem's mount options, in the order the parser's error message lists them.
pub const MOUNT_OPTIONS: &[MountOption] = &[
    MountOption {
        name: "compress",
        value: "[=ALG[:LEVEL]]",
        text: "Compress new data with ALG, after btrfs's heuristic: a file whose extent does not \
               save a 4 KiB block is marked NOCOMPRESS. ALG:LEVEL is zstd:-15..22 (default 3), \
               zlib:1..9 (default 3), lzo, lz4 or lz4hc:1..12 (default 9); a level out of range \
               is clamped with a warning. Without a value, zlib:3. compress=no (or none) turns \
               compression off.",
        default: "no: nothing is compressed unless a compression property asks",
        shown: None,
        accepted: &[
            "compress",
            "compress=zstd:-15",
            "compress=zstd:22",
            "compress=zlib:9",
            "compress=lzo",
            "compress=lz4",
            "compress=lz4hc:12",
            "compress=no",
        ],
        refused: &["compress=zstdd", "compress=zlib:x"],
    },
    MountOption {
        name: "compress-force",
        value: "[=ALG[:LEVEL]]",
        text: "Compress everything with ALG, without the heuristic, marking nothing NOCOMPRESS \
               (a compression property of none is still honoured). Values as for compress.",
        default: "off",
        shown: None,
        accepted: &[
            "compress-force",
            "compress-force=zstd:3",
            "compress-force=lzo",
        ],
        refused: &["compress-force=lzma"],
    },
    MountOption {
        name: "max_extent",
        value: "=SIZE",
        text: "The largest extent compressed as one unit, for files first written from now on: \
               4K to 4M in whole 4K blocks (K, M suffixes or bytes). Larger extents store a \
               little less and make cold random reads slower.",
        default: "128K, btrfs's",
        shown: Some("max_extent=128K"),
        accepted: &["max_extent=4K", "max_extent=1M", "max_extent=4M"],
        refused: &["max_extent=6K", "max_extent=4100K", "max_extent=2K"],
    },
    MountOption {
        name: "streams",
        value: "=N",
        text: "Compression workers: extents compressed at once, 1 to 1024.",
        default: "the number of CPUs",
        shown: None,
        accepted: &["streams=1", "streams=1024"],
        refused: &["streams=0", "streams=1025"],
    },
    MountOption {
        name: "reclaim",
        value: "=SECONDS",
        text: "How long an idle compression workspace is kept before its memory is freed, at \
               least 1 second.",
        default: "307 seconds, as btrfs's workspace manager",
        shown: Some("reclaim=307"),
        accepted: &["reclaim=1", "reclaim=3600"],
        refused: &["reclaim=0", "reclaim=soon"],
    },
    MountOption {
        name: "workspace_mem",
        value: "=BYTES|unlimited",
        text: "A memory budget for each algorithm's workspaces (K, M, G suffixes); a request \
               past it waits for a free workspace.",
        default: "unlimited",
        shown: Some("workspace_mem=unlimited"),
        accepted: &["workspace_mem=64M", "workspace_mem=unlimited"],
        refused: &["workspace_mem=lots"],
    },
    MountOption {
        name: "page_pool",
        value: "=PAGES",
        text: "Reserved, mlocked 4 KiB pages that hold extents a read decodes in part, as \
               EROFS's decompression pool: 0 to 1048576 (4 GiB), allocated when set.",
        default: "0 (no pool)",
        shown: Some("page_pool=0"),
        accepted: &["page_pool=0", "page_pool=1048576"],
        refused: &["page_pool=1048577", "page_pool=-1"],
    },
    MountOption {
        name: "threads",
        value: "=N",
        text: "FUSE request threads, 1 to 64; 0 asks for the default. Only when mounting: a \
               remount cannot change it.",
        default: "the compression streams plus 4, between 4 and 16",
        shown: None,
        accepted: &["threads=0", "threads=1", "threads=64"],
        refused: &["threads=65", "threads=-1"],
    },
    MountOption {
        name: "uring",
        value: "=auto|0|1",
        text: "Serve the mount's requests through FUSE over io_uring instead of reading \
               /dev/fuse: a queue per CPU, whose requests a thread kept on that CPU answers, \
               each reply and the wait for the next request in one system call. The ring \
               needs Linux 6.14 or later with /sys/module/fuse/parameters/enable_uring set to \
               Y (by root). auto takes it when the kernel offers it and reads /dev/fuse \
               otherwise; 1 insists (the mount is refused, saying why, where it is not \
               offered); 0 reads /dev/fuse. wring status says which in its transport: line, \
               and has a uring: line while the ring serves. Only when mounting: a remount \
               cannot change it. on and off are accepted too.",
        default: "auto (the ring where the kernel offers it, else /dev/fuse)",
        shown: None,
        accepted: &["uring=auto", "uring=0", "uring=1", "uring=off"],
        refused: &["uring=2", "uring=yes"],
    },
    MountOption {
        name: "metrics",
        value: "=ADDR",
        text: "Serve the mount's figures as Prometheus metrics (the OpenMetrics text format) \
               on GET /metrics at ADDR: 127.0.0.1:PORT or [::1]:PORT (loopback), or an \
               absolute Unix socket path. Any other address is refused, since anyone who \
               reaches it reads the metrics, unless written public:IP:PORT (public:0.0.0.0:9101 \
               serves every interface). The figures are the counters wring status shows, read \
               when scraped: a mount nobody scrapes pays nothing. wring metrics prints the same \
               without a listener. Only when mounting: a remount cannot change it.",
        default: "off",
        shown: None,
        accepted: &[
            "metrics=127.0.0.1:9101",
            "metrics=[::1]:9101",
            "metrics=/run/wring-metrics.sock",
            "metrics=public:0.0.0.0:9101",
        ],
        refused: &[
            "metrics=0.0.0.0:9101",
            "metrics=10.1.2.3:9101",
            "metrics=9101",
        ],
    },
    MountOption {
        name: "dict",
        value: "=auto|off",
        text: "Trained dictionaries for small files, which no kernel filesystem has. With auto, \
               small extents (files and file tails of 16 KiB or less) compressed with zstd are \
               compressed with a zstd dictionary the filesystem trains on its own small \
               extents once dict_train bytes of them were written, and stores in its metadata; \
               each extent records which. A new dictionary is trained when a candidate does \
               better on the most recent small files, and a background pass rewrites older \
               small extents with the newest. On header files and Perl and Python modules \
               this stored 0.76 of what the same store needs without (wring bench dict). The \
               cost: 112 KiB per dictionary, up to 32 MiB of samples in memory, a training \
               (about a second) now and then. off trains and uses none for new data; extents \
               written with one still read. A store that holds a dictionary has format version \
               2, which wring releases before dictionaries cannot read. Other algorithms than \
               zstd never use one, nor does wring btrfs recompress (the kernel could not read \
               such extents). wring status has a dicts: line; wring stat a Dictionary table.",
        default: "auto",
        shown: None,
        accepted: &["dict=auto", "dict=off"],
        refused: &["dict=on", "dict=1"],
    },
    MountOption {
        name: "dict_train",
        value: "=SIZE",
        text: "Bytes of small extents written before the first dictionary is trained, 64K to \
               1G; four times as many since the last training make a candidate for a new one.",
        default: "4M",
        shown: None,
        accepted: &["dict_train=64K", "dict_train=16M"],
        refused: &["dict_train=1K", "dict_train=2G"],
    },
    MountOption {
        name: "compact",
        value: "=0|1",
        text: "For a store whose extents are in an S3 bucket (wring mkfs --data): compact its \
               segment objects in the background, as btrfs balance -dusage= does block groups. \
               Every second, segments whose live bytes fell under compact_threshold (overwritten \
               and deleted extents), and runs of small segments left by frequent fsyncs, have \
               their live extents copied into new segments; the old objects are deleted once \
               the metadata no longer points at them. Without it, dead bytes stay in the bucket \
               for good. No effect on a local store. on and off are accepted too.",
        default: "1 (on)",
        shown: Some("compact=1"),
        accepted: &["compact=0", "compact=1", "compact=off"],
        refused: &["compact=2", "compact=yes"],
    },
    MountOption {
        name: "compact_threshold",
        value: "=PERCENT",
        text: "The compactor rewrites a segment whose live bytes are under PERCENT of its size: \
               1 to 95. Higher reclaims more space and rewrites more (each live byte moved is \
               read from and written to the bucket again).",
        default: "50",
        shown: Some("compact_threshold=50"),
        accepted: &["compact_threshold=1", "compact_threshold=95"],
        refused: &["compact_threshold=0", "compact_threshold=96"],
    },
    MountOption {
        name: "allow_other",
        value: "",
        text: "Let users other than the one who mounted reach the mount, as their modes and \
               ACLs allow. Only when mounting: a remount cannot change it.",
        default: "off: only the mounting user",
        shown: None,
        accepted: &["allow_other"],
        refused: &["allow_other=1"],
    },
    MountOption {
        name: "ro",
        value: "",
        text: "Read-only: nothing is written to the store. At mount the store is opened \
               without writing to its files (as fsck opens it), so a store on read-only media \
               mounts and a store in a bucket takes no lease; wring remount -o rw of such a \
               mount is refused (unmount and mount rw). remount,ro (wring remount -o ro, or \
               mount -o remount,ro) writes everything back and makes it durable first, and is \
               refused with EBUSY while a file is open for writing, as on btrfs.",
        default: "rw",
        shown: None,
        accepted: &["ro"],
        refused: &["ro=1"],
    },
    MountOption {
        name: "rw",
        value: "",
        text: "Read-write: undoes ro on a mount that was made rw.",
        default: "rw",
        shown: None,
        accepted: &["rw"],
        refused: &["rw=1"],
    },
    MountOption {
        name: "suid",
        value: "",
        text: "Set-user-ID and set-group-ID bits take effect on exec, as on btrfs. Only for \
               root mounting a store root owns (directory and files): a store another user \
               can write is a way to plant a set-user-ID root binary, so suid is refused \
               otherwise, saying why.",
        default: "nosuid (FUSE's and libfuse's default)",
        shown: None,
        accepted: &["suid"],
        refused: &["suid=1"],
    },
    MountOption {
        name: "nosuid",
        value: "",
        text: "Set-ID bits do not take effect on exec.",
        default: "nosuid",
        shown: None,
        accepted: &["nosuid"],
        refused: &["nosuid=1"],
    },
    MountOption {
        name: "dev",
        value: "",
        text: "Device nodes on the mount can be opened, as on btrfs. The same condition as \
               suid: root mounting a store root owns.",
        default: "nodev (FUSE's default)",
        shown: None,
        accepted: &["dev"],
        refused: &["dev=1"],
    },
    MountOption {
        name: "nodev",
        value: "",
        text: "Device nodes on the mount cannot be opened.",
        default: "nodev",
        shown: None,
        accepted: &["nodev"],
        refused: &["nodev=1"],
    },
    MountOption {
        name: "exec",
        value: "",
        text: "Programs on the mount can be run.",
        default: "exec",
        shown: None,
        accepted: &["exec"],
        refused: &["exec=1"],
    },
    MountOption {
        name: "noexec",
        value: "",
        text: "Programs on the mount cannot be run.",
        default: "exec",
        shown: None,
        accepted: &["noexec"],
        refused: &["noexec=1"],
    },
    MountOption {
        name: "relatime",
        value: "",
        text: "A read updates a file's access time when it is not later than its last change, \
               or is a day old (btrfs's default). FUSE sends the server no access time, so a \
               read the kernel serves from its page cache updates it in the kernel's memory \
               only; a read that reaches wring is kept.",
        default: "relatime",
        shown: None,
        accepted: &["relatime"],
        refused: &["relatime=1"],
    },
    MountOption {
        name: "strictatime",
        value: "",
        text: "Every read updates the access time (with the same FUSE caveat as relatime).",
        default: "relatime",
        shown: None,
        accepted: &["strictatime"],
        refused: &["strictatime=1"],
    },
    MountOption {
        name: "noatime",
        value: "",
        text: "Reads never update access times.",
        default: "relatime",
        shown: None,
        accepted: &["noatime"],
        refused: &["noatime=1"],
    },
    MountOption {
        name: "diratime",
        value: "",
        text: "Listing a directory updates its access time as the atime option says for files \
               (the default); undoes nodiratime.",
        default: "diratime",
        shown: None,
        accepted: &["diratime"],
        refused: &["diratime=1"],
    },
    MountOption {
        name: "nodiratime",
        value: "",
        text: "Listing a directory does not update its access time (files' follow the atime \
               option); the kernel's MS_NODIRATIME, as btrfs takes it from mount(8).",
        default: "diratime",
        shown: None,
        accepted: &["nodiratime"],
        refused: &["nodiratime=1"],
    },
    MountOption {
        name: "lazytime",
        value: "",
        text: "Kept and shown; wring's access time updates are delayed inode items whatever \
               it says, written with the next commit.",
        default: "nolazytime",
        shown: None,
        accepted: &["lazytime"],
        refused: &["lazytime=1"],
    },
    MountOption {
        name: "nolazytime",
        value: "",
        text: "Undoes lazytime.",
        default: "nolazytime",
        shown: None,
        accepted: &["nolazytime"],
        refused: &["nolazytime=1"],
    },
];

/// Options of mount(8), fstab and systemd that a wring mount accepts and ignores.
pub const IGNORED_OPTIONS: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "comment=TEXT",
    "x-systemd.*",
    "x-*",
    "remount",
    "async",
];

/// Print the completion script for `shell` on stdout.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "wring", &mut script);
    std::io::stdout()
        .write_all(&script)
        .context("writing the completion script")
}

/// Write every man page into `dir` (created if missing); returns their file names.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write_pages(cmd, dir).with_context(|| format!("writing man pages into {}", dir.display()))?;
    let page = dir.join("wring-mount-options.5");
    std::fs::write(&page, mount_options_page())
        .with_context(|| format!("writing {}", page.display()))?;
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("wring"))
        .collect();
    names.sort();
    Ok(names)
}

/// clap_mangen::generate_to, with every page's footer naming wring and its version (clap_mangen
/// puts the subcommand's own name and no version there).
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_pages(sub, dir)?;
    }
    clap_mangen::Man::new(cmd)
        .date(env!("WRING_GIT_DATE"))
        .source(SOURCE)
        .manual("wring")
        .generate_to(dir)?;
    Ok(())
}

/// The footer's source: the program and its version.
const SOURCE: &str = concat!("wring ", env!("CARGO_PKG_VERSION"));

fn para(roff: &mut Roff, text: impl Into<Vec<Inline>>) {
    roff.control("PP", []).text(text);
}

/// wring-mount-options(5) in roff.
pub fn mount_options_page() -> String {
    let mut r = Roff::new();
    r.control(
        "TH",
        [
            "wring-mount-options",
            "5",
            env!("WRING_GIT_DATE"),
            SOURCE,
            "wring",
        ],
    );
    r.control("SH", ["NAME"]);
    r.text([roman(
        "wring-mount-options - mount options of the wring filesystem",
    )]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([
        bold("wring mount -o "),
        italic("OPTIONS DIR MOUNTPOINT"),
        Inline::LineBreak,
        bold("mount -t fuse.wring "),
        italic("DIR MOUNTPOINT"),
        bold(" -o "),
        italic("OPTIONS"),
        Inline::LineBreak,
        roman("fstab: "),
        italic("DIR MOUNTPOINT"),
        roman(" fuse.wring "),
        italic("OPTIONS"),
        roman(" 0 0"),
    ]);
    r.control("SH", ["DESCRIPTION"]);
    r.text([roman(
        "Options are comma-separated and spelled as btrfs's; -o may repeat and later ones win. \
         wring remount changes any of them on a live mount but allow_other; wring status shows \
         the live ones as /proc/mounts shows btrfs's. An unknown option or a value out of range \
         is an error naming what is accepted.",
    )]);
    r.control("SH", ["OPTIONS"]);
    for o in MOUNT_OPTIONS {
        r.control("TP", []);
        r.text([bold(o.name), roman(o.value)]);
        r.text([roman(format!("{} Default: {}.", o.text, o.default))]);
    }
    r.control("SH", ["OPTIONS OF MOUNT(8) AND SYSTEMD"]);
    r.text([roman(format!(
        "mount(8) hands its own options and systemd's on to the helper; wring accepts and \
         ignores these: {} (async is what a wring mount always is; mount -o remount,OPTIONS \
         reaches the live mount as wring remount -o OPTIONS does). The VFS flags (ro, rw, \
         suid, nosuid, dev, nodev, exec, noexec and the atime options) are wring's options \
         above, as mount(8) means them.",
        IGNORED_OPTIONS.join(", ")
    ))]);
    r.control("SH", ["EXAMPLES"]);
    r.text([roman("An fstab line, mounted at boot and by mount -a:")]);
    para(
        &mut r,
        [roman(
            "/srv/store /mnt/w fuse.wring compress=zstd:3,nofail 0 0",
        )],
    );
    r.control("SH", ["SEE ALSO"]);
    r.text([roman(
        "wring-mount(1), wring-remount(1), wring-status(1), mount(8), fstab(5), btrfs(5)",
    )]);
    r.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wring_fs::Options;

    /// The page lists exactly the options the parser names when it refuses one.
    #[test]
    fn the_page_names_the_parsers_options() {
        let e = Options::parse("frobnicate").unwrap_err().to_string();
        let list = e.split("accepted are ").nth(1).unwrap();
        let parser: Vec<&str> = list
            .split(", ")
            .map(|s| s.split(['=', '[']).next().unwrap().trim())
            .collect();
        let page: Vec<&str> = MOUNT_OPTIONS.iter().map(|o| o.name).collect();
        assert_eq!(parser, page, "update MOUNT_OPTIONS to the parser's list");
    }

    #[test]
    fn defaults_ranges_and_ignored_options_are_the_parsers() {
        let defaults = Options::default();
        let shown = defaults.to_string();
        assert_eq!(defaults.compress, wring_fs::options::Compress::No);
        assert!(!defaults.allow_other);
        for o in MOUNT_OPTIONS {
            if let Some(s) = o.shown {
                assert!(shown.split(',').any(|x| x == s), "{s} not in {shown}");
            }
            for a in o.accepted {
                assert!(Options::parse(a).is_ok(), "{a} should be accepted");
            }
            for r in o.refused {
                assert!(Options::parse(r).is_err(), "{r} should be refused");
            }
        }
        for i in IGNORED_OPTIONS {
            let i = i.replace("TEXT", "x").replace('*', "automount");
            assert_eq!(Options::parse(&i).unwrap(), defaults, "{i}");
        }
    }

    #[test]
    fn page_renders_every_option() {
        let page = mount_options_page();
        assert!(page.contains("\n.TH wring-mount-options 5 "), "{page}");
        for o in MOUNT_OPTIONS {
            let name = format!("\\fB{}\\fR", o.name.replace('-', "\\-"));
            assert!(page.contains(&name), "{name} in {page}");
        }
    }
}
