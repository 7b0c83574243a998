use super::*;
use crate::store::Access;
use crate::store::{self, Store, DATA_FILE, DB_FILE, ROOT};
use crate::volume::NewInode;
use crate::Options;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wring-fsck-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn write_file(vol: &Volume, name: &str, len: usize) {
    let new = NewInode::file(0o644);
    let (ino, _) = vol.create(ROOT, name.as_bytes(), new).unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 253) as u8).collect();
    vol.write(ino, 0, &data, None).unwrap();
}

fn files(dir: &Path) -> [Vec<u8>; 2] {
    [DB_FILE, DATA_FILE].map(|f| std::fs::read(dir.join(f)).unwrap())
}

#[test]
fn fsck_changes_nothing_even_after_a_crash_and_refuses_a_mounted_store() {
    let (dir, crashed) = (scratch("live"), scratch("crashed"));
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, Options::parse("max_extent=16K").unwrap()).unwrap();
    write_file(&vol, "a", 100_000);
    vol.sync().unwrap();
    // Not durable: its bytes make the data file longer than the last durable commit needs.
    write_file(&vol, "b", 50_000);
    // The files as a crash would leave them: the database not closed.
    std::fs::create_dir_all(&crashed).unwrap();
    for f in [DB_FILE, DATA_FILE] {
        std::fs::copy(dir.join(f), crashed.join(f)).unwrap();
    }
    assert!(fsck(&dir).is_err(), "fsck must refuse a mounted store");
    drop(vol);

    let before = files(&crashed);
    let r = fsck(&crashed).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.inodes, 2, "the root and 'a', as a mount recovers them");
    assert!(files(&crashed) == before, "fsck changed the store");
    // A mount cuts the data file after what the recovered commit refers to.
    drop(Volume::open(&crashed, Options::default()).unwrap());
    assert!(files(&crashed)[1].len() < before[1].len());

    let r = fsck(&dir).unwrap();
    assert!(r.problems.is_empty() && r.notes.is_empty(), "{r:?}");
    assert_eq!(r.inodes, 3);
    for d in [dir, crashed] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A store whose data file is gone does not mount with an empty one in its place.
#[test]
fn a_missing_data_file_is_not_recreated_under_stored_extents() {
    let dir = scratch("no-data");
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, Options::default()).unwrap();
    write_file(&vol, "a", 100_000);
    vol.sync().unwrap();
    drop(vol);
    std::fs::remove_file(dir.join(DATA_FILE)).unwrap();
    let e = Volume::open(&dir, Options::default()).err().unwrap();
    assert!(e.to_string().contains(DATA_FILE), "{e}");
    assert!(!dir.join(DATA_FILE).exists());
    let _ = std::fs::remove_dir_all(dir);
}

/// A damaged next-inode counter is reported by fsck, and a create refuses it (EUCLEAN)
/// instead of handing out a number in use (it used to restart at the root's).
#[test]
fn a_damaged_next_inode_counter_is_reported_and_not_used() {
    let dir = scratch("next-ino");
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, Options::default()).unwrap();
    write_file(&vol, "a", 10);
    let txn = vol.store().write().unwrap();
    txn.open_table(store::META)
        .unwrap()
        .remove("next_ino")
        .unwrap();
    vol.store().commit(txn, true).unwrap();
    let new = NewInode::file(0o644);
    let e = vol.create(ROOT, b"b", new).unwrap_err();
    assert_eq!(e.errno(), libc::EUCLEAN);
    drop(vol);
    let r = fsck(&dir).unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("next inode number")),
        "{r:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A directory's `NewInode`.
fn dir_inode() -> NewInode<'static> {
    NewInode {
        kind: crate::store::records::Kind::Dir,
        ..NewInode::file(0o755)
    }
}

/// The inodes of [`tree`]'s store.
struct Tree {
    dir: PathBuf,
    /// `/a`, a file also named `/d/a2`.
    a: u64,
    /// `/d`.
    d: u64,
    /// `/d/e`.
    e: u64,
    /// `/d/e/f`, a file of 10,000 bytes.
    f: u64,
    /// `/s`, a symlink to `a`.
    s: u64,
}

