//! Writeback to a backing file: zram's `backing_dev`, `writeback`, `writeback_limit` and
//! `bd_stat` (CONFIG_ZRAM_WRITEBACK in drivers/block/zram/zram_drv.c).
//!
//! * The backing file is divided into 4 KiB blocks handed out from a bitmap
//!   (`alloc_block_bdev`/`free_block_bdev`). A file that already has a size keeps it: its
//!   blocks are all there is, as a block device's are to zram. An empty (or new) file gets as
//!   many blocks as the device has pages and grows as they are written.
//! * [`Store::writeback`] writes idle, huge, huge-and-idle or incompressible pages out
//!   uncompressed (zram writes the decompressed page), page by page under each slot's lock, and
//!   frees their arena objects; the slot then names its block. A read, or the read half of a
//!   partial write, reads the block back transparently; a write, discard or reset frees it.
//! * When no block is free, or the file system refuses the write (ENOSPC on a full file
//!   system), writeback stops with [`BlkError::BackingFull`]: the page it was on stays in RAM,
//!   the pages written before it stay written back, nothing is lost.
//! * `writeback_limit` is zram's budget in 4 KiB pages (set = `writeback_limit_enable`): each
//!   page written back spends one; at zero, writeback stops and says so.
//! * `bd_stat` counts in zram's units, 4 KiB pages: `bd_count` pages on the file now,
//!   `bd_reads` and `bd_writes` pages read and written since the device was made.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::arena::PAGE_SIZE;
use crate::error::BlkError;
use crate::stats::Counters;
use crate::store::{flag, Entry, Slot, Store};
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

    fn alloc(&self) -> Option<u64> {
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

    fn free(&self, block: u64) {
        let mut used = lock(&self.used);
        if let Some(w) = used.get_mut((block / 64) as usize) {
            *w &= !(1 << (block % 64));
        }
    }

    fn write(&self, block: u64, page: &[u8]) -> std::io::Result<()> {
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

/// Which pages [`Store::writeback`] writes out (zram's `writeback` words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WritebackType {
    /// Pages marked idle.
    Idle,
    /// Huge pages.
    Huge,
    /// Pages both huge and idle.
    HugeIdle,
    /// Pages every recompression algorithm failed on.
    Incompressible,
}

impl WritebackType {
    /// Parse `idle`, `huge`, `huge_idle` or `incompressible`.
    pub fn parse(text: &str) -> Result<WritebackType, BlkError> {
        Ok(match text.trim() {
            "idle" => WritebackType::Idle,
            "huge" => WritebackType::Huge,
            "huge_idle" => WritebackType::HugeIdle,
            "incompressible" => WritebackType::Incompressible,
            other => {
                return Err(BlkError::Option(format!(
                    "writeback {other}: give idle, huge, huge_idle or incompressible"
                )))
            }
        })
    }

    /// The word [`WritebackType::parse`] reads back.
    pub fn name(self) -> &'static str {
        match self {
            WritebackType::Idle => "idle",
            WritebackType::Huge => "huge",
            WritebackType::HugeIdle => "huge_idle",
            WritebackType::Incompressible => "incompressible",
        }
    }

    fn wants(self, e: &Entry, slot_size: usize) -> bool {
        let (huge, idle) = (e.slot.is_huge(slot_size), e.has(flag::IDLE));
        match self {
            WritebackType::Idle => idle,
            WritebackType::Huge => huge,
            WritebackType::HugeIdle => huge && idle,
            WritebackType::Incompressible => e.has(flag::INCOMPRESSIBLE),
        }
    }
}

/// What a writeback did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritebackReport {
    /// Pages written to the backing file by this call.
    pub written: u64,
    /// Whether it stopped because `writeback_limit` ran out.
    pub limit_reached: bool,
}

