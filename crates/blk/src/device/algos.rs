//! The device's algorithms: the primary one (`comp_algorithm`, zram's `zram->comps[ZRAM_PRIMARY_COMP]`)
//! and up to three secondary ones by priority (`recomp_algorithm`, `zram->comps[1..]`), each a
//! set of [`Streams`]. A stored object carries the priority it was compressed with, and decodes
//! with that priority's streams.

use std::sync::OnceLock;

use super::slot::{corrupt, with_page};
use super::stats::StreamStat;
use super::streams::{PageJob, Streams};
use crate::error::BlkError;

/// The primary algorithm and the secondaries of priority 1 to 3.
pub(crate) struct Algorithms {
    primary: Box<dyn Streams>,
    /// Secondary algorithms by priority 1 to 3 (`recomp_algorithm`).
    /// Set once each: at creation, or live by `train_dict` into a free priority.
    recomp: [OnceLock<Box<dyn Streams>>; 3],
}

impl Algorithms {
    /// `primary` and no secondary algorithm.
    pub(crate) fn new(primary: Box<dyn Streams>) -> Algorithms {
        Algorithms {
            primary,
            recomp: [OnceLock::new(), OnceLock::new(), OnceLock::new()],
        }
    }

    /// The primary algorithm's streams.
    pub(crate) fn primary(&self) -> &dyn Streams {
        self.primary.as_ref()
    }

    /// Set the algorithm at `prio` (1 to 3), replacing one set before.
    pub(crate) fn set(&mut self, prio: u8, streams: Box<dyn Streams>) -> Result<(), BlkError> {
        let i = usize::from(prio).wrapping_sub(1);
        if i < self.recomp.len() {
            self.recomp[i] = OnceLock::new();
        }
        match self.recomp.get(i).map(|s| s.set(streams)) {
            Some(Ok(())) => Ok(()),
            _ => Err(BlkError::Option(format!(
                "recomp_algorithm priority={prio} is out of range; use 1 to 3"
            ))),
        }
    }

    /// Add an algorithm live at the lowest free priority; returns it.
    pub(crate) fn install(&self, streams: Box<dyn Streams>) -> Result<u8, BlkError> {
        let mut streams = streams;
        for (i, slot) in self.recomp.iter().enumerate() {
            match slot.set(streams) {
                Ok(()) => return Ok(i as u8 + 1),
                Err(back) => streams = back,
            }
        }
        Err(BlkError::Option(format!(
            "all three recompression priorities are taken ({}); start the device with fewer \
             recomp_algorithm options to leave one for {}",
            self.names().join(", "),
            streams.algorithm()
        )))
    }

    /// The secondary algorithm at `prio` (1 to 3), if one is set.
    pub(crate) fn at(&self, prio: u8) -> Option<&dyn Streams> {
        self.recomp
            .get(usize::from(prio).wrapping_sub(1))?
            .get()
            .map(|b| b.as_ref())
    }

    /// Every secondary algorithm set, by priority.
    pub(crate) fn secondaries(&self) -> impl Iterator<Item = (u8, &dyn Streams)> {
        (1..=3u8).filter_map(|p| Some((p, self.at(p)?)))
    }

    /// The algorithm of priority `prio` (0 the primary). A priority with no algorithm (which
    /// no stored object can carry) falls back to the primary.
    pub(crate) fn of(&self, prio: u8) -> &dyn Streams {
        self.at(prio).unwrap_or(self.primary.as_ref())
    }

    /// The secondaries as `zstd:3 priority=1` (`stat`'s `recomp_algorithms`).
    pub(crate) fn names(&self) -> Vec<String> {
        self.secondaries()
            .map(|(p, s)| format!("{} priority={p}", s.algorithm()))
            .collect()
    }

    /// Per stream set, the primary's then each secondary's figures.
    pub(crate) fn stream_stats(&self) -> Vec<StreamStat> {
        std::iter::once((0u8, self.primary.as_ref()))
            .chain(self.secondaries())
            .map(|(prio, s)| StreamStat {
                priority: prio,
                ..s.figures()
            })
            .collect()
    }

    /// Decompress one slot's object `comp` with the streams of `prio` into `page` (the one
    /// decode the read path and a slot's load run); `index` names the slot in errors.
    pub(crate) fn decode(
        &self,
        prio: u8,
        comp: &[u8],
        page: &mut [u8],
        index: usize,
    ) -> Result<(), BlkError> {
        let mut jobs = [PageJob::new(comp, page)];
        self.of(prio).decompress(&mut jobs);
        match jobs[0].result.take() {
            Some(Ok(_)) => Ok(()),
            Some(Err(err)) => Err(with_page(err, index)),
            None => Err(with_page(corrupt("not decompressed"), index)),
        }
    }
}
