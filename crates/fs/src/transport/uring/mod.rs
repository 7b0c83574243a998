//! FUSE over io_uring (`uring=1`): the kernel puts each request on a queue of the CPU that
//! made it, into buffers the daemon registered, and takes the reply and hands over the next
//! request in one `io_uring_enter` — where the `/dev/fuse` loop (`transport/dev/`) takes a
//! `read` and a `writev` per request and wakes whichever thread reads next.
//!
//! Mirrors fs/fuse/dev_uring.c's protocol (Linux 6.14+, `enable_uring` set): FUSE_OVER_IO_URING
//! at INIT (`transport/dev/init.rs`), then for every possible CPU a queue of entries, each registered
//! with FUSE_IO_URING_CMD_REGISTER and answered with FUSE_IO_URING_CMD_COMMIT_AND_FETCH
//! ([`ring`]). The kernel routes requests to the ring once every queue has an entry; FORGET,
//! INTERRUPT and notifications still go through `/dev/fuse`, where one thread of the `/dev/fuse`
//! loop keeps serving. Requests decode in the same [`crate::wire`] and are answered by the
//! same `Ops` (`transport/ops.rs`, through `transport/dispatch.rs`) as on `/dev/fuse`.
//!
//! Differs from libfuse's io_uring loop in one entry per thread, each with its own ring, so a
//! request that blocks (fsync, a write waiting for a compression stream) holds up no other.
//!
//! Who may ask is the kernel's check (`allow_other`, fuse_allow_current_process), on the ring
//! as on `/dev/fuse`: neither transport has a second copy of it (test
//! `another_user_gets_in_only_with_allow_other_on_either_transport`).

mod ring;

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{io, FsError};
use crate::options::Uring;
use crate::transport::dispatch::{decode_and_dispatch, Answer};
use crate::transport::ops::Ops;
use crate::transport::wire;

/// What the log lines of a malformed request name.
const WHAT: &str = "FUSE over io_uring";

/// The kernel's switch for FUSE over io_uring.
pub const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";
/// Why `uring=1` cannot be had when the kernel does not offer it at INIT.
pub const NOT_OFFERED: &str = "uring=1: the kernel did not offer FUSE over io_uring at INIT";
pub use crate::transport::MAX_WRITE;
/// An entry's payload buffer: the kernel refuses one smaller than its largest request or
/// reply (max_write, or max_pages of readahead).
const PAYLOAD: usize = {
    let ra = (crate::transport::READAHEAD_KB as usize) << 10;
    if ra > MAX_WRITE {
        ra
    } else {
        MAX_WRITE
    }
};

/// Whether this kernel serves FUSE over io_uring now: an error saying what to change if not.
pub fn check_enabled() -> Result<(), FsError> {
    check_enabled_at(std::path::Path::new(ENABLE_URING))
}

/// [`check_enabled`] with the kernel's switch at `switch`.
pub fn check_enabled_at(switch: &std::path::Path) -> Result<(), FsError> {
    let why = match std::fs::read_to_string(switch) {
        Ok(v) if v.trim() == "Y" => return Ok(()),
        Ok(_) => format!(
            "uring=1: FUSE over io_uring is switched off in this kernel ({ENABLE_URING} is N); \
             as root: echo Y > {ENABLE_URING}"
        ),
        Err(_) => format!(
            "uring=1: this kernel has no FUSE over io_uring (no {ENABLE_URING}; it needs \
             Linux 6.14 or later built with CONFIG_FUSE_IO_URING)"
        ),
    };
    Err(FsError::Refused {
        why,
        errno: libc::EOPNOTSUPP,
    })
}

/// The transport `uring=` asks for, decided before mounting: the ring's entries when the ring
/// is to serve, and what `wring status` says about it. `uring=auto` (the default) takes the
/// ring when the kernel's switch is Y and the entries can be made, else `/dev/fuse`, saying
/// why; `uring=1` is refused in plain words where `auto` would fall back.
pub fn choose(choice: Uring, threads: usize) -> Result<(Option<Prepared>, String), FsError> {
    choose_at(choice, threads, std::path::Path::new(ENABLE_URING))
}

