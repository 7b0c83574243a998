//! The operations the tester runs, what each answers, and how each reads as a shell command.
//!
//! Paths are relative to a test directory and drawn from a small pool of names, so that names
//! are reused all the time: creates of names just removed, renames over names just made,
//! directories made and removed under the same name. That is where a namespace layer keeps
//! state a plain filesystem does not (fs/btrfs's delayed items, wring's delayed entries).

use std::fmt::Write as _;

/// Who makes a call: root, or an unprivileged user without supplementary groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Who {
    /// uid 0 with every capability.
    Root,
    /// [`USER`]:[`USER`], no groups, no capabilities.
    User,
}

/// The unprivileged user's uid and gid.
pub const USER: u32 = 1234;

/// The mount's extent size: a copy of whole extents shares them, what is left over is
/// written.
pub const EXTENT: u32 = 128 << 10;

/// What `open(O_CREAT)` is asked for beside O_CREAT|O_WRONLY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Creat {
    /// Nothing else: an existing file is opened as it is.
    Plain,
    /// O_EXCL: EEXIST when the name exists.
    Excl,
    /// O_TRUNC: an existing file is emptied.
    Trunc,
}

/// How a file is opened and kept in a slot, as a shell redirection can.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpenHow {
    /// `<`: O_RDONLY.
    Read,
    /// `<>`: O_RDWR|O_CREAT.
    ReadWrite,
    /// `>>`: O_WRONLY|O_APPEND|O_CREAT.
    Append,
}

/// A fallocate(2) mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Falloc {
    /// Mode 0: allocate, growing the file.
    Alloc,
    /// FALLOC_FL_KEEP_SIZE.
    KeepSize,
    /// FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE.
    Punch,
    /// FALLOC_FL_ZERO_RANGE.
    Zero,
}

/// renameat2's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RenameHow {
    /// rename(2).
    Plain,
    /// RENAME_NOREPLACE.
    NoReplace,
    /// RENAME_EXCHANGE.
    Exchange,
}

/// A node mknod(2) makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// S_IFIFO.
    Fifo,
    /// S_IFCHR 1:3 (/dev/null's numbers; never opened).
    Char,
    /// S_IFSOCK.
    Socket,
}

/// setxattr(2)'s flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XattrHow {
    /// 0: create or replace.
    Any,
    /// XATTR_CREATE.
    Create,
    /// XATTR_REPLACE.
    Replace,
}

/// A time utimensat(2) sets: an explicit one from long ago (so it can be told apart from
/// "now" in a comparison), now, or left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeArg {
    /// UTIME_OMIT.
    Omit,
    /// UTIME_NOW.
    Now,
    /// This many seconds (and as many nanoseconds times 1000) after 2001-09-09.
    At(u32),
}

/// The base of [`TimeArg::At`]: 1,000,000,000 s after the epoch, well before any "now".
pub const OLD_TIME: i64 = 1_000_000_000;

