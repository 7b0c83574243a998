//! The blk side of metrics: `metrics=ADDR` among `wring blk start`'s options (taken out of
//! zram's and handed to the plugin, which serves them: [`wring_blk::metrics`]), and
//! `wring metrics [--textfile DIR] DEVICE` (the same exposition, from `wring blk stat`'s
//! figures over the control socket).
//!
//! Mirrors the mount's `metrics=` and `wring metrics MNT` (`super::fs`).

use std::path::Path;

use anyhow::{Context, Result};
use wring_blk::control;
use wring_blk::metrics::{exposition, MetricsAddr};

/// `options` without its `metrics=` pairs, and the last of them, checked.
pub fn split(options: &str) -> Result<(String, Option<MetricsAddr>)> {
    let mut rest = Vec::new();
    let mut addr = None;
    for pair in options.split(',') {
        match pair.trim().strip_prefix("metrics=") {
            Some(v) => addr = Some(wring_blk::metrics::parse_addr(v.trim())?),
            None => rest.push(pair),
        }
    }
    Ok((rest.join(","), addr))
}

/// The device `name`'s exposition, read over its control socket in `dir`.
pub fn text(name: &str, dir: &Path) -> Result<String> {
    let s =
        control::stat(&dir.join("control.sock")).with_context(|| format!("blk device {name}"))?;
    Ok(exposition(&s, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_is_taken_out_of_zrams_options() {
        let (rest, a) = split("comp_algorithm=zstd,metrics=127.0.0.1:9,streams=2").unwrap();
        assert_eq!(rest, "comp_algorithm=zstd,streams=2");
        assert_eq!(a.unwrap().to_string(), "127.0.0.1:9");
        assert!(split("metrics=192.0.2.1:9").is_err());
        assert_eq!(split("").unwrap(), (String::new(), None));
    }
}