/// [`choose`] with the kernel's switch at `switch`.
pub fn choose_at(
    choice: Uring,
    threads: usize,
    switch: &std::path::Path,
) -> Result<(Option<Prepared>, String), FsError> {
    let ring = |why: &str| Ok((Some(prepare(threads)?), format!("io_uring ({why})")));
    match choice {
        Uring::Off => Ok((None, "/dev/fuse (uring=0)".into())),
        Uring::On => {
            check_enabled_at(switch)?;
            ring("uring=1")
        }
        Uring::Auto => match check_enabled_at(switch).and_then(|()| ring("uring=auto")) {
            Ok(chosen) => Ok(chosen),
            Err(e) => {
                let why = e.to_string();
                let why = why.strip_prefix("uring=1: ").unwrap_or(&why);
                log::info!("uring=auto: serving through /dev/fuse: {why}");
                Ok((None, format!("/dev/fuse (uring=auto: {why})")))
            }
        },
    }
}

/// The number of CPUs a list such as `0-3,8` names (`/sys/devices/system/cpu/possible`).
pub fn count_cpus(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let a = part.parse::<usize>().ok()?;
                (a, a)
            }
        };
        n += b.checked_sub(a)? + 1;
    }
    Some(n)
}

/// The kernel makes a queue per possible CPU (num_possible_cpus()).
fn queues() -> Result<usize, FsError> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path).map_err(io(format!("reading {path}")))?;
    count_cpus(&text)
        .filter(|&n| n > 0 && n <= usize::from(u16::MAX))
        .ok_or_else(|| FsError::Refused {
            why: format!("{path} says {text:?}: not a CPU list"),
            errno: libc::EIO,
        })
}

/// The entries, made before the mount.
pub struct Prepared {
    entries: Vec<ring::Entry>,
    queues: usize,
}

/// Make `threads` entries spread over the kernel's queues, at least one each: their rings and
/// buffers. An error here (io_uring refused to this process, no memory) is one the mount can
/// still be given up for.
pub fn prepare(threads: usize) -> Result<Prepared, FsError> {
    let n = queues()?;
    let per_queue = threads.div_ceil(n).max(1);
    let mut entries = Vec::with_capacity(n * per_queue);
    for qid in 0..n {
        for _ in 0..per_queue {
            let e = ring::Entry::new(qid as u16, PAYLOAD).map_err(|e| FsError::Refused {
                why: format!("uring=1: setting up an io_uring: {e}"),
                errno: e.raw_os_error().unwrap_or(libc::EIO),
            })?;
            entries.push(e);
        }
    }
    Ok(Prepared { entries, queues: n })
}

/// The threads serving the ring's entries.
pub struct Queues {
    threads: Vec<JoinHandle<()>>,
}

impl Queues {
    /// Wait for every entry's thread: they end when the kernel ends the connection.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

impl Prepared {
    /// Serve the connection `fd` (a duplicate of the session's `/dev/fuse`): a thread per
    /// entry, kept on its queue's CPU, registers it and answers its requests.
    pub fn start(self, fd: OwnedFd, ops: Arc<Ops>) -> Result<Queues, FsError> {
        let fd = Arc::new(fd);
        let entries = self.entries.len();
        ops.ring.queues.store(self.queues, Ordering::Relaxed);
        ops.ring.entries.store(entries, Ordering::Relaxed);
        let mut handles = Vec::with_capacity(entries);
        for (k, entry) in self.entries.into_iter().enumerate() {
            let (fd, ops) = (fd.clone(), ops.clone());
            let h = std::thread::Builder::new()
                .name(format!("wring-uring-{}.{k}", entry.qid()))
                .spawn(move || serve(entry, fd, &ops))
                .map_err(io("starting an io_uring thread"))?;
            handles.push(h);
        }
        log::info!(
            "FUSE over io_uring: {} queues, {entries} entries",
            self.queues
        );
        Ok(Queues { threads: handles })
    }
}

/// READs at least this large (readahead of a file read front to back) are served with the
/// thread free to run on any CPU: see [`Affinity`].
const STREAMING_READ: u32 = 64 << 10;

/// Where an entry's thread may run. The kernel queues a request on the CPU that made it, so a
/// thread kept on its queue's CPU keeps the caller, the request and its answer on one CPU's
/// caches, and no wake-up crosses CPUs: small files went 20–25% faster that way (tar -x, cp
/// -a). But a file read front to back sends its readahead to the reader's CPU too, and there
/// every 128 KiB decode competed with the reader while the other CPUs idled: streaming reads
/// were about 20% slower than through /dev/fuse. So a thread is kept on its CPU except while it
/// serves large READs, when it may run anywhere, and the scheduler spreads the decoding.
struct Affinity {
    cpu: usize,
    /// The CPUs the process may use (`None`: unknown; the thread is then only ever pinned).
    all: Option<rustix::thread::CpuSet>,
    pinned: bool,
    /// A change of affinity failed once (a cpuset that forbids it): the thread stays as it
    /// is, and the log has one line, not one per request.
    failed: bool,
}

impl Affinity {
    /// Keep this thread on `cpu` to begin with.
    fn pinned_to(cpu: usize) -> Affinity {
        let all = rustix::thread::sched_getaffinity(None).ok();
        let mut a = Affinity {
            cpu,
            all,
            pinned: false,
            failed: false,
        };
        a.set(true);
        a
    }

