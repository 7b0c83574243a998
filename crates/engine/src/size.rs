//! Sizes as wring's options and benchmarks spell them: a whole number of bytes, or one with a
//! binary `K`, `M` or `G` suffix (`65536`, `128K`, `1M`, `2G`, either case) — the one parser
//! every crate uses (`max_extent=`, `workspace_mem=`, `--max-bytes`, `--sizes`, …).
//!
//! Mirrors memparse() in lib/cmdline.c, which the kernel uses for its size options; it differs
//! in refusing a size that does not fit in 64 bits instead of wrapping, in refusing trailing
//! text, and in having no T, P or E suffixes.

/// A size that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// Not a whole number with an optional K, M or G.
    #[error("'{0}' is not a size: a whole number of bytes, or one with a K, M or G suffix (e.g. 65536, 64K, 16M, 1G)")]
    Invalid(String),
    /// A number that does not fit in 64 bits once the suffix multiplies it.
    #[error("'{0}' is too large: sizes go up to {max} bytes", max = u64::MAX)]
    TooLarge(String),
}

/// Parse `65536`, `64K`, `16M`, `1G` (binary multiples; either case; spaces around are
/// ignored).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let (digits, shift) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 10),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 20),
        Some(b'g' | b'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SizeError::Invalid(text.to_string()));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| SizeError::TooLarge(text.to_string()))
}

/// Format a size the way [`parse_size`] takes it, with the largest suffix that divides it
/// exactly (`128K`, `1M`, `4096`, `0`).
pub fn format_size(n: u64) -> String {
    match n {
        0 => "0".into(),
        n if n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spellings() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("128K"), Ok(128 << 10));
        assert_eq!(parse_size("128k"), Ok(128 << 10));
        assert_eq!(parse_size(" 4M "), Ok(4 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        for bad in ["", "K", "x", "1.5M", "-1", "+1", "1T", "1 M", "1KB", "M1"] {
            assert_eq!(
                parse_size(bad),
                Err(SizeError::Invalid(bad.to_string())),
                "{bad:?}"
            );
        }
        assert_eq!(format_size(1 << 20), "1M");
        assert_eq!(format_size(3 << 30), "3G");
        assert_eq!(format_size(4096), "4K");
        assert_eq!(format_size(4097), "4097");
        assert_eq!(format_size(0), "0");
    }

    #[test]
    fn overflow_is_an_error() {
        // 2^34 G = 2^64 bytes: one more than fits.
        let e = parse_size("17179869184G").unwrap_err();
        assert_eq!(e, SizeError::TooLarge("17179869184G".into()));
        assert!(e.to_string().contains("too large"), "{e}");
        assert_eq!(parse_size("17179869183G"), Ok(17179869183 << 30));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::TooLarge(_))
        ));
    }

    proptest! {
        #[test]
        fn format_then_parse_is_the_identity(n in any::<u64>()) {
            prop_assert_eq!(parse_size(&format_size(n)), Ok(n));
        }

        #[test]
        fn whole_multiples_round_trip(n in 0u64..(1 << 34), shift in prop::sample::select(vec![0u32, 10, 20, 30])) {
            let bytes = n << shift;
            prop_assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
            // The formatted form is never longer than the plain number.
            prop_assert!(format_size(bytes).len() <= bytes.to_string().len());
        }

        #[test]
        fn a_suffix_multiplies_or_refuses(n in any::<u64>(), suffix in prop::sample::select(vec![("", 0u32), ("K", 10), ("m", 20), ("G", 30)])) {
            let text = format!("{n}{}", suffix.0);
            let expected = n
                .checked_mul(1u64 << suffix.1)
                .ok_or_else(|| SizeError::TooLarge(text.clone()));
            prop_assert_eq!(parse_size(&text), expected);
        }
    }
}
