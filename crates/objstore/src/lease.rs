//! The lease record: who may write a filesystem's segments (`PREFIX/lease`), as a mount's
//! exclusive claim — the bucket's counterpart of btrfs refusing a second mount of one device.
//!
//! ```text
//! wring-lease 1
//! holder=<who, one line>
//! since=<seconds since the epoch>
//! ```

use crate::error::FormatError;

/// The record's first line.
pub const HEADER: &str = "wring-lease 1";
/// The longest holder name accepted.
pub const MAX_HOLDER: usize = 256;

/// A lease: who holds it, since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it (e.g. host:pid or a store directory's id).
    pub holder: String,
    /// When it was taken, seconds since the epoch.
    pub since: u64,
}

/// Whether `holder` can be written in a record: one line of printable characters.
pub fn valid_holder(holder: &str) -> Result<(), FormatError> {
    if holder.is_empty() || holder.len() > MAX_HOLDER {
        return Err(FormatError(format!(
            "a lease holder must be 1 to {MAX_HOLDER} bytes, not {}",
            holder.len()
        )));
    }
    if holder.chars().any(|c| c.is_control()) {
        return Err(FormatError(
            "a lease holder must not contain control characters".into(),
        ));
    }
    Ok(())
}

impl Lease {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        format!("{HEADER}\nholder={}\nsince={}\n", self.holder, self.since).into_bytes()
    }

    /// Parse a record.
    pub fn parse(bytes: &[u8]) -> Result<Lease, FormatError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| FormatError("the lease record is not UTF-8".into()))?;
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(FormatError(format!(
                "the lease record does not start with `{HEADER}`"
            )));
        }
        let mut field = |name: &str| -> Result<String, FormatError> {
            let line = lines.next().unwrap_or_default();
            line.strip_prefix(name)
                .and_then(|l| l.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(|| FormatError(format!("the lease record lacks its {name}= line")))
        };
        let holder = field("holder")?;
        let since = field("since")?;
        valid_holder(&holder)?;
        let since = since
            .parse()
            .map_err(|_| FormatError(format!("the lease's since={since} is not a number")))?;
        if lines.next().is_some() {
            return Err(FormatError("the lease record has extra lines".into()));
        }
        Ok(Lease { holder, since })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(holder in "[^\\p{Cc}]{1,64}", since in any::<u64>()) {
            let l = Lease { holder, since };
            prop_assert_eq!(Lease::parse(&l.encode()), Ok(l));
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Lease::parse(&bytes);
        }
    }

    #[test]
    fn rejects() {
        assert!(Lease::parse(b"wring-lease 1\nholder=a\nsince=x\n").is_err());
        assert!(Lease::parse(b"wring-lease 2\nholder=a\nsince=1\n").is_err());
        assert!(Lease::parse(b"wring-lease 1\nholder=\nsince=1\n").is_err());
        assert!(Lease::parse(b"wring-lease 1\nholder=a\nsince=1\nmore\n").is_err());
        assert!(valid_holder("a\nb").is_err());
    }
}
