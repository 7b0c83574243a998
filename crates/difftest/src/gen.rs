//! Where operations come from: a seeded random draw over a small pool of names (the random
//! pass), and every operation of a namespace alphabet over two names in two directories
//! (the exhaustive pass, as CrashMonkey's ACE generator bounds its sequences).

use crate::exec::SLOTS;
use crate::op::{
    Creat, Falloc, Node, Op, OpenHow, RenameHow, TimeArg, Who, XattrHow, EXTENT, USER,
};

/// SplitMix64: a small generator whose sequence never changes with a dependency's version,
/// so a seed printed today replays tomorrow.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        match n {
            0 => 0,
            _ => self.next_u64() % n,
        }
    }

    /// A u32 below `n`.
    pub fn below32(&mut self, n: u32) -> u32 {
        self.below(u64::from(n)) as u32
    }

    /// True `per_mille` times in 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// One of `items` (which is not empty).
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }
}

/// What the random pass draws from.
#[derive(Clone, Debug)]
pub struct Pool {
    /// The names (`n0`, `n1`…); any of them may be made a directory.
    pub names: Vec<String>,
    /// Names in the test directory that only a file is ever given (`f0`, `f1`): made by
    /// create, drawn besides the names by the operations on a file's data, now and then
    /// unlinked, renamed or linked to a name, exchanged with each other; so that copies and
    /// writes of several extents find files with data, which among the names, as often
    /// directories, they seldom do.
    pub files: Vec<String>,
    /// Whether O_TMPFILE is drawn (the transport has it).
    pub tmpfile: bool,
    /// Whether sync and drop_caches are drawn.
    pub global: bool,
    /// Whether fallocate's FALLOC_FL_ZERO_RANGE is drawn (btrfs has it, tmpfs not).
    pub zero_range: bool,
    /// Whether BTRFS_IOC_DEFRAG_RANGE is drawn (the oracle is btrfs).
    pub defrag: bool,
    /// Follow each hole punch with a utimensat of the mtime to now: btrfs leaves a file's
    /// times alone when its extent maps say the range is a hole already, by their
    /// granularity (a punch past the end of the file changes them or not by its alignment);
    /// wring, as tmpfs and ext4, always moves them.
    pub touch_after_punch: bool,
}

impl Pool {
    /// `n` names.
    pub fn new(n: usize, tmpfile: bool, global: bool) -> Pool {
        Pool {
            names: (0..n.max(1)).map(|i| format!("n{i}")).collect(),
            files: vec!["f0".into(), "f1".into()],
            tmpfile,
            global,
            zero_range: true,
            defrag: false,
            touch_after_punch: false,
        }
    }

    /// The pool with FALLOC_FL_ZERO_RANGE drawn or not.
    pub fn with_zero_range(mut self, zero_range: bool) -> Pool {
        self.zero_range = zero_range;
        self
    }

    /// The pool for what `oracle` can answer, and how.
    pub fn for_oracle(self, oracle: &crate::target::Oracle) -> Pool {
        Pool {
            touch_after_punch: oracle.punch_keeps_times,
            defrag: oracle.defrag,
            ..self.with_zero_range(oracle.zero_range)
        }
    }

    /// The operation that must follow `op` (see [`Pool::touch_after_punch`]).
    pub fn follow_up(&self, op: &Op) -> Option<Op> {
        match op {
            Op::Fallocate {
                p,
                how: Falloc::Punch,
                ..
            } if self.touch_after_punch => Some(Op::Utimes {
                p: p.clone(),
                atime: TimeArg::Omit,
                mtime: TimeArg::Now,
                who: Who::Root,
            }),
            _ => None,
        }
    }

    /// Thread `t`'s generator for `seed`: streams of different seeds and threads never
    /// overlap (SplitMix's states of two seeds a multiple of its step apart would).
    pub fn rng(seed: u64, t: u64) -> Rng {
        let mut r = Rng::new(seed);
        let mixed = r.next_u64() ^ t.wrapping_mul(0xd6e8_feb8_6659_fd93);
        Rng::new(Rng::new(mixed).next_u64())
    }

    /// A path of one to three names (so that any name can be a directory with entries).
    fn path(&self, rng: &mut Rng) -> String {
        let depth = match rng.below(10) {
            0..=4 => 1,
            5..=8 => 2,
            _ => 3,
        };
        let parts: Vec<String> = (0..depth).map(|_| rng.pick(&self.names)).collect();
        parts.join("/")
    }

