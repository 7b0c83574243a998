//! The exhaustive pass: every sequence of up to `max` namespace operations (create, mkdir,
//! mknod, symlink, unlink, rmdir, the three renames, link, and a durable sync) over two names
//! in two directories, each in a directory of its own starting from the same small tree:
//!
//! ```text
//! d0/a  file (3 bytes)      d1/a  symlink -> t
//! d0/b  directory           d1/b  (absent)
//! ```
//!
//! once warm (the tree just made: the kernel holds every inode, the store has nothing of it
//! yet) and once cold (made in a batch, committed durably, the kernel's caches dropped, so
//! every inode is unheld and read back from the store). Bugs of the delayed-namespace kind
//! hide in such short sequences, which random runs rarely draw.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::exec::Kernel;
use crate::gen::{alphabet, sequences};
use crate::op::{script, Creat, Op};
use crate::pair::{compare_trees, fresh, Pair};
use crate::target::{Mount, Oracle};
use crate::{Error, Failure, Report};

/// The two names in the two directories.
pub const PATHS: [&str; 4] = ["d0/a", "d0/b", "d1/a", "d1/b"];

/// Sequences set up and run per batch in the cold variant.
const BATCH: usize = 256;

/// The operations that make the start tree.
pub fn start() -> Vec<Op> {
    vec![
        Op::Mkdir {
            p: "d0".into(),
            mode: 0o755,
        },
        Op::Mkdir {
            p: "d1".into(),
            mode: 0o755,
        },
        Op::Creat {
            p: "d0/a".into(),
            how: Creat::Excl,
            mode: 0o644,
        },
        Op::Write {
            p: "d0/a".into(),
            off: 0,
            len: 3,
            seed: 1,
        },
        Op::Mkdir {
            p: "d0/b".into(),
            mode: 0o755,
        },
        Op::Symlink {
            target: "t".into(),
            p: "d1/a".into(),
        },
    ]
}

/// A part of the pass: every sequence of up to `max` operations of the alphabet over
/// `paths`, warm, cold, or both.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The paths the alphabet's operations name (within the start tree).
    pub paths: Vec<&'static str>,
    /// The longest sequence.
    pub max: usize,
    /// Run each sequence on the start tree just made.
    pub warm: bool,
    /// Run each sequence on the start tree committed, with the kernel's caches dropped.
    pub cold: bool,
}

impl Plan {
    /// What CI runs: up to 2 operations over the four paths, warm and cold; up to 3 over
    /// the two paths in `d0`, cold (a name committed, unlinked, made again and unlinked
    /// again is three operations).
    pub fn ci() -> Vec<Plan> {
        vec![
            Plan {
                paths: PATHS.to_vec(),
                max: 2,
                warm: true,
                cold: true,
            },
            Plan {
                paths: PATHS[..2].to_vec(),
                max: 3,
                warm: false,
                cold: true,
            },
        ]
    }

    /// The long mode: up to 3 operations over the four paths, warm and cold.
    pub fn long() -> Vec<Plan> {
        vec![Plan {
            paths: PATHS.to_vec(),
            max: 3,
            warm: true,
            cold: true,
        }]
    }

    fn variants(&self) -> Vec<bool> {
        let mut v = Vec::new();
        if self.warm {
            v.push(false);
        }
        if self.cold {
            v.push(true);
        }
        v
    }

    /// How many sequences the plan runs.
    pub fn count(&self) -> u64 {
        let alpha = alphabet(&self.paths).len();
        let seqs: u64 = (1..=self.max as u32).map(|l| (alpha as u64).pow(l)).sum();
        seqs * self.variants().len() as u64
    }
}

