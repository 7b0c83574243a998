//! The crate walked once for both checks: every non-test module (from `src/lib.rs` through
//! its `mod` declarations and inline modules), each one's imports, and every path written in
//! non-test code; then a path resolved to the module it names: `crate::`, `self::`,
//! `super::`, a name a module imports (a re-export, a glob's), or a child module's name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use super::scan::{is_test_only, Scan};
use super::LayerError;

/// A module's path below the crate root (empty for the root).
pub(super) type ModPath = Vec<String>;

/// A path written in non-test code.
pub(super) struct Reference {
    pub(super) file: PathBuf,
    /// The line of its first segment after `crate`, `self` or `super`.
    pub(super) line: usize,
    /// The module it is written in.
    pub(super) module: ModPath,
    /// Its segments as written.
    pub(super) path: Vec<String>,
}

/// What a `use` at a module's top brings in: names (each with the path as written) and globs.
#[derive(Default)]
pub(super) struct Scope {
    pub(super) imports: BTreeMap<String, Vec<String>>,
    pub(super) globs: Vec<Vec<String>>,
}

/// A `mod x;` (no body) at the top of a file.
pub(super) struct Declared {
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) test_only: bool,
}

/// The crate as walked.
#[derive(Default)]
pub(super) struct Crate {
    pub(super) lib: PathBuf,
    /// lib.rs's `mod x;` declarations, test-only ones included.
    pub(super) declared: Vec<Declared>,
    /// Every non-test module, the root included.
    pub(super) modules: BTreeSet<ModPath>,
    pub(super) scopes: BTreeMap<ModPath, Scope>,
    pub(super) refs: Vec<Reference>,
}

/// How many imports one resolution follows before it gives up (`use a as b; use b as a;`).
const DEPTH: usize = 16;

impl Crate {
    /// The crate whose sources are in `src`, walked from its `lib.rs`.
    pub(super) fn walk(src: &Path) -> Result<Crate, LayerError> {
        let lib = src.join("lib.rs");
        let mut krate = Crate {
            lib: lib.clone(),
            ..Crate::default()
        };
        krate.walk_file(&lib, Vec::new())?;
        let ast = parse(&lib)?;
        krate.declared = declared_mods(&ast.items);
        Ok(krate)
    }

    pub(super) fn scope(&mut self, module: &[String]) -> &mut Scope {
        self.scopes.entry(module.to_vec()).or_default()
    }

    /// The file of module `path` and the modules it declares, walked one after the other.
    fn walk_file(&mut self, file: &Path, path: ModPath) -> Result<(), LayerError> {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            return Ok(());
        }
        let ast = parse(file)?;
        self.modules.insert(path.clone());
        let mut scan = Scan {
            file,
            module: path.clone(),
            krate: self,
            blocks: 0,
        };
        scan.visit_file(&ast);
        // `mod x;` in lib.rs or foo/mod.rs is x.rs beside it, in foo.rs it is foo/x.rs.
        let dir = if path.is_empty() || file.file_name().is_some_and(|n| n == "mod.rs") {
            file.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            file.with_extension("")
        };
        for declared in declared_mods(&ast.items) {
            if declared.test_only {
                continue;
            }
            let child = module_file(&dir, &declared.name, file)?;
            let mut child_path = path.clone();
            child_path.push(declared.name);
            self.walk_file(&child, child_path)?;
        }
        Ok(())
    }

    /// `path`, written in `module`, with its leading segments made absolute: `crate`, `self`,
    /// `super` (repeated), or a first name that `module` imports or declares. `None` when it
    /// leads outside the crate (another crate, a local name).
    pub(super) fn anchor(&self, module: &[String], path: &[String]) -> Option<ModPath> {
        self.anchor_at(module, path, 0)
    }

    fn anchor_at(&self, module: &[String], path: &[String], depth: usize) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        let mut at = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => module.get(..module.len().checked_sub(1)?)?.to_vec(),
            name => self.lookup(module, name, depth)?,
        };
        for segment in rest {
            match segment.as_str() {
                "super" => {
                    at.pop()?;
                }
                "self" => {}
                name => at.push(name.to_string()),
            }
        }
        Some(at)
    }

    /// The absolute path `name` stands for in `module`: a child module, an import, or a name
    /// one of its globs brings in.
    fn lookup(&self, module: &[String], name: &str, depth: usize) -> Option<ModPath> {
        if depth > DEPTH {
            return None;
        }
        let mut child = module.to_vec();
        child.push(name.to_string());
        if self.modules.contains(&child) {
            return Some(child);
        }
        let scope = self.scopes.get(module)?;
        if let Some(target) = scope.imports.get(name) {
            return self.anchor_at(module, target, depth + 1);
        }
        scope.globs.iter().find_map(|glob| {
            let from = self.anchor_at(module, glob, depth + 1)?;
            self.modules.contains(&from).then_some(())?;
            self.lookup(&from, name, depth + 1)
        })
    }

    /// An absolute path with each name a module imports replaced by what it stands for (a
    /// re-export followed to its source), as far as modules go.
    pub(super) fn resolve(&self, path: &[String]) -> ModPath {
        self.resolve_at(path, 0)
    }

    fn resolve_at(&self, path: &[String], depth: usize) -> ModPath {
        let mut at: ModPath = Vec::new();
        let mut rest = path.iter();
        while let Some(name) = rest.next() {
            match self.lookup(&at, name, depth) {
                Some(next) if self.modules.contains(&next) => at = next,
                // An item another module defines: resolved there, the rest after it.
                Some(next) if depth < DEPTH => {
                    let whole: Vec<String> = next.into_iter().chain(rest.cloned()).collect();
                    return self.resolve_at(&whole, depth + 1);
                }
                _ => {
                    at.push(name.clone());
                    at.extend(rest.cloned());
                    return at;
                }
            }
        }
        at
    }

    /// The module a path names: the longest prefix of it that is a module.
    pub(super) fn module_of(&self, path: &[String]) -> ModPath {
        (0..=path.len())
            .rev()
            .filter_map(|n| path.get(..n))
            .find(|prefix| self.modules.contains(*prefix))
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }
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