    /// A path for an operation on a file's data: one of [`Pool::files`] or, more often, a
    /// path of names.
    fn data_path(&self, rng: &mut Rng) -> String {
        match rng.below(10) {
            0..=3 => rng.pick(&self.files),
            _ => self.path(rng),
        }
    }

    /// A path for what removes a name (unlink, rename from, link from): now and then one of
    /// [`Pool::files`], which then stay files long enough to gather data.
    fn gone_path(&self, rng: &mut Rng) -> String {
        match rng.below(10) {
            0 => rng.pick(&self.files),
            _ => self.path(rng),
        }
    }

    /// A path for a copy's ends and a write of several extents: mostly one of
    /// [`Pool::files`], else a name or a path.
    fn file(&self, rng: &mut Rng) -> String {
        match rng.below(10) {
            0..=7 => rng.pick(&self.files),
            8 => rng.pick(&self.names),
            _ => self.path(rng),
        }
    }

    /// A copy_file_range(2) between two files, or within one (about a third of the draws, as
    /// [`Pool::files`] are two; overlapping ranges are refused).
    fn copy_file_range(&self, rng: &mut Rng) -> Op {
        let (from, to) = (self.file(rng), self.file(rng));
        let (off_in, off_out, len) = copy_range(rng);
        Op::CopyFileRange {
            from,
            off_in,
            to,
            off_out,
            len,
        }
    }

    /// A directory to make a tmpfile in: the test directory or a path.
    fn dir(&self, rng: &mut Rng) -> String {
        match rng.below(3) {
            0 => ".".to_string(),
            _ => self.path(rng),
        }
    }

    /// A symlink target: a name, a path, a name above, or one that never exists.
    fn target(&self, rng: &mut Rng) -> String {
        match rng.below(4) {
            0 => self.path(rng),
            1 => format!("../{}", rng.pick(&self.names)),
            2 => "t".to_string(),
            _ => rng.pick(&self.names),
        }
    }

    /// One random operation.
    pub fn op(&self, rng: &mut Rng) -> Op {
        if self.global {
            match rng.below(1000) {
                0..=2 => return Op::Sync,
                3..=4 => return Op::DropCaches,
                _ => {}
            }
        }
        if self.defrag && rng.below(100) < 4 {
            return defrag(self.path(rng), rng);
        }
        match rng.below(1000) {
            0..=39 => return self.copy_file_range(rng),
            40..=64 => return big_write(self.file(rng), rng),
            _ => {}
        }
        let p = self.path(rng);
        let slot = rng.below(SLOTS as u64) as u8;
        match rng.below(200) {
            0..=19 => Op::Creat {
                p: self.data_path(rng),
                how: rng.pick(&[Creat::Plain, Creat::Excl, Creat::Excl, Creat::Trunc]),
                mode: rng.pick(&[0o644, 0o600, 0o755, 0o444]),
            },
            20..=35 => Op::Mkdir {
                p,
                mode: rng.pick(&[0o755, 0o700, 0o777, 0o2755]),
            },
            36..=47 => Op::Rmdir { p },
            48..=63 => Op::Unlink {
                p: self.gone_path(rng),
            },
            64..=83 => {
                let from = self.gone_path(rng);
                let to = self.path(rng);
                let how = rng.pick(&[
                    RenameHow::Plain,
                    RenameHow::Plain,
                    RenameHow::Plain,
                    RenameHow::NoReplace,
                    RenameHow::Exchange,
                ]);
                // One of the files' names is exchanged only with the other: a directory
                // never takes it.
                let to = match how == RenameHow::Exchange && self.files.contains(&from) {
                    true => rng.pick(&self.files),
                    false => to,
                };
                Op::Rename { from, to, how }
            }
            84..=93 => Op::Link {
                from: self.gone_path(rng),
                to: self.path(rng),
            },
            94..=103 => Op::Symlink {
                target: self.target(rng),
                p,
            },
            104..=109 => Op::Mknod {
                p,
                node: rng.pick(&[Node::Fifo, Node::Char, Node::Socket]),
            },
            110..=123 => Op::Write {
                p: self.data_path(rng),
                off: offset(rng),
                len: length(rng),
                seed: rng.below(256) as u8,
            },
            124..=129 => Op::Truncate {
                p: self.data_path(rng),
                size: size(rng),
            },
            130..=135 => Op::Fallocate {
                p: self.data_path(rng),
                how: match self.zero_range {
                    true => {
                        rng.pick(&[Falloc::Alloc, Falloc::KeepSize, Falloc::Punch, Falloc::Zero])
                    }
                    false => rng.pick(&[Falloc::Alloc, Falloc::KeepSize, Falloc::Punch]),
                },
                off: offset(rng),
                len: 1 + length(rng),
            },
            136..=141 => Op::Chmod {
                p,
                mode: rng.pick(&[0o644, 0o755, 0o600, 0o4755, 0o2755, 0o1777, 0o000, 0o6711]),
                who: who(rng),
            },
            142..=147 => Op::Chown {
                p,
                uid: rng.pick(&[None, Some(0), Some(USER), Some(2000)]),
                gid: rng.pick(&[None, Some(0), Some(USER), Some(2000)]),
                who: who(rng),
            },
            148..=153 => Op::SetXattr {
                p,
                name: rng.below(3) as u8,
                value: rng.below(256) as u8,
                len: rng.pick(&[0, 1, 7, 200]),
                how: rng.pick(&[XattrHow::Any, XattrHow::Create, XattrHow::Replace]),
            },
            154..=157 => Op::RemoveXattr {
                p,
                name: rng.below(3) as u8,
            },
            158..=163 => Op::Utimes {
                p,
                atime: time(rng),
                mtime: time(rng),
                who: who(rng),
            },
            164..=169 => Op::Open {
                slot,
                p: self.data_path(rng),
                how: rng.pick(&[OpenHow::Read, OpenHow::ReadWrite, OpenHow::Append]),
            },
            170..=172 => Op::Close { slot },
            173..=177 => Op::FdWrite {
                slot,
                off: offset(rng),
                len: length(rng),
                seed: rng.below(256) as u8,
            },
            178..=179 => Op::FdRead {
                slot,
                off: offset(rng),
                len: 1 + length(rng),
            },
            180..=182 => Op::FdStat { slot },
            183 => Op::FdTruncate {
                slot,
                size: size(rng),
            },
            184 => Op::FdSync { slot },
            185..=187 if self.tmpfile => Op::Tmpfile {
                slot,
                dir: self.dir(rng),
            },
            188..=189 if self.tmpfile => Op::LinkSlot { slot, p },
            190..=193 => Op::Stat { p },
            194..=195 => Op::Read {
                p: self.data_path(rng),
            },
            196..=197 => Op::List { p: self.dir(rng) },
            198 => Op::Readlink { p },
            _ => Op::Fsync {
                p: self.data_path(rng),
            },
        }
    }
}

