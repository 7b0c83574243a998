//! A simulated disk for power-loss tests, mirroring what dm-log-writes replays for xfstests'
//! power-fail tests (generic/482): each file keeps what its last `sync_data` made durable and
//! the writes and length changes since, any part of which a power cut may keep or lose.

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use redb::StorageBackend;

/// A write reaches the disk in pages that land whole or not at all.
const PAGE: u64 = 4096;

/// A small deterministic PRNG (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.bits() % n.max(1)
    }
}

/// A change not yet synced.
#[derive(Clone)]
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// One file: what reads see, what the last sync made durable, and the changes since.
#[derive(Clone, Default)]
struct Image {
    now: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Change>,
}

fn apply(bytes: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write(at, data) => {
            let at = *at as usize;
            if bytes.len() < at + data.len() {
                bytes.resize(at + data.len(), 0);
            }
            bytes[at..at + data.len()].copy_from_slice(data);
        }
        Change::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}

impl Image {
    fn durable(bytes: Vec<u8>) -> Image {
        Image {
            now: bytes.clone(),
            durable: bytes,
            unsynced: Vec::new(),
        }
    }

    fn change(&mut self, change: Change) {
        apply(&mut self.now, &change);
        self.unsynced.push(change);
    }

    fn sync(&mut self) {
        for c in std::mem::take(&mut self.unsynced) {
            apply(&mut self.durable, &c);
        }
    }

    /// What the disk holds if the power goes now. Length changes reach it in order (the
    /// filesystem's journal commits them), so the length is the durable one or one set later;
    /// each page a write touched reached it or not, in any order, unless a cut that reached it
    /// afterwards removed that page.
    fn cut(&self, rng: &mut Rng) -> Image {
        let k = rng.below(self.unsynced.len() as u64 + 1) as usize;
        let mut bytes = self.durable.clone();
        for c in &self.unsynced[..k] {
            match c {
                Change::SetLen(len) => bytes.resize(*len as usize, 0),
                Change::Write(at, data) => {
                    let end = *at as usize + data.len();
                    bytes.resize(bytes.len().max(end), 0);
                }
            }
        }
        let odds = rng.below(101);
        let mut pieces = Vec::new();
        let mut limit = bytes.len() as u64;
        for (i, c) in self.unsynced.iter().enumerate().rev() {
            match c {
                Change::SetLen(len) if i < k => limit = limit.min(*len),
                Change::SetLen(_) => {}
                Change::Write(at, data) => {
                    let end = (at + data.len() as u64).min(limit);
                    let mut from = *at;
                    while from < end {
                        let to = ((from / PAGE + 1) * PAGE).min(end);
                        if rng.below(100) < odds {
                            pieces.push((from, &data[(from - at) as usize..(to - at) as usize]));
                        }
                        from = to;
                    }
                }
            }
        }
        for i in (1..pieces.len()).rev() {
            pieces.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for (at, piece) in pieces {
            bytes[at as usize..at as usize + piece.len()].copy_from_slice(piece);
        }
        Image::durable(bytes)
    }
}

/// A trap set to cut the power before a given I/O, or before each from it on.
struct Trap {
    from: u64,
    each: bool,
    seed: u64,
    cuts: Vec<Vec<Image>>,
}

/// An I/O set to fail: the `at`th write, length change or sync, and with `sticky` every one
/// after it too, until healed.
struct Fault {
    at: u64,
    errno: i32,
    sticky: bool,
}

#[derive(Default)]
struct Disk {
    files: Vec<Image>,
    /// Writes, length changes and syncs so far.
    ios: u64,
    trap: Option<Trap>,
    /// Bytes the files may hold together (None: no limit); past it a write that grows a
    /// file fails with ENOSPC, as on a full filesystem.
    capacity: Option<u64>,
    fault: Option<Fault>,
    /// I/Os the fault failed.
    failed: u64,
}

impl Disk {
    fn used(&self) -> u64 {
        self.files.iter().map(|f| f.now.len() as u64).sum()
    }
}

fn cut_all(files: &[Image], seed: u64) -> Vec<Image> {
    let mut rng = Rng(seed);
    files.iter().map(|f| f.cut(&mut rng)).collect()
}

/// A disk holding simulated files, shared by handles: one power cut takes all of them at the
/// same instant.
#[derive(Clone, Default)]
pub struct SimDisk(Arc<Mutex<Disk>>);

impl SimDisk {
    fn disk(&self) -> MutexGuard<'_, Disk> {
        wring_sync::lock(&*self.0)
    }

