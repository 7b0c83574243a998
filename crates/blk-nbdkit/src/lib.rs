//! wring blk's nbdkit plugin: serves a [`wring_blk::Store`] over NBD. nbdkit (1.32 and later)
//! loads this crate's cdylib, `libwring_blk_nbdkit.so`, and speaks the protocol — structured
//! replies, block status, multi-conn, TLS and request validation are nbdkit's, the server qemu
//! and libguestfs rely on — while the store is zram's device model.
//!
//! ```text
//! nbdkit -U SOCKET libwring_blk_nbdkit.so size=1G [comp_algorithm=zstd:3] [streams=N]
//!        [mem_limit=SIZE] ['recomp_algorithm=algo=zstd priority=1' …] [slot_size=16K]
//!        [control=CONTROL_SOCKET]
//! ```
//!
//! * `size` is the device size (`disksize`), rounded up to whole slots (4 KiB pages unless
//!   `slot_size` says more); the other keys are [`wring_blk::Options`]' (zram's names). An
//!   unknown key is an error naming the keys.
//! * Block size: nbdkit's Rust binding (0.3) has no `block_size` callback, so the plugin
//!   advertises no constraints (clients assume a minimum of 1 and prefer 4 KiB). `wring blk
//!   start` puts nbdkit's own `blocksize-policy` filter in front with `blocksize-preferred`
//!   set to the slot size, so that clients which honour it (qemu) send whole slots and spare
//!   the store read-modify-write; every request size still works.
//! * The store, with its compression streams (threads), is made in `after_fork`, after nbdkit
//!   has forked into the background — threads do not survive a fork. The control socket
//!   ([`wring_blk::control`]) is bound in `get_ready`, so that a bad path fails the start
//!   before nbdkit detaches, and served from a thread started in `after_fork`. So is
//!   `metrics=ADDR` ([`wring_blk::metrics`]: Prometheus text on `GET /metrics`, every
//!   series labelled `device=NAME` from `name=NAME`); its Unix socket file is removed at unload.
//! * Thread model parallel: requests on any connection run concurrently, serialised only by
//!   the store's per-slot locks. `can_multi_conn` is true: every connection sees one store and
//!   a write is visible to all connections once it is answered (nothing is cached per
//!   connection), so a flush on one connection covers all. Flush and FUA have nothing to do
//!   for RAM and succeed at once.
//! * Trim frees whole pages (zram's discard); write-zeroes frees whole pages and zero-fills
//!   partial ends; block status reports never-written, discarded and zero-filled pages as
//!   holes that read as zeros.
//! * Every error is the store's typed error with its errno (EINVAL out of range, ENOSPC at
//!   mem_limit, ENOMEM, EIO for a corrupt page); nbdkit itself refuses requests past the end
//!   of the export or larger than its maximum before they reach the plugin.
//!
//! No `unsafe` here; the `plugin!` macro exports `plugin_init`, which nbdkit calls to get the
//! callback table.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use nbdkit::{Error, ExtentHandle, ExtentType, Flags, FuaFlags, Result, Server, ThreadModel};
use wring_blk::metrics::{self, Listener, MetricsAddr};
use wring_blk::{control, BlkError, Options, Store};

/// What `config` collected.
#[derive(Debug, Default)]
struct Config {
    size: Option<u64>,
    options: Option<Options>,
    control: Option<PathBuf>,
    metrics: Option<MetricsAddr>,
    name: Option<String>,
}

static CONFIG: Mutex<Config> = Mutex::new(Config {
    size: None,
    options: None,
    control: None,
    metrics: None,
    name: None,
});
static LISTENER: Mutex<Option<UnixListener>> = Mutex::new(None);
static METRICS: Mutex<Option<Listener>> = Mutex::new(None);
/// The metrics' Unix socket file, removed at unload.
static METRICS_SOCKET: Mutex<Option<PathBuf>> = Mutex::new(None);
static STORE: OnceLock<Arc<Store>> = OnceLock::new();

fn config() -> std::sync::MutexGuard<'static, Config> {
    wring_sync::lock(&CONFIG)
}

fn nbd_error(e: BlkError) -> Error {
    Error::new(e.errno(), e.to_string())
}

fn store() -> Result<&'static Arc<Store>> {
    STORE
        .get()
        .ok_or_else(|| Error::new(libc::EIO, "the wring-blk store is not ready"))
}

/// The plugin; connections carry no state of their own.
#[derive(Debug, Default)]
struct WringBlk;

