//! What the store's two files live on, mirroring the block device under btrfs: the real file,
//! a copy-on-write overlay that lets fsck open a store without writing to it, and (in tests) a
//! simulated disk that keeps only what was synced when the power goes ([`super::simdisk`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Bound;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// One of the store's files.
pub enum Medium {
    /// The real file.
    File(File),
    /// A file on a simulated disk.
    #[cfg(test)]
    Sim(super::simdisk::SimFile),
}

impl Medium {
    /// Open the file at `path` read-write, created if missing.
    pub fn open(path: &Path) -> io::Result<Medium> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            // Never wider than the store's files (mkfs makes it exactly that).
            .mode(super::FILE_MODE)
            .open(path)?;
        Ok(Medium::File(file))
    }

    /// Open the file at `path` read-only.
    pub fn open_read_only(path: &Path) -> io::Result<Medium> {
        Ok(Medium::File(File::open(path)?))
    }

    /// Read exactly `buf.len()` bytes at `offset` (a short file is an error).
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            Medium::File(f) => f.read_exact_at(buf, offset),
            #[cfg(test)]
            Medium::Sim(f) => f.read(offset, buf),
        }
    }

    /// Write all of `bytes` at `offset`.
    pub fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        match self {
            Medium::File(f) => f.write_all_at(bytes, offset),
            #[cfg(test)]
            Medium::Sim(f) => f.write(offset, bytes),
        }
    }

    /// Cut or extend (with zeros) to `len` bytes.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        match self {
            Medium::File(f) => f.set_len(len),
            #[cfg(test)]
            Medium::Sim(f) => StorageBackend::set_len(f, len),
        }
    }

    /// The length in bytes.
    pub fn size(&self) -> io::Result<u64> {
        match self {
            Medium::File(f) => Ok(f.metadata()?.len()),
            #[cfg(test)]
            Medium::Sim(f) => f.len(),
        }
    }

    /// Give the file `len` bytes of real blocks (fallocate, or zeros written where the
    /// filesystem has no fallocate): later writes below `len` need no new space.
    pub fn allocate(&self, len: u64) -> io::Result<()> {
        match self {
            Medium::File(f) => {
                use rustix::fs::{fallocate, FallocateFlags};
                match fallocate(f, FallocateFlags::empty(), 0, len) {
                    Ok(()) => Ok(()),
                    Err(rustix::io::Errno::OPNOTSUPP) => write_zeros(f, len),
                    Err(e) => Err(e.into()),
                }
            }
            #[cfg(test)]
            Medium::Sim(f) => f.allocate(len),
        }
    }

    /// Give the whole blocks inside `offset..offset + len` back to the filesystem (they read
    /// as zeros); a filesystem that cannot punch holes keeps them.
    pub fn punch(&self, offset: u64, len: u64) -> io::Result<()> {
        match self {
            Medium::File(f) => {
                use rustix::fs::{fallocate, FallocateFlags};
                let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
                match fallocate(f, flags, offset, len) {
                    Ok(()) | Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
            #[cfg(test)]
            Medium::Sim(f) => f.punch(offset, len),
        }
    }

    /// Make every write so far durable.
    pub fn sync_data(&self) -> io::Result<()> {
        match self {
            Medium::File(f) => f.sync_data(),
            #[cfg(test)]
            Medium::Sim(f) => StorageBackend::sync_data(f),
        }
    }

    /// The real file, if this is one (the flusher starts its writeback).
    pub fn file(&self) -> Option<&File> {
        match self {
            Medium::File(f) => Some(f),
            #[cfg(test)]
            Medium::Sim(_) => None,
        }
    }
}

/// Extend `f` to `len` bytes by writing zeros past its end (for filesystems without
/// fallocate).
fn write_zeros(f: &File, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut at = f.metadata()?.len();
    while at < len {
        let n = (len - at).min(zeros.len() as u64) as usize;
        let chunk = zeros.get(..n).ok_or(io::ErrorKind::InvalidInput)?;
        f.write_all_at(chunk, at)?;
        at += n as u64;
    }
    Ok(())
}

/// Size of the overlay's pages.
const PAGE: u64 = 4096;

/// Copy the bytes at file offsets `range` from `src` to `dst`, each a buffer with the file
/// offset it starts at; a range either does not hold is InvalidInput.
fn copy(
    (dst, dst_at): (&mut [u8], u64),
    (src, src_at): (&[u8], u64),
    range: std::ops::Range<u64>,
) -> io::Result<()> {
    let within = |at: u64| {
        let (from, to) = (range.start.checked_sub(at)?, range.end.checked_sub(at)?);
        Some(usize::try_from(from).ok()?..usize::try_from(to).ok()?)
    };
    let d = within(dst_at).and_then(|r| dst.get_mut(r));
    let s = within(src_at).and_then(|r| src.get(r));
    match (d, s) {
        (Some(d), Some(s)) if d.len() == s.len() => {
            d.copy_from_slice(s);
            Ok(())
        }
        _ => Err(io::ErrorKind::InvalidInput.into()),
    }
}

/// A database file read in place with every write kept in memory, so redb can open (and, after
/// a crash, repair) a store that fsck must leave as it is. Its locks are taken shared: a mount
/// (which locks exclusively) and fsck exclude each other, two fscks do not.
#[derive(Debug)]
pub(crate) struct Overlay {
    base: FileBackend,
    layer: Mutex<Layer>,
}

/// What was written over the file.
#[derive(Debug)]
struct Layer {
    /// The length redb sees.
    len: u64,
    /// The file's bytes before this offset show where no page covers them (a cut hides the
    /// rest; what is past the cut reads as zeros).
    base_len: u64,
    /// Written pages, by index.
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Overlay {
    /// The file at `path`, opened read-only.
    pub(crate) fn open(path: &Path) -> Result<Overlay, redb::DatabaseError> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Overlay {
            base: FileBackend::new(file)?,
            layer: Mutex::new(Layer {
                len,
                base_len: len,
                pages: BTreeMap::new(),
            }),
        })
    }

    fn layer(&self) -> MutexGuard<'_, Layer> {
        wring_sync::lock(&self.layer)
    }

    /// Fill `out` with what is at `offset`: the file below `base_len`, zeros past it, the
    /// written pages over both.
    fn fill(&self, layer: &Layer, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let below = (layer.base_len.saturating_sub(offset) as usize).min(out.len());
        let (file, past) = out
            .split_at_mut_checked(below)
            .ok_or(io::ErrorKind::InvalidInput)?;
        self.base.read(offset, file)?;
        past.fill(0);
        let end = offset + out.len() as u64;
        for (&idx, page) in layer.pages.range(offset / PAGE..end.div_ceil(PAGE)) {
            let (from, to) = ((idx * PAGE).max(offset), ((idx + 1) * PAGE).min(end));
            copy((out, offset), (page, idx * PAGE), from..to)?;
        }
        Ok(())
    }
}