/// A write of several extents (256 KiB to 1 MiB, sometimes with a tail), mostly at an
/// extent boundary: files big enough for copies of whole extents, whose ends a copy's
/// aligned range often meets exactly.
fn big_write(p: String, rng: &mut Rng) -> Op {
    let off = match rng.below(10) {
        0..=3 => 0,
        4..=8 => rng.below32(4) * EXTENT,
        _ => rng.below32(4 * EXTENT),
    };
    let tail = match rng.below(4) {
        0 => 1 + rng.below32(EXTENT - 1),
        _ => 0,
    };
    Op::Write {
        p,
        off,
        len: (2 + rng.below32(7)) * EXTENT + tail,
        seed: rng.below(256) as u8,
    }
}

/// The offsets and length of a copy: half of them whole extents (up to eight, 1 MiB, from
/// and to extent boundaries), some at the same distance from a boundary in both files (whose
/// middle extents line up), some whole blocks (what btrfs clones), the rest anywhere; lengths
/// that reach past any file's end (the kernel copies up to it) and of 0 among them.
fn copy_range(rng: &mut Rng) -> (u32, u32, u32) {
    let extents = |rng: &mut Rng, n: u32| rng.below32(n) * EXTENT;
    let blocks = |rng: &mut Rng| rng.below32(256) * 4096;
    let anywhere = |rng: &mut Rng| match rng.below(3) {
        0 => rng.below32(5000),
        _ => rng.below32(8 * EXTENT),
    };
    let past_end = |rng: &mut Rng| rng.pick(&[8 * EXTENT, 32 * EXTENT]);
    match rng.below(20) {
        // Whole extents: from and to extent boundaries, mostly the first ones.
        0..=9 => {
            let len = match rng.below(6) {
                0 => past_end(rng),
                _ => (1 + rng.below32(8)) * EXTENT,
            };
            (extents(rng, 5), extents(rng, 6), len)
        }
        // Whole extents and a tail, which only a source ending there shares.
        10 => (
            extents(rng, 4),
            extents(rng, 4),
            (1 + rng.below32(6)) * EXTENT + 1 + rng.below32(EXTENT - 1),
        ),
        // The same distance past a boundary in both files: the extents between line up,
        // the ends do not.
        11..=12 => {
            let r = match rng.below(2) {
                0 => 4096,
                _ => 1 + rng.below32(EXTENT - 1),
            };
            let len = (1 + rng.below32(6)) * EXTENT
                + match rng.below(2) {
                    0 => 0,
                    _ => rng.below32(EXTENT),
                };
            (extents(rng, 4) + r, extents(rng, 4) + r, len)
        }
        // Whole blocks, not whole extents.
        13..=14 => (blocks(rng), blocks(rng), 4096 * (1 + rng.below32(200))),
        // Aligned in one file, not in the other.
        15 => match rng.below(2) {
            0 => (
                extents(rng, 4),
                anywhere(rng),
                (1 + rng.below32(4)) * EXTENT,
            ),
            _ => (
                anywhere(rng),
                extents(rng, 4),
                (1 + rng.below32(4)) * EXTENT,
            ),
        },
        // Anywhere, of any length.
        16..=18 => (anywhere(rng), anywhere(rng), length(rng)),
        _ => {
            let len = match rng.below(2) {
                0 => 0,
                _ => past_end(rng),
            };
            (anywhere(rng), anywhere(rng), len)
        }
    }
}

