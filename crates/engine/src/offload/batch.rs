//! Borrowed batches: a front end's extents for one request (a read's extents, a file's
//! extents) submitted without copying into owned buffers, run on the providers, and all
//! finished before `run` returns — the scoped-thread rule that makes the borrowed pointers
//! sound. The calling thread does not compress: the workers hold every stream, and a third
//! thread contending for two workspaces halved `bench levels`' speed (measured: 422 against
//! 681 MB/s at zstd:1 on 2 streams). A batch of one CPU job runs on the calling thread.

use super::queue::{Job, Output, Shared, SlotId, Src, Target};
use super::{Completed, Op};
use crate::dict::Dictionary;
use crate::error::Error;

/// One borrowed job of a batch.
#[derive(Debug)]
pub struct BatchJob<'a> {
    /// What to do.
    pub op: Op,
    /// The bytes to work on.
    pub input: &'a [u8],
    /// Where the result goes: at least the compressed limit of the input (compression) or the
    /// decoded size (decompression); for [`Op::CompressInto`], its length is the limit.
    pub output: &'a mut [u8],
    /// Set when the batch has run.
    pub result: Option<Result<Completed, Error>>,
    /// The dictionary to compress or decompress with ([`BatchJob::with_dictionary`]).
    dictionary: Option<Dictionary>,
    slot: Option<SlotId>,
}

impl<'a> BatchJob<'a> {
    /// A job to run.
    pub fn new(op: Op, input: &'a [u8], output: &'a mut [u8]) -> BatchJob<'a> {
        BatchJob {
            op,
            input,
            output,
            result: None,
            dictionary: None,
            slot: None,
        }
    }

    /// The same job with `dictionary` (zstd only: any other algorithm completes with
    /// [`Error::NoDictionary`]). A job with a dictionary runs on the CPU.
    pub fn with_dictionary(mut self, dictionary: Option<&Dictionary>) -> BatchJob<'a> {
        self.dictionary = dictionary.cloned();
        self
    }

    fn job(&mut self) -> Job {
        Job {
            op: self.op,
            input: Src::Borrowed {
                ptr: self.input.as_ptr(),
                len: self.input.len(),
            },
            output: Output::Borrowed {
                ptr: self.output.as_mut_ptr(),
                len: self.output.len(),
            },
            dictionary: self.dictionary.clone(),
            tag: 0,
        }
    }
}

/// Waits for every submitted job of the batch when dropped, so that no worker can touch a
/// borrowed buffer after `run` has returned or unwound.
struct Pending<'b, 'a> {
    shared: &'b Shared,
    jobs: &'b mut [BatchJob<'a>],
}

impl Pending<'_, '_> {
    fn collect(&mut self, i: usize) {
        if let Some(id) = self.jobs[i].slot.take() {
            self.jobs[i].result = Some(self.shared.wait(id).result);
        }
    }
}

impl Drop for Pending<'_, '_> {
    fn drop(&mut self) {
        for i in 0..self.jobs.len() {
            self.collect(i);
        }
    }
}

pub(super) fn run(shared: &Shared, jobs: &mut [BatchJob<'_>]) {
    // One job that only the CPU can take runs here: a queue round trip would only add the
    // latency of waking a worker (a 4 KiB read's one extent).
    if let [one] = jobs {
        if !shared.has_device() {
            let mut job = one.job();
            one.result = Some(shared.run_here(&mut job));
            return;
        }
    }
    let mut pending = Pending { shared, jobs };
    // The oldest job not yet collected: collected first when the queue is full.
    let mut oldest = 0;
    for i in 0..pending.jobs.len() {
        let mut job = pending.jobs[i].job();
        loop {
            // Holding none of our own slots, waiting for a free one cannot deadlock.
            let block = oldest == i;
            match shared.submit_job(job, Target::Ticket, block) {
                Ok(id) => {
                    pending.jobs[i].slot = Some(id);
                    break;
                }
                Err((back, true)) => {
                    // Full, partly with our own earlier jobs: collect the oldest first.
                    job = back;
                    pending.collect(oldest);
                    oldest += 1;
                }
                Err((_, false)) => {
                    pending.jobs[i].result = Some(Err(Error::ShutDown));
                    break;
                }
            }
        }
    }
    // Pending's drop collects the rest, in order.
}
