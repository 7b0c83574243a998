//! docs/design.md checked against the code, so it cannot drift: its crate table against
//! `cargo metadata` (every workspace member, and each one's dependencies on the others), and
//! the filesystem's folder diagram against the files under crates/fs/src.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn design() -> String {
    std::fs::read_to_string(root().join("docs/design.md")).unwrap()
}

/// A crate as the table or cargo describes it: its folder, its normal (and build)
/// dependencies on workspace crates, and the ones only its tests use.
#[derive(Debug, Default, PartialEq)]
struct Crate {
    path: String,
    deps: BTreeSet<String>,
    dev: BTreeSet<String>,
}

/// `cargo metadata --no-deps` for `manifest` (the workspace's when `None`).
fn metadata(manifest: Option<&Path>) -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root());
    if let Some(manifest) = manifest {
        cmd.arg("--manifest-path").arg(manifest);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each package of `meta` by name, with its dependencies among `members` (names).
fn packages(meta: &serde_json::Value, members: &BTreeSet<String>) -> BTreeMap<String, Crate> {
    let root = meta["workspace_root"].as_str().unwrap();
    let mut out = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap();
        let path = match dir.strip_prefix(root) {
            Ok(p) if !p.as_os_str().is_empty() => p.display().to_string(),
            // A crate with its own workspace (crates/python): its folder under ours.
            _ => dir.strip_prefix(root_abs()).unwrap().display().to_string(),
        };
        let mut krate = Crate {
            path,
            ..Crate::default()
        };
        for dep in package["dependencies"].as_array().unwrap() {
            let name = dep["name"].as_str().unwrap().to_string();
            if !members.contains(&name) {
                continue;
            }
            match dep["kind"].as_str() {
                Some("dev") => krate.dev.insert(name),
                _ => krate.deps.insert(name),
            };
        }
        // A crate that is both a dependency and a dev-dependency is a dependency.
        krate.dev = &krate.dev - &krate.deps;
        out.insert(package["name"].as_str().unwrap().to_string(), krate);
    }
    out
}

fn root_abs() -> PathBuf {
    root().canonicalize().unwrap()
}

/// The cells of a table row, split at `|` outside backticks.
fn cells(row: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut code = false;
    for c in row.trim().trim_matches('|').chars() {
        match c {
            '`' => {
                code = !code;
                cells.last_mut().unwrap().push(c);
            }
            '|' if !code => cells.push(String::new()),
            _ => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// A list cell (`engine, btrfs (its `scratch`), …` or `—`) as crate names: a short name is
/// `wring-` and the name; words in parentheses are notes.
fn names(cell: &str, members: &BTreeSet<String>) -> BTreeSet<String> {
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    plain
        .split(',')
        .map(|n| n.trim().trim_matches('`'))
        .filter(|n| !n.is_empty() && *n != "—")
        .map(|n| {
            let long = format!("wring-{n}");
            if members.contains(&long) {
                long
            } else {
                n.to_string()
            }
        })
        .collect()
}

/// The crate table: `| crate | path | depends on | what it is | tests also use |`.
fn table(text: &str, members: &BTreeSet<String>) -> BTreeMap<String, Crate> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("| crate | path | depends on |"));
    let header = cells(lines.next().expect("docs/design.md has the crate table"));
    assert_eq!(
        header,
        [
            "crate",
            "path",
            "depends on",
            "what it is",
            "tests also use"
        ]
    );
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let c = cells(row);
            assert_eq!(c.len(), 5, "a crate row has five cells: {row}");
            let krate = Crate {
                path: c[1].trim_matches('`').to_string(),
                deps: names(&c[2], members),
                dev: names(&c[4], members),
            };
            (c[0].trim_matches('`').to_string(), krate)
        })
        .collect()
}

fn differences(what: &str, table: &BTreeSet<String>, cargo: &BTreeSet<String>) -> Vec<String> {
    let missing = cargo.difference(table).map(|d| format!("{what} lacks {d}"));
    let extra = table
        .difference(cargo)
        .map(|d| format!("{what} has {d}, which cargo does not"));
    missing.chain(extra).collect()
}

