//! The regular files under a set of paths, staying on one btrfs filesystem.
//!
//! Mirrors compsize's do_recursive_search() with `--one-file-system`, except that "one
//! filesystem" means one btrfs UUID (`BTRFS_IOC_FS_INFO`), so subvolumes and snapshots of the
//! same filesystem are entered while other mounts are not. Symlinks are never followed below the
//! given paths; each inode is listed once (hard links).

use std::collections::HashSet;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::BtrfsError;
use crate::fsinfo::is_on_btrfs;
use crate::search::btrfs_info;

/// Why the walk passed over something.
#[derive(Debug)]
pub enum Passed {
    /// A mount of another filesystem (or another btrfs) below a given path.
    OtherFilesystem,
    /// Symlinks, devices, sockets, fifos.
    NotRegular,
    /// A second name of an inode already listed.
    HardLink,
    /// It could not be read.
    Unreadable(std::io::Error),
}

impl std::fmt::Display for Passed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Passed::OtherFilesystem => f.write_str("on another filesystem"),
            Passed::NotRegular => f.write_str("not a regular file"),
            Passed::HardLink => f.write_str("another name of a file already seen"),
            Passed::Unreadable(e) => write!(f, "unreadable: {e}"),
        }
    }
}

/// One thing the walk met.
#[derive(Debug)]
pub enum Found {
    /// A regular file on the filesystem, with its size.
    File(PathBuf, u64),
    /// Something passed over, and why.
    Passed(PathBuf, Passed),
}

/// Check that every path exists and is on btrfs; returns the filesystem UUID of each.
pub fn check_roots(paths: &[PathBuf]) -> Result<Vec<[u8; 16]>, BtrfsError> {
    paths
        .iter()
        .map(|p| {
            let file = File::open(p).map_err(|source| BtrfsError::Path {
                path: p.clone(),
                source,
            })?;
            if !is_on_btrfs(&file)? {
                return Err(BtrfsError::PathNotBtrfs { path: p.clone() });
            }
            Ok(btrfs_info(&file)?.fsid)
        })
        .collect()
}

/// Everything under `paths` (each must be on btrfs: see [`check_roots`]), in sorted order per
/// directory, depth first.
pub fn walk(paths: &[PathBuf]) -> Result<Vec<Found>, BtrfsError> {
    let fsids = check_roots(paths)?;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (root, fsid) in paths.iter().zip(fsids) {
        walk_one(root, fsid, &mut seen, &mut out);
    }
    Ok(out)
}

fn walk_one(root: &Path, fsid: [u8; 16], seen: &mut HashSet<(u64, u64)>, out: &mut Vec<Found>) {
    // The root itself may be a symlink the user typed: resolve it there only.
    let root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut stack = vec![(root, true)];
    let mut dev_ok: HashSet<u64> = HashSet::new();
    while let Some((path, is_root)) = stack.pop() {
        let meta = if is_root {
            fs::metadata(&path)
        } else {
            fs::symlink_metadata(&path)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                out.push(Found::Passed(path, Passed::Unreadable(e)));
                continue;
            }
        };
        let ft = meta.file_type();
        if ft.is_file() {
            if seen.insert((meta.dev(), meta.ino())) {
                out.push(Found::File(path, meta.len()));
            } else {
                out.push(Found::Passed(path, Passed::HardLink));
            }
            continue;
        }
        if !ft.is_dir() {
            out.push(Found::Passed(path, Passed::NotRegular));
            continue;
        }
        if !dev_ok.contains(&meta.dev()) {
            // A new st_dev: another subvolume of this btrfs, or another filesystem.
            let same = File::open(&path)
                .ok()
                .filter(|f| is_on_btrfs(f).unwrap_or(false))
                .and_then(|f| btrfs_info(&f).ok())
                .is_some_and(|info| info.fsid == fsid);
            if !same {
                out.push(Found::Passed(path, Passed::OtherFilesystem));
                continue;
            }
            dev_ok.insert(meta.dev());
        }
        let entries = match fs::read_dir(&path) {
            Ok(rd) => rd,
            Err(e) => {
                out.push(Found::Passed(path, Passed::Unreadable(e)));
                continue;
            }
        };
        let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        children.sort();
        for child in children.into_iter().rev() {
            stack.push((child, false));
        }
    }
}
