//! The overlap: files are worked on by a few I/O lanes at once, every lane sending its
//! extents through the engine's one [`Offload`] (compression, then the decode check as an
//! `Op::Decompress`), so that reading the next files, compressing, checking and the encoded
//! writes of the files before proceed together instead of in turn.
//!
//! Mirrors the kernel's split of compressed writeback (fs/btrfs/inode.c: the btrfs-delalloc
//! workers compress while the submitting thread moves on to the next range, and
//! btrfs_submit_compressed_write() overlaps with both): here the offload's fixed pool of CPU
//! workers, one per `-j` stream, does all the compression and decoding; a lane only reads,
//! submits, compares and writes.
//!
//! * **Bounded.** Each lane keeps at most `per_lane` requests of its own in flight (submitted
//!   and not yet collected, decode checks included) and the offload's depth is
//!   `lanes × per_lane`, so a lane's submission always finds a free slot and no lane can wait
//!   on another's uncollected completions: no deadlock, and memory is bounded by
//!   `lanes × per_lane` extents (two buffers of at most 128 KiB each).
//! * **In order.** Reports (and [`Event::FileDone`]) come out in walk order whatever order the
//!   lanes finish in; [`Event::Bytes`] is passed on as it happens.
//! * **Threads.** The lanes are started once per run; a lane that cannot be started is an
//!   error ([`RecompressError::Thread`]), never a panic. No lane compresses anything itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use wring_engine::offload::{
    Completed, CompletionQueue, Done, Offload, OffloadConfig, Op as OffloadOp, Request,
};
use wring_engine::{Algorithm, CompressSpec, Engine, Outcome, Policy, Saving};

use super::file::{process_file, Finished};
use super::{Event, Options, RecompressError, Status, Summary};
use crate::ioctl::MAX_UNCOMPRESSED;
use crate::walk::Found;

/// Files worked on at once. Two are enough to keep the offload busy across one file's final
/// fdatasync and the next one's flush, lease and plan; more would only hold more leases.
pub(super) const LANES: usize = 2;

/// Requests one lane keeps in flight for `jobs` CPU workers: enough to keep every worker busy
/// while the lane writes, with decode checks in between.
pub(super) fn per_lane(jobs: usize) -> usize {
    2 * jobs + 2
}

/// A tag's top bit marks a decode check; the rest is the piece's index in its file.
const CHECK: u64 = 1 << 63;

/// One piece back from a lane: its tag, its input, and `Ok(Some(compressed))` when it
/// compressed and decoded back to the input, `Ok(None)` when it did not compress (or early
/// abort gave up), `Err` when compressing or the decode check failed.
pub(super) struct Checked {
    pub(super) tag: u64,
    pub(super) data: Vec<u8>,
    pub(super) result: Result<Option<Vec<u8>>, String>,
}

/// One lane's access to the offload: its own completion queue and spare buffers.
pub(super) struct Lane {
    queue: CompletionQueue,
    limit: usize,
    spec: CompressSpec,
    policy: Policy,
    algorithm: Algorithm,
    /// Inputs whose compressed form is being decoded, by piece tag.
    checking: BTreeMap<u64, Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

impl Lane {
    fn new(offload: &Offload, limit: usize, opts: &Options, algorithm: Algorithm) -> Lane {
        Lane {
            queue: offload.completion_queue(),
            limit,
            spec: opts.spec,
            policy: opts.policy,
            algorithm,
            checking: BTreeMap::new(),
            spare: Vec::new(),
        }
    }

    /// Whether another piece may be submitted now, with `held` pieces collected but not yet
    /// written (they count against the lane's bound too).
    pub(super) fn has_room(&self, held: usize) -> bool {
        self.queue.outstanding() + held < self.limit
    }