impl Server for WringBlk {
    fn name() -> &'static str {
        "wring-blk"
    }

    fn description() -> Option<&'static str> {
        Some("wring blk: a compressed RAM block device (zram in userspace)")
    }

    fn config_help() -> Option<&'static str> {
        Some(
            "size=SIZE                   (required) device size, e.g. 1G\n\
             comp_algorithm=ALG[:LEVEL]  lzo, lzo-rle, lz4, lz4hc, zstd, deflate (default lz4)\n\
             streams=N                   compression streams (default: CPUs)\n\
             mem_limit=SIZE              most memory for compressed pages (default: none)\n\
             recomp_algorithm='algo=ALG priority=N'  a secondary algorithm (up to 3)\n\
             backing_dev=FILE            the writeback file\n\
             writeback_limit=PAGES       writeback budget in 4 KiB pages (default: none)\n\
             policy='every=S age=S [recompress=T] [writeback=T]'  scheduled aging/recompression/writeback\n\
             slot_size=4K|8K|16K|32K     bytes per slot, each compressed alone (default 4K, zram's page)\n\
             page_pool=PAGES             reserved 4 KiB staging pages (default 0: off)\n\
             control=PATH                the control socket for `wring blk`\n\
             metrics=ADDR                Prometheus metrics on GET /metrics (127.0.0.1:PORT, [::1]:PORT, /SOCKET, public:IP:PORT)\n\
             name=NAME                   the device label of the metrics",
        )
    }

    fn config(key: &str, value: &str) -> Result<()> {
        let mut c = config();
        match key {
            "size" => {
                let size = wring_blk::parse_size("size", value).map_err(nbd_error)?;
                c.size = Some(size);
            }
            "control" => c.control = Some(PathBuf::from(value)),
            "metrics" => c.metrics = Some(metrics::parse_addr(value).map_err(nbd_error)?),
            "name" => c.name = Some(value.to_string()),
            _ => {
                let mut o = c.options.take().unwrap_or_default();
                let r = o.set(key, value).map_err(|e| {
                    let mut m = e.to_string();
                    if m.starts_with("unknown option") {
                        m += ", size, control, metrics, name";
                    }
                    Error::new(libc::EINVAL, m)
                });
                c.options = Some(o);
                r?;
            }
        }
        Ok(())
    }

    fn config_complete() -> Result<()> {
        let c = config();
        if c.size.is_none_or(|s| s == 0) {
            return Err(Error::new(
                libc::EINVAL,
                "wring-blk needs size=SIZE (e.g. size=1G)",
            ));
        }
        // Options that do not go together (slot_size above 4K with backing_dev) fail here,
        // before nbdkit detaches, not in after_fork where the error would only reach the log.
        match &c.options {
            Some(o) => o.check().map_err(nbd_error),
            None => Ok(()),
        }
    }

    fn get_ready() -> Result<()> {
        let path = config().control.clone();
        if let Some(path) = path {
            let l = control::bind(&path).map_err(nbd_error)?;
            *wring_sync::lock(&LISTENER) = Some(l);
        }
        let metrics = config().metrics.clone();
        if let Some(addr) = metrics {
            let l = metrics::bind(&addr).map_err(nbd_error)?;
            if let Some(p) = l.socket_path() {
                *wring_sync::lock(&METRICS_SOCKET) = Some(p.to_path_buf());
            }
            *wring_sync::lock(&METRICS) = Some(l);
        }
        Ok(())
    }

    fn unload() {
        if let Some(p) = wring_sync::lock(&METRICS_SOCKET).take() {
            let _ = std::fs::remove_file(p);
        }
    }

    fn after_fork() -> Result<()> {
        let (size, options) = {
            let c = config();
            (c.size.unwrap_or(0), c.options.clone().unwrap_or_default())
        };
        let store = Arc::new(wring_blk::open(size, &options).map_err(nbd_error)?);
        let store = STORE.get_or_init(|| store);
        if let Some(l) = wring_sync::lock(&LISTENER).take() {
            control::serve(l, Arc::clone(store));
        }
        if let Some(l) = wring_sync::lock(&METRICS).take() {
            let name = config().name.clone().unwrap_or_else(|| "wring-blk".into());
            metrics::serve(l, Arc::clone(store), name).map_err(nbd_error)?;
        }
        // The scheduled policy (idle for a device without one, which can get one live).
        wring_blk::spawn_policy(Arc::clone(store));
        Ok(())
    }

    fn thread_model() -> Result<ThreadModel> {
        Ok(ThreadModel::Parallel)
    }

    fn open(_readonly: bool) -> Result<Box<dyn Server>> {
        store()?;
        Ok(Box::new(WringBlk))
    }

    fn get_size(&self) -> Result<i64> {
        i64::try_from(store()?.size())
            .map_err(|_| Error::new(libc::EINVAL, "the device is larger than NBD allows"))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        store()?.read(offset, buf).map_err(nbd_error)
    }

    fn write_at(&self, buf: &[u8], offset: u64, _flags: Flags) -> Result<()> {
        store()?.write(offset, buf).map_err(nbd_error)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn trim(&self, count: u32, offset: u64, _flags: Flags) -> Result<()> {
        store()?.discard(offset, count as u64).map_err(nbd_error)
    }

    fn zero(&self, count: u32, offset: u64, _flags: Flags) -> Result<()> {
        store()?
            .write_zeroes(offset, count as u64)
            .map_err(nbd_error)
    }

    fn extents(&self, count: u32, offset: u64, flags: Flags, h: &mut ExtentHandle) -> Result<()> {
        let extents = store()?.extents(offset, count as u64).map_err(nbd_error)?;
        for e in extents {
            let t = if e.hole {
                ExtentType::HoleZero
            } else {
                ExtentType::Allocated
            };
            h.add(e.offset, e.len, t)?;
            if flags.contains(Flags::REQ_ONE) {
                break;
            }
        }
        Ok(())
    }

    fn can_multi_conn(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_trim(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_zero(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_flush(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_extents(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_fua(&self) -> Result<FuaFlags> {
        Ok(FuaFlags::Native)
    }

    fn is_rotational(&self) -> Result<bool> {
        Ok(false)
    }
}

// `plugin_init`, the one symbol nbdkit looks up, comes from the macro and has no doc comment.
#[allow(missing_docs)]
mod entry {
    use super::WringBlk;
    use nbdkit::plugin;

    plugin!(WringBlk {
        config,
        config_complete,
        config_help,
        get_ready,
        after_fork,
        unload,
        thread_model,
        write_at,
        flush,
        trim,
        zero,
        extents,
        can_multi_conn,
        can_trim,
        can_zero,
        can_flush,
        can_extents,
        can_fua,
        is_rotational
    });
}
