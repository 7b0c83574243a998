//! blk's folders are its layers, and `use` only ever names a layer below (lib.rs's "# Layers",
//! docs/design.md's blk section): checked here on every module, test code aside; and inside
//! every folder too its modules form no import cycle.

use std::path::{Path, PathBuf};
use wring_testing::layers::{assert_acyclic, assert_layered, Layers};

/// lib.rs's layers, top first: admin (control, metrics) → actions → device; beside them the
/// leaves every layer may name and which name no layer.
const BLK: Layers<'static> = Layers {
    layers: &[&["admin"], &["actions"], &["device"]],
    shared: &["error", "options", "report", "sync"],
};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn use_only_names_a_layer_below() {
    assert_layered(&src(), &BLK);
}

/// The old flat blk had seven modules in one cycle (backing, options, recompress, schedule,
/// stats, store, streams); at no level do blk's modules depend on each other in a ring now.
#[test]
fn modules_form_no_cycle() {
    assert_acyclic(&src());
}