    fn from_images(files: Vec<Image>) -> SimDisk {
        SimDisk(Arc::new(Mutex::new(Disk {
            files,
            ..Disk::default()
        })))
    }

    /// A new empty file on this disk.
    pub fn new_file(&self) -> SimFile {
        let mut d = self.disk();
        d.files.push(Image::default());
        SimFile {
            disk: self.clone(),
            id: d.files.len() - 1,
        }
    }

    /// The `id`th file made on this disk (or on the disk it was cut from).
    pub fn file(&self, id: usize) -> SimFile {
        SimFile {
            disk: self.clone(),
            id,
        }
    }

    /// A new disk holding what this one would hold if the power went now.
    pub fn power_cut(&self, rng: &mut Rng) -> SimDisk {
        let seed = rng.bits();
        SimDisk::from_images(cut_all(&self.disk().files, seed))
    }

    /// Cut the power (into copies, taken by [`SimDisk::disarm`]) just before the `after`th
    /// write, length change or sync from now on, any file, and with `each` before every one
    /// after it too.
    pub fn arm(&self, after: u64, each: bool, seed: u64) {
        let mut d = self.disk();
        let from = d.ios + after.max(1);
        d.trap = Some(Trap {
            from,
            each,
            seed,
            cuts: Vec::new(),
        });
    }

    /// Remove the trap; the disks it cut, in order.
    pub fn disarm(&self) -> Vec<SimDisk> {
        let cuts = self.disk().trap.take().map(|t| t.cuts);
        cuts.into_iter()
            .flatten()
            .map(SimDisk::from_images)
            .collect()
    }

    /// A disk whose files may hold `capacity` bytes together.
    pub fn with_capacity(capacity: u64) -> SimDisk {
        let disk = SimDisk::default();
        disk.disk().capacity = Some(capacity);
        disk
    }

    /// (free bytes, capacity); a disk without a limit has a large one.
    pub fn space(&self) -> (u64, u64) {
        let d = self.disk();
        let cap = d.capacity.unwrap_or(1 << 50);
        (cap.saturating_sub(d.used()), cap)
    }

    /// Fail the `after`th write, length change or sync from now on (any file) with `errno`,
    /// and with `sticky` every one after it too, until [`SimDisk::heal`].
    pub fn fail_at(&self, after: u64, errno: i32, sticky: bool) {
        let mut d = self.disk();
        let at = d.ios + after.max(1);
        d.fault = Some(Fault { at, errno, sticky });
    }

    /// Remove the fault; how many I/Os it failed.
    pub fn heal(&self) -> u64 {
        let mut d = self.disk();
        d.fault = None;
        std::mem::take(&mut d.failed)
    }

    /// Writes, length changes and syncs so far.
    pub fn ios(&self) -> u64 {
        self.disk().ios
    }

    /// Run `f` on file `id` after counting an I/O that makes it `grow_to` bytes long (at
    /// least): an armed trap goes off first, then a fault or a full disk fails it.
    fn io<R>(&self, id: usize, grow_to: u64, f: impl FnOnce(&mut Image) -> R) -> io::Result<R> {
        let mut d = self.disk();
        d.ios += 1;
        let ios = d.ios;
        let Disk { files, trap, .. } = &mut *d;
        if let Some(t) = trap.as_mut() {
            if ios == t.from || (t.each && ios > t.from) {
                t.cuts.push(cut_all(files, t.seed ^ ios));
            }
        }
        if let Some(fault) = &d.fault {
            if ios == fault.at || (fault.sticky && ios > fault.at) {
                let e = fault.errno;
                d.failed += 1;
                return Err(io::Error::from_raw_os_error(e));
            }
        }
        let len = d.files[id].now.len() as u64;
        if let Some(cap) = d.capacity {
            if grow_to > len && d.used() + (grow_to - len) > cap {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        Ok(f(&mut d.files[id]))
    }
}

/// A file on a [`SimDisk`].
#[derive(Clone)]
pub struct SimFile {
    disk: SimDisk,
    id: usize,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimFile({})", self.id)
    }
}

impl StorageBackend for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.disk.disk().files[self.id].now.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let d = self.disk.disk();
        let now = &d.files[self.id].now;
        let end = offset.saturating_add(out.len() as u64);
        if end > now.len() as u64 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        out.copy_from_slice(&now[offset as usize..end as usize]);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.disk
            .io(self.id, len, |f| f.change(Change::SetLen(len)))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.disk.io(self.id, 0, Image::sync)
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset.saturating_add(data.len() as u64);
        self.disk.io(self.id, end, |f| {
            f.change(Change::Write(offset, data.to_vec()))
        })
    }
}

