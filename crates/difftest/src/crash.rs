//! The crash pass: a seeded sequence in lockstep, with the daemon killed (SIGKILL, from
//! another thread, a random few microseconds into a random step). After the dead mount is
//! cleared, `wring fsck` must find nothing, and once mounted again the tree must equal the
//! oracle's tree after some step between the last durable point and the one the kill landed
//! in, as a power cut leaves btrfs at its last committed transaction.
//!
//! Durable points are the steps a sync (syncfs and the durable commit), an fsync of a file or
//! of a descriptor answered. Data the kernel holds in its page cache reaches the daemon when
//! the kernel writes it back, which no operation orders against the namespace; so a file
//! whose data changed after the last durable point that covered it ("dirty") is compared
//! without its content, size and mtime. Everything else — names, kinds, modes, owners, link
//! counts and hard-link groups, symlink targets, xattrs, and the content of every file
//! written only before it was synced — must match exactly.

use std::collections::HashSet;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};

use crate::exec::{Kernel, Side};
use crate::gen::{Pool, Rng};
use crate::op::{script, Creat, Op};
use crate::pair::{diff_or_ok, fresh, Pair};
use crate::target::{Mount, Oracle};
use crate::tree::{snapshot, Tree};
use crate::{Error, Failure, Report};

/// The crash pass's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed.
    pub seed: u64,
    /// Kills (each a sequence of its own, in a directory of its own).
    pub rounds: u64,
    /// The longest sequence.
    pub ops: u64,
    /// Names in the pool.
    pub names: usize,
    /// Draw O_TMPFILE.
    pub tmpfile: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seed: 1,
            rounds: 20,
            ops: 120,
            names: 4,
            tmpfile: true,
        }
    }
}

/// Run `cfg.rounds` kills on `mount` against `oracle`.
pub fn run(mount: &mut Mount, oracle: &Oracle, cfg: &Config) -> Result<Report, Error> {
    let mut report = Report::default();
    let base = format!("c{}", cfg.seed);
    fresh(&mount.mnt, &oracle.root, &base)?;
    for r in 0..cfg.rounds {
        let mut rng = Pool::rng(cfg.seed, r);
        let (ops, failure) = round(mount, oracle, cfg, &format!("{base}/r{r}"), &mut rng)?;
        report.ops += ops;
        report.trees += 1;
        report.failures.extend(failure);
    }
    Ok(report)
}

/// The sequence of one round: the random pool's operations with syncs and fsyncs mixed in.
fn sequence(cfg: &Config, oracle: &Oracle, rng: &mut Rng) -> Vec<Op> {
    let pool = Pool::new(cfg.names, cfg.tmpfile, false).for_oracle(oracle);
    let len = 1 + rng.below(cfg.ops);
    let mut ops = Vec::new();
    while (ops.len() as u64) < len {
        let op = match rng.below(100) {
            0..=3 => Op::Sync,
            4..=6 => Op::FdSync {
                slot: rng.below(crate::exec::SLOTS as u64) as u8,
            },
            _ => pool.op(rng),
        };
        let follow = pool.follow_up(&op);
        ops.push(op);
        ops.extend(follow);
    }
    ops
}

/// The oracle's inode an operation changes the data of, looked up before it runs.
fn data_target(side: &Side<'_>, op: &Op) -> Option<u64> {
    match op {
        Op::Write { p, .. } | Op::Truncate { p, .. } | Op::Fallocate { p, .. } => side.ino(p),
        Op::CopyFileRange { to, .. } => side.ino(to),
        Op::Creat {
            p,
            how: Creat::Trunc,
            ..
        } => side.ino(p),
        Op::FdWrite { slot, .. } | Op::FdTruncate { slot, .. } => side.slot_ino(*slot),
        _ => None,
    }
}

/// What a sequence left on the oracle: its tree after each step (the first before any),
/// the last step that was a durable point, and the files dirty since.
struct Trail {
    trees: Vec<Tree>,
    durable: usize,
    dirty: HashSet<u64>,
}

impl Trail {
    /// Account for `op`, which answered `ok` on the oracle: a durable point cleans what it
    /// covers; `target` (looked up before it ran) is dirty.
    fn step(&mut self, side: &Side<'_>, op: &Op, ok: bool, target: Option<u64>) {
        if let Some(ino) = target {
            self.dirty.insert(ino);
        }
        if !ok {
            return;
        }
        let at = self.trees.len();
        match op {
            Op::Sync => {
                self.durable = at;
                self.dirty.clear();
            }
            Op::Fsync { p } => {
                self.durable = at;
                if let Some(ino) = side.ino(p) {
                    self.dirty.remove(&ino);
                }
            }
            Op::FdSync { slot } => {
                self.durable = at;
                if let Some(ino) = side.slot_ino(*slot) {
                    self.dirty.remove(&ino);
                }
            }
            _ => {}
        }
    }

