//! Power loss, simulated, mirroring xfstests' power-fail tests (generic/482 replays a
//! dm-log-writes log to every flush): a seeded run of file operations on the real [`Volume`]
//! over a [`SimDisk`], cut at many points — between operations and between the I/Os of one —
//! and every cut must mount, pass fsck and give back each file as it was at or after its last
//! fsync. A second run does the same with zstd and text, and trains dictionaries and
//! rewrites extents with them (`dict=auto`) between the operations.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::admin::fsck::{self, FsckReport};
use crate::error::FsError;
use crate::store::simdisk::{Rng, SimDisk};
use crate::store::{DIRENTS, ROOT};
use crate::volume::data::reflink::CopyRange;
use crate::volume::{NewInode, SetAttr};
use crate::{Options, Volume};

const SEED: u64 = 0x5eed_f00d;
/// Operations in the run.
const STEPS: usize = 1000;
/// The extent size: small, so a file has many extents, most of them in the data file.
const EXTENT: u64 = 16 << 10;
const OPTIONS: &str = "compress-force=lzo,max_extent=16K,streams=1";
/// The run with dictionaries: zstd (which takes them), every extent small.
const DICT_OPTIONS: &str = "compress-force=zstd:3,max_extent=16K,streams=1,dict=auto";
/// Files grow up to about this size.
const MAX_SIZE: u64 = 192 << 10;
/// File names in use at most (all in the root directory).
const NAMES: u64 = 8;

/// A file as a power cut may leave it: its name and contents, or gone.
type State = Option<(Vec<u8>, Arc<Vec<u8>>)>;

/// An operation of the run: what it did, and what it made durable.
struct Op(String, Durable);

enum Durable {
    Nothing,
    /// fsync of this inode.
    Inode(u64),
    /// The volume-wide sync.
    All,
}

/// A file of the run and what a power cut may leave of it.
struct File {
    ino: u64,
    name: Option<Vec<u8>>,
    data: Vec<u8>,
    /// The state its last fsync (or sync) made durable, then every state since, oldest first.
    /// wring's fsync commits everything, so the name as of the fsync is durable too.
    allowed: Vec<State>,
}

impl File {
    fn state(&self) -> State {
        let name = self.name.clone()?;
        Some((name, Arc::new(self.data.clone())))
    }

    fn changed(&mut self) {
        let s = self.state();
        self.allowed.push(s);
    }

    fn synced(&mut self) {
        self.allowed = vec![self.state()];
    }
}

fn describe(s: &State) -> String {
    match s {
        None => "gone".into(),
        Some((name, data)) => format!(
            "'{}' with {} bytes (crc {:08x})",
            String::from_utf8_lossy(name),
            data.len(),
            crc32fast::hash(data)
        ),
    }
}

fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len.div_ceil(8))
        .flat_map(|_| rng.bits().to_le_bytes())
        .collect();
    v.truncate(len);
    v
}

/// Mostly incompressible data (so extents go to the data file), some text, some zeros (holes);
/// with `words`, half of it words (what a dictionary can be trained on).
fn some_data(rng: &mut Rng, len: usize, words: bool) -> Vec<u8> {
    match rng.below(10) {
        0 => vec![0; len],
        1 => (0..len)
            .map(|i| b"the quick brown fox jumps over "[(i * 7 + i / 31) % 31])
            .collect(),
        2..=6 if words => word_data(rng, len),
        _ => random_bytes(rng, len),
    }
}

/// Words of a small vocabulary in random order, lines of a few.
fn word_data(rng: &mut Rng, len: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "#define ",
        "extent ",
        "inode ",
        "struct ",
        "btrfs_",
        "zstd_",
        "return ",
        "static ",
        "(1 << 4) ",
        "u64 ",
        "*/\n",
        "/* ",
        "if (",
        "dictionary ",
        "0x",
        "\n",
    ];
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        v.extend_from_slice(WORDS[rng.below(16) as usize].as_bytes());
        v.extend_from_slice(format!("{:x} ", rng.below(4096)).as_bytes());
    }
    v.truncate(len);
    v
}

/// Apply a write to the model, pushing a state per extent it touches: without writeback
/// threads a write commits its extents one by one in order, and a durable commit (the commit
/// interval) may come between them.
fn write_model(f: &mut File, offset: u64, data: &[u8]) {
    let mut at = offset;
    let end = offset + data.len() as u64;
    while at < end {
        let to = ((at / EXTENT + 1) * EXTENT).min(end);
        if f.data.len() < to as usize {
            f.data.resize(to as usize, 0);
        }
        f.data[at as usize..to as usize]
            .copy_from_slice(&data[(at - offset) as usize..(to - offset) as usize]);
        f.changed();
        at = to;
    }
}

