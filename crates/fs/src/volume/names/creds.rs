//! Who asks: the user, group and process a FUSE request names, and what the kernel would grant
//! that process — its supplementary groups and whether it holds CAP_FSETID or CAP_FOWNER,
//! read from `/proc/PID/status`.
//!
//! Mirrors the kernel's credentials checks the VFS makes for a filesystem (kernel/groups.c's
//! in_group_p, capable(CAP_FSETID) in fs/attr.c and fs/inode.c). Differs in reading them from
//! `/proc` when a request needs them: FUSE sends a request's uid, gid and pid only.

/// Who asked for an operation, as a FUSE request says: user, primary group and process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caller {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Process (thread) id, for the supplementary groups; 0 when unknown.
    pub pid: u32,
}

impl Caller {
    /// in_group_p(): the primary group, or one of the supplementary groups the process has
    /// now (`Groups:` in /proc/PID/status; none when the process is gone).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || (self.pid != 0 && supplementary_groups(self.pid).contains(&gid))
    }

    /// Every group the process is in: the primary one and the supplementary ones.
    pub fn groups(&self) -> Vec<u32> {
        let mut groups = match self.pid {
            0 => Vec::new(),
            pid => supplementary_groups(pid),
        };
        groups.push(self.gid);
        groups
    }

    /// capable(CAP_FSETID): the capability is in the process's effective set (`CapEff:` in
    /// /proc/PID/status). When the process is unknown or gone: whether it is root.
    pub fn has_fsetid(&self) -> bool {
        self.has_cap(CAP_FSETID)
    }

    /// inode_owner_or_capable(): the caller owns an inode owned by `owner`, or holds
    /// CAP_FOWNER.
    pub fn owns_or_fowner(&self, owner: u32) -> bool {
        self.uid == owner || self.has_cap(CAP_FOWNER)
    }

    /// capable(cap), read as [`Caller::has_fsetid`] says.
    fn has_cap(&self, cap: u32) -> bool {
        let status = match self.pid {
            0 => None,
            pid => std::fs::read_to_string(format!("/proc/{pid}/status")).ok(),
        };
        let eff = status.as_deref().and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        });
        match eff {
            Some(caps) => caps & (1 << cap) != 0,
            None => self.uid == 0,
        }
    }
}

fn supplementary_groups(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The capability numbers of CAP_FOWNER and CAP_FSETID (linux/capability.h).
const CAP_FOWNER: u32 = 3;
const CAP_FSETID: u32 = 4;