    /// `t` with every dirty file's data left out, by the inode numbers of `by`.
    fn relax(&self, t: &Tree, by: &Tree) -> Tree {
        t.without_contents(|path| by.1.get(path).is_none_or(|ino| !self.dirty.contains(ino)))
    }
}

/// One round in directory `rel`: the operations run, and the failure if any.
fn round(
    mount: &mut Mount,
    oracle: &Oracle,
    cfg: &Config,
    rel: &str,
    rng: &mut Rng,
) -> Result<(u64, Option<Failure>), Error> {
    let ops = sequence(cfg, oracle, rng);
    let kill_at = rng.below(ops.len() as u64) as usize;
    let delay = Duration::from_micros(rng.below(2000));
    fresh(&mount.mnt, &oracle.root, rel)?;
    // The round's own directory is durable before it starts.
    mount.sync()?;
    let (mglobal, kernel) = (mount.global(), Kernel);
    let norm = oracle.norm;
    let mut pair = Pair::new((&mount.mnt, &mglobal), (&oracle.root, &kernel), rel, norm);
    let mut trail = Trail {
        trees: vec![snapshot(&oracle.root.join(rel), norm)],
        durable: 0,
        dirty: HashSet::new(),
    };
    let head = |why: &str| {
        format!(
            "crash, seed {} ({rel}): kill -9 {delay:?} into step {} of {}: {why}",
            cfg.seed,
            kill_at + 1,
            ops.len()
        )
    };
    for op in &ops[..kill_at] {
        let target = data_target(&pair.oracle, op);
        if let Err(why) = pair.step(op) {
            let f = Failure {
                what: head(&why),
                script: script(&head(&why), &pair.notes()),
            };
            pair.close();
            return Ok((pair.steps.len() as u64, Some(f)));
        }
        let ok = pair.steps.last().is_some_and(|s| s.2.is_ok());
        trail.step(&pair.oracle, op, ok, target);
        trail.trees.push(snapshot(&oracle.root.join(rel), norm));
    }
    // The step the kill lands in: on the oracle it either happened or not.
    let last = &ops[kill_at];
    let target = data_target(&pair.oracle, last);
    let pid = mount.pid();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(delay);
            if let Some(pid) = pid.and_then(|p| Pid::from_raw(p as i32)) {
                let _ = kill_process(pid, Signal::KILL);
            }
        });
        let _ = pair.mount.run(last);
    });
    // Its answer on the mount is lost with the daemon: it is no durable point.
    let _ = pair.oracle.run(last);
    trail.step(&pair.oracle, last, false, target);
    trail.trees.push(snapshot(&oracle.root.join(rel), norm));
    let notes = pair.notes();
    pair.close();
    let n = pair.steps.len() as u64 + 1;
    mount.kill();
    let problems = mount.fsck()?;
    mount.mount()?;
    let script_of = |why: &str| {
        let mut notes = notes.clone();
        notes.push((last.clone(), "the kill lands here".into()));
        script(&head(why), &notes)
    };
    if !problems.is_empty() {
        let why = format!("fsck found:\n  {}", problems.join("\n  "));
        return Ok((n, Some(failure(&head(&why), script_of(&why)))));
    }
    let after = snapshot(&mount.mnt.join(rel), norm);
    let matches = (trail.durable..trail.trees.len()).rev().any(|j| {
        diff_or_ok(
            &trail.relax(&after, &trail.trees[j]),
            &trail.relax(&trail.trees[j], &trail.trees[j]),
        )
        .is_ok()
    });
    if matches {
        return Ok((n, None));
    }
    let last_tree = &trail.trees[trail.trees.len() - 1];
    let why = match diff_or_ok(&trail.relax(&after, last_tree), &trail.relax(last_tree, last_tree)) {
        Err(d) => format!(
            "the tree after the crash is no step's from {} to {} (last durable point: step {}); against the last, {d}",
            trail.durable,
            trail.trees.len() - 1,
            trail.durable
        ),
        Ok(()) => "no step's tree matches".to_string(),
    };
    Ok((n, Some(failure(&head(&why), script_of(&why)))))
}

fn failure(what: &str, script: String) -> Failure {
    Failure {
        what: what.to_string(),
        script,
    }
}