/// The run: the volume, its disk and the model of its files.
struct Run {
    disk: SimDisk,
    vol: Volume,
    files: Vec<File>,
    rng: Rng,
    cuts: usize,
    /// The run with dictionaries: words in the data, and dictionary rounds among the steps.
    dict: bool,
    /// Extents the dictionary rounds rewrote.
    rewritten: u64,
    /// Copies after which some stored extent was shared.
    shared: u64,
    /// Files unlinked while held (as the kernel holds what it looked up): orphans until the
    /// next sync step releases them. Their unlinks are delayed.
    held: Vec<u64>,
}

impl Run {
    fn live(&self) -> Vec<usize> {
        (0..self.files.len())
            .filter(|&i| self.files[i].name.is_some())
            .collect()
    }

    fn pick_live(&mut self) -> Option<usize> {
        let live = self.live();
        let n = self.rng.below(live.len() as u64) as usize;
        live.get(n).copied()
    }

    fn holder(&self, name: &[u8]) -> Option<usize> {
        (0..self.files.len()).find(|&i| self.files[i].name.as_deref() == Some(name))
    }

    fn create(&mut self) -> Op {
        let free: Vec<u64> = (0..NAMES)
            .filter(|n| self.holder(format!("f{n}").as_bytes()).is_none())
            .collect();
        let Some(&n) = free.get(self.rng.below(free.len() as u64) as usize) else {
            return self.write();
        };
        let name = format!("f{n}").into_bytes();
        let new = NewInode::file(0o644);
        let (ino, _) = self.vol.create(ROOT, &name, new).unwrap();
        let mut f = File {
            ino,
            name: Some(name),
            data: Vec::new(),
            allowed: vec![None],
        };
        f.changed();
        self.files.push(f);
        Op(format!("create f{n} (inode {ino})"), Durable::Nothing)
    }

    fn write(&mut self) -> Op {
        let Some(i) = self.pick_live() else {
            return self.create();
        };
        let offset = self.rng.below(MAX_SIZE);
        let max = if self.rng.below(2) == 0 {
            64 << 10
        } else {
            5000
        };
        let len = 1 + self.rng.below(max) as usize;
        let data = some_data(&mut self.rng, len, self.dict);
        let f = &mut self.files[i];
        self.vol.write(f.ino, offset, &data, None).unwrap();
        write_model(f, offset, &data);
        let what = format!("write {len} bytes at {offset} to inode {}", f.ino);
        Op(what, Durable::Nothing)
    }

    /// copy_file_range between two live files (or within one), often with whole extents
    /// that line up, so that they are shared.
    fn copy(&mut self) -> Op {
        let (Some(i), Some(j)) = (self.pick_live(), self.pick_live()) else {
            return self.create();
        };
        let src_len = self.files[i].data.len() as u64;
        let off_in = match self.rng.below(2) {
            0 => self.rng.below(MAX_SIZE / EXTENT) * EXTENT,
            _ => self.rng.below(MAX_SIZE),
        };
        let off_out = match self.rng.below(2) {
            0 => off_in % EXTENT + self.rng.below(MAX_SIZE / EXTENT) * EXTENT,
            _ => self.rng.below(MAX_SIZE),
        };
        let len = self.rng.below(MAX_SIZE / 2);
        let count = src_len.saturating_sub(off_in).min(len);
        if i == j && off_in < off_out + count && off_out < off_in + count {
            return self.fsync();
        }
        let (from, to) = (self.files[i].ino, self.files[j].ino);
        let req = CopyRange {
            ino_in: from,
            off_in,
            ino_out: to,
            off_out,
            len,
        };
        let n = self.vol.copy_range(req, None).unwrap();
        assert_eq!(n, count, "{req:?}");
        if n > 0 {
            let data = self.files[i].data[off_in as usize..][..n as usize].to_vec();
            write_model(&mut self.files[j], off_out, &data);
        }
        let t = self.vol.stat_report(ROOT).unwrap().total;
        self.shared += u64::from(t.refs > t.extents);
        let what =
            format!("copy {n} bytes from inode {from} at {off_in} to inode {to} at {off_out}");
        Op(what, Durable::Nothing)
    }