/// Run `plans` on `mount` against `oracle` (in directory `x` of each), `jobs` batches at a
/// time (the calls wait on the daemon, not on a core); then unmount, fsck, mount and compare
/// everything again. `progress` is called with the sequences done and the total.
pub fn run(
    mount: &mut Mount,
    oracle: &Oracle,
    plans: &[Plan],
    jobs: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Report, Error> {
    let total: u64 = plans.iter().map(Plan::count).sum();
    fresh(&mount.mnt, &oracle.root, "x")?;
    let alphabets: Vec<Vec<Op>> = plans.iter().map(|p| alphabet(&p.paths)).collect();
    let mut work = Vec::new();
    for (n, plan) in plans.iter().enumerate() {
        let all: Vec<Vec<usize>> = sequences(alphabets[n].len(), plan.max).collect();
        for cold in plan.variants() {
            let variant = if cold { "cold" } else { "warm" };
            for (b, batch) in all.chunks(BATCH).enumerate() {
                work.push((format!("x/p{n}{variant}{b}"), n, batch.to_vec(), cold));
            }
        }
    }
    let next = AtomicUsize::new(0);
    let done = AtomicU64::new(0);
    let shared = Mutex::new(Ok(Report::default()));
    let m: &Mount = mount;
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some((dir, n, batch, cold)) = work.get(k) else {
                    return;
                };
                let r = run_batch(m, oracle, dir, &alphabets[*n], batch, *cold);
                let d = done.fetch_add(batch.len() as u64, Ordering::Relaxed);
                progress(d + batch.len() as u64, total);
                let mut all = shared.lock().unwrap_or_else(|e| e.into_inner());
                let failed = match (&mut *all, r) {
                    (Ok(report), Ok(r)) => {
                        report.absorb(r);
                        report.failures.len() >= 5
                    }
                    (Ok(_), Err(e)) => {
                        *all = Err(e);
                        true
                    }
                    (Err(_), _) => true,
                };
                if failed {
                    // The others stop at their next batch.
                    next.store(work.len(), Ordering::Relaxed);
                }
            });
        }
    });
    let mut report = shared.into_inner().unwrap_or_else(|e| e.into_inner())?;
    if !report.failures.is_empty() {
        return Ok(report);
    }
    mount.sync()?;
    let problems = mount.cycle()?;
    if !problems.is_empty() {
        report.failures.push(Failure {
            what: format!(
                "fsck after the exhaustive pass found:\n  {}",
                problems.join("\n  ")
            ),
            script: String::new(),
        });
    }
    report.trees += 1;
    if let Err(why) = compare_trees(&mount.mnt.join("x"), &oracle.root.join("x"), oracle.norm) {
        report.failures.push(Failure {
            what: format!("after the exhaustive pass's unmount and mount, {why}"),
            script: String::new(),
        });
    }
    Ok(report)
}

/// One batch: each sequence's start tree (all of them first, committed and uncached, when
/// `cold`), then each sequence with its answers compared; then the batch's trees, and again
/// after a durable commit (which writes what the delayed layer held, so a store it damaged
/// shows).
fn run_batch(
    mount: &Mount,
    oracle: &Oracle,
    dir: &str,
    ops: &[Op],
    batch: &[Vec<usize>],
    cold: bool,
) -> Result<Report, Error> {
    let (mglobal, kernel) = (mount.global(), Kernel);
    let norm = oracle.norm;
    let mut report = Report::default();
    let pair = |k: usize| {
        Pair::new(
            (&mount.mnt, &mglobal),
            (&oracle.root, &kernel),
            &format!("{dir}/s{k}"),
            norm,
        )
    };
    fresh(&mount.mnt, &oracle.root, dir)?;
    let setup = |k: usize| -> Result<Option<Failure>, Error> {
        fresh(&mount.mnt, &oracle.root, &format!("{dir}/s{k}"))?;
        let mut p = pair(k);
        for op in start() {
            if let Err(why) = p.step(&op) {
                return Ok(Some(failure(&[], &why, cold)));
            }
        }
        Ok(None)
    };
    if cold {
        for k in 0..batch.len() {
            report.failures.extend(setup(k)?);
        }
        mount.sync()?;
        let _ = std::fs::write("/proc/sys/vm/drop_caches", "2");
    }
    for (k, seq) in batch.iter().enumerate() {
        if !cold {
            if let Some(f) = setup(k)? {
                report.failures.push(f);
                continue;
            }
        }
        let mut p = pair(k);
        for &i in seq {
            report.ops += 1;
            if let Err(why) = p.step(&ops[i]) {
                report.failures.push(failure(&p.notes(), &why, cold));
                break;
            }
        }
    }
    for when in ["", " and a durable commit"] {
        if !when.is_empty() {
            mount.sync()?;
        }
        report.trees += 1;
        let (m, o) = (mount.mnt.join(dir), oracle.root.join(dir));
        let tree = |p: &std::path::Path| crate::tree::snapshot(p, norm);
        let diff = tree(&m).diff(&tree(&o));
        // The first sequence whose tree differs, with its steps.
        if let Some(line) = diff.first() {
            let k: usize = line
                .strip_prefix('s')
                .and_then(|r| r.split('/').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let steps: Vec<(Op, String)> = batch
                .get(k)
                .map(|seq| {
                    seq.iter()
                        .map(|&i| (ops[i].clone(), String::new()))
                        .collect()
                })
                .unwrap_or_default();
            let why = format!(
                "after the batch{when}, the trees differ:\n  {}",
                diff.join("\n  ")
            );
            report.failures.push(failure(&steps, &why, cold));
            break;
        }
    }
    Ok(report)
}

fn failure(steps: &[(Op, String)], why: &str, cold: bool) -> Failure {
    let variant = match cold {
        true => "cold (the start tree committed, the kernel's caches dropped)",
        false => "warm (the start tree just made)",
    };
    let head = format!("exhaustive, {variant}: {why}");
    let mut notes: Vec<(Op, String)> = start()
        .into_iter()
        .map(|op| (op, "start tree".to_string()))
        .collect();
    if cold {
        notes.push((Op::Sync, "start tree committed".into()));
        notes.push((Op::DropCaches, String::new()));
    }
    notes.extend(steps.iter().cloned());
    Failure {
        what: head.clone(),
        script: script(&head, &notes),
    }
}