    /// A buffer for a piece (reused when one is spare).
    pub(super) fn buffer(&mut self) -> Vec<u8> {
        self.spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_UNCOMPRESSED))
    }

    /// Give a buffer back for reuse. Its bytes stay: whoever takes it next overwrites the
    /// part it uses, and keeping the length spares the offload zero-filling it again.
    pub(super) fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < 3 * self.limit {
            self.spare.push(buf);
        }
    }

    /// Submit one piece for compression.
    pub(super) fn compress(&mut self, tag: u64, data: Vec<u8>) -> Result<(), String> {
        let output = self.buffer();
        let op = OffloadOp::Compress {
            spec: self.spec,
            policy: self.policy,
            // The kernel reads what the bridge writes: btrfs's own rule, in whole blocks.
            saving: Saving::Block,
        };
        self.submit(op, tag, data, output)
    }

    fn submit(
        &mut self,
        op: OffloadOp,
        tag: u64,
        input: Vec<u8>,
        output: Vec<u8>,
    ) -> Result<(), String> {
        let request = Request {
            op,
            input: input.into(),
            output,
            tag,
        };
        self.queue
            .submit(request)
            .map_err(|e| format!("the compression offload did not take the extent: {e}"))
    }

    /// The next piece finished (compressed and checked, or not compressed), waiting for it;
    /// `None` when nothing is in flight.
    pub(super) fn next(&mut self) -> Option<Checked> {
        loop {
            let done = self.queue.wait(None)?;
            if done.tag & CHECK != 0 {
                return Some(self.checked(done));
            }
            match done.result {
                Ok(Completed::Compressed(Outcome::Compressed(n))) => {
                    let Done {
                        tag,
                        input,
                        mut output,
                        ..
                    } = done;
                    output.truncate(n);
                    let op = OffloadOp::Decompress {
                        algorithm: self.algorithm,
                        len: input.len(),
                    };
                    let check = self.buffer();
                    self.checking.insert(tag, input.into_vec());
                    // A slot was just collected, so the lane has room for the check.
                    if let Err(e) = self.submit(op, tag | CHECK, output, check) {
                        let data = self.checking.remove(&tag).unwrap_or_default();
                        return Some(Checked {
                            tag,
                            data,
                            result: Err(e),
                        });
                    }
                }
                Ok(Completed::Compressed(Outcome::Incompressible | Outcome::Skipped)) => {
                    self.recycle(done.output);
                    return Some(Checked {
                        tag: done.tag,
                        data: done.input.into_vec(),
                        result: Ok(None),
                    });
                }
                Ok(other) => {
                    return Some(Checked {
                        tag: done.tag,
                        data: done.input.into_vec(),
                        result: Err(format!("the offload answered {other:?} to a compression")),
                    })
                }
                Err(e) => {
                    return Some(Checked {
                        tag: done.tag,
                        data: done.input.into_vec(),
                        result: Err(e.to_string()),
                    })
                }
            }
        }
    }

    /// A decode check finished: the compressed bytes are good only if they decoded to the
    /// input exactly.
    fn checked(&mut self, done: Done) -> Checked {
        let tag = done.tag & !CHECK;
        let data = self.checking.remove(&tag).unwrap_or_default();
        let result = match done.result {
            Ok(Completed::Decompressed(_))
                if done.output.get(..data.len()) == Some(&data[..]) && !data.is_empty() =>
            {
                Ok(Some(done.input.into_vec()))
            }
            Ok(Completed::Decompressed(_)) => {
                Err("the compressed extent does not decompress to its input".into())
            }
            Ok(other) => Err(format!("the offload answered {other:?} to a decode check")),
            Err(e) => Err(format!("the compressed extent does not decompress: {e}")),
        };
        let output = done.output;
        self.recycle(output);
        Checked { tag, data, result }
    }

    /// Wait for everything in flight and throw it away.
    pub(super) fn drain(&mut self) {
        while self.queue.wait(None).is_some() {}
        self.checking.clear();
    }
}

/// What a lane tells the caller's thread.
enum Msg {
    Started(usize),
    Bytes(u64),
    Finished(usize, Box<Finished>),
    /// The filesystem is full: this many files were left unstarted.
    Full(usize),
}

/// What the walk found, in walk order, for the lanes to take.
type Work = Mutex<std::vec::IntoIter<(usize, PathBuf, u64)>>;

/// Recompress the files of `found` with `opts.jobs` CPU workers; events and the summary in
/// walk order.
pub(super) fn run(
    engine: &Arc<Engine>,
    found: Vec<Found>,
    opts: &Options,
    algorithm: Algorithm,
    summary: &mut Summary,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(), RecompressError> {
    let jobs = opts.jobs.max(1);
    let limit = per_lane(jobs);
    let offload = Offload::new(
        Arc::clone(engine),
        OffloadConfig {
            depth: LANES * limit,
            workers: jobs,
            device: None,
        },
    )
    .map_err(RecompressError::Offload)?;
    let files: Vec<(usize, PathBuf, u64)> = found
        .iter()
        .enumerate()
        .filter_map(|(i, f)| match f {
            Found::File(path, size) => Some((i, path.clone(), *size)),
            Found::Passed(..) => None,
        })
        .collect();
    let lanes = LANES.min(files.len()).max(1);
    let work: Work = Mutex::new(files.into_iter());
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Msg>();
        for n in 0..lanes {
            let tx = tx.clone();
            let (offload, work) = (&offload, &work);
            let started = std::thread::Builder::new()
                .name(format!("wring-recompress-{n}"))
                .spawn_scoped(scope, move || {
                    lane(offload, work, limit, opts, algorithm, &tx)
                });
            if let Err(e) = started {
                // The lanes already started finish the file in hand and stop.
                if let Ok(mut w) = work.lock() {
                    w.by_ref().for_each(drop);
                }
                return Err(RecompressError::Thread(e));
            }
        }
        drop(tx);
        collect(&rx, &found, summary, on_event);
        Ok(())
    })
}