    fn truncate(&mut self) -> Op {
        let Some(i) = self.pick_live() else {
            return self.create();
        };
        let size = self.rng.below(MAX_SIZE);
        let f = &mut self.files[i];
        let set = SetAttr {
            size: Some(size),
            ..Default::default()
        };
        self.vol.setattr(f.ino, &set).unwrap();
        f.data.resize(size as usize, 0);
        f.changed();
        Op(
            format!("truncate inode {} to {size}", f.ino),
            Durable::Nothing,
        )
    }

    fn rename(&mut self) -> Op {
        let Some(i) = self.pick_live() else {
            return self.create();
        };
        let to = format!("f{}", self.rng.below(NAMES)).into_bytes();
        let from = self.files[i].name.clone().unwrap_or_default();
        if to == from {
            return self.fsync();
        }
        self.vol.rename(ROOT, &from, ROOT, &to, 0).unwrap();
        if let Some(j) = self.holder(&to) {
            self.files[j].name = None;
            self.files[j].changed();
        }
        self.files[i].name = Some(to.clone());
        self.files[i].changed();
        let (from, to) = (String::from_utf8_lossy(&from), String::from_utf8_lossy(&to));
        Op(format!("rename {from} to {to}"), Durable::Nothing)
    }

    fn unlink(&mut self) -> Op {
        let Some(i) = self.pick_live() else {
            return self.create();
        };
        let name = self.files[i].name.take().unwrap_or_default();
        if self.rng.below(2) == 0 {
            self.vol.open_existing(self.files[i].ino).unwrap();
            self.held.push(self.files[i].ino);
        }
        self.vol.remove(ROOT, &name, false).unwrap();
        self.files[i].changed();
        let what = format!("unlink {}", String::from_utf8_lossy(&name));
        Op(what, Durable::Nothing)
    }

    fn fsync(&mut self) -> Op {
        let Some(i) = self.pick_live() else {
            return self.sync();
        };
        let ino = self.files[i].ino;
        self.vol.fsync(ino).unwrap();
        Op(format!("fsync inode {ino}"), Durable::Inode(ino))
    }

    fn sync(&mut self) -> Op {
        for ino in std::mem::take(&mut self.held) {
            self.vol.released(ino).unwrap();
        }
        self.vol.sync().unwrap();
        Op("sync".into(), Durable::All)
    }

    /// Train a dictionary if one is due and rewrite the extents with it, as the committer's
    /// tick and the training's thread do (here on this thread, between operations).
    fn dict_round(&mut self) -> Op {
        let new = self.vol.dict_round_now();
        self.rewritten += new;
        Op(
            format!("dictionary round ({new} extents rewritten)"),
            Durable::Nothing,
        )
    }

    /// One random operation.
    fn step(&mut self) -> Op {
        if self.dict && self.rng.below(20) == 0 {
            return self.dict_round();
        }
        match self.rng.below(100) {
            0..=7 => self.create(),
            8..=57 => self.write(),
            58..=62 => self.copy(),
            63..=69 => self.truncate(),
            70..=76 => self.rename(),
            77..=80 => self.unlink(),
            81..=95 => self.fsync(),
            _ => self.sync(),
        }
    }

    /// After an fsync or a sync, what it made durable is all a cut may leave.
    fn settle(&mut self, durable: &Durable) {
        match durable {
            Durable::Nothing => {}
            Durable::Inode(ino) => self
                .files
                .iter_mut()
                .filter(|f| f.ino == *ino)
                .for_each(File::synced),
            Durable::All => {
                self.files.iter_mut().for_each(File::synced);
                self.files.retain(|f| f.name.is_some());
            }
        }
    }

