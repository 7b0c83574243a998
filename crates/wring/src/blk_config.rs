//! `wring blk-config`: block devices from a config file, in the spirit of zram-generator's
//! zram-generator.conf(5): one section per device, started by the template unit
//! `wring-blk@NAME.service` (packaging/wring-blk@.service) with `wring blk-config start NAME`.
//!
//! ```text
//! [swap0]
//! size = 4G                 # --size (required)
//! algorithm = zstd:3        # comp_algorithm=
//! streams = 2
//! mem_limit = 1G
//! ```
//!
//! `size`, `algorithm` (or `comp_algorithm`), `listen`, `listen_insecure` and `tls_psk` have
//! their own meaning; every other key becomes `-o KEY=VALUE` of `wring blk start`, which checks it, so
//! options `wring blk start` gains (idle, recompress, writeback policies) need nothing here.
//!
//! `listen` serves NBD over TCP with no authentication: any local user (any host, off
//! loopback) can read and write the device. A section must say `listen_insecure = yes` as well,
//! or `tls_psk = FILE` (`--tls-psk`: TLS with pre-shared keys, which clients must know).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Where the units read the configuration.
pub const DEFAULT_CONFIG: &str = "/etc/wring/blk.conf";

/// The file's format, for `--help` and the man pages.
pub const FORMAT: &str = "The config file (/etc/wring/blk.conf) has one [NAME] section per \
device; `systemctl enable --now wring-blk@NAME` starts section [NAME]. In a section, KEY = VALUE \
lines ('#' and ';' start comments):\n  \
size = SIZE         the device's size (zram's disksize), required\n  \
algorithm = ALG     comp_algorithm: lzo, lz4, lz4hc[:L], zstd[:L], deflate[:L]\n  \
listen = [ADDR:]PORT   serve NBD over TCP instead of the Unix socket. INSECURE: TCP NBD has \
no authentication, so every local user (every host, off loopback) can read and write the device; \
refused unless the section also says listen_insecure = yes, or tls_psk\n  \
tls_psk = FILE      require TLS with the pre-shared keys in FILE (USERNAME:HEXKEY lines, chmod \
600; `wring blk start --tls-psk`): only clients with a key connect, over the socket or TCP\n  \
KEY = VALUE         any other `wring blk start -o` option (streams, mem_limit, slot_size, \
the idle, recompress and writeback policies); `wring blk start` checks it\n\
Example:\n  [swap0]\n  size = 4G\n  algorithm = zstd:3\n  streams = 2\n  mem_limit = 1G\n\
The device serves nbd+unix:///?socket=/run/wring/blk/NAME/nbd.sock: an NBD export, not a /dev \
node. A filesystem or swap on it at boot needs the export attached first, e.g. by nbd-client with \
the kernel's nbd module in an ExecStartPost= drop-in of wring-blk@NAME.service (the example \
blk.conf shows one; untested here), and x-systemd.requires=wring-blk@NAME.service on its fstab \
line.";

