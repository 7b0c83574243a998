//! fs's folders are its layers, and `use` only ever names a layer below (lib.rs's "# Layers",
//! docs/design.md's "The filesystem"): checked here on every module, test code aside.

use std::path::Path;
use wring_testing::layers::{check, Layers};

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

#[test]
fn use_only_names_a_layer_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = check(&src, &FS).expect("fs's sources parse");
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(
        list.is_empty(),
        "{} paths break fs's layering:\n{}",
        list.len(),
        list.join("\n")
    );
}
