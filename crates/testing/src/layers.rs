//! The layering rule checked: in a crate whose top-level modules are layers, `use` (and any
//! other path into the crate) only ever names a layer below, and the shared leaves beside the
//! layers name none. It mirrors nothing in the kernel, whose layering is kept by review;
//! here a test keeps it (`crates/fs/tests/layers.rs`, with fs's table).
//!
//! [`check`] parses every module of a crate with `syn`, starting at `src/lib.rs` and following
//! its `mod` declarations, maps each file to its top-level module, and finds every path into
//! the crate: `crate::x` in a `use` (groups included, however nested) or anywhere else (a
//! type, an expression, a pattern), `super::` that climbs to the crate root, and `crate::x`
//! or `super::` in a macro's tokens. A name the crate root re-exports (`crate::Volume` when
//! lib.rs says `pub use volume::Volume`) counts as the module it comes from. Test-only code
//! is not checked: an item or module under `#[cfg(test)]` (or `cfg(all(test, …))`), a
//! `#[test]` function, a file named `tests.rs`. lib.rs itself is the crate's public face and
//! names every layer; it is not checked.
//!
//! [`cycles`] works at every level instead: among the children of each module it finds the
//! ones that depend on each other in a ring (`cycles.rs`). Both read the crate from one walk
//! (`walk.rs`, each file's paths and imports collected by `scan.rs`), which resolves a path
//! to the module it names: `crate::`, `self::`, `super::`, a first name the module imports or
//! declares, and re-exports (globs included) followed to their source.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use walk::{Crate, Declared};

pub use cycles::{cycles, Cycle, Edge};

mod cycles;
mod scan;
mod walk;

/// A crate's layers: top first, each a list of top-level module names, and the shared leaves
/// that any layer may name and that name no layer.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    /// The layers, top first; modules of one layer may name each other.
    pub layers: &'a [&'a [&'a str]],
    /// Modules beside the layers: named from anywhere, naming no layer (they may name each
    /// other).
    pub shared: &'a [&'a str],
}

/// Why the check could not run (not a broken rule: that is a [`Violation`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayerError {
    /// A source file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A source file is not Rust that `syn` parses.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: syn::Error,
    },
    /// A `mod x;` whose file is neither `x.rs` nor `x/mod.rs`.
    #[error("{path}: `mod {module};` has no file")]
    NoFile {
        /// The file that declares the module.
        path: PathBuf,
        /// The module.
        module: String,
    },
}

/// What a path names that the rule forbids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breach {
    /// A layer above the file's own.
    Above,
    /// A layer, from a shared leaf.
    FromShared,
    /// A top-level module the table does not place (the file's or the one named).
    Unplaced,
    /// A module the table names that lib.rs does not declare.
    Missing,
}

/// One path that breaks the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The file, as `src` joined with its path inside the crate.
    pub file: PathBuf,
    /// The line of the path.
    pub line: usize,
    /// The file's top-level module.
    pub from: String,
    /// The top-level module the path names.
    pub named: String,
    /// Which rule it breaks.
    pub breach: Breach,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (file, line, named, from) = (self.file.display(), self.line, &self.named, &self.from);
        match self.breach {
            Breach::Above => write!(f, "{file}:{line}: `use` names {named} (above {from}'s layer)"),
            Breach::FromShared => write!(
                f,
                "{file}:{line}: `use` names {named} (a layer, from {from}, a shared leaf that names none)"
            ),
            Breach::Unplaced => write!(
                f,
                "{file}:{line}: {named} (named from {from}) is in no layer and not shared: place it in the table"
            ),
            Breach::Missing => write!(
                f,
                "{file}: the layer table names {named}, which is no module of this crate"
            ),
        }
    }
}

/// Where a top-level module sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In layer `n`, 0 the top.
    Layer(usize),
    Shared,
    /// The crate root's own items (lib.rs's constants): shared.
    Root,
    Unplaced,
}

