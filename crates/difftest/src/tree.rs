//! A directory tree as the comparison sees it: every name under a root with its attributes,
//! symlink target, user xattrs, content hash and hard-link group, and the differences between
//! two trees.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rustix::fs as rfs;

use crate::exec::{self, list, Attrs, Norm};

/// One name in a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The name is listed and lstat answers.
    Is {
        /// Its attributes.
        attrs: Attrs,
        /// A symlink's target.
        target: Option<Vec<u8>>,
        /// A regular file's content: hash and length (or the errno reading it gave).
        content: Option<Result<(u64, usize), i32>>,
        /// `user.*` xattrs, sorted by name.
        xattrs: Vec<(Vec<u8>, Vec<u8>)>,
        /// The first path (in sorted order) naming the same inode, when it is not this one.
        same_as: Option<String>,
    },
    /// The name is listed but lstat (or listing the directory) failed: a dangling entry.
    Broken(i32),
}

/// Every name under a root, by path relative to it, and each one's inode number (not
/// compared: the two sides number differently).
#[derive(Clone, Debug, Default)]
pub struct Tree(pub BTreeMap<String, Entry>, pub BTreeMap<String, u64>);

/// Walk `root`.
pub fn snapshot(root: &Path, norm: Norm) -> Tree {
    let mut raw = BTreeMap::new();
    walk(root, "", norm, &mut raw);
    // Hard links: each member after the first names the first.
    let mut first: HashMap<(u64, u64), String> = HashMap::new();
    let mut tree = BTreeMap::new();
    let mut inos = BTreeMap::new();
    for (path, (entry, id)) in raw {
        if let Some((_, ino)) = id {
            inos.insert(path.clone(), ino);
        }
        let entry = match (entry, id) {
            (
                Entry::Is {
                    attrs,
                    target,
                    content,
                    xattrs,
                    ..
                },
                Some(id),
            ) => {
                let same_as = match first.get(&id) {
                    Some(p) => Some(p.clone()),
                    None => {
                        first.insert(id, path.clone());
                        None
                    }
                };
                Entry::Is {
                    attrs,
                    target,
                    content,
                    xattrs,
                    same_as,
                }
            }
            (entry, _) => entry,
        };
        tree.insert(path, entry);
    }
    Tree(tree, inos)
}

type Raw = BTreeMap<String, (Entry, Option<(u64, u64)>)>;

fn walk(root: &Path, rel: &str, norm: Norm, out: &mut Raw) {
    let dir = root.join(rel);
    let names = match list(&dir) {
        Ok(n) => n,
        Err(e) => {
            if !rel.is_empty() {
                out.insert(format!("{rel}/"), (Entry::Broken(e), None));
            }
            return;
        }
    };
    for name in names {
        let name = String::from_utf8_lossy(&name).into_owned();
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let full = root.join(&path);
        let st = match rfs::lstat(&full) {
            Ok(st) => st,
            Err(e) => {
                out.insert(path, (Entry::Broken(e.raw_os_error()), None));
                continue;
            }
        };
        let attrs = Attrs::of(&st, norm);
        let kind = attrs.kind;
        let target = (kind == libc::S_IFLNK)
            .then(|| rfs::readlink(&full, Vec::new()).map(|t| t.into_bytes()))
            .map(|r| r.unwrap_or_else(|e| format!("<{e}>").into_bytes()));
        let content = (kind == libc::S_IFREG)
            .then(|| exec::read_file(&full).map(|b| (exec::hash(&b), b.len())));
        let xattrs = user_xattrs(&full);
        let id = (st.st_dev, st.st_ino);
        let entry = Entry::Is {
            attrs,
            target,
            content,
            xattrs,
            same_as: None,
        };
        out.insert(path.clone(), (entry, Some(id)));
        if kind == libc::S_IFDIR {
            walk(root, &path, norm, out);
        }
    }
}

/// The `user.*` xattrs of `p` (not following a symlink), sorted.
fn user_xattrs(p: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut buf = vec![0u8; 4096];
    let Ok(n) = rfs::llistxattr(p, &mut buf[..]) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in buf[..n]
        .split(|&b| b == 0)
        .filter(|n| n.starts_with(b"user."))
    {
        let Ok(name_str) = std::str::from_utf8(name) else {
            continue;
        };
        let mut v = vec![0u8; 65536];
        let value = match rfs::lgetxattr(p, name_str, &mut v[..]) {
            Ok(len) => v[..len].to_vec(),
            Err(e) => format!("<{e}>").into_bytes(),
        };
        out.push((name.to_vec(), value));
    }
    out.sort();
    out
}

impl Tree {
    /// What differs from `other` (empty when they agree), one line per path: `self` is the
    /// mount's, `other` the oracle's.
    pub fn diff(&self, other: &Tree) -> Vec<String> {
        let mut out = Vec::new();
        for (path, a) in &self.0 {
            match other.0.get(path) {
                None => out.push(format!("{path}: only on the mount: {}", show(a))),
                Some(b) if a != b => {
                    out.push(format!("{path}: mount {} / kernel {}", show(a), show(b)))
                }
                Some(_) => {}
            }
        }
        for (path, b) in &other.0 {
            if !self.0.contains_key(path) {
                out.push(format!(
                    "{path}: missing on the mount (kernel: {})",
                    show(b)
                ));
            }
        }
        out
    }

    /// The tree with file contents and sizes left out (files whose writes may not have
    /// reached the daemon before a crash), for those paths `keep` says no to.
    pub fn without_contents(&self, keep: impl Fn(&str) -> bool) -> Tree {
        let mut t = self.clone();
        for (path, entry) in t.0.iter_mut() {
            if let Entry::Is { attrs, content, .. } = entry {
                if attrs.kind == libc::S_IFREG && !keep(path) {
                    *content = None;
                    attrs.size = None;
                    attrs.mtime = exec::Time::Now;
                }
            }
        }
        t
    }
}

fn show(e: &Entry) -> String {
    match e {
        Entry::Broken(errno) => format!("listed, but {}", exec::errno_name(*errno)),
        Entry::Is {
            attrs,
            target,
            content,
            xattrs,
            same_as,
        } => {
            let mut s = format!(
                "{} {:o} {}:{} nlink={} size={} mtime={:?}",
                kind_name(attrs.kind),
                attrs.perm,
                attrs.uid,
                attrs.gid,
                attrs.nlink.map_or("-".into(), |n| n.to_string()),
                attrs.size.map_or("-".into(), |n| n.to_string()),
                attrs.mtime
            );
            if let Some(t) = target {
                s.push_str(&format!(" -> {}", String::from_utf8_lossy(t)));
            }
            match content {
                Some(Ok((h, n))) => s.push_str(&format!(" content={n}B#{:04x}", h & 0xffff)),
                Some(Err(e)) => s.push_str(&format!(" content={}", exec::errno_name(*e))),
                None => {}
            }
            for (n, v) in xattrs {
                s.push_str(&format!(" {}={}B", String::from_utf8_lossy(n), v.len()));
            }
            if let Some(p) = same_as {
                s.push_str(&format!(" (same inode as {p})"));
            }
            s
        }
    }
}

/// A file type's name.
pub fn kind_name(kind: u32) -> &'static str {
    match kind {
        libc::S_IFREG => "file",
        libc::S_IFDIR => "dir",
        libc::S_IFLNK => "symlink",
        libc::S_IFIFO => "fifo",
        libc::S_IFCHR => "chardev",
        libc::S_IFBLK => "blockdev",
        libc::S_IFSOCK => "socket",
        _ => "?",
    }
}
