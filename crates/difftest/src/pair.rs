//! One sequence on both sides in lockstep: each operation runs on the mount, then on the
//! oracle, and the answers are compared; the two trees are compared when asked.

use std::path::Path;

use crate::exec::{show, Global, Norm, Outcome, Side};
use crate::op::Op;
use crate::tree::{snapshot, Tree};
use crate::Error;

/// A test directory on the mount and its twin on the oracle.
pub struct Pair<'g> {
    /// The mount's side.
    pub mount: Side<'g>,
    /// The oracle's side.
    pub oracle: Side<'g>,
    /// Each step run so far, with what the two sides answered.
    pub steps: Vec<(Op, Outcome, Outcome)>,
}

/// The directory a sequence runs in, inside its test directory: a symlink's `../name`
/// (which the pool draws) then names something of the test directory's own, never a
/// neighbour's.
pub const WORK: &str = "w";

/// Make `rel` (a fresh test directory, with its [`WORK`] directory) under both roots.
pub fn fresh(mount_root: &Path, oracle_root: &Path, rel: &str) -> Result<(), Error> {
    for root in [mount_root, oracle_root] {
        let d = root.join(rel);
        let _ = std::fs::remove_dir_all(&d);
        let w = d.join(WORK);
        std::fs::create_dir_all(&w).map_err(Error::io(format!("making {}", w.display())))?;
    }
    Ok(())
}

impl<'g> Pair<'g> {
    /// The test directory `rel` under both roots (made by [`fresh`]): operations run in its
    /// [`WORK`] directory, trees are compared from `rel` down.
    pub fn new(
        mount: (&Path, &'g dyn Global),
        oracle: (&Path, &'g dyn Global),
        rel: &str,
        norm: Norm,
    ) -> Pair<'g> {
        let work = Path::new(rel).join(WORK);
        Pair {
            mount: Side::new(mount.0.join(&work), norm, mount.1),
            oracle: Side::new(oracle.0.join(&work), norm, oracle.1),
            steps: Vec::new(),
        }
    }

    /// Run `op` on both sides; `Err` with a description when they answered differently.
    pub fn step(&mut self, op: &Op) -> Result<(), String> {
        let m = self.mount.run(op);
        let o = self.oracle.run(op);
        let same = m == o;
        self.steps.push((op.clone(), m.clone(), o.clone()));
        match same {
            true => Ok(()),
            false => Err(format!(
                "step {}: {}: the mount answered {}, the kernel {}",
                self.steps.len(),
                op.shell(),
                show(&m),
                show(&o)
            )),
        }
    }

    /// Compare the two test directories' trees; `Err` with the differences.
    pub fn compare(&self, norm: Norm) -> Result<(), String> {
        let up = |p: &Path| p.parent().map(Path::to_path_buf).unwrap_or_default();
        compare_trees(&up(&self.mount.root), &up(&self.oracle.root), norm)
    }

    /// Close both sides' descriptors.
    pub fn close(&mut self) {
        self.mount.close_all();
        self.oracle.close_all();
    }

    /// The steps so far as (op, note) for a script.
    pub fn notes(&self) -> Vec<(Op, String)> {
        self.steps
            .iter()
            .map(|(op, m, o)| {
                let note = match m == o {
                    true => show(m),
                    false => format!("kernel: {}, wring: {}", show(o), show(m)),
                };
                (op.clone(), note)
            })
            .collect()
    }
}

/// Compare the trees under two directories.
pub fn compare_trees(mount: &Path, oracle: &Path, norm: Norm) -> Result<(), String> {
    let (m, o) = (snapshot(mount, norm), snapshot(oracle, norm));
    diff_or_ok(&m, &o)
}

/// `Err` listing the differences of two trees (at most 20 lines).
pub fn diff_or_ok(m: &Tree, o: &Tree) -> Result<(), String> {
    let d = m.diff(o);
    if d.is_empty() {
        return Ok(());
    }
    let more = d.len().saturating_sub(20);
    let mut s = d.into_iter().take(20).collect::<Vec<_>>().join("\n  ");
    if more > 0 {
        s.push_str(&format!("\n  … and {more} more"));
    }
    Err(format!("the trees differ:\n  {s}"))
}