#[test]
fn the_crate_table_is_cargos() {
    let meta = metadata(None);
    let members: BTreeSet<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut cargo = packages(&meta, &members);
    let table = table(&design(), &members);
    let mut wrong = Vec::new();
    // A row outside the workspace (crates/python) is checked against its own manifest.
    for (name, row) in &table {
        if !cargo.contains_key(name) {
            let manifest = root().join(&row.path).join("Cargo.toml");
            if manifest.is_file() {
                cargo.extend(packages(&metadata(Some(&manifest)), &members));
            }
        }
    }
    for (name, row) in &table {
        let Some(real) = cargo.get(name) else {
            wrong.push(format!("the table has {name}, which is no crate"));
            continue;
        };
        if row.path != real.path {
            wrong.push(format!(
                "{name}: the table says {}, cargo {}",
                row.path, real.path
            ));
        }
        wrong.extend(differences(
            &format!("{name}'s \"depends on\""),
            &row.deps,
            &real.deps,
        ));
        wrong.extend(differences(
            &format!("{name}'s \"tests also use\""),
            &row.dev,
            &real.dev,
        ));
    }
    wrong.extend(
        cargo
            .keys()
            .filter(|n| !table.contains_key(*n))
            .map(|n| format!("the table lacks {n}")),
    );
    // Every crate folder is in the table, in the workspace or not.
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let path = format!("crates/{}", dir.file_name().unwrap().to_string_lossy());
        if dir.join("Cargo.toml").is_file() && !table.values().any(|c| c.path == path) {
            wrong.push(format!("the table has no row for {path}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/design.md's crate table is not cargo's:\n{}",
        wrong.join("\n")
    );
}

/// The filesystem's folder diagram: the first code block under "## The filesystem".
fn fs_diagram(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| *l != "## The filesystem")
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect()
}

/// Whether `word` is in `text` with no letter, digit or `_` just before it (so `dicts.rs`
/// does not match inside `store_dicts.rs`, but does in `store/dicts.rs`) and, unless it is a
/// folder (`data/`), none after.
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(ident) && (word.ends_with('/') || !after.is_some_and(ident))
    })
}

/// Each `.rs` file under `dir`, as its path relative to `base`.
fn rs_files(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(base, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(base).unwrap().to_path_buf());
        }
    }
}

/// Every file under crates/fs/src is in the diagram: a file at the top anywhere in it; one in
/// a folder in that folder's entry (a line starting at the diagram's indent that names
/// `folder/`, through the lines indented under it), with each folder on the way named there
/// as `sub/` and the file by its name. A folder's `mod.rs` is named by the folder.
#[test]
fn the_fs_diagram_names_every_file() {
    let text = design();
    let diagram = fs_diagram(&text);
    assert!(
        diagram
            .first()
            .is_some_and(|l| l.starts_with("crates/fs/src/")),
        "no fs diagram"
    );
    // The entries: a line starting at column 2, and the lines below it until the next.
    let mut entries: Vec<String> = Vec::new();
    for line in &diagram[1..] {
        let entry_line = line.starts_with("  ") && !line[2..].starts_with([' ', '│', '▼']);
        match entries.last_mut() {
            Some(entry) if !entry_line => {
                entry.push('\n');
                entry.push_str(line);
            }
            _ => entries.push(line.to_string()),
        }
    }
    let src = root().join("crates/fs/src");
    let mut files = Vec::new();
    rs_files(&src, &src, &mut files);
    files.sort();
    let mut missing = Vec::new();
    for file in &files {
        let parts: Vec<String> = file
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let (name, folders) = parts.split_last().unwrap();
        let named = match folders.split_first() {
            None => diagram.iter().any(|l| has_word(l, name)),
            Some((top, below)) => entries.iter().any(|entry| {
                let head = entry.lines().next().unwrap_or_default();
                has_word(head, &format!("{top}/"))
                    && below.iter().all(|f| has_word(entry, &format!("{f}/")))
                    && (name == "mod.rs" || has_word(entry, name))
            }),
        };
        if !named {
            missing.push(file.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "docs/design.md's fs diagram (## The filesystem) does not name:\n{}",
        missing.join("\n")
    );
}
