//! The random pass: threads, each running its own seeded sequence in its own directory on
//! both sides in lockstep, and now and then an operation in one shared directory on the
//! mount, whose answers depend on the race and are checked only for consistency at the end.
//! Then a durable commit, an unmount, fsck, a new mount, and every tree compared again.

use std::path::Path;

use crate::exec::{Global, Kernel, Side};
use crate::gen::Pool;
use crate::op::{script, Op};
use crate::pair::{compare_trees, diff_or_ok, fresh, Pair};
use crate::shrink::shrink;
use crate::target::{Mount, Oracle};
use crate::tree::{snapshot, Entry, Tree};
use crate::{Error, Failure, Report};

/// The random pass's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed: each thread's sequence comes from it and the thread's number.
    pub seed: u64,
    /// Threads, each in its own directory.
    pub threads: usize,
    /// Operations per thread.
    pub ops: u64,
    /// Names in the pool.
    pub names: usize,
    /// Compare the trees every this many operations.
    pub check_every: u64,
    /// Draw O_TMPFILE (the transport has it).
    pub tmpfile: bool,
    /// Draw sync and drop_caches.
    pub global: bool,
    /// Operations in the shared directory, per thousand.
    pub shared_per_mille: u64,
    /// Replays shrinking may take per failure.
    pub shrink_budget: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seed: 1,
            threads: 3,
            ops: 2000,
            names: 4,
            check_every: 50,
            tmpfile: true,
            global: true,
            shared_per_mille: 80,
            shrink_budget: 300,
        }
    }
}

/// What one thread did: its operations, and where it first diverged.
struct ThreadRun {
    ops: Vec<Op>,
    notes: Vec<(Op, String)>,
    diverged: Option<String>,
    trees: u64,
}

/// Run the pass on `mount` against `oracle`, in directory `r{seed}` of each.
pub fn run(mount: &mut Mount, oracle: &Oracle, cfg: &Config) -> Result<Report, Error> {
    let run_dir = format!("r{}", cfg.seed);
    let norm = oracle.norm;
    fresh(&mount.mnt, &oracle.root, &run_dir)?;
    let (mroot, oroot) = (mount.mnt.join(&run_dir), oracle.root.join(&run_dir));
    let shared_dir = mroot.join("shared").join(crate::pair::WORK);
    std::fs::create_dir_all(&shared_dir).map_err(Error::io("making shared/"))?;
    for t in 0..cfg.threads {
        fresh(&mroot, &oroot, &format!("t{t}"))?;
    }
    let mglobal = mount.global();
    let runs: Vec<ThreadRun> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let (mroot, oroot, mglobal) = (&mroot, &oroot, &mglobal);
                s.spawn(move || thread(cfg, t, (mroot, mglobal), oracle, oroot))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panicked()))
            .collect()
    });
    let mut report = Report {
        ops: runs.iter().map(|r| r.ops.len() as u64).sum(),
        trees: runs.iter().map(|r| r.trees).sum(),
        ..Report::default()
    };
    for (t, r) in runs.iter().enumerate() {
        if let Some(why) = &r.diverged {
            let f = shrunk(mount, oracle, cfg, t, r, why);
            report.failures.push(f);
        }
    }
    if let Err(why) = consistent(&shared_dir, norm) {
        report.failures.push(Failure {
            what: format!(
                "seed {}: the shared directory is inconsistent: {why}",
                cfg.seed
            ),
            script: String::new(),
        });
    }
    report.trees += after_remount(mount, oracle, &run_dir, cfg, &runs, &mut report.failures)?;
    Ok(report)
}

fn panicked() -> ThreadRun {
    ThreadRun {
        ops: Vec::new(),
        notes: Vec::new(),
        diverged: Some("the thread panicked".into()),
        trees: 0,
    }
}

