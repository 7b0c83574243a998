//! The walk of one file for [`super::check`]: every path into the crate outside test code
//! (`use` trees, paths in types and expressions, macro tokens), resolved to the top-level
//! module it names and judged against the layer table.

use std::path::Path;

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

use super::{Layers, Place, Root, Violation};

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

/// One file's walk: its module path (top-level module first), and what it found.
pub(super) struct Scan<'a> {
    pub(super) file: &'a Path,
    pub(super) top: &'a str,
    pub(super) module: Vec<String>,
    pub(super) layers: &'a Layers<'a>,
    pub(super) root: &'a Root,
    pub(super) found: &'a mut Vec<Violation>,
}

/// Where a path's leading segments have got to: the crate root's modules named so far, or
/// somewhere outside the crate (another crate, a local name).
#[derive(Clone)]
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

    /// A `use` tree below `anchor` (`None` at its start): each branch of a group on its own,
    /// each stopping once it names a top-level module.
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
                    self.use_tree(item, anchor.clone());
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
pub(super) fn item_ident(item: &syn::Item) -> Option<String> {
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