/// `wring blk-config` subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Start the device NAME as its section of the config file says (what wring-blk@NAME.service runs)
    Start {
        /// The section, which is the device's name
        name: String,
        /// The config file
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Print the `wring blk start` command each section (or NAME's) stands for
    Show {
        /// Only this section
        name: Option<String>,
        /// The config file
        #[arg(long, default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
}

/// One device's section: its name and its keys in file order.
#[derive(Debug, PartialEq, Eq)]
pub struct Section {
    /// The device's name.
    pub name: String,
    /// `key = value` pairs.
    pub keys: Vec<(String, String)>,
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parse the file's text (`what` names it in errors).
pub fn parse(text: &str, what: &str) -> Result<Vec<Section>> {
    let mut sections: Vec<Section> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = || format!("{what} line {}", i + 1);
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[') {
            let Some(name) = name.strip_suffix(']') else {
                bail!("{}: a section header is [NAME], got {line}", at());
            };
            let name = name.trim().to_string();
            // The name goes into `wring blk start`'s argv and the device's directory name:
            // the rule `wring blk start NAME` applies (so no `[--size=1]`, `[]` or `[../x]`;
            // `[-h]` passes it, and start_args puts "--" before the name).
            if let Err(e) = crate::cmd::blk::check_name(&name) {
                bail!("{}: section [{name}]: {e}", at());
            }
            if sections.iter().any(|s| s.name == name) {
                bail!("{}: section [{name}] appears twice", at());
            }
            sections.push(Section {
                name,
                keys: Vec::new(),
            });
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            bail!("{}: expected KEY = VALUE or [NAME], got {line}", at());
        };
        let (k, v) = (k.trim(), v.trim());
        let Some(section) = sections.last_mut() else {
            bail!("{}: {k} comes before any [NAME] section", at());
        };
        if !valid_key(k) {
            bail!("{}: '{k}' is not a key (letters, digits, '_', '-')", at());
        }
        if v.is_empty() || v.contains(',') {
            bail!("{}: {k} needs one value without commas, got '{v}'", at());
        }
        if section.keys.iter().any(|(key, _)| key == k) {
            bail!("{}: {k} is set twice in [{}]", at(), section.name);
        }
        section.keys.push((k.to_string(), v.to_string()));
    }
    Ok(sections)
}

/// The `wring blk start` arguments (after `wring blk start`) a section stands for.
pub fn start_args(s: &Section, what: &str) -> Result<Vec<String>> {
    let mut size = None;
    let mut listen = None;
    let mut insecure = None;
    let mut psk = None;
    let mut options = Vec::new();
    for (k, v) in &s.keys {
        match k.as_str() {
            "size" => size = Some(v.clone()),
            "listen" => listen = Some(v.clone()),
            "listen_insecure" => insecure = Some(v.as_str()),
            "tls_psk" => psk = Some(v.clone()),
            "algorithm" | "comp_algorithm" => options.push(format!("comp_algorithm={v}")),
            _ => options.push(format!("{k}={v}")),
        }
    }
    let Some(size) = size else {
        bail!(
            "[{}] in {what} has no size: add `size = 1G` (the device's disksize)",
            s.name
        );
    };
    check_listen(s, listen.as_deref(), insecure, psk.is_some(), what)?;
    let mut args = Vec::new();
    if !options.is_empty() {
        args.extend(["-o".to_string(), options.join(",")]);
    }
    args.extend(["--size".to_string(), size]);
    if let Some(l) = listen {
        args.extend(["--listen".to_string(), l]);
    }
    if let Some(f) = psk {
        args.extend(["--tls-psk".to_string(), f]);
    }
    // NAME is checked in parse; "--" keeps it positional all the same.
    args.extend(["--".to_string(), s.name.clone()]);
    Ok(args)
}

/// `listen` only with `listen_insecure = yes` or `tls_psk`: TCP NBD without TLS has no
/// authentication.
fn check_listen(
    s: &Section,
    listen: Option<&str>,
    insecure: Option<&str>,
    tls: bool,
    what: &str,
) -> Result<()> {
    match (listen, insecure) {
        (None, None) => Ok(()),
        (Some(_), None) if tls => Ok(()),
        (_, Some(v)) if v != "yes" => bail!(
            "[{}] in {what}: listen_insecure takes only `yes` (got '{v}'); remove it to refuse \
             unauthenticated TCP NBD",
            s.name
        ),
        (Some(_), Some(_)) => Ok(()),
        (Some(l), None) => bail!(
            "[{}] in {what}: `listen = {l}` serves the device over TCP NBD without \
             authentication, so any local user can read and write it; use the Unix socket \
             (remove `listen`), require TLS with `tls_psk = FILE`, or add \
             `listen_insecure = yes` to the section to accept that",
            s.name
        ),
        (None, Some(_)) => bail!(
            "[{}] in {what}: listen_insecure = yes without `listen = [ADDR:]PORT`; remove it",
            s.name
        ),
    }
}

fn load(config: &Path) -> Result<Vec<Section>> {
    let text = std::fs::read_to_string(config).with_context(|| {
        format!(
            "reading {} (one [NAME] section per device; see wring-blk-config(1))",
            config.display()
        )
    })?;
    parse(&text, &config.display().to_string())
}

/// The full `wring blk start …` command line for device `name` in `config`.
pub fn command_for(name: &str, config: &Path) -> Result<Vec<String>> {
    let sections = load(config)?;
    let Some(s) = sections.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = sections.iter().map(|s| s.name.as_str()).collect();
        bail!(
            "{} has no section [{name}]; it has: {}",
            config.display(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    };
    let mut argv = vec!["wring".to_string(), "blk".into(), "start".into()];
    argv.extend(start_args(s, &config.display().to_string())?);
    Ok(argv)
}

/// `wring blk-config show`.
pub fn show(name: Option<&str>, config: &Path) -> Result<()> {
    let sections = load(config)?;
    for s in sections.iter().filter(|s| name.is_none_or(|n| n == s.name)) {
        let args = start_args(s, &config.display().to_string())?;
        println!("[{}] wring blk start {}", s.name, args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_map_to_blk_start_arguments() {
        let text = "# devices\n[swap0]\nsize = 4G\nalgorithm = zstd:3\nstreams=2\n\
                    mem_limit = 1G\nidle_after = 300\n\n; another\n[tmp]\nsize=1G\nlisten = 10809\n\
                    listen_insecure = yes\n";
        let s = parse(text, "t").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            start_args(&s[0], "t").unwrap(),
            [
                "-o",
                "comp_algorithm=zstd:3,streams=2,mem_limit=1G,idle_after=300",
                "--size",
                "4G",
                "--",
                "swap0"
            ]
        );
        assert_eq!(
            start_args(&s[1], "t").unwrap(),
            ["--size", "1G", "--listen", "10809", "--", "tmp"]
        );
    }

    #[test]
    fn a_name_like_an_option_stays_the_device_name() {
        use clap::Parser;
        for name in ["-h", "--help", "-V", "--size"] {
            let s = parse(&format!("[{name}]\nsize = 1G\n"), "f").unwrap();
            let mut argv = vec!["wring".to_string(), "blk".into(), "start".into()];
            argv.extend(start_args(&s[0], "f").unwrap());
            assert_eq!(argv.last(), Some(&name.to_string()));
            if let Err(e) = crate::Cli::try_parse_from(&argv) {
                panic!("{argv:?} does not parse as a device named {name}: {e}");
            }
        }
    }

    #[test]
    fn listen_needs_listen_insecure() {
        let args = |text: &str| {
            let s = parse(text, "f").unwrap();
            start_args(&s[0], "f").map_err(|e| e.to_string())
        };
        let e = args("[a]\nsize = 1G\nlisten = 10809\n").unwrap_err();
        for word in [
            "listen = 10809",
            "listen_insecure = yes",
            "without authentication",
        ] {
            assert!(e.contains(word), "{word} missing from: {e}");
        }
        let e = args("[a]\nsize = 1G\nlisten = 10809\nlisten_insecure = no\n").unwrap_err();
        assert!(e.contains("takes only `yes`"), "{e}");
        let e = args("[a]\nsize = 1G\nlisten_insecure = yes\n").unwrap_err();
        assert!(e.contains("without `listen"), "{e}");
        let ok = args("[a]\nsize = 1G\nlisten = 10809\nlisten_insecure = yes\n").unwrap();
        assert_eq!(ok, ["--size", "1G", "--listen", "10809", "--", "a"]);
        // TLS with pre-shared keys authenticates: no listen_insecure needed.
        let ok = args("[a]\nsize = 1G\nlisten = 10809\ntls_psk = /etc/wring/a.psk\n").unwrap();
        assert_eq!(
            ok,
            [
                "--size",
                "1G",
                "--listen",
                "10809",
                "--tls-psk",
                "/etc/wring/a.psk",
                "--",
                "a"
            ]
        );
        let ok = args("[a]\nsize = 1G\ntls_psk = /k\n").unwrap();
        assert_eq!(ok, ["--size", "1G", "--tls-psk", "/k", "--", "a"]);
    }

    #[test]
    fn the_packaged_example_parses() {
        let text = include_str!("../../../packaging/blk.conf");
        let s = parse(text, "packaging/blk.conf").unwrap();
        assert_eq!(s.len(), 2);
        for section in &s {
            let args = start_args(section, "packaging/blk.conf").unwrap();
            assert!(args.contains(&"--size".to_string()), "{args:?}");
        }
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        for (text, want) in [
            ("size = 1G\n", "line 1: size comes before any [NAME]"),
            ("[a]\nsize\n", "line 2: expected KEY = VALUE"),
            ("[a]\nsize = 1G\nsize = 2G\n", "line 3: size is set twice"),
            ("[a]\n[a]\n", "line 2: section [a] appears twice"),
            ("[a]\nstreams = 1,2\n", "without commas"),
            ("[a\n", "[NAME]"),
            ("[a]\nbad key = 1\n", "not a key"),
            (
                "[--size=1]\n",
                "section [--size=1]: '--size=1' is not a device name",
            ),
            ("[]\n", "line 1: section []: '' is not a device name"),
            ("[ a b ]\n", "'a b' is not a device name"),
            ("[.hidden]\n", "not starting with '.'"),
            ("[../x]\n", "'../x' is not a device name"),
        ] {
            let e = parse(text, "f").unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let s = parse("[a]\nstreams = 2\n", "f").unwrap();
        let e = start_args(&s[0], "f").unwrap_err().to_string();
        assert!(e.contains("has no size"), "{e}");
    }
}