/// One operation. `slot`s index a small table of open descriptors the run keeps.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Op {
    /// open(O_CREAT|O_WRONLY|…, mode) and close.
    Creat {
        p: String,
        how: Creat,
        mode: u32,
    },
    /// open(O_WRONLY), pwrite `len` bytes of pattern `seed` at `off`, close.
    Write {
        p: String,
        off: u32,
        len: u32,
        seed: u8,
    },
    /// truncate(2).
    Truncate {
        p: String,
        size: u32,
    },
    /// open(O_WRONLY), fallocate, close.
    Fallocate {
        p: String,
        how: Falloc,
        off: u32,
        len: u32,
    },
    Mkdir {
        p: String,
        mode: u32,
    },
    Rmdir {
        p: String,
    },
    Unlink {
        p: String,
    },
    Rename {
        from: String,
        to: String,
        how: RenameHow,
    },
    Link {
        from: String,
        to: String,
    },
    Symlink {
        target: String,
        p: String,
    },
    Mknod {
        p: String,
        node: Node,
    },
    Chmod {
        p: String,
        mode: u32,
        who: Who,
    },
    /// chown(2) (follows a symlink); `None` leaves that id.
    Chown {
        p: String,
        uid: Option<u32>,
        gid: Option<u32>,
        who: Who,
    },
    /// lsetxattr of `user.x{name}` to `value` (repeated `len` times).
    SetXattr {
        p: String,
        name: u8,
        value: u8,
        len: u8,
        how: XattrHow,
    },
    /// lremovexattr of `user.x{name}`.
    RemoveXattr {
        p: String,
        name: u8,
    },
    /// utimensat(2), following a symlink.
    Utimes {
        p: String,
        atime: TimeArg,
        mtime: TimeArg,
        who: Who,
    },
    /// Open and keep in `slot` (closing what it held).
    Open {
        slot: u8,
        p: String,
        how: OpenHow,
    },
    /// Close `slot`.
    Close {
        slot: u8,
    },
    /// pwrite through `slot`.
    FdWrite {
        slot: u8,
        off: u32,
        len: u32,
        seed: u8,
    },
    /// pread through `slot`: the bytes' hash.
    FdRead {
        slot: u8,
        off: u32,
        len: u32,
    },
    /// fstat of `slot`.
    FdStat {
        slot: u8,
    },
    /// ftruncate through `slot`.
    FdTruncate {
        slot: u8,
        size: u32,
    },
    /// fsync of `slot`.
    FdSync {
        slot: u8,
    },
    /// open(dir, O_TMPFILE|O_RDWR, 0600) into `slot`.
    Tmpfile {
        slot: u8,
        dir: String,
    },
    /// linkat(slot, "", p, AT_EMPTY_PATH): give an open file (an O_TMPFILE) a name.
    LinkSlot {
        slot: u8,
        p: String,
    },
    /// lstat.
    Stat {
        p: String,
    },
    /// The whole file's hash.
    Read {
        p: String,
    },
    /// The names a directory lists.
    List {
        p: String,
    },
    /// readlink(2).
    Readlink {
        p: String,
    },
    /// open(O_RDONLY), fsync, close.
    Fsync {
        p: String,
    },
    /// open(O_RDONLY) and BTRFS_IOC_DEFRAG_RANGE (`btrfs filesystem defragment`): the
    /// argument's fields as given, so that what is refused is drawn too (btrfs only).
    Defrag {
        p: String,
        start: u32,
        len: u64,
        flags: u64,
        compress_type: u32,
        who: Who,
    },
    /// open `from` O_RDONLY and `to` O_WRONLY (either may be the other), then
    /// copy_file_range(2) from `off_in` to `off_out`, again after a short count (as cp does)
    /// until `len` bytes are copied or it answers 0: the bytes copied. btrfs clones whole
    /// blocks (a reflink), the mount shares the extents that line up, tmpfs copies.
    CopyFileRange {
        from: String,
        off_in: u32,
        to: String,
        off_out: u32,
        len: u32,
    },
    /// Everything durable: syncfs, and on the mount the daemon's durable commit.
    Sync,
    /// `echo 2 > /proc/sys/vm/drop_caches`: the kernel forgets the inodes it holds, so later
    /// operations find them unheld (on the mount: FORGET for each).
    DropCaches,
}

impl Op {
    /// Whether the operation changes a directory's entries (the exhaustive pass's alphabet).
    pub fn is_namespace(&self) -> bool {
        matches!(
            self,
            Op::Creat { .. }
                | Op::Mkdir { .. }
                | Op::Rmdir { .. }
                | Op::Unlink { .. }
                | Op::Rename { .. }
                | Op::Link { .. }
                | Op::Symlink { .. }
                | Op::Mknod { .. }
        )
    }

