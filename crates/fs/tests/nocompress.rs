//! btrfs's NOCOMPRESS rules under `compress=lzo` (heuristic), on the volume directly (no root):
//! only an extent of more than one block that was tried and saved too little marks the inode;
//! an extent of one block or less is compressed (the store packs it without rounding: bytes
//! saved are saved) but never judged, as btrfs judges none (compress_file_range bails out
//! before compressing), so a short tail that cannot compress does not mark a file; a change of
//! the `compression` property clears the mark (prop_compression_apply); a truncate keeps the
//! cut extent's encoding and judges nothing. Run with synchronous
//! writes and with writeback on the offload, which judge extents on two different paths.
mod common;
use common::{text, Rng};

use std::sync::Arc;

use wring_fs::store::records::FLAG_NOCOMPRESS;
use wring_fs::store::{Store, ROOT};
use wring_fs::{NewInode, Options, SetAttr, Volume, PROP_XATTR};

const E: u64 = 128 * 1024;

fn marked(vol: &Volume, ino: u64) -> bool {
    vol.inode(ino).unwrap().flags & FLAG_NOCOMPRESS != 0
}

/// The encodings `ino`'s extents are stored in (`none`, `zstd`, …).
fn kinds(vol: &Volume, ino: u64) -> Vec<String> {
    vol.fsync(ino).unwrap();
    vol.stat_report(ino).unwrap().by_type.into_keys().collect()
}

/// Random bytes of 32 values: the heuristic calls them compressible (fewer than 64 distinct
/// bytes), but LZO, which has no entropy coder, finds nothing to save in them.
fn random32(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| b'A' + (rng.next() % 32) as u8).collect()
}

/// The scenario with writes written back by the writer (`false`) or on the offload's
/// completions, as a mount does (`true`).
fn scenario(on_offload: bool) {
    let threads = if on_offload { "offload" } else { "writer" };
    let dir =
        std::env::temp_dir().join(format!("wring-nocompress-{threads}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Store::mkfs(&dir).unwrap();
    let vol = Arc::new(Volume::open(&dir, Options::parse("compress=lzo").unwrap()).unwrap());
    if on_offload {
        vol.start_writeback();
    }
    let file = |name: &str| {
        vol.create(ROOT, name.as_bytes(), NewInode::file(0o644))
            .unwrap()
            .0
    };
    let mut rng = Rng(0x6e6f_636f);

    // A small file of text is compressed, where btrfs's block rule would store it raw.
    let a = file("small");
    vol.write(a, 0, &text(&mut rng, 3000), None).unwrap();
    assert_eq!(kinds(&vol, a), ["lzo"], "written back by the {threads}");
    vol.write(a, 3000, &text(&mut rng, 2 * E as usize + 1000 - 3000), None)
        .unwrap();
    assert_eq!(kinds(&vol, a), ["lzo"], "written back by the {threads}");
    assert!(!marked(&vol, a), "written back by the {threads}");

    // A small file that does not compress is stored raw, and judges nothing: neither does a
    // short tail after extents that compressed.
    let s = file("small-random");
    vol.write(s, 0, &random32(&mut rng, 3000), None).unwrap();
    assert_eq!(kinds(&vol, s), ["none"], "written back by the {threads}");
    assert!(
        !marked(&vol, s),
        "written back by the {threads}: a 3000-byte file marked the inode"
    );
    let t = file("tail");
    vol.write(t, 0, &text(&mut rng, E as usize), None).unwrap();
    vol.write(t, E, &random32(&mut rng, 1000), None).unwrap();
    assert_eq!(
        kinds(&vol, t),
        ["lzo", "none"],
        "written back by the {threads}"
    );
    assert!(
        !marked(&vol, t),
        "written back by the {threads}: a 1000-byte tail marked the inode"
    );

    // Truncating to just past an extent boundary leaves a one-block extent: not judged.
    vol.setattr(
        a,
        &SetAttr {
            size: Some(E + 100),
            ..SetAttr::default()
        },
    )
    .unwrap();
    assert!(
        !marked(&vol, a),
        "written back by the {threads}: a truncate marked the inode"
    );

    // A truncate keeps the cut extent's encoding, whatever the file's rules are now.
    let c = file("cut");
    vol.write(c, 0, &text(&mut rng, 2 * E as usize), None)
        .unwrap();
    assert_eq!(kinds(&vol, c), ["lzo"], "written back by the {threads}");
    vol.setxattr(c, PROP_XATTR.as_bytes(), b"none", 0).unwrap();
    let cut = SetAttr {
        size: Some(E + 60_000),
        ..SetAttr::default()
    };
    vol.setattr(c, &cut).unwrap();
    assert_eq!(
        kinds(&vol, c),
        ["lzo"],
        "written back by the {threads}: the cut extent was re-encoded"
    );

    // Data the heuristic lets through is tried, saves nothing, and marks; later text is then
    // stored raw.
    let b = file("random");
    vol.write(b, 0, &random32(&mut rng, E as usize), None)
        .unwrap();
    assert_eq!(kinds(&vol, b), ["none"], "written back by the {threads}");
    assert!(
        marked(&vol, b),
        "written back by the {threads}: incompressible data did not mark"
    );
    vol.write(b, E, &text(&mut rng, E as usize), None).unwrap();
    assert_eq!(kinds(&vol, b), ["none"], "written back by the {threads}");

    // Setting the property clears the mark, and removing it does not bring the mark back.
    vol.setxattr(b, PROP_XATTR.as_bytes(), b"zstd:3", 0)
        .unwrap();
    assert!(
        !marked(&vol, b),
        "written back by the {threads}: the property kept the mark"
    );
    vol.removexattr(b, PROP_XATTR.as_bytes()).unwrap();
    assert!(!marked(&vol, b), "written back by the {threads}");
    vol.write(b, 2 * E, &text(&mut rng, E as usize), None)
        .unwrap();
    assert_eq!(
        kinds(&vol, b),
        ["lzo", "none"],
        "written back by the {threads}"
    );
    drop(vol);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn synchronous_writes() {
    scenario(false);
}

#[test]
fn writeback_on_the_offload() {
    scenario(true);
}
