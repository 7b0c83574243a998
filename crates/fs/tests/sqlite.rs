//! sqlite3 on the mount, as applications use it: a database in WAL mode (its `-shm` index is
//! a shared memory map of a file on the mount) and one with a rollback journal, written by
//! two processes at once (POSIX locks between them), checked with `PRAGMA integrity_check`,
//! and again after a remount.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{require_root, Mount};

const ROWS: usize = 300;

fn sqlite(db: &Path, sql: &str) -> String {
    let o = Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .output()
        .expect("sqlite3 (apt-get install sqlite3)");
    assert!(
        o.status.success(),
        "sqlite3 {sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A writer process: `ROWS` transactions of one insert each, waiting for the other's locks.
fn writer(db: &Path, who: &str) -> Child {
    let mut sql = String::from(".timeout 20000\n");
    for i in 0..ROWS {
        sql += &format!(
            "BEGIN IMMEDIATE; INSERT INTO t(who, n, pad) VALUES('{who}', {i}, hex(randomblob(64))); COMMIT;\n"
        );
    }
    let mut c = Command::new("sqlite3")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sqlite3 (apt-get install sqlite3)");
    use std::io::Write;
    c.stdin.take().unwrap().write_all(sql.as_bytes()).unwrap();
    c
}

#[test]
fn two_sqlite_writers_leave_an_intact_database() {
    if !require_root("two_sqlite_writers_leave_an_intact_database") {
        return;
    }
    let mut m = Mount::new("sqlite");
    m.start("compress=zstd:1");
    for mode in ["wal", "delete"] {
        let db = m.p(&format!("{mode}.db"));
        let created = sqlite(
            &db,
            &format!(
                "PRAGMA journal_mode={mode}; CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT, n INT, pad TEXT);"
            ),
        );
        assert_eq!(created, mode);
        let (a, b) = (writer(&db, "a"), writer(&db, "b"));
        for c in [a, b] {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let counts = sqlite(&db, "SELECT who, count(DISTINCT n) FROM t GROUP BY who;");
        assert_eq!(counts, format!("a|{ROWS}\nb|{ROWS}"), "{mode}");
        assert_eq!(sqlite(&db, "PRAGMA integrity_check;"), "ok", "{mode}");
    }
    m.stop();
    m.start("compress=zstd:1");
    for mode in ["wal", "delete"] {
        let db = m.p(&format!("{mode}.db"));
        assert_eq!(sqlite(&db, "PRAGMA integrity_check;"), "ok", "{mode}");
        let n = sqlite(&db, "SELECT count(*) FROM t;");
        assert_eq!(n, (2 * ROWS).to_string(), "{mode} after a remount");
    }
    m.stop();
}
