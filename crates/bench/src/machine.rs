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
