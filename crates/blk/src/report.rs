//! What the actions report (zram's attributes print nothing back; here each action answers):
//! plain data, the control channel's replies, and the policy's last round, which the device
//! keeps and its `stat` shows. A leaf, so that the device's `stat` can carry a report without
//! naming the actions.

use serde::{Deserialize, Serialize};

/// What a writeback did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritebackReport {
    /// Pages written to the backing file by this call.
    pub written: u64,
    /// Whether it stopped because `writeback_limit` ran out.
    pub limit_reached: bool,
}

/// What a recompression did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecompressReport {
    /// Pages looked at (those the type, threshold and priority let through).
    pub scanned: u64,
    /// Pages now held by a secondary algorithm.
    pub recompressed: u64,
    /// Pages newly marked incompressible.
    pub incompressible: u64,
    /// Compressed bytes of the recompressed pages before.
    pub bytes_before: u64,
    /// And after.
    pub bytes_after: u64,
}

/// What `train_dict` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Pages trained on.
    pub samples: u64,
    /// The dictionary's size.
    pub dict_bytes: u64,
    /// The priority the dictionary's algorithm was installed at.
    pub priority: u8,
    /// The recompression with it that followed.
    pub recompress: RecompressReport,
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleReport {
    /// When it ran (seconds on the store's clock).
    pub at: u64,
    /// Pages marked idle.
    pub idle: u64,
    /// The recompression, if it ran.
    pub recompress: Option<RecompressReport>,
    /// The writeback, if it ran.
    pub writeback: Option<WritebackReport>,
    /// Why a step stopped early (a full backing file, say).
    pub error: Option<String>,
}

/// The scheduled policy in `stat`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleStat {
    /// The policy as text.
    pub policy: String,
    /// Rounds run.
    pub rounds: u64,
    /// The last round.
    pub last: Option<ScheduleReport>,
}