/// A defragment of `p`: mostly with compression (zlib, lzo or zstd, with or without a level
/// in btrfs's ranges and just past them, and types past zstd), sometimes without, to store
/// raw, or with a flag nobody knows.
fn defrag(p: String, rng: &mut Rng) -> Op {
    const COMPRESS: u64 = wring_fs::DEFRAG_COMPRESS;
    const LEVEL: u64 = wring_fs::DEFRAG_COMPRESS_LEVEL;
    let flags = rng.pick(&[
        COMPRESS,
        COMPRESS,
        COMPRESS | LEVEL,
        COMPRESS | LEVEL,
        COMPRESS | LEVEL,
        wring_fs::DEFRAG_START_IO,
        wring_fs::DEFRAG_NOCOMPRESS,
        COMPRESS | wring_fs::DEFRAG_NOCOMPRESS,
        16,
    ]);
    let t = rng.pick(&[0u8, 1, 2, 2, 3, 3, 4]);
    // zlib 1-9, lzo 0-1, zstd -15..15 in btrfs; one past each end is refused, but zstd's
    // 16 to 22, which wring takes as its compress= does (a documented difference): 23 stands
    // for past the top. Without COMPRESS_LEVEL the level byte makes the type unknown: mostly
    // it is left 0.
    let level = match flags & LEVEL != 0 || rng.below(8) == 0 {
        true => rng.pick(&[0i8, 1, 3, 9, 10, -1, -15, -16, 15, 23]),
        false => 0,
    };
    Op::Defrag {
        p,
        start: match rng.below(3) {
            0 => offset(rng),
            _ => 0,
        },
        len: rng.pick(&[u64::MAX, u64::MAX, 4096, 200_000]),
        flags,
        compress_type: u32::from_le_bytes([t, level as u8, 0, 0]),
        who: who(rng),
    }
}

fn who(rng: &mut Rng) -> Who {
    match rng.below(10) {
        0..=6 => Who::Root,
        _ => Who::User,
    }
}

fn time(rng: &mut Rng) -> TimeArg {
    match rng.below(4) {
        0 => TimeArg::Omit,
        1 => TimeArg::Now,
        _ => TimeArg::At(rng.below32(1_000_000)),
    }
}

/// An offset: mostly small, block-aligned or not, sometimes past 128 KiB extents.
fn offset(rng: &mut Rng) -> u32 {
    match rng.below(4) {
        0 => 0,
        1 => rng.below32(5000),
        2 => rng.below32(80) * 4096,
        _ => rng.below32(400_000),
    }
}

/// A size to truncate to: an offset, or now and then an extent boundary (so that a copy of
/// whole extents meets the end of its source exactly more often).
fn size(rng: &mut Rng) -> u32 {
    match rng.below(4) {
        0 => rng.below32(9) * EXTENT,
        _ => offset(rng),
    }
}

/// A length: mostly small, sometimes several extents.
fn length(rng: &mut Rng) -> u32 {
    match rng.below(10) {
        0..=5 => rng.below32(3000),
        6..=8 => rng.below32(70_000),
        _ => rng.below32(300_000),
    }
}

