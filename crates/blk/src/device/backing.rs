//! Writeback to a backing file: zram's `backing_dev`, `writeback`, `writeback_limit` and
//! `bd_stat` (CONFIG_ZRAM_WRITEBACK in drivers/block/zram/zram_drv.c).
//!
//! * The backing file is divided into 4 KiB blocks handed out from a bitmap
//!   (`alloc_block_bdev`/`free_block_bdev`). A file that already has a size keeps it: its
//!   blocks are all there is, as a block device's are to zram. An empty (or new) file gets as
//!   many blocks as the device has pages and grows as they are written.
//! * The actions' `writeback` writes idle, huge, huge-and-idle or incompressible pages out
//!   uncompressed (zram writes the decompressed page), page by page under each slot's lock, and
//!   frees their arena objects (`Store::write_back_slot`); the slot then names its block. A
//!   read, or the read half of a partial write, reads the block back transparently; a write,
//!   discard or reset frees it.
//! * When no block is free, or the file system refuses the write (ENOSPC on a full file
//!   system), writeback stops with [`BlkError::BackingFull`]: the page it was on stays in RAM,
//!   the pages written before it stay written back, nothing is lost.
//! * `writeback_limit` is zram's budget in 4 KiB pages (set = `writeback_limit_enable`): each
//!   page written back spends one; at zero, writeback stops and says so. The file and the
//!   budget are the device's writeback state, [`Writeback`].
//! * `bd_stat` counts in zram's units, 4 KiB pages: `bd_count` pages on the file now,
//!   `bd_reads` and `bd_writes` pages read and written since the device was made.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::BlkError;
use crate::options::PAGE_SIZE;
use crate::sync::{lock, Mutex};

/// The backing file and its block bitmap.
#[derive(Debug)]
pub struct Backing {
    path: PathBuf,
    file: File,
    blocks: u64,
    used: Mutex<Vec<u64>>,
}

impl Backing {
    /// Open (or create) `path`: its blocks are its size in pages, or `pages` when it is empty.
    pub fn open(path: &Path, pages: u64) -> Result<Backing, BlkError> {
        let io = |what: &str, source| BlkError::Io {
            what: format!("backing_dev={}: {what}", path.display()),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io("could not open it read-write", e))?;
        let len = file
            .metadata()
            .map_err(|e| io("could not read its size", e))?
            .len();
        let blocks = if len == 0 {
            pages
        } else {
            len / PAGE_SIZE as u64
        };
        if blocks == 0 {
            return Err(BlkError::Option(format!(
                "backing_dev={}: a file of {len} bytes holds no 4 KiB block; use an empty \
                 file (it grows) or one of at least 4096 bytes",
                path.display()
            )));
        }
        Ok(Backing {
            path: path.to_path_buf(),
            file,
            blocks,
            used: Mutex::new(vec![0; blocks.div_ceil(64) as usize]),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Blocks the file offers.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    pub(crate) fn alloc(&self) -> Option<u64> {
        let mut used = lock(&self.used);
        let (i, w) = used.iter_mut().enumerate().find(|(_, w)| **w != u64::MAX)?;
        let bit = w.trailing_ones() as u64;
        let block = i as u64 * 64 + bit;
        if block >= self.blocks {
            return None;
        }
        *w |= 1 << bit;
        Some(block)
    }

    pub(crate) fn free(&self, block: u64) {
        let mut used = lock(&self.used);
        if let Some(w) = used.get_mut((block / 64) as usize) {
            *w &= !(1 << (block % 64));
        }
    }

    pub(crate) fn write(&self, block: u64, page: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(page, block * PAGE_SIZE as u64)
    }

    /// Read block `block` into `page`.
    pub(crate) fn read(&self, block: u64, page: &mut [u8]) -> Result<(), BlkError> {
        self.file
            .read_exact_at(page, block * PAGE_SIZE as u64)
            .map_err(|source| BlkError::Io {
                what: format!(
                    "reading block {block} of the backing file {}",
                    self.path.display()
                ),
                source,
            })
    }
}

/// Why a page could not be written back: the file is full (the page stays in RAM and the
/// writeback stops, [`BlkError::BackingFull`]), or another failure.
pub(crate) enum WbError {
    /// No free block, or the file system is full: why.
    Full(String),
    /// Anything else.
    Other(BlkError),
}

/// The device's writeback state (zram's `backing_dev`, `bd_wb_limit`): the backing file, if
/// any, and the budget.
#[derive(Debug, Default)]
pub(crate) struct Writeback {
    /// The backing file (`backing_dev`).
    file: Option<Backing>,
    /// Pages writeback may still write (`writeback_limit`); `None`: no limit.
    limit: Mutex<Option<u64>>,
}

impl Writeback {
    /// Use `file` (before the device is shared).
    pub(crate) fn set_file(&mut self, file: Backing) {
        self.file = Some(file);
    }

    /// The backing file, if any.
    pub(crate) fn file(&self) -> Option<&Backing> {
        self.file.as_ref()
    }

    /// Set the budget in pages (`None`: no limit).
    pub(crate) fn set_limit(&self, pages: Option<u64>) {
        *lock(&self.limit) = pages;
    }

    /// The budget left.
    pub(crate) fn limit(&self) -> Option<u64> {
        *lock(&self.limit)
    }

    /// Spend one page of the budget; `false` when none is left.
    pub(crate) fn spend(&self) -> bool {
        let mut budget = lock(&self.limit);
        match budget.as_mut() {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
            None => true,
        }
    }

    /// Give one page of the budget back (a page that was not written back after all).
    pub(crate) fn refund(&self) {
        if let Some(n) = lock(&self.limit).as_mut() {
            *n += 1;
        }
    }

    /// Read block `block` of the backing file into `page` (a written-back slot).
    pub(crate) fn read(&self, block: u64, page: &mut [u8]) -> Result<(), BlkError> {
        let Some(file) = &self.file else {
            return Err(BlkError::Corrupt {
                page: 0,
                message: "a slot names a backing block but the device has no backing_dev".into(),
            });
        };
        file.read(block, page)
    }

    /// Give a written-back slot's block back.
    pub(crate) fn free(&self, block: u64) {
        if let Some(f) = &self.file {
            f.free(block);
        }
    }
}
