//! The walk of one file for [`super::check`] and [`super::cycles`]: every path outside test
//! code (`use` trees, paths in types and expressions, macro tokens) recorded as written, with
//! the module it is written in, and each module's imports (what a `use` at its top brings in,
//! globs included) so that [`super::walk`] can resolve the paths once every module is known.

use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use super::walk::{Crate, Reference};

/// `#[test]`, `#[cfg(test)]`, or a `cfg(all(…))` that requires `test`.
pub(super) fn is_test_only(attrs: &[syn::Attribute]) -> bool {
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

/// One file's walk: the module it is (inline modules pushed as they are entered), and the
/// crate's record it adds to.
pub(super) struct Scan<'a> {
    pub(super) file: &'a Path,
    pub(super) module: Vec<String>,
    pub(super) krate: &'a mut Crate,
    /// Inside a block (a function body): a `use` there imports nothing for the module.
    pub(super) blocks: usize,
}

/// A path's segments as written, each with its line.
type Segments = Vec<(String, usize)>;

fn is_anchor(segment: &str) -> bool {
    matches!(segment, "crate" | "self" | "super")
}

impl Scan<'_> {
    /// A path of two segments or more (one segment names something in scope, which only a
    /// `use` can have brought in, and that `use` is recorded).
    fn path(&mut self, segments: Segments) {
        if segments.len() < 2 {
            return;
        }
        // The line of the first segment after `crate`, `self` and `super`: where the module
        // named is written.
        let line = segments
            .iter()
            .find(|(s, _)| !is_anchor(s))
            .or(segments.last())
            .map_or(0, |(_, line)| *line);
        self.krate.refs.push(Reference {
            file: self.file.to_path_buf(),
            line,
            module: self.module.clone(),
            path: segments.into_iter().map(|(s, _)| s).collect(),
        });
    }

    /// A `use` tree below `prefix`: each leaf a path (`x::{self}` is `x`), and, at a module's
    /// top, an import of the leaf's name.
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &Segments) {
        let with = |ident: &syn::Ident| {
            let mut path = prefix.clone();
            if ident != "self" || path.is_empty() {
                path.push((ident.to_string(), ident.span().start().line));
            }
            path
        };
        let (path, name) = match tree {
            syn::UseTree::Path(p) => return self.use_tree(&p.tree, &with(&p.ident)),
            syn::UseTree::Group(g) => {
                return g.items.iter().for_each(|t| self.use_tree(t, prefix));
            }
            syn::UseTree::Glob(_) => {
                if self.blocks == 0 {
                    let glob = prefix.iter().map(|(s, _)| s.clone()).collect();
                    self.krate.scope(&self.module).globs.push(glob);
                }
                return self.path(prefix.clone());
            }
            syn::UseTree::Name(n) => (with(&n.ident), n.ident.to_string()),
            syn::UseTree::Rename(r) => (with(&r.ident), r.rename.to_string()),
        };
        if self.blocks == 0 {
            // `use x::{self}` brings in `x`.
            let name = match (name.as_str(), path.last()) {
                ("self", Some((last, _))) => last.clone(),
                _ => name,
            };
            let target = path.iter().map(|(s, _)| s.clone()).collect();
            self.krate.scope(&self.module).imports.insert(name, target);
        }
        if path.len() == 1 {
            // `use x;`: an import only (a crate, or a name in scope).
            return;
        }
        self.path(path);
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
            let mut segments = Vec::new();
            let mut j = i;
            while let Some(TokenTree::Ident(id)) = trees.get(j) {
                segments.push((id.to_string(), id.span().start().line));
                if is_colon(trees.get(j + 1)) && is_colon(trees.get(j + 2)) {
                    j += 3;
                } else {
                    j += 1;
                    break;
                }
            }
            self.path(segments);
            i = j.max(i + 1);
        }
    }
}

fn is_colon(tree: Option<&TokenTree>) -> bool {
    matches!(tree, Some(TokenTree::Punct(p)) if p.as_char() == ':')
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
        // (One inside a function body is walked as part of its module.)
        if m.content.is_none() {
            return;
        }
        if self.blocks > 0 {
            return visit::visit_item_mod(self, m);
        }
        self.module.push(m.ident.to_string());
        self.krate.modules.insert(self.module.clone());
        visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        self.blocks += 1;
        visit::visit_block(self, block);
        self.blocks -= 1;
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
            self.use_tree(&u.tree, &Vec::new());
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments = path
                .segments
                .iter()
                .map(|s| (s.ident.to_string(), s.ident.span().start().line))
                .collect();
            self.path(segments);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }
}