/// A lane: take the next file, work on it through the offload, report, until none is left.
fn lane(
    offload: &Offload,
    work: &Work,
    limit: usize,
    opts: &Options,
    algorithm: Algorithm,
    tx: &mpsc::Sender<Msg>,
) {
    let mut lane = Lane::new(offload, limit, opts, algorithm);
    loop {
        let next = match work.lock() {
            Ok(mut w) => w.next(),
            Err(_) => None,
        };
        let Some((index, path, size)) = next else {
            return;
        };
        let _ = tx.send(Msg::Started(index));
        let finished = process_file(&mut lane, &path, size, opts, algorithm, &mut |n| {
            let _ = tx.send(Msg::Bytes(n));
        });
        let full = matches!(&finished.report.status, Status::Failed(e) if e.no_room());
        let _ = tx.send(Msg::Finished(index, Box::new(finished)));
        if full {
            // The filesystem is full: no file is started after this one (the other lane
            // finishes the one in hand). Each file is unchanged in content, whatever was
            // written of it (see the module's header).
            if let Ok(mut w) = work.lock() {
                let left = w.by_ref().count();
                let _ = tx.send(Msg::Full(left));
            }
            return;
        }
    }
}

/// Pass the lanes' messages on as events and put the reports in walk order.
fn collect(
    rx: &mpsc::Receiver<Msg>,
    found: &[Found],
    summary: &mut Summary,
    on_event: &mut dyn FnMut(Event<'_>),
) {
    let mut ready: BTreeMap<usize, Box<Finished>> = BTreeMap::new();
    let mut cursor = 0;
    flush(found, &mut ready, &mut cursor, summary, on_event);
    for msg in rx {
        match msg {
            Msg::Started(i) => {
                if let Some(Found::File(path, _)) = found.get(i) {
                    on_event(Event::FileStarted(path));
                }
            }
            Msg::Bytes(n) => on_event(Event::Bytes(n)),
            Msg::Finished(i, finished) => {
                ready.insert(i, finished);
                flush(found, &mut ready, &mut cursor, summary, on_event);
            }
            Msg::Full(left) => summary.full = Some(summary.full.unwrap_or(0) + left),
        }
    }
    // Files never started (the filesystem filled up) leave gaps: report the rest around them.
    while cursor < found.len() {
        if matches!(found[cursor], Found::File(..)) && !ready.contains_key(&cursor) {
            cursor += 1;
            continue;
        }
        flush(found, &mut ready, &mut cursor, summary, on_event);
    }
}

/// Report every file and passed-over path from `cursor` on whose turn has come.
fn flush(
    found: &[Found],
    ready: &mut BTreeMap<usize, Box<Finished>>,
    cursor: &mut usize,
    summary: &mut Summary,
    on_event: &mut dyn FnMut(Event<'_>),
) {
    while let Some(f) = found.get(*cursor) {
        match f {
            Found::Passed(path, why) => on_event(Event::Passed(path, why.to_string())),
            Found::File(..) => {
                let Some(done) = ready.remove(cursor) else {
                    return;
                };
                let Finished {
                    report,
                    before,
                    after,
                } = *done;
                if let Some(items) = before {
                    summary.before.add_file(&items);
                }
                if let (Some(total), Some(items)) = (&mut summary.after, after) {
                    total.add_file(&items);
                }
                on_event(Event::FileDone(&report));
                summary.files.push(report);
            }
        }
        *cursor += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recompress::FileReport;
    use crate::walk::Passed;

    fn finished(path: &str) -> Box<Finished> {
        Box::new(Finished {
            report: FileReport::new(PathBuf::from(path), 1),
            before: Some(Vec::new()),
            after: None,
        })
    }

    #[test]
    fn reports_come_out_in_walk_order_whatever_order_the_lanes_finish_in() {
        let found = vec![
            Found::File("a".into(), 1),
            Found::Passed("link".into(), Passed::NotRegular),
            Found::File("b".into(), 1),
            Found::File("c".into(), 1),
        ];
        let (tx, rx) = mpsc::channel();
        // Lane 2 finishes c, then lane 1 finishes b, then a: the walk order is a, link, b, c.
        for (i, path) in [(3, "c"), (2, "b"), (0, "a")] {
            tx.send(Msg::Started(i)).unwrap();
            tx.send(Msg::Bytes(1)).unwrap();
            tx.send(Msg::Finished(i, finished(path))).unwrap();
        }
        drop(tx);
        let mut summary = Summary::default();
        let mut seen = Vec::new();
        let mut bytes = 0;
        collect(&rx, &found, &mut summary, &mut |e| match e {
            Event::FileDone(r) => seen.push(format!("done {}", r.path.display())),
            Event::Passed(p, _) => seen.push(format!("passed {}", p.display())),
            Event::Bytes(n) => bytes += n,
            _ => {}
        });
        assert_eq!(seen, ["done a", "passed link", "done b", "done c"]);
        assert_eq!(bytes, 3);
        let order: Vec<_> = summary.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(order, [PathBuf::from("a"), "b".into(), "c".into()]);
        assert_eq!(summary.before.files, 3);
    }
}
