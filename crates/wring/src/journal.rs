//! Log lines in a form journald keeps: when stderr is the journal's stream, each line starts
//! with its syslog priority, `<3>` for errors down to `<7>` for trace (sd-daemon(3)'s
//! SD_ERR…SD_DEBUG prefixes), and journald stores it as the entry's PRIORITY. Elsewhere (a
//! terminal, the filesystem daemon's `wring.log`) lines keep env_logger's usual form.
//!
//! Whether stderr is the journal is checked per line, as systemd.exec(5) describes for
//! `$JOURNAL_STREAM` ("DEVICE:INODE" of the stream): the variable is inherited by children
//! whose stderr goes elsewhere, and the filesystem daemon points its stderr at its log file
//! after it is mounted, so neither the variable alone nor a check at start-up would do.

use std::io::Write;

use log::Level;

/// The syslog priority journald files a line of `level` under.
pub fn priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// Whether `JOURNAL_STREAM` (`DEVICE:INODE`) names the file behind descriptor 2.
pub(crate) fn stderr_is_journal() -> bool {
    let Some(var) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = var.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a struct stat into the buffer we own; descriptor 2 is only read.
    if unsafe { libc::fstat(2, st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstat returned 0, so it filled the struct.
    let st = unsafe { st.assume_init() };
    st.st_dev == dev && st.st_ino == ino
}

/// Install the logger: `RUST_LOG` as usual (default `warn`), journald priorities when stderr
/// is the journal.
pub fn init() {
    let plain = env_logger::fmt::ConfigurableFormat::default();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format(move |buf, record| {
            if stderr_is_journal() {
                writeln!(
                    buf,
                    "<{}>{}: {}",
                    priority(record.level()),
                    record.target(),
                    record.args()
                )
            } else {
                plain.format(buf, record)
            }
        })
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_map_to_syslog_priorities() {
        assert_eq!(priority(Level::Error), 3);
        assert_eq!(priority(Level::Warn), 4);
        assert_eq!(priority(Level::Info), 6);
        assert_eq!(priority(Level::Debug), 7);
    }
}
