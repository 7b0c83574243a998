//! Import cycles in small made-up crates: found at the root and inside a folder, through
//! `super::super::`, a re-export and a glob; none in a chain or through test code.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A crate in a fresh directory made of `files`.
struct Fixture(PathBuf);

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Fixture {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wring-cycles-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Fixture(dir)
    }

    /// Each cycle as `parent: members`, then each edge as `from→to file:line`.
    fn cycles(&self) -> Vec<String> {
        cycles(&self.0)
            .unwrap()
            .iter()
            .flat_map(|c| {
                let head = format!("{}: {}", c.parent, c.members.join(" "));
                let edges = c.edges.iter().map(|e| {
                    let file = e.file.strip_prefix(&self.0).unwrap().display();
                    format!("{}→{} {file}:{}", e.from, e.to, e.line)
                });
                std::iter::once(head).chain(edges).collect::<Vec<_>>()
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
fn two_modules_at_the_root() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\npub use b::B;\n"),
        ("a.rs", "pub struct A;\nfn f(_: crate::B) {}\n"),
        ("b.rs", "pub struct B;\n\nuse crate::a::A;\n"),
    ]);
    assert_eq!(
        f.cycles(),
        ["crate: a b", "a→b a.rs:2", "b→a b.rs:3"],
        "a names b through lib.rs's re-export"
    );
    let text = cycles(&f.0).unwrap()[0].to_string();
    assert!(
        text.starts_with("in crate, a, b depend on each other:\n  a → b: "),
        "{text}"
    );
    assert!(text.ends_with("b.rs:3"), "{text}");
}

#[test]
fn siblings_inside_a_folder() {
    let f = Fixture::new(&[
        ("lib.rs", "mod f;\nmod g;\n"),
        ("f/mod.rs", "mod x;\nmod y;\nmod z;\npub use self::x::X;\n"),
        ("f/x.rs", "pub struct X;\nfn f() { super::y::g() }\n"),
        ("f/y.rs", "pub fn g() {}\nfn h(_: super::X) {}\n"),
        ("f/z.rs", "use crate::f::x::X;\n"),
        ("g.rs", "use crate::f::X;\n"),
    ]);
    assert_eq!(
        f.cycles(),
        ["crate::f: x y", "x→y f/x.rs:2", "y→x f/y.rs:2"],
        "y names x through f's re-export; z and g only name x"
    );
}

#[test]
fn a_chain_has_none() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::b;\nfn f() { b::g() }\n"),
        ("b/mod.rs", "mod inner;\npub fn g() { inner::h() }\n"),
        (
            "b/inner.rs",
            "pub fn h() { crate::c::k() }\nfn up() { super::g() }\n",
        ),
        ("c.rs", "pub fn k() {}\nuse std::fmt;\n"),
    ]);
    assert_eq!(f.cycles(), Vec::<String>::new());
}

#[test]
fn test_code_is_ignored() {
    let f = Fixture::new(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub fn f() {}\n"),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::f;\n}\n\
             #[cfg(test)]\nmod more;\nmod tests;\n\
             #[cfg(all(test, feature = \"x\"))]\nfn m() { crate::a::f() }\n\
             impl B {\n    #[test]\n    fn t() { crate::a::f() }\n}\n",
        ),
        ("b/more.rs", "use crate::a::f;\n"),
        ("b/tests.rs", "use crate::a::f;\n"),
    ]);
    assert_eq!(f.cycles(), Vec::<String>::new());
}

#[test]
fn super_super_names_the_parents_sibling() {
    let f = Fixture::new(&[
        ("lib.rs", "mod p;\nmod q;\n"),
        ("p/mod.rs", "mod r;\nmod s;\n"),
        ("p/r.rs", "use super::s;\nfn f() { super::super::q::g() }\n"),
        ("p/s.rs", "pub fn h() {}\n"),
        ("q.rs", "pub fn g() {}\nuse crate::p;\n"),
    ]);
    assert_eq!(
        f.cycles(),
        ["crate: p q", "p→q p/r.rs:2", "q→p q.rs:2"],
        "r → s stays inside p"
    );
}

#[test]
fn a_glob_and_a_bare_name_through_an_import() {
    let f = Fixture::new(&[
        ("lib.rs", "mod m;\n"),
        ("m/mod.rs", "mod x;\nmod y;\n"),
        (
            "m/x.rs",
            "use super::*;\nfn f() { y::g() }\npub fn k() {}\n",
        ),
        (
            "m/y.rs",
            "use super::x as other;\npub fn g() { other::k() }\n",
        ),
    ]);
    assert_eq!(
        f.cycles(),
        ["crate::m: x y", "x→y m/x.rs:2", "y→x m/y.rs:1"]
    );
}
