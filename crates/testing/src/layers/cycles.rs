//! Import cycles, at every level: among the children of each module (the crate root
//! included), child A depends on child B when non-test code anywhere under A names a path
//! under B; each strongly connected component of more than one child is a cycle. It mirrors
//! nothing in the kernel (whose directories are not Rust modules); with [`super::check`] it
//! keeps a crate's modules a tree of layers, at the top and inside every folder.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::walk::{Crate, ModPath};
use super::LayerError;

/// Modules among one parent's children that depend on each other in a ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The parent, `crate` or `crate::a::b`.
    pub parent: String,
    /// The children in the cycle, by name, sorted.
    pub members: Vec<String>,
    /// Every dependency between two members, each with the first path that makes it.
    pub edges: Vec<Edge>,
}

/// Child `from` depends on child `to`: the path at `file:line` names something under `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The child whose code names the other.
    pub from: String,
    /// The child named.
    pub to: String,
    /// The file of the first such path, as `src` joined with its path inside the crate.
    pub file: PathBuf,
    /// Its line.
    pub line: usize,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in {}, {} depend on each other:",
            self.parent,
            self.members.join(", ")
        )?;
        for e in &self.edges {
            let (from, to, file, line) = (&e.from, &e.to, e.file.display(), e.line);
            write!(f, "\n  {from} → {to}: {file}:{line}")?;
        }
        Ok(())
    }
}

/// Every import cycle in the crate whose sources are in `src` (its `lib.rs` the root), test
/// code aside: for each module with children, the cycles among them, parents first.
pub fn cycles(src: &Path) -> Result<Vec<Cycle>, LayerError> {
    let krate = Crate::walk(src)?;
    // Per parent: child → child → the first path that makes the edge.
    let mut graphs: BTreeMap<ModPath, Graph> = BTreeMap::new();
    for r in &krate.refs {
        let Some(written) = krate.anchor(&r.module, &r.path) else {
            continue;
        };
        let resolved = krate.resolve(&written);
        for target in [krate.module_of(&written), krate.module_of(&resolved)] {
            if let Some((parent, from, to)) = split(&r.module, &target) {
                let at = (r.file.clone(), r.line);
                let edges = graphs.entry(parent).or_default();
                let first = edges
                    .entry(from)
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| at.clone());
                if at < *first {
                    *first = at;
                }
            }
        }
    }
    Ok(graphs
        .iter()
        .flat_map(|(parent, graph)| cycles_in(parent, graph))
        .collect())
}

/// child → child → (file, line) of the first path between them.
type Graph = BTreeMap<String, BTreeMap<String, (PathBuf, usize)>>;

/// Code in module `from` naming module `to`: their common parent and the two children of it
/// they are under, unless one is under the other.
fn split(from: &[String], to: &[String]) -> Option<(ModPath, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let a = from.get(common)?;
    let b = to.get(common)?;
    Some((from.get(..common)?.to_vec(), a.clone(), b.clone()))
}

fn cycles_in(parent: &[String], graph: &Graph) -> Vec<Cycle> {
    let name = std::iter::once("crate".to_string())
        .chain(parent.iter().cloned())
        .collect::<Vec<_>>()
        .join("::");
    components(graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut members| {
            members.sort();
            let edges = members
                .iter()
                .filter_map(|from| graph.get(from).map(|to| (from, to)))
                .flat_map(|(from, to)| to.iter().map(move |(to, at)| (from, to, at)))
                .filter(|(_, to, _)| members.contains(to))
                .map(|(from, to, (file, line))| Edge {
                    from: from.clone(),
                    to: to.clone(),
                    file: file.clone(),
                    line: *line,
                })
                .collect();
            Cycle {
                parent: name.clone(),
                members,
                edges,
            }
        })
        .collect()
}

/// Tarjan's strongly connected components of `graph`.
fn components(graph: &Graph) -> Vec<Vec<String>> {
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !t.index.contains_key(node.as_str()) {
            t.visit(node);
        }
    }
    t.found
}

struct Tarjan<'a> {
    graph: &'a Graph,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    /// The nodes visited and not yet in a component (`index` tells whether one is on it).
    stack: Vec<&'a str>,
    found: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, node: &'a str) {
        let n = self.index.len();
        self.index.insert(node, n);
        self.low.insert(node, n);
        self.stack.push(node);
        for next in self.graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            let next = next.as_str();
            if !self.index.contains_key(next) {
                self.visit(next);
                self.lower(node, self.low.get(next).copied());
            } else if self.stack.contains(&next) {
                self.lower(node, self.index.get(next).copied());
            }
        }
        if self.low.get(node) == self.index.get(node) {
            let at = self.stack.iter().rposition(|s| *s == node).unwrap_or(0);
            let component = self.stack.split_off(at);
            self.found
                .push(component.into_iter().map(str::to_string).collect());
        }
    }

    fn lower(&mut self, node: &'a str, to: Option<usize>) {
        if let (Some(low), Some(to)) = (self.low.get_mut(node), to) {
            *low = (*low).min(to);
        }
    }
}

#[cfg(test)]
mod tests;
