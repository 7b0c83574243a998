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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use scan::{is_test_only, item_ident, Scan};

mod scan;

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

/// Checks the crate whose sources are in `src` (its `lib.rs` the root) against `layers`:
/// every path into the crate from a non-test file, each one that breaks the rule returned,
/// and each top-level module the table does not place (or places but lib.rs lacks).
pub fn check(src: &Path, layers: &Layers<'_>) -> Result<Vec<Violation>, LayerError> {
    let lib = src.join("lib.rs");
    let ast = parse(&lib)?;
    let root = Root::of(&ast);
    let declared = declared_mods(&ast.items);
    let mut found = table_gaps(&lib, &declared, layers);
    for module in declared.into_iter().filter(|d| !d.test_only) {
        let file = module_file(src, &module.name, &lib)?;
        walk_file(&file, &[module.name], layers, &root, &mut found)?;
    }
    found.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    Ok(found)
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

/// What the crate root says of its names: those it re-exports, with the top-level module
/// each comes from (`pub use volume::data::dicts::Training` gives `Training` → `volume`), and
/// its own items (lib.rs's constants), which count as shared.
struct Root {
    reexports: BTreeMap<String, String>,
    items: BTreeSet<String>,
}

impl Root {
    fn of(ast: &syn::File) -> Self {
        let mut reexports = BTreeMap::new();
        let mut items = BTreeSet::new();
        for item in &ast.items {
            match item {
                syn::Item::Use(u) if !is_test_only(&u.attrs) => {
                    use_leaves(&u.tree, None, &mut reexports);
                }
                syn::Item::Use(_) | syn::Item::Mod(_) => {}
                other => items.extend(item_ident(other)),
            }
        }
        Root { reexports, items }
    }
}

/// The file of module `path` and the modules it declares, checked one after the other.
fn walk_file(
    file: &Path,
    path: &[String],
    layers: &Layers<'_>,
    root: &Root,
    found: &mut Vec<Violation>,
) -> Result<(), LayerError> {
    if file.file_name().is_some_and(|n| n == "tests.rs") {
        return Ok(());
    }
    let ast = parse(file)?;
    let mut scan = Scan {
        file,
        top: &path[0],
        module: path.to_vec(),
        layers,
        root,
        found,
    };
    scan.visit_file(&ast);
    // `mod x;` in foo.rs is foo/x.rs, in foo/mod.rs it is foo/x.rs too.
    let dir = if file.file_name().is_some_and(|n| n == "mod.rs") {
        file.parent().map(Path::to_path_buf).unwrap_or_default()
    } else {
        file.with_extension("")
    };
    for declared in declared_mods(&ast.items) {
        if declared.test_only {
            continue;
        }
        let child = module_file(&dir, &declared.name, file)?;
        let mut child_path = path.to_vec();
        child_path.push(declared.name);
        walk_file(&child, &child_path, layers, root, found)?;
    }
    Ok(())
}

fn parse(path: &Path) -> Result<syn::File, LayerError> {
    let text = std::fs::read_to_string(path).map_err(|source| LayerError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    syn::parse_file(&text).map_err(|source| LayerError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// `dir/name.rs` or `dir/name/mod.rs`.
fn module_file(dir: &Path, name: &str, declared_in: &Path) -> Result<PathBuf, LayerError> {
    let flat = dir.join(format!("{name}.rs"));
    if flat.is_file() {
        return Ok(flat);
    }
    let nested = dir.join(name).join("mod.rs");
    if nested.is_file() {
        return Ok(nested);
    }
    Err(LayerError::NoFile {
        path: declared_in.to_path_buf(),
        module: name.to_string(),
    })
}

/// A `mod x;` (no body) at the top of a file.
struct Declared {
    name: String,
    line: usize,
    test_only: bool,
}

fn declared_mods(items: &[syn::Item]) -> Vec<Declared> {
    items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) if m.content.is_none() => Some(Declared {
                name: m.ident.to_string(),
                line: m.ident.span().start().line,
                test_only: is_test_only(&m.attrs),
            }),
            _ => None,
        })
        .collect()
}

/// Each name a `use` tree brings in, with the first segment of its path.
fn use_leaves(tree: &syn::UseTree, first: Option<&str>, out: &mut BTreeMap<String, String>) {
    match tree {
        syn::UseTree::Path(p) => {
            let ident = p.ident.to_string();
            use_leaves(&p.tree, Some(first.unwrap_or(&ident)), out);
        }
        syn::UseTree::Name(n) => {
            if let Some(first) = first {
                out.insert(n.ident.to_string(), first.to_string());
            }
        }
        syn::UseTree::Rename(r) => {
            if let Some(first) = first {
                out.insert(r.rename.to_string(), first.to_string());
            }
        }
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_leaves(t, first, out)),
        syn::UseTree::Glob(_) => {}
    }
}

#[cfg(test)]
mod tests;