/// Thread `t`: its sequence in `tT` on both sides, its shared operations on the mount.
fn thread(
    cfg: &Config,
    t: usize,
    mount: (&Path, &dyn Global),
    oracle: &Oracle,
    oroot: &Path,
) -> ThreadRun {
    let norm = oracle.norm;
    let kernel = Kernel;
    let rel = format!("t{t}");
    let mut pair = Pair::new(mount, (oroot, &kernel), &rel, norm);
    let shared_dir = mount.0.join("shared").join(crate::pair::WORK);
    let mut shared = Side::new(shared_dir, norm, mount.1);
    let pool = Pool::new(cfg.names, cfg.tmpfile, cfg.global).for_oracle(oracle);
    let mut rng = Pool::rng(cfg.seed, t as u64);
    let mut diverged = None;
    let mut trees = 0;
    for i in 1..=cfg.ops {
        let op = pool.op(&mut rng);
        if cfg.shared_per_mille > 0 && rng.chance(cfg.shared_per_mille) && !op.is_global() {
            let _ = shared.run(&op);
            continue;
        }
        let follow = pool.follow_up(&op);
        if let Err(why) = pair.step(&op) {
            diverged = Some(why);
            break;
        }
        if let Some(Err(why)) = follow.map(|f| pair.step(&f)) {
            diverged = Some(why);
            break;
        }
        if i % cfg.check_every == 0 || i == cfg.ops {
            trees += 1;
            if let Err(why) = pair.compare(norm) {
                diverged = Some(format!("after step {}: {why}", pair.steps.len()));
                break;
            }
        }
    }
    pair.close();
    shared.close_all();
    ThreadRun {
        ops: pair.steps.iter().map(|s| s.0.clone()).collect(),
        notes: pair.notes(),
        diverged,
        trees,
    }
}

/// Whether `ops` alone, on fresh directories of the same mount and oracle, diverges (in a
/// step's answer or in the final trees).
fn diverges_alone(mount: &Mount, oracle: &Oracle, rel: &str, ops: &[Op]) -> bool {
    if fresh(&mount.mnt, &oracle.root, rel).is_err() {
        return false;
    }
    let (mglobal, kernel) = (mount.global(), Kernel);
    let mut pair = Pair::new(
        (&mount.mnt, &mglobal),
        (&oracle.root, &kernel),
        rel,
        oracle.norm,
    );
    let stepped = ops.iter().all(|op| pair.step(op).is_ok());
    let diverged = !stepped || pair.compare(oracle.norm).is_err();
    pair.close();
    diverged
}

/// Thread `t`'s divergence, shrunk to the shortest sequence that diverges alone when one
/// does.
fn shrunk(
    mount: &Mount,
    oracle: &Oracle,
    cfg: &Config,
    t: usize,
    r: &ThreadRun,
    why: &str,
) -> Failure {
    let head = format!(
        "seed {}, thread {t} of {}: {} operations, then: {why}",
        cfg.seed,
        cfg.threads,
        r.ops.len()
    );
    let mut trial = 0u32;
    let mut fails = |ops: &[Op]| {
        trial += 1;
        let rel = format!("shrink{}-{t}/s{trial}", cfg.seed);
        diverges_alone(mount, oracle, &rel, ops)
    };
    if !fails(&r.ops) {
        return Failure {
            what: format!("{head}\n(it does not diverge alone: a race with the other threads or the shared directory)"),
            script: script(&head, &r.notes),
        };
    }
    let small = shrink(&r.ops, cfg.shrink_budget, &mut fails);
    let notes = replay_notes(
        mount,
        oracle,
        &format!("shrink{}-{t}/final", cfg.seed),
        &small,
    );
    Failure {
        what: format!("{head}\nshrunk to {} operations", small.len()),
        script: script(&head, &notes),
    }
}

/// What each of `ops` answers on both sides (for the script of a shrunk sequence).
pub(crate) fn replay_notes(
    mount: &Mount,
    oracle: &Oracle,
    rel: &str,
    ops: &[Op],
) -> Vec<(Op, String)> {
    if fresh(&mount.mnt, &oracle.root, rel).is_err() {
        return ops.iter().map(|o| (o.clone(), String::new())).collect();
    }
    let (mglobal, kernel) = (mount.global(), Kernel);
    let mut pair = Pair::new(
        (&mount.mnt, &mglobal),
        (&oracle.root, &kernel),
        rel,
        oracle.norm,
    );
    for op in ops {
        let _ = pair.step(op);
    }
    pair.close();
    let mut notes = pair.notes();
    if let Err(why) = pair.compare(oracle.norm) {
        if let Some(last) = notes.last_mut() {
            last.1
                .push_str(&format!("; then {}", why.replace('\n', "\n#")));
        }
    }
    notes
}