    /// Keep the thread on its CPU (`pin`) or let it run on any the process may use.
    fn set(&mut self, pin: bool) {
        if pin == self.pinned || self.failed {
            return;
        }
        let set = match (pin, &self.all) {
            (true, _) => {
                let mut one = rustix::thread::CpuSet::new();
                one.set(self.cpu);
                one
            }
            (false, Some(all)) => *all,
            (false, None) => return,
        };
        match rustix::thread::sched_setaffinity(None, &set) {
            Ok(()) => self.pinned = pin,
            Err(e) => {
                log::warn!(
                    "FUSE over io_uring: CPU affinity of queue {}: {e}; left as it is",
                    self.cpu
                );
                self.failed = true;
            }
        }
    }
}

/// One entry's loop: a request in, its answer out with the wait for the next.
fn serve(mut entry: ring::Entry, fd: Arc<OwnedFd>, ops: &Ops) {
    let qid = entry.qid();
    let mut affinity = Affinity::pinned_to(usize::from(qid));
    let mut next = match entry.register(fd) {
        Ok(n) => n,
        Err(e) => {
            // The kernel falls back to /dev/fuse once a registration fails.
            ops.ring.refused.fetch_add(1, Ordering::Relaxed);
            return log::error!("FUSE over io_uring: registering on queue {qid}: {e}");
        }
    };
    loop {
        match next {
            ring::Next::Closed => return,
            ring::Next::Request => {
                ops.ring.requests.fetch_add(1, Ordering::Relaxed);
            }
        }
        let b = entry.buffers();
        let streaming = b
            .headers
            .split_at_checked(wire::IN_OUT)
            .and_then(|(in_out, rest)| wire::read_size(in_out, rest))
            .is_some_and(|n| n >= STREAMING_READ);
        affinity.set(!streaming);
        let commit_id = match answer(entry.buffers(), ops) {
            Ok(id) => id,
            Err(e) => return log::error!("FUSE over io_uring: queue {qid}: {e}"),
        };
        next = match entry.commit_and_fetch(commit_id) {
            Ok(n) => n,
            Err(e) => return log::error!("FUSE over io_uring: queue {qid}: commit: {e}"),
        };
    }
}

/// Decode the request in `b`, answer it into `b`, and say which request the answer is for.
///
/// The payload holds the request and then the answer. A WRITE's data is read where it lies
/// and its 8-byte answer kept aside until the data is taken; any other request's payload
/// (names, an xattr's value) is copied out first, so its answer (a READ's data, a listing)
/// can be written in place.
fn answer(b: &mut ring::Buffers, ops: &Ops) -> Result<u64, wire::WireError> {
    let (in_out, op_in, ent) = wire::ring_headers(&mut b.headers)?;
    let (commit_id, size) = wire::commit_id_and_size(ent)?;
    let h = wire::header(in_out)?;
    // At most the payload buffer, whatever payload_sz says.
    let payload = b.payload.get(..size).unwrap_or(&b.payload);
    let (error, len) = if h.opcode == wire::WRITE {
        let mut small = [0u8; 16];
        let mut a = Answer::new(&mut small);
        decode_and_dispatch(ops, (in_out, op_in, payload), &mut a, WHAT);
        let (error, answer) = (a.error, a.bytes_written());
        match b.payload.get_mut(..answer.len()) {
            Some(to) => {
                to.copy_from_slice(answer);
                (error, answer.len())
            }
            None => (-libc::EIO, 0),
        }
    } else {
        b.request.clear();
        b.request.extend_from_slice(payload);
        let mut a = Answer::new(&mut b.payload);
        decode_and_dispatch(ops, (in_out, op_in, &b.request), &mut a, WHAT);
        (a.error, a.len)
    };
    in_out[..wire::OUT_HEADER].copy_from_slice(&wire::out_header(h.unique, error, len));
    wire::put_payload_size(ent, len);
    Ok(commit_id)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{answer, count_cpus, ring, wire, Ops};
    use crate::store::{Store, ROOT};
    use crate::{Options, Volume};

    /// One request through a ring entry's buffers: the commit id, the errno and the answer.
    fn ask(b: &mut ring::Buffers, ops: &Ops, req: (u32, u64, &[u8], &[u8])) -> (u64, i32, Vec<u8>) {
        let (opcode, nodeid, op, payload) = req;
        b.headers.fill(0xa5);
        let len = (wire::IN_HEADER + op.len() + payload.len()) as u32;
        let h = &mut b.headers;
        h[0..4].copy_from_slice(&len.to_le_bytes());
        h[4..8].copy_from_slice(&opcode.to_le_bytes());
        h[8..16].copy_from_slice(&77u64.to_le_bytes());
        h[16..24].copy_from_slice(&nodeid.to_le_bytes());
        h[24..36].fill(0);
        h[wire::IN_OUT..][..op.len()].copy_from_slice(op);
        let ent = wire::IN_OUT * 2;
        h[ent + 8..ent + 16].copy_from_slice(&9u64.to_le_bytes());
        h[ent + 16..ent + 20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        b.payload[..payload.len()].copy_from_slice(payload);
        let commit_id = answer(b, ops).unwrap();
        let h = &b.headers;
        let word = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().unwrap());
        let n = word(0) as usize - wire::OUT_HEADER;
        assert_eq!(u64::from_le_bytes(h[8..16].try_into().unwrap()), 77);
        assert_eq!(
            word(ent + 16) as usize,
            n,
            "payload_sz is the answer's length"
        );
        (commit_id, word(4) as i32, b.payload[..n].to_vec())
    }

    /// Requests answered in place in a ring entry's buffers: CREATE's answer over its name,
    /// WRITE's 8 bytes after its data is taken, a name without its NUL EIO.
    #[test]
    fn a_ring_entry_is_answered_in_place() {
        let dir = std::env::temp_dir().join(format!("wring-ring-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::mkfs(&dir).unwrap();
        let ops = Ops::new(Arc::new(Volume::open(&dir, Options::default()).unwrap()));
        let mut b = ring::Buffers {
            headers: vec![0; wire::REQ_HEADER],
            payload: vec![0; 4096],
            request: Vec::new(),
        };
        let create_in = [libc::O_WRONLY as u32, libc::S_IFREG | 0o644, 0o022, 0];
        let create_in: Vec<u8> = create_in.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (commit_id, e, out) = ask(&mut b, &ops, (35, ROOT, &create_in, b"f\0"));
        assert_eq!(
            (commit_id, e, out.len()),
            (9, 0, wire::ENTRY_OUT + wire::OPEN_OUT)
        );
        let ino = u64::from_le_bytes(out[..8].try_into().unwrap());
        let mut write_in = [0u8; 40];
        write_in[16..20].copy_from_slice(&5u32.to_le_bytes());
        let (_, e, out) = ask(&mut b, &ops, (wire::WRITE, ino, &write_in, b"hello"));
        assert_eq!((e, out), (0, [5, 0, 0, 0, 0, 0, 0, 0].to_vec()));
        let (_, e, out) = ask(&mut b, &ops, (1, ROOT, &[], b"f"));
        assert_eq!((e, out.len()), (-libc::EIO, 0));
        drop(ops);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpus("0-1\n"), Some(2));
        assert_eq!(count_cpus("0"), Some(1));
        assert_eq!(count_cpus("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpus("3-1"), None);
        assert_eq!(count_cpus("x"), None);
    }
}