/// A store holding `/a` (also `/d/a2`), `/d/e/f` and the symlink `/s`, made durable.
fn tree(name: &str) -> Tree {
    let dir = scratch(name);
    Store::mkfs(&dir).unwrap();
    let vol = Volume::open(&dir, Options::default()).unwrap();
    let (a, _) = vol.create(ROOT, b"a", NewInode::file(0o644)).unwrap();
    let (d, _) = vol.create(ROOT, b"d", dir_inode()).unwrap();
    vol.link(a, d, b"a2").unwrap();
    let (e, _) = vol.create(d, b"e", dir_inode()).unwrap();
    let (f, _) = vol.create(e, b"f", NewInode::file(0o644)).unwrap();
    vol.write(f, 0, &[7u8; 10_000], None).unwrap();
    let link = NewInode {
        kind: crate::store::records::Kind::Symlink,
        target: Some(b"a"),
        ..NewInode::file(0o777)
    };
    let (s, _) = vol.create(ROOT, b"s", link).unwrap();
    vol.sync().unwrap();
    drop(vol);
    let r = fsck(&dir).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
    Tree { dir, a, d, e, f, s }
}

/// Damage the store in `dir` through the store's API, in one durable transaction.
fn damage(dir: &Path, how: impl FnOnce(&redb::WriteTransaction)) {
    let vol = Volume::open(dir, Options::default()).unwrap();
    let txn = vol.store().write().unwrap();
    how(&txn);
    vol.store().commit(txn, true).unwrap();
}

fn set_inode(txn: &redb::WriteTransaction, ino: u64, f: impl FnOnce(&mut Inode)) {
    let mut t = txn.open_table(store::INODES).unwrap();
    let mut i = store::get_inode(&t, ino).unwrap();
    f(&mut i);
    t.insert(ino, i.to_bytes().as_slice()).unwrap();
}

fn unlink_entry(txn: &redb::WriteTransaction, parent: u64, name: &[u8]) {
    let mut t = txn.open_table(store::DIRENTS).unwrap();
    assert!(t.remove((parent, name)).unwrap().is_some());
}

/// fsck's problems, then `fsck --repair`'s changes, which must leave fsck clean and a second
/// repair with nothing to do. The problems before and the changes.
fn repaired(dir: &Path) -> (Vec<String>, Vec<String>) {
    let before = fsck(dir).unwrap().problems;
    assert!(!before.is_empty(), "nothing to repair");
    let r = repair(dir, &Access::default(), &mut |m| panic!("waited: {m}")).unwrap();
    assert!(r.after.problems.is_empty(), "{before:#?}\n{r:#?}");
    let again = fsck(dir).unwrap();
    assert!(again.problems.is_empty(), "{again:?}");
    let second = repair(dir, &Access::default(), &mut |_| {}).unwrap();
    assert!(second.changes.is_empty(), "{:?}", second.changes);
    (before, r.changes)
}

fn has(lines: &[String], words: &[&str]) -> bool {
    lines.iter().any(|l| words.iter().all(|w| l.contains(w)))
}

/// The inode named `name` in `parent`, and its record.
fn named(dir: &Path, parent: u64, name: &str) -> Result<(u64, Inode), FsError> {
    Volume::open(dir, Options::default())?.lookup(parent, name.as_bytes())
}

/// The inode `/lost+found`.
fn lost_found(dir: &Path) -> u64 {
    named(dir, ROOT, "lost+found").unwrap().0
}

use crate::store::records::Inode;