/// The shared directory holds together: every listed name answers lstat, a file's link
/// count is the number of its names there (links are made only within it), a directory's
/// is 2 and one per subdirectory (when the oracle counts so).
pub fn consistent(dir: &Path, norm: crate::exec::Norm) -> Result<(), String> {
    let tree = snapshot(dir, norm);
    let mut names: std::collections::HashMap<String, u64> = Default::default();
    for (path, e) in &tree.0 {
        match e {
            Entry::Broken(errno) => {
                return Err(format!(
                    "{path} is listed but answers {}",
                    crate::exec::errno_name(*errno)
                ))
            }
            Entry::Is { same_as, .. } => {
                *names
                    .entry(same_as.clone().unwrap_or(path.clone()))
                    .or_default() += 1;
            }
        }
    }
    for (path, e) in &tree.0 {
        let Entry::Is { attrs, same_as, .. } = e else {
            continue;
        };
        let want = match attrs.kind {
            libc::S_IFDIR => {
                let prefix = format!("{path}/");
                let subdirs = tree.0.iter().filter(|(p, e)| {
                    p.strip_prefix(&prefix)
                        .is_some_and(|rest| !rest.contains('/'))
                        && matches!(e, Entry::Is { attrs, .. } if attrs.kind == libc::S_IFDIR)
                });
                2 + subdirs.count() as u64
            }
            _ => names[&same_as.clone().unwrap_or(path.clone())],
        };
        if attrs.nlink.is_some_and(|n| n != want) {
            return Err(format!("{path} has {:?} links, {want} names", attrs.nlink));
        }
    }
    Ok(())
}

/// After the threads: a durable commit, the tree, an unmount, fsck, a new mount, the same
/// tree; every thread's directory against the oracle's again. Returns the trees compared.
fn after_remount(
    mount: &mut Mount,
    oracle: &Oracle,
    run_dir: &str,
    cfg: &Config,
    runs: &[ThreadRun],
    failures: &mut Vec<Failure>,
) -> Result<u64, Error> {
    let norm = oracle.norm;
    mount.sync()?;
    let before: Tree = snapshot(&mount.mnt.join(run_dir), norm);
    let problems = mount.cycle()?;
    let after: Tree = snapshot(&mount.mnt.join(run_dir), norm);
    let head = format!("seed {}", cfg.seed);
    if !problems.is_empty() {
        failures.push(Failure {
            what: format!(
                "{head}: fsck after the run found:\n  {}",
                problems.join("\n  ")
            ),
            script: whole_script(&head, runs),
        });
    }
    if let Err(why) = diff_or_ok(&after, &before) {
        failures.push(Failure {
            what: format!(
                "{head}: the tree changed across a durable commit, unmount and mount ({why})"
            ),
            script: whole_script(&head, runs),
        });
    }
    for t in 0..cfg.threads {
        let rel = format!("{run_dir}/t{t}");
        let diverged = runs.get(t).is_some_and(|r| r.diverged.is_some());
        if diverged {
            continue;
        }
        if let Err(why) = compare_trees(&mount.mnt.join(&rel), &oracle.root.join(&rel), norm) {
            failures.push(Failure {
                what: format!("{head}, thread {t}: after the remount {why}"),
                script: whole_script(&head, &runs[t..=t]),
            });
        }
    }
    Ok(2 + cfg.threads as u64)
}

/// Every thread's sequence, one after the other, as a script.
fn whole_script(head: &str, runs: &[ThreadRun]) -> String {
    let notes: Vec<(Op, String)> = runs.iter().flat_map(|r| r.notes.clone()).collect();
    script(head, &notes)
}
