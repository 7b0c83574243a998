//! zram's `idle` attribute (`idle_store` and `mark_idle` in drivers/block/zram/zram_drv.c):
//! mark pages idle, all of them or those not accessed for a number of seconds, so that
//! `recompress type=idle` and `writeback idle` find them. The access times are the device's
//! (a read or a write stamps them from its clock).

use crate::device::slot::{flag, Slot};
use crate::device::Store;
use crate::sync::lock;

/// zram's `idle`: mark every page held in the arena idle (`older_than` None: `idle all`), or
/// only those not read or written for at least `older_than` seconds, clearing the mark on the
/// others. Empty and same-filled pages are skipped. Returns the pages now idle.
pub fn mark_idle(store: &Store, older_than: Option<u64>) -> u64 {
    let now = store.now();
    let mut idle = 0;
    for s in store.entries() {
        let mut e = lock(s);
        if !matches!(e.slot, Slot::Stored { .. }) {
            continue;
        }
        let is_idle = older_than.is_none_or(|secs| now.saturating_sub(e.ac_time) >= secs);
        store.set_flag(&mut e, flag::IDLE, is_idle);
        idle += u64::from(is_idle);
    }
    idle
}