    /// Whether running it touches state outside its test directory.
    pub fn is_global(&self) -> bool {
        matches!(self, Op::Sync | Op::DropCaches)
    }

    /// The operation as a shell command run in the test directory (sh, coreutils, attr,
    /// python3 for what sh cannot say). Open slots are sh's descriptors 3 and up.
    pub fn shell(&self) -> String {
        match self {
            Op::Creat { p, how, mode } => {
                let flag = match how {
                    Creat::Plain => "",
                    Creat::Excl => "|os.O_EXCL",
                    Creat::Trunc => "|os.O_TRUNC",
                };
                py(&format!(
                    "os.close(os.open({}, os.O_CREAT|os.O_WRONLY{flag}, {mode:#o}))",
                    pq(p)
                ))
            }
            Op::Write { p, off, len, seed } => py(&format!(
                "f = os.open({}, os.O_WRONLY); os.pwrite(f, {}, {off}); os.close(f)",
                pq(p),
                py_data(*seed, *len)
            )),
            Op::Truncate { p, size } => format!("truncate -s {size} -- {}", q(p)),
            Op::Fallocate { p, how, off, len } => {
                let mode = match how {
                    Falloc::Alloc => "",
                    Falloc::KeepSize => " -n",
                    Falloc::Punch => " -p",
                    Falloc::Zero => " -z",
                };
                format!("fallocate{mode} -o {off} -l {len} -- {}", q(p))
            }
            Op::Mkdir { p, mode } => format!("mkdir -m {mode:o} -- {}", q(p)),
            Op::Rmdir { p } => format!("rmdir -- {}", q(p)),
            Op::Unlink { p } => format!("unlink -- {}", q(p)),
            Op::Rename { from, to, how } => match how {
                RenameHow::Plain => py(&format!("os.rename({}, {})", pq(from), pq(to))),
                // renameat2 has no shell command before coreutils 9.5 (mv --exchange);
                // syscall 316 is renameat2 on x86_64.
                RenameHow::NoReplace => renameat2(from, to, 1),
                RenameHow::Exchange => renameat2(from, to, 2),
            },
            Op::Link { from, to } => format!("ln -- {} {}", q(from), q(to)),
            Op::Symlink { target, p } => format!("ln -s -- {} {}", q(target), q(p)),
            Op::Mknod { p, node } => match node {
                Node::Fifo => format!("mkfifo -m 644 -- {}", q(p)),
                Node::Char => format!("mknod -m 644 -- {} c 1 3", q(p)),
                Node::Socket => py(&format!(
                    "import stat; os.mknod({}, stat.S_IFSOCK|0o644)",
                    pq(p)
                )),
            },
            Op::Chmod { p, mode, who } => as_who(*who, &format!("chmod {mode:o} -- {}", q(p))),
            Op::Chown { p, uid, gid, who } => {
                let id = |i: &Option<u32>| i.map_or("-1".to_string(), |i| i.to_string());
                let call = format!("os.chown({}, {}, {})", pq(p), id(uid), id(gid));
                as_who(*who, &py(&call))
            }
            Op::SetXattr {
                p,
                name,
                value,
                len,
                how,
            } => {
                let flags = match how {
                    XattrHow::Any => "0",
                    XattrHow::Create => "os.XATTR_CREATE",
                    XattrHow::Replace => "os.XATTR_REPLACE",
                };
                py(&format!(
                    "os.setxattr({}, 'user.x{name}', bytes([{value}]) * {len}, {flags}, follow_symlinks=False)",
                    pq(p)
                ))
            }
            Op::RemoveXattr { p, name } => format!("setfattr -h -x user.x{name} -- {}", q(p)),
            Op::Utimes {
                p,
                atime,
                mtime,
                who,
            } => as_who(
                *who,
                &py(&format!(
                    "os.utime({}, ns=({}, {}))",
                    pq(p),
                    py_time(*atime, p, "st_atime_ns"),
                    py_time(*mtime, p, "st_mtime_ns")
                )),
            ),
            Op::Open { slot, p, how } => {
                let r = match how {
                    OpenHow::Read => "<",
                    OpenHow::ReadWrite => "<>",
                    OpenHow::Append => ">>",
                };
                // `command`: a failed redirection of the special built-in would end sh.
                format!("command exec {}{r} {}", fd(*slot), q(p))
            }
            Op::Close { slot } => format!("exec {}>&-", fd(*slot)),
            Op::FdWrite {
                slot,
                off,
                len,
                seed,
            } => py(&format!(
                "os.pwrite({}, {}, {off})",
                fd(*slot),
                py_data(*seed, *len)
            )),
            Op::FdRead { slot, off, len } => py(&format!(
                "print(len(os.pread({}, {len}, {off})))",
                fd(*slot)
            )),
            Op::FdStat { slot } => py(&format!("print(os.fstat({}))", fd(*slot))),
            Op::FdTruncate { slot, size } => py(&format!("os.ftruncate({}, {size})", fd(*slot))),
            Op::FdSync { slot } => py(&format!("os.fsync({})", fd(*slot))),
            Op::Tmpfile { slot, dir } => format!(
                "# O_TMPFILE into descriptor {} (sh cannot): open({}, O_TMPFILE|O_RDWR, 0600)",
                fd(*slot),
                q(dir)
            ),
            Op::LinkSlot { slot, p } => format!("ln -L -- /proc/self/fd/{} {}", fd(*slot), q(p)),
            Op::Stat { p } => format!("stat -c '%F %a %u:%g %h %s' -- {}", q(p)),
            Op::Read { p } => format!("cksum -- {}", q(p)),
            Op::List { p } => format!("ls -A -- {}", q(p)),
            Op::Readlink { p } => format!("readlink -- {}", q(p)),
            Op::Fsync { p } => py(&format!(
                "f = os.open({}, os.O_RDONLY); os.fsync(f); os.close(f)",
                pq(p)
            )),
            Op::Defrag {
                p,
                start,
                len,
                flags,
                compress_type,
                who,
            } => as_who(
                *who,
                &py(&format!(
                    "import fcntl, struct; f = os.open({}, os.O_RDONLY|os.O_NONBLOCK); \
                     fcntl.ioctl(f, {:#x}, struct.pack('<QQQII16x', {start}, {len}, {flags}, 0, \
                     {compress_type})); os.close(f)",
                    pq(p),
                    wring_fs::BTRFS_IOC_DEFRAG_RANGE
                )),
            ),
            Op::CopyFileRange {
                from,
                off_in,
                to,
                off_out,
                len,
            } => py(&format!(
                // cp's loop in one line: called at least once, `all` stops at the first count
                // of 0 or once `len` bytes are copied.
                "i = os.open({}, os.O_RDONLY|os.O_NONBLOCK); \
                 o = os.open({}, os.O_WRONLY|os.O_NONBLOCK); t = 0; \
                 all((c := os.copy_file_range(i, o, {len} - t, {off_in} + t, {off_out} + t)) \
                 and (t := t + c) < {len} for _ in iter(int, 1)); print(t)",
                pq(from),
                pq(to)
            )),
            Op::Sync => "sync -f . && getfattr --only-values -n wring.sync \"$MNT\" # on the mount"
                .to_string(),
            Op::DropCaches => "echo 2 > /proc/sys/vm/drop_caches".to_string(),
        }
    }
}

