//! Which pages an action takes: the words of zram's `writeback` attribute and of
//! `recompress type=` (drivers/block/zram/zram_drv.c's `writeback_store` and
//! `recompress_store`), shared by the options (`policy=`), the actions and the control channel.
//! What each word selects is the actions' (`actions::writeback`, `actions::recompress`); here
//! are only the words.

use serde::{Deserialize, Serialize};

use crate::error::BlkError;

/// Which pages a writeback writes out (zram's `writeback` words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WritebackType {
    /// Pages marked idle.
    Idle,
    /// Huge pages.
    Huge,
    /// Pages both huge and idle.
    HugeIdle,
    /// Pages every recompression algorithm failed on.
    Incompressible,
}

impl WritebackType {
    /// Parse `idle`, `huge`, `huge_idle` or `incompressible`.
    pub fn parse(text: &str) -> Result<WritebackType, BlkError> {
        Ok(match text.trim() {
            "idle" => WritebackType::Idle,
            "huge" => WritebackType::Huge,
            "huge_idle" => WritebackType::HugeIdle,
            "incompressible" => WritebackType::Incompressible,
            other => {
                return Err(BlkError::Option(format!(
                    "writeback {other}: give idle, huge, huge_idle or incompressible"
                )))
            }
        })
    }

    /// The word [`WritebackType::parse`] reads back.
    pub fn name(self) -> &'static str {
        match self {
            WritebackType::Idle => "idle",
            WritebackType::Huge => "huge",
            WritebackType::HugeIdle => "huge_idle",
            WritebackType::Incompressible => "incompressible",
        }
    }
}

/// Which pages a recompression looks at (zram's `type=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RecompressType {
    /// Every stored page (no `type=`).
    #[default]
    All,
    /// Huge pages only.
    Huge,
    /// Idle pages only.
    Idle,
    /// Pages both huge and idle.
    HugeIdle,
}

impl RecompressType {
    /// Parse the value of `type=`: `huge`, `idle` or `huge_idle` (every page is no `type=`).
    pub(crate) fn parse(value: &str) -> Result<RecompressType, BlkError> {
        match value {
            "huge" => Ok(RecompressType::Huge),
            "idle" => Ok(RecompressType::Idle),
            "huge_idle" => Ok(RecompressType::HugeIdle),
            _ => Err(bad_recompress(
                &format!("type={value}"),
                "needs huge, idle or huge_idle",
            )),
        }
    }

    /// The value of `type=`; `None` for every page (no `type=`).
    pub(crate) fn name(self) -> Option<&'static str> {
        match self {
            RecompressType::All => None,
            RecompressType::Huge => Some("huge"),
            RecompressType::Idle => Some("idle"),
            RecompressType::HugeIdle => Some("huge_idle"),
        }
    }
}

/// A `recompress` word refused: the word, why, and every word accepted.
pub(crate) fn bad_recompress(word: &str, why: &str) -> BlkError {
    BlkError::Option(format!(
        "recompress: '{word}' {why}; accepted: type=huge|idle|huge_idle threshold=BYTES \
         algo=NAME priority=1..3 max_pages=N"
    ))
}