    /// Mount what the disk `cut` holds and check it.
    fn verify(&mut self, cut: &SimDisk, at: &str) {
        self.cuts += 1;
        let mut vol = Volume::open_sim(cut.file(0), cut.file(1), options(self.dict))
            .unwrap_or_else(|e| panic!("{at}: the store does not mount after the power cut: {e}"));
        let mut names = names(&vol);
        for f in &self.files {
            let seen = observe(&vol, f.ino, names.remove(&f.ino).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{at}: inode {} after the power cut: {e}", f.ino));
            if !f.allowed.contains(&seen) {
                let allowed: Vec<String> = f.allowed.iter().map(describe).collect();
                panic!(
                    "{at}: inode {} is {} after the power cut; it may only be one of (oldest \
                     first) {allowed:?}",
                    f.ino,
                    describe(&seen)
                );
            }
        }
        if let Some((ino, n)) = names.into_iter().next() {
            panic!("{at}: after the power cut, {n:?} name inode {ino}, which never had them");
        }
        let mut report = FsckReport::default();
        fsck::check(&vol, &mut report).unwrap();
        assert!(
            report.problems.is_empty(),
            "{at}: fsck after the power cut: {:?}",
            report.problems
        );
        assert!(
            vol.check_integrity().unwrap(),
            "{at}: redb's integrity check fails after the power cut"
        );
    }
}

fn options(dict: bool) -> Options {
    match dict {
        false => Options::parse(OPTIONS).unwrap(),
        true => {
            let mut o = Options::parse(DICT_OPTIONS).unwrap();
            o.dict_train_bytes = 48 << 10;
            o
        }
    }
}

/// Names in the root directory, by inode.
fn names(vol: &Volume) -> HashMap<u64, Vec<Vec<u8>>> {
    let txn = vol.store().read().unwrap();
    let dirents = txn.open_table(DIRENTS).unwrap();
    let mut names: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
    for r in dirents.range((ROOT, &[][..])..(ROOT + 1, &[][..])).unwrap() {
        let (k, v) = r.unwrap();
        names
            .entry(v.value().0)
            .or_default()
            .push(k.value().1.to_vec());
    }
    names
}

/// What the volume holds of `ino`, named by `names`.
fn observe(vol: &Volume, ino: u64, names: Vec<Vec<u8>>) -> Result<State, String> {
    let inode = match vol.inode(ino) {
        Err(FsError::Errno(libc::ENOENT)) if names.is_empty() => return Ok(None),
        Err(e) => return Err(format!("stat fails: {e}")),
        Ok(i) => i,
    };
    let data = vol
        .read(ino, 0, inode.size as u32)
        .map_err(|e| format!("reading it fails: {e}"))?;
    match <[Vec<u8>; 1]>::try_from(names) {
        Ok([name]) => Ok(Some((name, Arc::new(data)))),
        Err(names) => Err(format!("it has the names {names:?}")),
    }
}

#[test]
fn power_cuts_keep_what_fsync_made_durable() {
    let run = power_cuts(false);
    assert!(run.shared >= 5, "{} copies shared extents", run.shared);
    eprintln!("{} copies left shared extents", run.shared);
}

#[test]
fn power_cuts_keep_what_fsync_made_durable_with_dictionaries() {
    let run = power_cuts(true);
    let st = run.vol.dict_status().unwrap();
    assert!(
        st.dicts.len() >= 2,
        "the run trained {} dictionaries; it must train and replace one",
        st.dicts.len()
    );
    assert!(run.rewritten > 0, "the dictionary rounds rewrote nothing");
    eprintln!(
        "{} dictionaries, {} extents rewritten",
        st.dicts.len(),
        run.rewritten
    );
}

fn power_cuts(dict: bool) -> Run {
    let t = Instant::now();
    let disk = SimDisk::default();
    let (db, data) = (disk.new_file(), disk.new_file());
    crate::store::Store::mkfs_sim(&db).unwrap();
    let vol = Volume::open_sim(db, data, options(dict)).unwrap();
    let mut run = Run {
        disk,
        vol,
        files: Vec::new(),
        rng: Rng(SEED),
        cuts: 0,
        dict,
        rewritten: 0,
        shared: 0,
        held: Vec::new(),
    };
    let mut trapped = 0;
    for step in 0..STEPS {
        // Sometimes cuts in the middle of the operation: before one of its first I/Os, or
        // before each of them.
        match run.rng.below(8) {
            0 => run.disk.arm(1, true, run.rng.bits()),
            1 | 2 => run.disk.arm(1 + run.rng.below(8), false, run.rng.bits()),
            _ => {}
        }
        let Op(op, durable) = run.step();
        for (n, cut) in run.disk.disarm().iter().enumerate() {
            trapped += 1;
            run.verify(cut, &format!("step {step} ({op}), cut {n} within it"));
        }
        run.settle(&durable);
        if run.rng.below(4) == 0 {
            let cut = run.disk.power_cut(&mut run.rng);
            run.verify(&cut, &format!("step {step}, cut after {op}"));
        }
    }
    eprintln!(
        "{} power cuts ({trapped} within an operation) in {:.1?}",
        run.cuts,
        t.elapsed()
    );
    assert!(run.cuts >= 200 && trapped >= 50, "too few cuts");
    let delayed = &run.vol.store().delayed_counts.names;
    let delayed = delayed.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{delayed} creates and unlinks delayed");
    assert!(
        delayed >= 50,
        "the run delayed {delayed} creates and unlinks"
    );
    run
}
