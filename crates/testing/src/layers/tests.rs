//! The layer check on small made-up crates: each rule broken once, and what it must not count.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Top to bottom: `top`, `mid`, `low`; `leaf` beside them.
const LAYERS: Layers<'static> = Layers {
    layers: &[&["top"], &["mid", "mid2"], &["low"]],
    shared: &["leaf"],
};

const LIB: &str = "mod top;\nmod mid;\nmod mid2;\nmod low;\nmod leaf;\n\
                   pub use mid::Thing;\npub const ROOT: u8 = 0;\n";

/// A crate in a fresh directory: lib.rs and the four modules, `files` replacing any of them.
struct Fixture(PathBuf);

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Fixture {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wring-layers-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let defaults = [
            ("lib.rs", LIB),
            ("top.rs", "pub fn x() {}\n"),
            ("mid/mod.rs", "pub struct Thing;\npub fn a() {}\n"),
            ("mid2.rs", ""),
            ("low.rs", "pub fn z() {}\n"),
            ("leaf.rs", "pub struct L;\n"),
        ];
        for (name, text) in defaults.iter().chain(files) {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Fixture(dir)
    }

    /// Each violation as `file:line named breach`, the file relative to the crate.
    fn check(&self) -> Vec<String> {
        check(&self.0, &LAYERS)
            .unwrap()
            .iter()
            .map(|v| {
                let file = v.file.strip_prefix(&self.0).unwrap().display().to_string();
                format!("{file}:{} {} {:?}", v.line, v.named, v.breach)
            })
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn downward_uses_and_the_roots_items_pass() {
    let f = Fixture::new(&[
        ("top.rs", "use crate::mid::Thing;\nuse crate::{low, leaf::L};\npub fn x() -> u8 { crate::ROOT }\n"),
        ("mid/mod.rs", "mod sub;\npub struct Thing;\nuse crate::mid2;\nuse self::sub::y;\n"),
        ("mid/sub.rs", "pub fn y() { super::super::low::z() }\n"),
        ("low.rs", "use crate::leaf::L;\nuse std::fmt;\npub fn z() {}\n"),
        ("leaf.rs", "pub struct L;\nuse crate::ROOT;\n"),
    ]);
    assert_eq!(f.check(), Vec::<String>::new());
}

#[test]
fn an_upward_use_is_caught() {
    let f = Fixture::new(&[("low.rs", "use std::fmt;\nuse crate::mid::Thing;\n")]);
    assert_eq!(f.check(), ["low.rs:2 mid Above"]);
    let v = check(&f.0, &LAYERS).unwrap();
    let text = v[0].to_string();
    assert!(
        text.ends_with("low.rs:2: `use` names mid (above low's layer)"),
        "{text}"
    );
}

#[test]
fn a_crate_path_in_an_expression_or_a_type_is_caught() {
    let f = Fixture::new(&[(
        "low.rs",
        "pub fn z() {\n    crate::top::x();\n}\npub fn w(_: crate::mid::Thing) {}\n",
    )]);
    assert_eq!(f.check(), ["low.rs:2 top Above", "low.rs:4 mid Above"]);
}

#[test]
fn a_nested_use_group_is_caught() {
    let f = Fixture::new(&[(
        "low.rs",
        "use crate::{\n    leaf::L,\n    low::z,\n    mid::{a, Thing as T},\n    top,\n};\n",
    )]);
    assert_eq!(f.check(), ["low.rs:4 mid Above", "low.rs:5 top Above"]);
}

#[test]
fn super_to_the_root_a_reexport_and_a_macro_are_caught() {
    let f = Fixture::new(&[
        (
            "mid/mod.rs",
            "mod sub;\npub struct Thing;\nuse super::top::x;\n",
        ),
        ("mid/sub.rs", "fn f() { super::super::top::x() }\n"),
        (
            "low.rs",
            "use crate::Thing;\nfn f() { let _ = format!(\"{:?}\", crate::top::x()); }\n",
        ),
    ]);
    assert_eq!(
        f.check(),
        [
            "low.rs:1 mid Above",
            "low.rs:2 top Above",
            "mid/mod.rs:3 top Above",
            "mid/sub.rs:1 top Above"
        ]
    );
}

#[test]
fn a_shared_leaf_names_no_layer() {
    let f = Fixture::new(&[("leaf.rs", "pub struct L;\nfn f() { crate::low::z() }\n")]);
    assert_eq!(f.check(), ["leaf.rs:2 low FromShared"]);
}

#[test]
fn test_code_is_not_checked() {
    let f = Fixture::new(&[
        (
            "low.rs",
            "#[cfg(test)]\nmod tests {\n    use crate::top::x;\n}\n\
             #[cfg(test)]\nmod more;\nmod inner;\n\
             #[cfg(all(test, feature = \"shuttle\"))]\nfn m() { crate::top::x() }\n\
             struct S;\nimpl S {\n    #[test]\n    fn t() { crate::top::x() }\n}\n",
        ),
        ("low/more.rs", "use crate::top::x;\n"),
        ("low/inner.rs", "#[cfg(test)]\nmod tests;\n"),
        ("low/inner/tests.rs", "use crate::top::x;\n"),
    ]);
    assert_eq!(f.check(), Vec::<String>::new());
}

#[test]
fn a_module_outside_the_table_and_a_stale_name_are_reported() {
    let lib = LIB.replace("mod mid2;\n", "mod stray;\n");
    let f = Fixture::new(&[("lib.rs", &lib), ("stray.rs", "")]);
    assert_eq!(
        f.check(),
        ["lib.rs:1 mid2 Missing", "lib.rs:3 stray Unplaced"]
    );
}