impl StorageBackend for Overlay {
    fn len(&self) -> io::Result<u64> {
        Ok(self.layer().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let layer = self.layer();
        if offset.saturating_add(out.len() as u64) > layer.len {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        self.fill(&layer, offset, out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut layer = self.layer();
        if len < layer.len {
            layer.base_len = layer.base_len.min(len);
            layer.pages.retain(|&idx, _| idx * PAGE < len);
            if let Some(tail) = (layer.pages.get_mut(&(len / PAGE)))
                .and_then(|page| page.get_mut((len % PAGE) as usize..))
            {
                tail.fill(0);
            }
        }
        layer.len = len;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut layer = self.layer();
        let end = offset + data.len() as u64;
        for idx in offset / PAGE..end.div_ceil(PAGE) {
            if !layer.pages.contains_key(&idx) {
                let mut page = vec![0u8; PAGE as usize].into_boxed_slice();
                self.fill(&layer, idx * PAGE, &mut page)?;
                layer.pages.insert(idx, page);
            }
            let (from, to) = ((idx * PAGE).max(offset), ((idx + 1) * PAGE).min(end));
            if let Some(page) = layer.pages.get_mut(&idx) {
                copy((page, idx * PAGE), (data, offset), from..to)?;
            }
        }
        layer.len = layer.len.max(end);
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        self.base.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.base.try_lock_shared_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.base.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.base.lock_shared_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.base.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.base.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.base.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_reads_writes_over_the_file_and_leaves_it_alone() {
        let path = std::env::temp_dir().join(format!("wring-overlay-{}", std::process::id()));
        let base: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &base).unwrap();
        let o = Overlay::open(&path).unwrap();
        let mut model = base.clone();
        let check = |o: &Overlay, model: &[u8]| {
            assert_eq!(o.len().unwrap(), model.len() as u64);
            let mut got = vec![0u8; model.len()];
            o.read(0, &mut got).unwrap();
            assert!(got == model);
            assert!(o.read(model.len() as u64 - 1, &mut [0u8; 2]).is_err());
        };
        o.write(4000, &[7u8; 300]).unwrap();
        model[4000..4300].fill(7);
        check(&o, &model);
        o.set_len(4100).unwrap();
        model.truncate(4100);
        check(&o, &model);
        o.set_len(9000).unwrap();
        model.resize(9000, 0);
        check(&o, &model);
        o.write(12_000, &[9u8; 10]).unwrap();
        model.resize(12_000, 0);
        model.extend_from_slice(&[9u8; 10]);
        check(&o, &model);
        drop(o);
        assert!(
            std::fs::read(&path).unwrap() == base,
            "the file is unchanged"
        );
        let _ = std::fs::remove_file(&path);
    }
}