/// A slot's shell descriptor.
fn fd(slot: u8) -> u32 {
    3 + u32::from(slot)
}

/// `s` quoted for sh.
fn q(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` as a Python string literal.
fn pq(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A python3 one-liner.
fn py(code: &str) -> String {
    format!("python3 -c {}", q(&format!("import os; {code}")))
}

/// renameat2(from, to, flags) through perl's syscall (x86_64's number).
fn renameat2(from: &str, to: &str, flags: u32) -> String {
    let code =
        format!("syscall(316, -100, \"{from}\", -100, \"{to}\", {flags}) == 0 or die \"$!\\n\"");
    format!("perl -e {}", q(&code))
}

/// Run `cmd` as the unprivileged user (no groups, no capabilities).
fn as_who(who: Who, cmd: &str) -> String {
    match who {
        Who::Root => cmd.to_string(),
        Who::User => format!("setpriv --reuid={USER} --regid={USER} --clear-groups {cmd}"),
    }
}

/// Python for the bytes [`data`] makes.
fn py_data(seed: u8, len: u32) -> String {
    format!("bytes(({seed} * 131 + i * 7) % 251 for i in range({len}))")
}

/// Python for a [`TimeArg`] of `p`'s `field`.
fn py_time(t: TimeArg, p: &str, field: &str) -> String {
    match t {
        TimeArg::Omit => format!("os.stat({}).{field}", pq(p)),
        TimeArg::Now => "__import__('time').time_ns()".to_string(),
        TimeArg::At(s) => {
            let (secs, nsecs) = at(s);
            format!("{}", i128::from(secs) * 1_000_000_000 + i128::from(nsecs))
        }
    }
}

/// The seconds and nanoseconds [`TimeArg::At`] stands for.
pub fn at(s: u32) -> (i64, i64) {
    (OLD_TIME + i64::from(s), i64::from(s % 1000) * 1000)
}

/// The bytes a write of pattern `seed` puts down: the same on every side.
pub fn data(seed: u8, len: u32) -> Vec<u8> {
    (0..len)
        .map(|i| ((u32::from(seed) * 131 + i * 7) % 251) as u8)
        .collect()
}

/// A sequence as a shell script (what a failure prints): each step with what the two sides
/// answered.
pub fn script(header: &str, steps: &[(Op, String)]) -> String {
    let mut s = String::from("#!/bin/sh\n");
    for line in header.lines() {
        let _ = writeln!(s, "# {line}");
    }
    s.push_str(
        "# Run it in an empty directory on a wring mount ($MNT is the mount point) and on tmpfs.\n",
    );
    for (k, (op, note)) in steps.iter().enumerate() {
        let _ = writeln!(s, "{}  # {}: {note}", op.shell(), k + 1);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shell form of each kind quotes what it must and names the right call.
    #[test]
    fn shell_forms() {
        let p = |s: &str| s.to_string();
        assert_eq!(
            Op::Symlink {
                target: p("t"),
                p: p("n0")
            }
            .shell(),
            "ln -s -- t n0"
        );
        assert_eq!(Op::Rmdir { p: p("a b") }.shell(), "rmdir -- 'a b'");
        let r = Op::Rename {
            from: p("a"),
            to: p("d/b"),
            how: RenameHow::Exchange,
        }
        .shell();
        assert!(r.contains("syscall(316") && r.contains(", 2)"), "{r}");
        let c = Op::Chown {
            p: p("f"),
            uid: None,
            gid: Some(5),
            who: Who::User,
        }
        .shell();
        assert_eq!(
            c,
            "setpriv --reuid=1234 --regid=1234 --clear-groups python3 -c 'import os; os.chown('\\''f'\\'', -1, 5)'"
        );
        assert_eq!(data(3, 4), vec![142, 149, 156, 163]);
    }

    /// A copy_file_range's script text says what the tester runs, and replays to the same
    /// answer and the same files: run through sh (python3) in one directory and by the
    /// tester in its twin, each case from the same files.
    #[test]
    fn copy_file_range_script_replays() {
        use crate::exec::{Kernel, Norm, Side, Value};
        let copy = |from: &str, off_in, to: &str, off_out, len| Op::CopyFileRange {
            from: from.into(),
            off_in,
            to: to.into(),
            off_out,
            len,
        };
        assert_eq!(
            copy("a b", 0, "n1/n0", 4096, 7).shell(),
            "python3 -c 'import os; i = os.open('\\''a b'\\'', os.O_RDONLY|os.O_NONBLOCK); \
             o = os.open('\\''n1/n0'\\'', os.O_WRONLY|os.O_NONBLOCK); t = 0; \
             all((c := os.copy_file_range(i, o, 7 - t, 0 + t, 4096 + t)) \
             and (t := t + c) < 7 for _ in iter(int, 1)); print(t)'"
        );
        if std::process::Command::new("python3")
            .arg("-V")
            .output()
            .is_err()
        {
            eprintln!("no python3: the scripts are not replayed");
            return;
        }
        let creat = |p: &str| Op::Creat {
            p: p.into(),
            how: Creat::Excl,
            mode: 0o644,
        };
        let setup = [
            creat("src"),
            creat("dst"),
            Op::Write {
                p: "src".into(),
                off: 0,
                len: 3 * EXTENT + 100,
                seed: 1,
            },
            Op::Write {
                p: "dst".into(),
                off: 0,
                len: EXTENT,
                seed: 2,
            },
            Op::Mkdir {
                p: "d".into(),
                mode: 0o755,
            },
        ];
        let cases = [
            // Whole extents, past the source's end: a short count.
            (
                copy("src", EXTENT, "dst", 2 * EXTENT, 4 * EXTENT),
                Ok(2 * EXTENT + 100),
            ),
            (copy("src", 0, "dst", 0, 2 * EXTENT), Ok(2 * EXTENT)),
            (copy("src", 5000, "dst", 77, 3000), Ok(3000)),
            (copy("src", 4 * EXTENT, "dst", 0, EXTENT), Ok(0)),
            // Within one file: apart, then overlapping (refused).
            (copy("src", 0, "src", 4 * EXTENT, EXTENT), Ok(EXTENT)),
            (copy("src", 0, "src", 4096, EXTENT), Err(libc::EINVAL)),
            (copy("d", 0, "dst", 0, 0), Err(libc::EISDIR)),
            (copy("none", 0, "dst", 0, 10), Err(libc::ENOENT)),
        ];
        let base = std::env::temp_dir().join(format!("wring-difftest-cfr-{}", std::process::id()));
        for (k, (op, want)) in cases.iter().enumerate() {
            let (by_tester, by_script) = (base.join(format!("t{k}")), base.join(format!("s{k}")));
            for d in [&by_tester, &by_script] {
                std::fs::create_dir_all(d).unwrap();
                let mut side = Side::new(d.clone(), Norm { dir_nlink: false }, &Kernel);
                for s in &setup {
                    assert!(matches!(side.run(s), Ok(Value::Count(_) | Value::Done)));
                }
            }
            let mut side = Side::new(by_tester.clone(), Norm { dir_nlink: false }, &Kernel);
            let answer = side.run(op);
            let want = want.map(|n| Value::Count(u64::from(n)));
            assert_eq!(answer, want, "{}", op.shell());
            let out = std::process::Command::new("sh")
                .args(["-c", &op.shell()])
                .current_dir(&by_script)
                .output()
                .unwrap();
            let replayed = match out.status.success() {
                true => Ok(Value::Count(
                    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap(),
                )),
                false => {
                    let err = String::from_utf8_lossy(&out.stderr);
                    let errno = err
                        .split("[Errno ")
                        .nth(1)
                        .and_then(|r| r.split(']').next());
                    Err(errno.and_then(|n| n.parse().ok()).unwrap_or(-1))
                }
            };
            assert_eq!(replayed, answer, "{}", op.shell());
            for f in ["src", "dst"] {
                let read = |d: &std::path::Path| std::fs::read(d.join(f)).unwrap();
                assert!(
                    read(&by_tester) == read(&by_script),
                    "{f} after {}",
                    op.shell()
                );
            }
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}