#[test]
fn an_entry_whose_inode_is_gone_is_removed() {
    let t = tree("repair-no-inode");
    damage(&t.dir, |txn| {
        txn.open_table(store::INODES).unwrap().remove(t.f).unwrap();
    });
    let (before, changes) = repaired(&t.dir);
    let gone = format!("entry 'f' in {} points at missing inode {}", t.e, t.f);
    assert!(before.contains(&gone), "{before:?}");
    let f = t.f.to_string();
    assert!(has(
        &changes,
        &["removed entry 'f' in /d/e", "inode", &f, "does not exist"]
    ));
    assert!(
        has(&changes, &["removed extent 0 of missing inode", &f]),
        "{changes:?}"
    );
    assert!(has(&changes, &["inode count"]), "{changes:?}");
    assert_eq!(named(&t.dir, t.e, "f").unwrap_err().errno(), libc::ENOENT);
    // The name can be used again.
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    vol.create(t.e, b"f", NewInode::file(0o644)).unwrap();
    drop(vol);
    assert!(fsck(&t.dir).unwrap().problems.is_empty());
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn entries_in_a_directory_that_is_gone_are_removed_and_their_inodes_reconnected() {
    let t = tree("repair-no-dir");
    damage(&t.dir, |txn| {
        txn.open_table(store::INODES).unwrap().remove(t.e).unwrap();
    });
    let (before, changes) = repaired(&t.dir);
    assert!(before.contains(&format!("entry 'f' in missing directory {}", t.e)));
    assert!(has(&changes, &["removed entry 'e' in /d"]), "{changes:?}");
    assert!(has(
        &changes,
        &["removed entry 'f' in directory", "does not exist"]
    ));
    assert!(has(&changes, &["made /lost+found"]), "{changes:?}");
    let moved = format!(
        "moved inode {} (a file, 10000 bytes) to /lost+found/#{}",
        t.f, t.f
    );
    assert!(has(&changes, &[&moved]), "{changes:?}");
    assert!(
        has(&changes, &["`..` record of inode", "not a directory"]),
        "{changes:?}"
    );
    // /d lost its subdirectory: 2 links, not 3.
    assert!(
        has(&changes, &["link count of /d", "from 3 to 2"]),
        "{changes:?}"
    );
    let lf = lost_found(&t.dir);
    let (f, inode) = named(&t.dir, lf, &format!("#{}", t.f)).unwrap();
    assert_eq!((f, inode.nlink), (t.f, 1));
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    assert_eq!(vol.read(f, 0, 20_000).unwrap(), vec![7u8; 10_000]);
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn what_no_name_reaches_goes_to_lost_found_once() {
    let t = tree("repair-unreached");
    damage(&t.dir, |txn| {
        unlink_entry(txn, ROOT, b"a");
        unlink_entry(txn, t.d, b"a2");
        // A directory without a name, its file below it.
        unlink_entry(txn, t.d, b"e");
    });
    let (before, changes) = repaired(&t.dir);
    for ino in [t.a, t.e] {
        assert!(before.contains(&format!("inode {ino}: no name refers to it")));
    }
    // Only the top of what hangs loose is reported: f comes back with e.
    assert!(!has(&before, &[&format!("inode {}:", t.f)]), "{before:?}");
    let made: Vec<_> = changes
        .iter()
        .filter(|c| c.contains("made /lost+found"))
        .collect();
    assert_eq!(made.len(), 1, "{changes:?}");
    let lf = lost_found(&t.dir);
    let (a, inode) = named(&t.dir, lf, &format!("#{}", t.a)).unwrap();
    assert_eq!((a, inode.nlink), (t.a, 1));
    let (e, inode) = named(&t.dir, lf, &format!("#{}", t.e)).unwrap();
    assert_eq!((e, inode.nlink), (t.e, 2));
    assert_eq!(named(&t.dir, e, "f").unwrap().0, t.f);
    // lost+found: 2 + the directory moved into it; its owner the root's, mode 0700.
    let (_, lfi) = named(&t.dir, ROOT, "lost+found").unwrap();
    assert_eq!((lfi.nlink, lfi.perm), (3, 0o700));
    // `..` of the directory moved is lost+found.
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    let txn = vol.store().read().unwrap();
    assert_eq!(store::parent_of(&txn, e).unwrap(), lf);
    drop(txn);
    drop(vol);
    // Something else comes loose later: the same lost+found takes it.
    damage(&t.dir, |txn| unlink_entry(txn, ROOT, b"s"));
    let (_, changes) = repaired(&t.dir);
    assert!(!has(&changes, &["made /lost+found"]), "{changes:?}");
    assert_eq!(named(&t.dir, lf, &format!("#{}", t.s)).unwrap().0, t.s);
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn wrong_link_counts_of_files_and_directories_are_set_from_the_names() {
    let t = tree("repair-nlink");
    damage(&t.dir, |txn| {
        set_inode(txn, t.a, |i| i.nlink = 5);
        set_inode(txn, t.f, |i| i.nlink = 0);
        set_inode(txn, t.d, |i| i.nlink = 7);
        set_inode(txn, ROOT, |i| i.nlink = 2);
    });
    let (before, changes) = repaired(&t.dir);
    assert!(before.contains(&format!("inode {}: link count 5 but 2 expected", t.a)));
    for (path, from, to) in [("/a", 5, 2), ("/d/e/f", 0, 1), ("/d", 7, 3), ("/", 2, 3)] {
        let line = format!("set the link count of {path} (inode");
        assert!(
            has(&changes, &[&line, &format!("from {from} to {to}")]),
            "{changes:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn missing_and_wrong_dotdot_records_are_set() {
    let t = tree("repair-dotdot");
    damage(&t.dir, |txn| {
        let mut parents = txn.open_table(store::PARENTS).unwrap();
        parents.remove(t.e).unwrap();
        parents.insert(t.d, t.e).unwrap();
        // A record of a file is stale.
        parents.insert(t.a, t.d).unwrap();
    });
    let (before, changes) = repaired(&t.dir);
    let missing = format!("directory {}: no `..` record", t.e);
    assert!(has(&before, &[&missing]), "{before:?}");
    let line = format!(
        "set the `..` of /d/e (directory {}) to directory {}",
        t.e, t.d
    );
    assert!(has(&changes, &[&line, "(was none)"]), "{changes:?}");
    let line = format!("set the `..` of /d (directory {}) to directory {ROOT}", t.d);
    assert!(has(&changes, &[&line]), "{changes:?}");
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    let txn = vol.store().read().unwrap();
    assert_eq!(store::parent_of(&txn, t.e).unwrap(), t.d);
    assert_eq!(store::parent_of(&txn, t.d).unwrap(), ROOT);
    drop(txn);
    drop(vol);
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn a_loop_of_directories_is_broken_through_lost_found() {
    let t = tree("repair-loop");
    // /d holds e, e holds d: neither is reached from the root.
    damage(&t.dir, |txn| {
        unlink_entry(txn, ROOT, b"d");
        let mut dirents = txn.open_table(store::DIRENTS).unwrap();
        let dir = crate::store::records::Kind::Dir as u8;
        dirents.insert((t.e, &b"d"[..]), (t.d, dir)).unwrap();
    });
    let (before, changes) = repaired(&t.dir);
    let lowest = t.d.min(t.e);
    assert!(has(
        &before,
        &[&format!("directory {lowest} is not reachable")]
    ));
    let lf = lost_found(&t.dir);
    assert_eq!(named(&t.dir, lf, &format!("#{lowest}")).unwrap().0, lowest);
    assert!(has(&changes, &["has another name"]), "{changes:?}");
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn the_orphan_table_is_set_right_and_true_orphans_left_to_the_mount() {
    let t = tree("repair-orphans");
    damage(&t.dir, |txn| {
        let mut orphans = txn.open_table(store::ORPHANS).unwrap();
        // An orphan that is gone, and one with a name (a mount would delete /s).
        orphans.insert(999_999, ()).unwrap();
        orphans.insert(t.s, ()).unwrap();
        // A true orphan: no name, no links.
        orphans.insert(t.a, ()).unwrap();
        drop(orphans);
        unlink_entry(txn, ROOT, b"a");
        unlink_entry(txn, t.d, b"a2");
        set_inode(txn, t.a, |i| i.nlink = 0);
        set_inode(txn, t.d, |i| i.nlink = 3);
    });
    let (before, changes) = repaired(&t.dir);
    assert!(before.contains(&"orphan record of missing inode 999999".to_string()));
    assert!(has(
        &before,
        &[&format!(
            "inode {} is in the orphan table but has 1 name",
            t.s
        )]
    ));
    assert!(has(
        &changes,
        &["removed inode 999999 from the orphan table"]
    ));
    assert!(has(
        &changes,
        &[&format!("removed inode {} from the orphan table", t.s)]
    ));
    assert!(!has(&changes, &[&format!("inode {}", t.a)]), "{changes:?}");
    // The mount deletes the true orphan and keeps /s.
    drop(Volume::open(&t.dir, Options::default()).unwrap());
    assert!(named(&t.dir, ROOT, "s").is_ok());
    {
        let vol = Volume::open(&t.dir, Options::default()).unwrap();
        let txn = vol.store().read().unwrap();
        let inodes = txn.open_table(store::INODES).unwrap();
        assert!(store::get_inode(&inodes, t.a).is_err());
    }
    assert!(fsck(&t.dir).unwrap().problems.is_empty());
    let _ = std::fs::remove_dir_all(&t.dir);
}

#[test]
fn bad_entries_and_counters_are_set_right() {
    let t = tree("repair-entries");
    damage(&t.dir, |txn| {
        let file = crate::store::records::Kind::File as u8;
        let mut dirents = txn.open_table(store::DIRENTS).unwrap();
        // The symlink's entry says file; a file holds an entry; a directory names the root.
        dirents.insert((ROOT, &b"s"[..]), (t.s, file)).unwrap();
        dirents.insert((t.a, &b"x"[..]), (t.f, file)).unwrap();
        let dir = crate::store::records::Kind::Dir as u8;
        dirents.insert((t.d, &b"up"[..]), (ROOT, dir)).unwrap();
        drop(dirents);
        let mut meta = txn.open_table(store::META).unwrap();
        meta.remove("next_ino").unwrap();
        meta.insert("used", 1).unwrap();
        meta.insert("inodes", 77).unwrap();
        drop(meta);
        set_inode(txn, t.f, |i| {
            i.disk += 3;
            i.bytes += 4096;
        });
    });
    let (before, changes) = repaired(&t.dir);
    for p in [
        "entry 's' in 1: kind mismatch",
        "entry 'x' in non-directory",
        "entry 'up' in",
        "next inode number 0",
        "store counts 78 inodes, holds 6",
        "store counts 1 stored bytes",
        "records 10003 stored bytes",
        "bytes in extents, extents cover",
    ] {
        assert!(has(&before, &[p]), "{p}: {before:?}");
    }
    for c in [
        "entry 's' in / (directory 1): its kind set to its inode's (a symlink)",
        "removed entry 'x' in",
        "removed entry 'up' in /d",
        "set the next inode number to 7",
        "set the store's inode count to 6 (was 78)",
        "set the store's stored bytes to",
        "set the stored bytes of /d/e/f",
        "set the bytes that the extents of /d/e/f",
    ] {
        assert!(has(&changes, &[c]), "{c}: {changes:?}");
    }
    let _ = std::fs::remove_dir_all(&t.dir);
}

/// The repair takes the store's lock: a store this process has open is refused at once.
#[test]
fn a_store_in_use_is_refused() {
    let t = tree("repair-in-use");
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    let e = repair(&t.dir, &Access::default(), &mut |m| panic!("waited: {m}")).unwrap_err();
    assert!(e.to_string().contains("in use by this process"), "{e}");
    drop(vol);
    let _ = std::fs::remove_dir_all(&t.dir);
}

/// A power cut before any of the repair's writes and syncs leaves the store as it was or
/// repaired, never in between: the repair is one transaction.
#[test]
fn a_power_cut_during_a_repair_leaves_the_store_as_it_was_or_repaired() {
    use crate::store::simdisk::SimDisk;
    let disk = SimDisk::default();
    let (db, data) = (disk.new_file(), disk.new_file());
    Store::mkfs_sim(&db).unwrap();
    let vol = Volume::open_sim(db.clone(), data.clone(), Options::default()).unwrap();
    let (d, _) = vol.create(ROOT, b"d", dir_inode()).unwrap();
    let mut inos = Vec::new();
    for n in 0..20u32 {
        let (ino, _) = vol
            .create(d, format!("f{n}").as_bytes(), NewInode::file(0o644))
            .unwrap();
        vol.write(ino, 0, &n.to_le_bytes().repeat(3000), None)
            .unwrap();
        inos.push(ino);
    }
    vol.sync().unwrap();
    // Half the files lose their inode, the other half their name.
    let txn = vol.store().write().unwrap();
    for (n, ino) in inos.iter().enumerate() {
        match n % 2 {
            0 => drop(txn.open_table(store::INODES).unwrap().remove(*ino).unwrap()),
            _ => unlink_entry(&txn, d, format!("f{n}").as_bytes()),
        }
    }
    vol.store().commit(txn, true).unwrap();
    let mut before = FsckReport::default();
    check(&vol, &mut before).unwrap();
    assert!(before.problems.len() > 20, "{before:?}");
    disk.arm(1, true, 7);
    let changes = repair::repair_volume(&vol).unwrap();
    let cuts = disk.disarm();
    assert!(
        changes.len() > 30 && cuts.len() > 2,
        "{changes:?}, {} cuts",
        cuts.len()
    );
    drop(vol);
    let (mut old, mut new) = (0, 0);
    for cut in &cuts {
        let vol = Volume::open_sim(cut.file(0), cut.file(1), Options::default()).unwrap();
        let mut r = FsckReport::default();
        check(&vol, &mut r).unwrap();
        match r.problems.is_empty() {
            true => new += 1,
            false if r.problems == before.problems => old += 1,
            false => panic!("a cut left a store half repaired: {:#?}", r.problems),
        }
    }
    assert!(old > 0, "no cut before the commit ({new} after)");
    eprintln!("{old} cuts left the store as it was, {new} repaired");
}

/// A store from before format version 4: its inode items have no `bytes`. fsck finds nothing
/// wrong with it; the first writable open counts every file's, and fsck then checks them.
#[test]
fn an_older_stores_inodes_get_their_bytes_at_the_first_writable_open() {
    use crate::store::records::INODE_LEN_V3;
    use redb::ReadableTable;
    let t = tree("upgrade-bytes");
    damage(&t.dir, |txn| {
        let mut inodes = txn.open_table(store::INODES).unwrap();
        let all: Vec<(u64, Vec<u8>)> = inodes
            .iter()
            .unwrap()
            .map(|r| r.map(|(k, v)| (k.value(), v.value().to_vec())).unwrap())
            .collect();
        for (ino, v) in all {
            inodes.insert(ino, &v[..INODE_LEN_V3]).unwrap();
        }
        drop(inodes);
        txn.open_table(store::META)
            .unwrap()
            .insert("version", 3)
            .unwrap();
    });
    let r = fsck(&t.dir).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
    let vol = Volume::open_for_check_with(&t.dir, &Access::default()).unwrap();
    assert_eq!(vol.inode(t.f).unwrap().bytes, vol.inode(t.f).unwrap().disk);
    drop(vol);
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    // 10,000 bytes in one extent: three blocks, as btrfs's st_blocks would say.
    assert_eq!(vol.inode(t.f).unwrap().bytes, 3 * 4096);
    assert_eq!(vol.inode(t.a).unwrap().bytes, 0);
    drop(vol);
    let r = fsck(&t.dir).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
    let vol = Volume::open_for_check_with(&t.dir, &Access::default()).unwrap();
    let txn = vol.store().read().unwrap();
    assert_eq!(store::counter(&txn, "version").unwrap(), 4);
    let _ = std::fs::remove_dir_all(&t.dir);
}

/// Shared extents whose reference records were lost or made up: the repair rebuilds the
/// table from the extent items before it removes anything, so deleting one copy afterwards
/// frees nothing the other still names.
#[test]
fn lost_and_made_up_reference_records_are_rebuilt_from_the_items() {
    use crate::store::shared::SHARED;
    use crate::volume::data::reflink::CopyRange;
    use redb::ReadableTable;
    let t = tree("repair-shared");
    let vol = Volume::open(&t.dir, Options::parse("compress=zstd:1").unwrap()).unwrap();
    let (src, _) = vol.create(ROOT, b"src", NewInode::file(0o644)).unwrap();
    let (dst, _) = vol.create(ROOT, b"dst", NewInode::file(0o644)).unwrap();
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i % 251) as u8 ^ (i >> 13) as u8)
        .collect();
    vol.write(src, 0, &data, None).unwrap();
    vol.fsync(src).unwrap();
    let req = CopyRange {
        ino_in: src,
        off_in: 0,
        ino_out: dst,
        off_out: 0,
        len: data.len() as u64,
    };
    assert_eq!(vol.copy_range(req, None).unwrap(), data.len() as u64);
    vol.sync().unwrap();
    drop(vol);
    damage(&t.dir, |txn| {
        let mut shared = txn.open_table(SHARED).unwrap();
        let first = shared.first().unwrap().map(|(k, _)| k.value()).unwrap();
        shared.remove(first).unwrap();
        shared.insert(u64::MAX / 2, (4096, 2)).unwrap();
    });
    let (before, changes) = repaired(&t.dir);
    assert!(
        has(
            &before,
            &["named by 2 extent item(s)", "nothing (unshared)"]
        ),
        "{before:?}"
    );
    assert!(has(&before, &["that no extent item names"]), "{before:?}");
    assert!(has(&changes, &["recorded 2 references"]), "{changes:?}");
    assert!(
        has(
            &changes,
            &["removed the reference record", "0 extent item(s)"]
        ),
        "{changes:?}"
    );
    let vol = Volume::open(&t.dir, Options::default()).unwrap();
    vol.remove(ROOT, b"src", false).unwrap();
    vol.sync().unwrap();
    let (dst, _) = vol.lookup(ROOT, b"dst").unwrap();
    assert!(vol.read(dst, 0, data.len() as u32).unwrap() == data);
    drop(vol);
    let r = fsck(&t.dir).unwrap();
    assert!(r.problems.is_empty(), "{r:?}");
    let _ = std::fs::remove_dir_all(&t.dir);
}

/// A damaged inode item and a damaged extent item: fsck's lines carry the decoder's error,
/// naming the record, the field and the value.
#[test]
fn a_damaged_record_is_reported_with_its_field() {
    use redb::ReadableTable;
    let t = tree("damaged-record");
    damage(&t.dir, |txn| {
        let mut inodes = txn.open_table(store::INODES).unwrap();
        let mut v = inodes.get(t.a).unwrap().unwrap().value().to_vec();
        v[0] = 9;
        inodes.insert(t.a, v.as_slice()).unwrap();
        drop(inodes);
        let mut extents = txn.open_table(store::EXTENTS).unwrap();
        let mut v = extents.get((t.f, 0)).unwrap().unwrap().value().to_vec();
        v[1] = 8;
        extents.insert((t.f, 0), v.as_slice()).unwrap();
    });
    let r = fsck(&t.dir).unwrap();
    let want = [
        format!(
            "inode {}: damaged inode item: inode record: field kind: invalid value 9: not a \
             kind of inode",
            t.a
        ),
        format!("/d/e/f (inode {}): offset 0: ", t.f),
        "extent item record: field compression: invalid value 8: no such compression".into(),
    ];
    for w in want {
        assert!(
            r.problems.iter().any(|p| p.contains(&w)),
            "{w}: {:#?}",
            r.problems
        );
    }
    for p in &r.problems {
        eprintln!("problem: {p}");
    }
    let _ = std::fs::remove_dir_all(&t.dir);
}
