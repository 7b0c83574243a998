//! fs's folders are its layers, and `use` only ever names a layer below (lib.rs's "# Layers",
//! docs/design.md's "The filesystem"): checked here on every module, test code aside; and
//! inside every folder too its modules form no import cycle.

use std::path::{Path, PathBuf};
use wring_testing::layers::{assert_acyclic, assert_layered, Layers};

/// lib.rs's layers, top first: `sim` (the whole-filesystem simulations, tests only) above
/// everything, then admin → transport → volume → store; beside them the shared leaves.
const FS: Layers<'static> = Layers {
    layers: &[
        &["sim"],
        &["admin"],
        &["transport"],
        &["volume"],
        &["store"],
    ],
    shared: &["counters", "error", "options", "sync"],
};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn use_only_names_a_layer_below() {
    assert_layered(&src(), &FS);
}

/// fs had four cycles inside its layers (admin/fsck's finding, names and rules; volume's
/// delayed and names; volume/data's dicts and encode; volume/names's fsflags, inode and
/// xattr); at no level do fs's modules depend on each other in a ring now.
#[test]
fn modules_form_no_cycle() {
    assert_acyclic(&src());
}