impl Store {
    /// Use `backing` for writeback (before the store is shared). Refused with slots larger
    /// than 4 KiB: the backing file's blocks and `writeback_limit` are 4 KiB pages.
    pub fn set_backing(&mut self, backing: Backing) -> Result<(), BlkError> {
        if self.slot_size() != PAGE_SIZE {
            return Err(BlkError::Option(format!(
                "slot_size={}K cannot be used with backing_dev={}: writeback writes 4 KiB \
                 blocks; drop backing_dev, or use slot_size=4K",
                self.slot_size() / 1024,
                backing.path.display()
            )));
        }
        self.backing = Some(backing);
        Ok(())
    }

    /// Set the writeback budget in pages (`None`: no limit; zram's `writeback_limit` with
    /// `writeback_limit_enable`).
    pub fn set_writeback_limit(&self, pages: Option<u64>) {
        *lock(&self.wb_limit) = pages;
    }

    /// The writeback budget left.
    pub fn writeback_limit(&self) -> Option<u64> {
        *lock(&self.wb_limit)
    }

    /// zram's `writeback`: write the chosen pages to the backing file.
    pub fn writeback(&self, kind: WritebackType) -> Result<WritebackReport, BlkError> {
        let Some(backing) = &self.backing else {
            return Err(BlkError::Option(
                "writeback: the device has no backing_dev; start it with -o backing_dev=FILE"
                    .into(),
            ));
        };
        let mut report = WritebackReport::default();
        for (page, slot) in self.slots.iter().enumerate() {
            let mut e = lock(slot);
            if !matches!(e.slot, Slot::Stored { .. }) || !kind.wants(&e, self.slot_size()) {
                continue;
            }
            {
                let mut budget = lock(&self.wb_limit);
                match budget.as_mut() {
                    Some(0) => {
                        report.limit_reached = true;
                        break;
                    }
                    Some(n) => *n -= 1,
                    None => {}
                }
            }
            if let Err(err) = self.write_back_slot(backing, &mut e, page) {
                // The page was not written back: give its budget back.
                if let Some(n) = lock(&self.wb_limit).as_mut() {
                    *n += 1;
                }
                return Err(match err {
                    WbError::Full(why) => BlkError::BackingFull {
                        path: backing.path.display().to_string(),
                        blocks: backing.blocks,
                        written: report.written,
                        why,
                    },
                    WbError::Other(e) => e,
                });
            }
            report.written += 1;
        }
        Ok(report)
    }

    fn write_back_slot(
        &self,
        backing: &Backing,
        e: &mut Entry,
        page_index: usize,
    ) -> Result<(), WbError> {
        let mut page = vec![0u8; self.slot_size()];
        self.load(e, page_index, &mut page)
            .map_err(WbError::Other)?;
        let Some(block) = backing.alloc() else {
            return Err(WbError::Full(format!(
                "all {} blocks are in use",
                backing.blocks
            )));
        };
        if let Err(err) = backing.write(block, &page) {
            backing.free(block);
            let why = format!("writing block {block} failed: {err}");
            return Err(if err.raw_os_error() == Some(libc::ENOSPC) {
                WbError::Full(why)
            } else {
                WbError::Other(BlkError::Io {
                    what: format!("writeback to {}", backing.path.display()),
                    source: err,
                })
            });
        }
        let ac_time = e.ac_time;
        self.release(e);
        e.slot = Slot::Written { block };
        e.ac_time = ac_time;
        self.account(&e.slot);
        Counters::add(&self.counters.bd_writes, 1);
        Ok(())
    }

    /// Read a written-back page (a read, or the read half of a partial write).
    pub(crate) fn read_back(&self, block: u64, page: &mut [u8]) -> Result<(), BlkError> {
        let Some(backing) = &self.backing else {
            return Err(BlkError::Corrupt {
                page: 0,
                message: "a slot names a backing block but the device has no backing_dev".into(),
            });
        };
        backing.read(block, page)?;
        Counters::add(&self.counters.bd_reads, 1);
        Ok(())
    }

    /// Give a written-back page's block back.
    pub(crate) fn free_block(&self, block: u64) {
        if let Some(b) = &self.backing {
            b.free(block);
        }
    }
}

enum WbError {
    Full(String),
    Other(BlkError),
}
