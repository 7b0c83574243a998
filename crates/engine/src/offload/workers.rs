//! The offload's provider threads: the CPU workers (one fixed pool, resized live, surplus
//! workers exiting after their request) and the device's submission threads, which hand the
//! device batches and send what it does not complete back to the CPU (the software fallback).

use std::sync::Arc;
use std::time::Instant;

use super::device::DeviceWork;
use super::queue::{Job, Notify, Phase, Shared, State};
use super::stats::{Fallback, OffloadStats};
use super::Ran;
use crate::error::Error;
use crate::sync::{thread, thread_local, wait};

thread_local! {
    /// The offload whose provider thread this is (its shared state's address), and whether it
    /// is a CPU worker (else a device thread); 0 on other threads.
    static PROVIDER_OF: std::cell::Cell<(usize, bool)> = const { std::cell::Cell::new((0, false)) };
}

impl Shared {
    /// Mark the calling thread as one of this offload's provider threads.
    fn enter(&self, cpu: bool) {
        PROVIDER_OF.with(|p| p.set((self as *const Shared as usize, cpu)));
    }

    /// Whether the calling thread is one of this offload's provider threads: a completion
    /// handler that drops the last owner of the offload shuts it down from inside one, which
    /// must not wait for itself (nor for threads that wait for it).
    fn is_own_thread(&self) -> bool {
        PROVIDER_OF.with(|p| p.get()).0 == self as *const Shared as usize
    }
}

/// The provider threads: CPU workers and device submission threads.
impl Shared {
    /// Run `n` CPU workers: start the missing ones; surplus ones exit after their request.
    pub(super) fn set_workers(self: &Arc<Self>, n: usize) -> Result<(), Error> {
        let start = {
            let mut st = self.state();
            if st.shutdown {
                return Err(Error::ShutDown);
            }
            st.workers_wanted = n;
            let start = n.saturating_sub(st.workers_running);
            st.workers_running += start;
            start
        };
        self.cpu_work.notify_all();
        for i in 0..start {
            let me = Arc::clone(self);
            let spawned = thread::Builder::new()
                .name("wring-cpu".into())
                .spawn(move || me.cpu_worker());
            if let Err(e) = spawned {
                self.state().workers_running -= start - i;
                return Err(Error::Thread {
                    what: "a compression worker",
                    reason: e.to_string(),
                });
            }
        }
        Ok(())
    }

    pub(super) fn workers(&self) -> usize {
        self.state().workers_running
    }

    fn cpu_worker(self: Arc<Self>) {
        self.enter(true);
        let mut st = self.state();
        loop {
            if st.workers_running > st.workers_wanted {
                break;
            }
            if let Some((index, job, fallback)) = self.take_cpu(&mut st) {
                drop(st);
                self.run_cpu(index, job, fallback);
                st = self.state();
                continue;
            }
            // Shut down once nothing is queued and no device thread can still fall back.
            if st.shutdown && st.device_threads == 0 {
                break;
            }
            st = wait(&self.cpu_work, st);
        }
        st.workers_running -= 1;
        self.done.notify_all();
    }

    pub(super) fn start_device_threads(self: &Arc<Self>) -> Result<(), Error> {
        let Some((_, caps)) = &self.device else {
            return Ok(());
        };
        for _ in 0..caps.queue_depth.div_ceil(caps.batch).max(1) {
            self.state().device_threads += 1;
            let me = Arc::clone(self);
            let spawned = thread::Builder::new()
                .name("wring-dev".into())
                .spawn(move || me.device_thread());
            if let Err(e) = spawned {
                self.state().device_threads -= 1;
                return Err(Error::Thread {
                    what: "a device submission thread",
                    reason: e.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Take up to a batch of device requests, or `None` to exit.
    fn take_device(&self, work: &mut Vec<DeviceWork>, batch: usize) -> bool {
        let mut st = self.state();
        while st.device.is_empty() {
            if st.shutdown {
                return false;
            }
            st = wait(&self.device_work, st);
        }
        let st = &mut *st;
        while work.len() < batch {
            let Some(index) = st.device.pop_front() else {
                break;
            };
            let slot = &mut st.slots[index];
            slot.phase = Phase::Running;
            let waited = slot.since.elapsed();
            if let Some(job) = slot.job.take() {
                st.on_device += 1;
                if let Some(s) = st.device_stats.as_mut() {
                    s.queue_wait.record(waited);
                }
                work.push(DeviceWork::new(index, job));
            }
        }
        true
    }

    fn device_thread(self: Arc<Self>) {
        let Some((device, caps)) = self.device.clone() else {
            return;
        };
        self.enter(false);
        let mut work = Vec::with_capacity(caps.batch);
        while self.take_device(&mut work, caps.batch) {
            let start = Instant::now();
            let deadline = start + caps.timeout;
            device.run(&mut work, deadline);
            let late = Instant::now() > deadline;
            let service = start.elapsed();
            let mut st = self.state();
            for w in work.drain(..) {
                st.on_device -= 1;
                let (index, job, result) = w.into_parts();
                let why = match result {
                    Some(Ok(c)) if !late => {
                        let notify = self.finish(&mut st, index, job, Ok(c), Ran::Device, service);
                        if !matches!(notify, Notify::Nothing) {
                            drop(st);
                            notify.run();
                            st = self.state();
                        }
                        continue;
                    }
                    Some(Err(e)) if !late => Fallback::from(e),
                    None if !late => Fallback::Failed,
                    _ => Fallback::TimedOut,
                };
                self.fall_back(&mut st, index, job, why);
            }
        }
        let mut st = self.state();
        st.device_threads -= 1;
        drop(st);
        self.cpu_work.notify_all();
        self.done.notify_all();
    }

    /// Send a request the device did not complete to the CPU (the software fallback).
    fn fall_back(&self, st: &mut State, index: usize, job: Job, why: Fallback) {
        let slot = &mut st.slots[index];
        slot.phase = Phase::Queued;
        slot.job = Some(job);
        slot.fallback = Some(why);
        slot.since = Instant::now();
        st.cpu_stats.submitted += 1;
        st.cpu_stats.fallbacks[why as usize] += 1;
        st.cpu.push_back(index);
        self.cpu_work.notify_one();
    }

    pub(super) fn stats(&self) -> OffloadStats {
        let st = self.state();
        let mut cpu = st.cpu_stats.clone();
        cpu.in_flight = cpu.submitted - cpu.completed;
        cpu.workers = st.workers_running;
        let device = st.device_stats.clone().map(|mut d| {
            d.in_flight = (st.on_device + st.device.len()) as u64;
            d
        });
        OffloadStats {
            depth: self.depth,
            in_flight: self.depth - st.free.len(),
            cpu,
            device,
        }
    }

    /// Refuse new requests, let the threads finish what was accepted, wait for them to exit.
    /// Called from one of its own provider threads (a completion handler dropping the last
    /// owner), it waits for nobody: the threads finish what was accepted and exit on their
    /// own once the handler returns.
    pub(super) fn shutdown(&self) {
        let own = self.is_own_thread();
        let mut st = self.state();
        st.shutdown = true;
        self.stopped
            .store(true, crate::sync::atomic::Ordering::Release);
        self.cpu_work.notify_all();
        self.device_work.notify_all();
        self.space.notify_all();
        while !own && (st.workers_running > 0 || st.device_threads > 0) {
            st = wait(&self.done, st);
        }
    }
}
