//! The `policy` option's value, beyond zram: a [`Schedule`] of aging, recompression and
//! writeback (`policy=every=60 age=300 recompress=idle writeback=idle`). Only the words are
//! here; the rounds are the actions' (`actions::schedule`), and the device merely holds the
//! value they run.

use crate::error::BlkError;

use super::{RecompressType, WritebackType};

/// A schedule of aging, recompression and writeback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Seconds between rounds.
    pub every: u64,
    /// Pages not accessed for this many seconds are idle.
    pub age: u64,
    /// Which pages to recompress (`None`: skip).
    pub recompress: Option<RecompressType>,
    /// Which pages to write back (`None`: skip).
    pub writeback: Option<WritebackType>,
}

impl Schedule {
    /// Parse `every=60 age=300 recompress=idle writeback=idle` (every and age required).
    pub fn parse(text: &str) -> Result<Schedule, BlkError> {
        let bad = |word: &str| {
            BlkError::Option(format!(
                "policy: '{word}' is not understood; write 'every=SECONDS age=SECONDS \
                 [recompress=idle|huge|huge_idle|all|off] [writeback=idle|huge|huge_idle|\
                 incompressible|off]'"
            ))
        };
        let (mut every, mut age) = (None, None);
        let mut p = Schedule {
            every: 0,
            age: 0,
            recompress: Some(RecompressType::Idle),
            writeback: Some(WritebackType::Idle),
        };
        for word in text.split_whitespace() {
            match word.split_once('=') {
                Some(("every", v)) => every = v.parse::<u64>().ok().filter(|&n| n > 0),
                Some(("age", v)) => age = v.parse::<u64>().ok(),
                Some(("recompress", "off")) => p.recompress = None,
                Some(("recompress", "all")) => p.recompress = Some(RecompressType::All),
                Some(("recompress", v)) => p.recompress = Some(RecompressType::parse(v)?),
                Some(("writeback", "off")) => p.writeback = None,
                Some(("writeback", v)) => p.writeback = Some(WritebackType::parse(v)?),
                _ => return Err(bad(word)),
            }
        }
        match (every, age) {
            (Some(e), Some(a)) => {
                p.every = e;
                p.age = a;
                Ok(p)
            }
            _ => Err(bad(text.trim())),
        }
    }

    /// The text [`Schedule::parse`] reads back.
    pub fn text(&self) -> String {
        let r = match self.recompress {
            None => "off",
            Some(RecompressType::All) => "all",
            Some(RecompressType::Huge) => "huge",
            Some(RecompressType::Idle) => "idle",
            Some(RecompressType::HugeIdle) => "huge_idle",
        };
        let w = self.writeback.map_or("off", WritebackType::name);
        format!(
            "every={} age={} recompress={r} writeback={w}",
            self.every, self.age
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        let p = Schedule::parse("every=60 age=300").unwrap();
        assert_eq!(p.text(), "every=60 age=300 recompress=idle writeback=idle");
        let q = Schedule::parse("every=5 age=0 recompress=huge_idle writeback=off").unwrap();
        assert_eq!(Schedule::parse(&q.text()).unwrap(), q);
        let a = Schedule::parse("every=1 age=1 recompress=all writeback=incompressible").unwrap();
        assert_eq!(Schedule::parse(&a.text()).unwrap(), a);
        for bad in [
            "",
            "every=60",
            "age=5",
            "every=0 age=5",
            "every=1 age=1 recompress=some",
            "every=1 age=1 writeback=all",
            "every=1 age=1 often",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad:?}");
        }
    }
}
