//! zram's `writeback` attribute (`writeback_store` in drivers/block/zram/zram_drv.c,
//! CONFIG_ZRAM_WRITEBACK): write idle, huge, huge-and-idle or incompressible pages out to the
//! backing file, uncompressed, page by page under each slot's lock.
//!
//! * Each page spends one page of `writeback_limit` (zram's budget, 4 KiB pages); at zero the
//!   writeback stops and says so in its report.
//! * When no block is free, or the file system refuses the write (ENOSPC on a full file
//!   system), the writeback stops with [`BlkError::BackingFull`]: the page it was on stays in
//!   RAM and keeps its budget, the pages written before it stay written back, nothing is lost.
//! * The backing file, its blocks and the slot's change are the device's
//!   (`Store::write_back_slot`); this chooses the pages and keeps the budget.

use crate::device::backing::WbError;
use crate::device::slot::{flag, Entry, Slot};
use crate::device::Store;
use crate::error::BlkError;
use crate::options::WritebackType;
use crate::report::WritebackReport;
use crate::sync::lock;

/// zram's `writeback`: write the chosen pages to the backing file.
pub fn writeback(store: &Store, kind: WritebackType) -> Result<WritebackReport, BlkError> {
    let Some(backing) = store.writeback_state().file() else {
        return Err(BlkError::Option(
            "writeback: the device has no backing_dev; start it with -o backing_dev=FILE".into(),
        ));
    };
    let mut report = WritebackReport::default();
    for (page, slot) in store.entries().iter().enumerate() {
        let mut e = lock(slot);
        if !matches!(e.slot, Slot::Stored { .. }) || !wants(kind, &e, store.slot_size()) {
            continue;
        }
        if !store.writeback_state().spend() {
            report.limit_reached = true;
            break;
        }
        if let Err(err) = store.write_back_slot(backing, &mut e, page) {
            // The page was not written back: give its budget back.
            store.writeback_state().refund();
            return Err(match err {
                WbError::Full(why) => BlkError::BackingFull {
                    path: backing.path().display().to_string(),
                    blocks: backing.blocks(),
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

/// Whether a writeback of `kind` takes the slot `e`.
fn wants(kind: WritebackType, e: &Entry, slot_size: usize) -> bool {
    let (huge, idle) = (e.slot.is_huge(slot_size), e.has(flag::IDLE));
    match kind {
        WritebackType::Idle => idle,
        WritebackType::Huge => huge,
        WritebackType::HugeIdle => huge && idle,
        WritebackType::Incompressible => e.has(flag::INCOMPRESSIBLE),
    }
}
