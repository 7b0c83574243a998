//! The layering rule checked: in a crate whose top-level modules are layers, `use` (and any
//! other path into the crate) only ever names a layer below, and the shared leaves beside the
//! layers name none. Nothing in the kernel checks its own layering this way; this is what
//! `scripts/checkpatch.pl`'s include checks would be if headers were layers.
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

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

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

/// `#[test]`, `#[cfg(test)]`, or a `cfg(all(…))` that requires `test`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if attr.path().is_ident("test") {
            return true;
        }
        if !attr.path().is_ident("cfg") {
            return false;
        }
        attr.parse_args::<syn::Meta>()
            .is_ok_and(|m| requires_test(&m))
    })
}

fn requires_test(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(list) if list.path.is_ident("all") => list
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )
            .is_ok_and(|all| all.iter().any(requires_test)),
        _ => false,
    }
}

/// One file's walk: its module path (top-level module first), and what it found.
struct Scan<'a> {
    file: &'a Path,
    top: &'a str,
    module: Vec<String>,
    layers: &'a Layers<'a>,
    root: &'a Root,
    found: &'a mut Vec<Violation>,
}

/// Where a path's leading segments have got to: the crate root's modules named so far, or
/// somewhere outside the crate (another crate, a local name).
enum Anchor {
    /// Below the crate root: the modules so far (empty at the root itself).
    Crate(Vec<String>),
    Outside,
}

impl Scan<'_> {
    /// The first segment of a path: `crate` and `super` anchor it in the crate, `self` in this
    /// module; anything else is another crate or a local name.
    fn start(&self, first: &str) -> Anchor {
        match first {
            "crate" => Anchor::Crate(Vec::new()),
            "self" => Anchor::Crate(self.module.clone()),
            "super" => {
                let mut up = self.module.clone();
                up.pop();
                Anchor::Crate(up)
            }
            _ => Anchor::Outside,
        }
    }

    /// One more segment after `anchor`: a further `super` climbs, a name goes down.
    fn step(anchor: Anchor, segment: &str) -> Anchor {
        match anchor {
            Anchor::Crate(mut at) if segment == "super" => {
                at.pop();
                Anchor::Crate(at)
            }
            Anchor::Crate(mut at) => {
                at.push(segment.to_string());
                Anchor::Crate(at)
            }
            Anchor::Outside => Anchor::Outside,
        }
    }

    /// A path that has reached `at` below the crate root: once it names a top-level module
    /// (or a root item), that is what it names.
    fn named(&mut self, at: &[String], span: Span) -> bool {
        let Some(first) = at.first() else {
            return false;
        };
        let (module, place) = match self.root.reexports.get(first) {
            Some(module) => (module.as_str(), self.layers.place(module)),
            None if self.root.items.contains(first) => (first.as_str(), Place::Root),
            None => (first.as_str(), self.layers.place(first)),
        };
        let from = self.layers.place(self.top);
        if module != self.top {
            if let Some(breach) = self.layers.breach(from, place) {
                self.found.push(Violation {
                    file: self.file.to_path_buf(),
                    line: span.start().line,
                    from: self.top.to_string(),
                    named: module.to_string(),
                    breach,
                });
            }
        }
        true
    }

    /// A path's segments (`crate`, `super`, `self` first when it is into the crate): what it
    /// names, once it names a top-level module.
    fn path(&mut self, segments: &[(String, Span)]) {
        let Some(((first, _), rest)) = segments.split_first() else {
            return;
        };
        let mut anchor = self.start(first);
        for (segment, span) in rest {
            anchor = Self::step(anchor, segment);
            if let Anchor::Crate(at) = &anchor {
                if self.named(at, *span) {
                    return;
                }
            }
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree, anchor: Option<Anchor>) {
        let segment = |ident: &syn::Ident| ident.to_string();
        let advance = |scan: &Self, anchor: Option<Anchor>, ident: &syn::Ident| match anchor {
            None => scan.start(&segment(ident)),
            Some(a) => Self::step(a, &segment(ident)),
        };
        match tree {
            syn::UseTree::Path(p) => {
                let next = advance(self, anchor, &p.ident);
                if let Anchor::Crate(at) = &next {
                    if self.named(at, p.ident.span()) {
                        return;
                    }
                }
                self.use_tree(&p.tree, Some(next));
            }
            syn::UseTree::Name(n) => {
                if let Anchor::Crate(at) = advance(self, anchor, &n.ident) {
                    self.named(&at, n.ident.span());
                }
            }
            syn::UseTree::Rename(r) => {
                if let Anchor::Crate(at) = advance(self, anchor, &r.ident) {
                    self.named(&at, r.ident.span());
                }
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    let again = match &anchor {
                        Some(Anchor::Crate(at)) => Some(Anchor::Crate(at.clone())),
                        Some(Anchor::Outside) => Some(Anchor::Outside),
                        None => None,
                    };
                    self.use_tree(item, again);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }

    /// A macro's tokens: `crate :: x`, `$crate :: x` and `super :: … :: x` sequences.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(g) = &trees[i] {
                self.tokens(g.stream());
                i += 1;
                continue;
            }
            let starts =
                matches!(&trees[i], TokenTree::Ident(id) if id == "crate" || id == "super");
            let after_colons = i == 0 || !is_colon(trees.get(i - 1));
            if !(starts && after_colons) {
                i += 1;
                continue;
            }
            // Collect `ident :: ident :: …`.
            let mut idents = Vec::new();
            let mut j = i;
            while let Some(TokenTree::Ident(id)) = trees.get(j) {
                idents.push(id.clone());
                if is_colon(trees.get(j + 1)) && is_colon(trees.get(j + 2)) {
                    j += 3;
                } else {
                    j += 1;
                    break;
                }
            }
            let segments: Vec<_> = idents
                .iter()
                .map(|id| (id.to_string(), id.span()))
                .collect();
            self.path(&segments);
            i = j.max(i + 1);
        }
    }
}

fn is_colon(tree: Option<&TokenTree>) -> bool {
    matches!(tree, Some(TokenTree::Punct(p)) if p.as_char() == ':')
}

/// The name an item defines at its module's top (`None` for impls, uses, foreign blocks).
fn item_ident(item: &syn::Item) -> Option<String> {
    use syn::Item;
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Scan<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // A `mod x;` is walked as its own file; an inline one here, one module deeper.
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if !is_test_only(&f.attrs) {
            visit::visit_trait_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_none() {
            self.use_tree(&u.tree, None);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments: Vec<_> = path
                .segments
                .iter()
                .map(|s| (s.ident.to_string(), s.ident.span()))
                .collect();
            self.path(&segments);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }
}

#[cfg(test)]
mod tests;
