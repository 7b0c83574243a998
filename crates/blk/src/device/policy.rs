//! The scheduled policy as the device holds it (beyond zram): a value the actions set and run
//! (`actions::schedule`), kept here so that the device's `stat` can show it without naming
//! the actions.

use crate::options::Schedule;
use crate::report::ScheduleReport;

/// The policy, when its last round ran, that round's report and the rounds run.
#[derive(Debug, Default)]
pub(crate) struct PolicyState {
    /// The policy (`None`: no schedule).
    pub(crate) policy: Option<Schedule>,
    /// When the last round ran (seconds on the store's clock); `None`: the next runs at once.
    pub(crate) last_run: Option<u64>,
    /// The last round's report.
    pub(crate) last: Option<ScheduleReport>,
    /// Rounds run.
    pub(crate) rounds: u64,
}