impl SimFile {
    /// The disk this file is on.
    pub fn disk(&self) -> SimDisk {
        self.disk.clone()
    }

    /// Grow the file to `len` bytes (a simulated disk counts every byte of a file as used).
    pub fn allocate(&self, len: u64) -> io::Result<()> {
        if len > StorageBackend::len(self)? {
            StorageBackend::set_len(self, len)?;
        }
        Ok(())
    }

    /// Punch a hole: the whole pages inside `offset..offset + len` (and within the file)
    /// read as zeros from now on.
    pub fn punch(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = (offset.saturating_add(len) / PAGE * PAGE).min(StorageBackend::len(self)?);
        let start = offset.div_ceil(PAGE) * PAGE;
        if start >= end {
            return Ok(());
        }
        let zeros = vec![0u8; (end - start) as usize];
        StorageBackend::write(self, start, &zeros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(f: &SimFile) -> Vec<u8> {
        let mut b = vec![0u8; f.len().unwrap() as usize];
        f.read(0, &mut b).unwrap();
        b
    }

    #[test]
    fn synced_writes_survive_unsynced_ones_may_not() {
        let disk = SimDisk::default();
        let f = disk.new_file();
        f.write(0, &[1u8; 10_000]).unwrap();
        f.sync_data().unwrap();
        f.write(5000, &[2u8; 5000]).unwrap();
        f.set_len(20_000).unwrap();
        let mut rng = Rng(1);
        let (mut kept, mut lost) = (false, false);
        for _ in 0..200 {
            let c = contents(&disk.power_cut(&mut rng).file(0));
            assert!(c.len() == 10_000 || c.len() == 20_000);
            assert!(c[..5000].iter().all(|&b| b == 1));
            // Pages land whole: 5000..8192 is one piece, 8192..10000 another.
            for piece in [5000..8192, 8192..10_000] {
                let p = &c[piece];
                assert!(p.iter().all(|&b| b == 1) || p.iter().all(|&b| b == 2));
                kept |= p[0] == 2;
                lost |= p[0] == 1;
            }
            assert!(c[10_000..].iter().all(|&b| b == 0));
        }
        assert!(kept && lost);
    }

    #[test]
    fn a_cut_that_reached_the_disk_removes_earlier_writes_past_it() {
        let disk = SimDisk::default();
        let f = disk.new_file();
        f.write(0, &[3u8; 8192]).unwrap();
        f.set_len(100).unwrap();
        f.set_len(8192).unwrap();
        let mut rng = Rng(2);
        let same = |c: &[u8], r: std::ops::Range<usize>| {
            c[r.clone()].iter().all(|&b| b == 3) || c[r].iter().all(|&b| b == 0)
        };
        let mut cut_after_write = false;
        for _ in 0..200 {
            let c = contents(&disk.power_cut(&mut rng).file(0));
            match c.len() {
                0 => {}
                100 => assert!(same(&c, 0..100)),
                8192 if c[100..].iter().all(|&b| b == 0) => cut_after_write |= c[0] == 3,
                8192 => assert!(same(&c, 0..4096) && same(&c, 4096..8192)),
                n => panic!("length {n}"),
            }
        }
        assert!(cut_after_write);
    }

    #[test]
    fn a_trap_cuts_before_the_io_it_waits_for() {
        let disk = SimDisk::default();
        let f = disk.new_file();
        disk.arm(2, false, 5);
        f.write(0, b"one").unwrap();
        f.sync_data().unwrap();
        f.write(0, b"two").unwrap();
        let cuts = disk.disarm();
        assert_eq!(cuts.len(), 1);
        // Cut before the sync: the write may or may not be there.
        let c = contents(&cuts[0].file(0));
        assert!(c.is_empty() || c == b"one");
        assert!(disk.disarm().is_empty());
        f.sync_data().unwrap();
        disk.arm(1, true, 6);
        f.write(3, b"three").unwrap();
        f.sync_data().unwrap();
        f.sync_data().unwrap();
        let cuts: Vec<Vec<u8>> = disk.disarm().iter().map(|d| contents(&d.file(0))).collect();
        assert_eq!(cuts.len(), 3, "one cut before each I/O");
        assert_eq!(cuts[0], b"two");
        assert!([&b"two"[..], b"two\0\0\0\0\0", b"twothree"].contains(&cuts[1].as_slice()));
        assert_eq!(cuts[2], b"twothree");
    }
}