impl Layers<'_> {
    fn place(&self, module: &str) -> Place {
        if self.shared.contains(&module) {
            return Place::Shared;
        }
        match self.layers.iter().position(|l| l.contains(&module)) {
            Some(n) => Place::Layer(n),
            None => Place::Unplaced,
        }
    }

    /// What breaks the rule when a file of `from` names `named`, if anything.
    fn breach(&self, from: Place, named: Place) -> Option<Breach> {
        match (from, named) {
            // An unplaced module is reported once, where lib.rs declares it.
            (_, Place::Root | Place::Shared) | (Place::Unplaced, _) | (_, Place::Unplaced) => None,
            (Place::Shared | Place::Root, Place::Layer(_)) => Some(Breach::FromShared),
            (Place::Layer(f), Place::Layer(n)) => (n < f).then_some(Breach::Above),
        }
    }
}

/// For a crate's test: fails, listing each one, if a path in the crate whose sources are in
/// `src` breaks `layers` ([`check`]).
pub fn assert_layered(src: &Path, layers: &Layers<'_>) {
    assert_none("paths break the layering", src, check(src, layers));
}

/// For a crate's test: fails, listing each one, if the crate whose sources are in `src` has
/// an import cycle at any level ([`cycles`]).
pub fn assert_acyclic(src: &Path) {
    assert_none("import cycles", src, cycles(src));
}

fn assert_none<T: fmt::Display>(what: &str, src: &Path, found: Result<Vec<T>, LayerError>) {
    let found = found.unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(
        list.is_empty(),
        "{}: {} {what}:\n{}",
        src.display(),
        list.len(),
        list.join("\n")
    );
}

/// Checks the crate whose sources are in `src` (its `lib.rs` the root) against `layers`:
/// every path into the crate from a non-test file, each one that breaks the rule returned
/// (once per line and module named), and each top-level module the table does not place (or
/// places but lib.rs lacks).
pub fn check(src: &Path, layers: &Layers<'_>) -> Result<Vec<Violation>, LayerError> {
    let krate = Crate::walk(src)?;
    let mut found = table_gaps(&krate.lib, &krate.declared, layers);
    let mut seen = BTreeSet::new();
    for r in krate.refs.iter().filter(|r| r.file != krate.lib) {
        let (Some(top), Some(named)) = (r.module.first(), top_named(&krate, r)) else {
            continue;
        };
        let from = layers.place(top);
        let place = named.as_deref().map_or(Place::Root, |m| layers.place(m));
        let Some(breach) = layers.breach(from, place) else {
            continue;
        };
        let named = named.unwrap_or_default();
        if named != *top && seen.insert((r.file.clone(), r.line, named.clone())) {
            found.push(Violation {
                file: r.file.clone(),
                line: r.line,
                from: top.clone(),
                named,
                breach,
            });
        }
    }
    found.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    Ok(found)
}

/// The top-level module a path as written names (`Some(None)` for the crate root's own
/// items): only a path that starts at `crate`, `self` or `super` counts, and a name lib.rs
/// re-exports counts as the module it comes from.
fn top_named(krate: &Crate, r: &walk::Reference) -> Option<Option<String>> {
    if !matches!(r.path.first()?.as_str(), "crate" | "self" | "super") {
        return None;
    }
    let first = krate.anchor(&r.module, &r.path)?.into_iter().next()?;
    if krate.modules.contains(std::slice::from_ref(&first)) {
        return Some(Some(first));
    }
    let source = krate.anchor(&[], std::slice::from_ref(&first));
    let top = source.and_then(|s| s.into_iter().next());
    Some(top.filter(|t| krate.modules.contains(std::slice::from_ref(t))))
}

/// A top-level module the table does not place, or a name in the table lib.rs lacks.
fn table_gaps(lib: &Path, declared: &[Declared], layers: &Layers<'_>) -> Vec<Violation> {
    let gap = |line: usize, named: &str, breach| Violation {
        file: lib.to_path_buf(),
        line,
        from: "lib.rs".to_string(),
        named: named.to_string(),
        breach,
    };
    let unplaced = declared
        .iter()
        .filter(|d| layers.place(&d.name) == Place::Unplaced)
        .map(|d| gap(d.line, &d.name, Breach::Unplaced));
    let tabled = layers
        .layers
        .iter()
        .flat_map(|l| l.iter())
        .chain(layers.shared);
    let missing = tabled
        .filter(|name| !declared.iter().any(|d| d.name == **name))
        .map(|name| gap(1, name, Breach::Missing));
    unplaced.chain(missing).collect()
}

#[cfg(test)]
mod tests;