/// The exhaustive pass's alphabet: every namespace operation over `paths`, and a durable
/// sync. Two-path operations take every ordered pair of different paths.
pub fn alphabet(paths: &[&str]) -> Vec<Op> {
    let mut ops = Vec::new();
    for p in paths {
        let p = p.to_string();
        ops.push(Op::Creat {
            p: p.clone(),
            how: Creat::Excl,
            mode: 0o644,
        });
        ops.push(Op::Mkdir {
            p: p.clone(),
            mode: 0o755,
        });
        ops.push(Op::Mknod {
            p: p.clone(),
            node: Node::Fifo,
        });
        ops.push(Op::Symlink {
            target: "t".into(),
            p: p.clone(),
        });
        ops.push(Op::Unlink { p: p.clone() });
        ops.push(Op::Rmdir { p });
    }
    for a in paths {
        for b in paths.iter().filter(|b| *b != a) {
            let (from, to) = (a.to_string(), b.to_string());
            for how in [RenameHow::Plain, RenameHow::NoReplace, RenameHow::Exchange] {
                ops.push(Op::Rename {
                    from: from.clone(),
                    to: to.clone(),
                    how,
                });
            }
            ops.push(Op::Link { from, to });
        }
    }
    ops.push(Op::Sync);
    ops
}

/// Every sequence over `alphabet` of length 1 to `max` (in order of length), as indices.
pub fn sequences(alphabet: usize, max: usize) -> impl Iterator<Item = Vec<usize>> {
    (1..=max).flat_map(move |len| {
        let total = alphabet.checked_pow(len as u32).unwrap_or(0);
        (0..total).map(move |mut k| {
            let mut seq = vec![0; len];
            for slot in seq.iter_mut().rev() {
                *slot = k % alphabet;
                k /= alphabet;
            }
            seq
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed draws the same operations; sequences enumerate every combination once.
    #[test]
    fn seeded_and_exhaustive() {
        let pool = Pool::new(4, true, true);
        let draw = |seed| {
            let mut r = Rng::new(seed);
            (0..200).map(|_| pool.op(&mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let all: Vec<_> = sequences(3, 2).collect();
        assert_eq!(all.len(), 3 + 9);
        let mut uniq = all.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), all.len());
        let a = alphabet(&["d0/a", "d0/b", "d1/a", "d1/b"]);
        assert_eq!(a.len(), 4 * 6 + 12 * 4 + 1);
    }

    /// About 4% of draws are copies; many of them are of several whole extents between
    /// extent boundaries, others are not aligned, past any end, of 0 bytes, or within one
    /// file; and writes of several extents make files for them to copy.
    #[test]
    fn draws_copies_of_whole_extents() {
        let pool = Pool::new(4, true, true);
        let mut rng = Pool::rng(1, 0);
        let ops: Vec<Op> = (0..100_000).map(|_| pool.op(&mut rng)).collect();
        // (same file, offset in, offset out, length)
        let copies: Vec<(bool, u32, u32, u32)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::CopyFileRange {
                    from,
                    off_in,
                    to,
                    off_out,
                    len,
                } => Some((from == to, *off_in, *off_out, *len)),
                _ => None,
            })
            .collect();
        let share = copies.len() * 1000 / ops.len();
        assert!((35..=45).contains(&share), "{share} per mille");
        let percent = |f: fn(&(bool, u32, u32, u32)) -> bool| {
            copies.iter().filter(|c| f(c)).count() * 100 / copies.len()
        };
        let whole = percent(|&(_, i, o, l)| {
            [i, o, l].iter().all(|n| n.is_multiple_of(EXTENT))
                && (2 * EXTENT..=8 * EXTENT).contains(&l)
        });
        let unaligned = percent(|&(_, i, o, l)| [i, o, l].iter().any(|n| n % EXTENT != 0));
        let long = percent(|c| c.3 > 8 * EXTENT);
        let empty = percent(|c| c.3 == 0);
        let within = percent(|c| c.0);
        eprintln!(
            "{} copies: {whole}% of 2-8 whole extents, {unaligned}% not aligned, {long}% \
             longer than 1 MiB, {empty}% of 0 bytes, {within}% within one file",
            copies.len()
        );
        assert!(whole >= 30 && unaligned >= 30);
        assert!(long >= 3 && empty >= 1 && within >= 15);
        let big = ops
            .iter()
            .filter(|op| matches!(op, Op::Write { len, .. } if *len >= 2 * EXTENT))
            .count();
        assert!(
            big * 1000 / ops.len() >= 20,
            "{big} writes of several extents"
        );
    }
}
