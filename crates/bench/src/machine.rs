//! The machine a run measured: throughput means little without it.

use serde::Serialize;

/// Cores, CPU model, kernel and memory, read from /proc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// Logical CPUs listed in /proc/cpuinfo (0 when unreadable).
    pub cpus: usize,
    /// What the process may use (std's available_parallelism: cgroup and affinity limits).
    pub parallelism: usize,
    /// The CPU's model name.
    pub cpu_model: String,
    /// The running kernel's release.
    pub kernel: String,
    /// Physical memory in bytes (0 when unreadable).
    pub memory_bytes: u64,
    /// /proc/loadavg's 1, 5 and 15 minute averages when detected: other work running at the
    /// same time slows every figure.
    pub load_average: String,
}

impl Machine {
    /// The machine this process runs on.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            cpus: count_cpus(&cpuinfo),
            parallelism: available_parallelism(),
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown CPU".into()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            memory_bytes: mem_total(&meminfo).unwrap_or(0),
            load_average: load_average(),
        }
    }

    /// One line for a report header.
    pub fn summary(&self) -> String {
        format!(
            "{} ({} CPUs, {} usable), Linux {}, {:.1} GiB RAM, load average {} at the start",
            self.cpu_model,
            self.cpus,
            self.parallelism,
            self.kernel,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.load_average
        )
    }
}

/// Threads the process may run at once (1 when unknown).
pub fn available_parallelism() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The first `model name` of a /proc/cpuinfo text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "model name")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Number of `processor` entries in a /proc/cpuinfo text.
pub fn count_cpus(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim() == "processor")
        .count()
}

/// MemTotal of a /proc/meminfo text, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The 1, 5 and 15 minute load averages from /proc/loadavg ("unknown" when unreadable).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The numeric fields of /proc/PID/stat after the command (`state` is field 0 here and reads
/// as 0; minflt is 7, majflt 9, utime 11, stime 12), empty when the process is gone.
pub fn proc_stat(pid: u32) -> Vec<u64> {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Vec::new();
    };
    let Some(rest) = stat.rsplit_once(')').map(|r| r.1) else {
        return Vec::new();
    };
    rest.split_whitespace()
        .map(|w| w.parse().unwrap_or(0))
        .collect()
}

/// CPU seconds (user + system) `pid` used so far; 0 when it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    let f = proc_stat(pid);
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    ticks as f64 / hz as f64
}

/// Other work on the machine over a whole run, not only at its start: how many CPUs other
/// processes kept busy on average (from /proc/stat's busy time less this process's own), the
/// time the hypervisor stole, and the range of the 1-minute load average seen at each sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadDuring {
    /// CPUs kept busy by other processes, on average over the run.
    pub others_cpus: f64,
    /// CPUs' worth of time stolen by the hypervisor, on average.
    pub steal_cpus: f64,
    /// Lowest and highest 1-minute load average sampled during the run.
    pub loadavg_min: f64,
    /// See `loadavg_min`.
    pub loadavg_max: f64,
    /// Seconds the watch ran.
    pub secs: f64,
}

impl LoadDuring {
    /// One line for a report header.
    pub fn summary(&self) -> String {
        format!(
            "{:.2} CPUs busy with other work and {:.2} stolen, on average over the run's {:.0} s; 1-minute load {:.2}–{:.2}",
            self.others_cpus, self.steal_cpus, self.secs, self.loadavg_min, self.loadavg_max
        )
    }
}

/// Watches the machine's load from its start; [`LoadWatch::sample`] at the run's steps.
#[derive(Debug, Clone)]
pub struct LoadWatch {
    start: std::time::Instant,
    busy0: f64,
    steal0: f64,
    own0: f64,
    min: f64,
    max: f64,
}

impl LoadWatch {
    /// Start watching now.
    pub fn start() -> LoadWatch {
        let (busy0, steal0) = cpu_times(&std::fs::read_to_string("/proc/stat").unwrap_or_default());
        let first = loadavg_1();
        LoadWatch {
            start: std::time::Instant::now(),
            busy0,
            steal0,
            own0: cpu_seconds(std::process::id()),
            min: first,
            max: first,
        }
    }

    /// Read the 1-minute load average now.
    pub fn sample(&mut self) {
        let l = loadavg_1();
        self.min = self.min.min(l);
        self.max = self.max.max(l);
    }

    /// What the machine did besides this process since [`LoadWatch::start`].
    pub fn finish(mut self) -> LoadDuring {
        self.sample();
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let (busy, steal) = cpu_times(&std::fs::read_to_string("/proc/stat").unwrap_or_default());
        let own = cpu_seconds(std::process::id()) - self.own0;
        LoadDuring {
            others_cpus: ((busy - self.busy0 - own) / secs).max(0.0),
            steal_cpus: ((steal - self.steal0) / secs).max(0.0),
            loadavg_min: self.min,
            loadavg_max: self.max,
            secs,
        }
    }
}

/// The 1-minute load average (0 when unreadable).
fn loadavg_1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Busy and stolen seconds of all CPUs from a /proc/stat text: user, nice, system, irq and
/// softirq count as busy (idle and iowait do not; guest time is inside user already).
pub fn cpu_times(stat: &str) -> (f64, f64) {
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return (0.0, 0.0);
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    (busy as f64 / hz, at(7) as f64 / hz)
}
