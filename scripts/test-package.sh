#!/usr/bin/env bash
# The Debian package, as an administrator meets it: build it (packaging/build-deb.sh), install
# it with dpkg, and use only the installed binary for: --version, `man -w` for wring and every
# subcommand (found by walking --help) and wring-mount-options(5), bash completion of
# `wring mo`, an fstab line mounted with `mount -a` (twice) and unmounted with `umount`,
# findmnt, `mount -t fuse.wring` with a bad option failing with wring's message, journald
# priorities on stderr, `systemd-analyze verify` of the unit, a block device started from a
# blk.conf section; then purge the package and check that none of its files is left.
#   usage: scripts/test-package.sh [--from-tests]   (root; --from-tests: see build-deb.sh)
# Everything it mounts, starts or installs is undone on exit, also when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "test-package: FAIL: $*" >&2; exit 1; }
pass=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (dpkg -i, mount); run it as root"
if dpkg -s wring >/dev/null 2>&1; then
  fail "a wring package is installed already; this test installs and purges its own: dpkg --purge wring first"
fi

if grep -qs '^path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg.d/*; then
  fail "dpkg here drops man pages (path-exclude in /etc/dpkg/dpkg.cfg.d/): remove that line to test them"
fi

deb=$(packaging/build-deb.sh "$@" | tail -n 1)
[ -f "$deb" ] || fail "packaging/build-deb.sh did not print a .deb path (got '$deb')"

work=$(mktemp -d -t wring-pkg.XXXXXX)
installed=0
# What `systemctl enable wring-blk@t0` would create (the purge must remove it).
wants=/etc/systemd/system/multi-user.target.wants/wring-blk@t0.service
cleanup() {
  local rc=$?
  rm -f "$wants"
  for m in "$work/mnt"; do
    if findmnt -n "$m" >/dev/null 2>&1; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
  done
  if [ -x /usr/bin/wring ] && [ -d "$work/blk/t0" ]; then
    WRING_BLK_DIR="$work/blk" /usr/bin/wring blk stop t0 >/dev/null 2>&1 || true
  fi
  if [ "$installed" -eq 1 ] && dpkg -s wring >/dev/null 2>&1; then
    dpkg --purge wring >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  if [ "$rc" -eq 0 ]; then echo "$pass passed, 0 failed"; else echo "$pass passed, 1 failed"; fi
}
trap cleanup EXIT

dpkg -i "$deb" >/dev/null
installed=1
[ "$(command -v wring)" = /usr/bin/wring ] || fail "wring on PATH is $(command -v wring), not the package's /usr/bin/wring"
W=/usr/bin/wring
ok "dpkg -i $(basename "$deb")"

# Maintainer scripts: prerm stops running wring-blk@ instances on remove, postrm reloads systemd
# and on purge removes `systemctl enable wring-blk@NAME`'s links. PID 1 is not systemd here, so
# the stop is checked in the script's text; the purge of an enable link really runs below.
dpkg-deb -e "$deb" "$work/control"
for s in prerm postrm; do [ -x "$work/control/$s" ] || fail "the .deb has no $s maintainer script"; done
grep -qF "systemctl stop 'wring-blk@*.service'" "$work/control/prerm" || fail "prerm does not stop wring-blk@ instances: $(cat "$work/control/prerm")"
grep -qF 'systemctl daemon-reload' "$work/control/postrm" || fail "postrm does not reload systemd"
ok "prerm stops wring-blk@*.service on remove; postrm reloads systemd"

# --version: version, commit, codec libraries.
v=$($W --version)
for want in "wring 0." "(commit " "zstd 1." "zlib-rs 0." "lz4 1."; do
  grep -qF "$want" <<<"$v" || fail "wring --version lacks '$want':"$'\n'"$v"
done
ok "--version names the commit and codecs: $(head -n 1 <<<"$v")"

# Man pages: wring, every subcommand --help lists (recursively), the mount options.
subcommands() { # $@: the command path; prints each subcommand's path
  "$W" "$@" --help | awk '/^Commands:/{on=1; next} on && /^$/{exit} on {print $1}' |
    while read -r sub; do
      [ "$sub" = help ] && continue
      echo "$* $sub"
      subcommands "$@" "$sub"
    done
}
man -w wring >/dev/null || fail "man -w wring finds no page"
pages=1
while read -r path; do
  page="wring-${path// /-}"
  man -w "$page" >/dev/null 2>&1 || fail "no man page $page for 'wring $path' (man -w $page)"
  pages=$((pages + 1))
done < <(subcommands | sed 's/^ //')
[ "$pages" -gt 20 ] || fail "only $pages subcommand pages found: walking --help went wrong"
man -w 5 wring-mount-options >/dev/null || fail "man -w 5 wring-mount-options finds no page"
man 5 wring-mount-options 2>/dev/null | grep -q "max_extent" || fail "wring-mount-options(5) does not list max_extent"
ok "man -w finds wring and all $pages command pages, and wring-mount-options(5)"

# Bash completion: `wring mo<TAB>` completes to mount.
comp=$(bash -c 'source /usr/share/bash-completion/completions/wring
  COMP_WORDS=(wring mo); COMP_CWORD=1; COMP_LINE="wring mo"; COMP_POINT=${#COMP_LINE}
  _wring wring mo wring; printf "%s\n" "${COMPREPLY[@]}"')
[ "$comp" = mount ] || fail "bash completes 'wring mo' to '$comp', not 'mount'"
ok "bash completes 'wring mo' to mount"

# fstab: mount -a (twice: the second finds it mounted), findmnt, umount.
mkdir -p "$work/mnt"
$W mkfs "$work/store" >/dev/null
printf '%s %s fuse.wring compress=zstd:3,nofail,_netdev,x-systemd.requires=foo.service,noauto 0 0\n' \
  "$work/store" "$work/mnt" >"$work/fstab"
# noauto keeps `mount -a` off it; the line without noauto is what `mount -a` mounts.
mount -a -T "$work/fstab"
findmnt -n "$work/mnt" >/dev/null && fail "mount -a mounted an fstab line marked noauto"
sed -i 's/,noauto / /' "$work/fstab"
mount -a -T "$work/fstab" || fail "mount -a -T $work/fstab failed"
src=$(findmnt -n -o SOURCE "$work/mnt") || fail "findmnt does not show $work/mnt after mount -a"
[ "$src" = "wring:$work/store" ] || fail "findmnt shows source '$src' for $work/mnt, not wring:$work/store"
fstype=$(findmnt -n -o FSTYPE "$work/mnt")
[ "$fstype" = "fuse.wring" ] || fail "findmnt shows type '$fstype' for $work/mnt, not fuse.wring"
$W status "$work/mnt" | grep -q '^options: compress=zstd:3,' || fail "the fstab options did not reach the mount: $($W status "$work/mnt" | head -n 1)"
echo "written through fstab" >"$work/mnt/f"
mount -a -T "$work/fstab" || fail "a second mount -a failed on the mounted line"
n=$(awk -v m="$work/mnt" '$5 == m' /proc/self/mountinfo | wc -l)
[ "$n" -eq 1 ] || fail "after a second mount -a, $work/mnt is mounted $n times"
# mount -o remount,ro reaches the live mount through the helper (it used to answer "already
# mounted" and leave it writable), and remount,rw gives it back.
mount -o remount,ro "$work/mnt" || fail "mount -o remount,ro $work/mnt failed"
findmnt -n -o OPTIONS "$work/mnt" | grep -q '^ro,' || fail "the kernel's mount is not read-only after mount -o remount,ro"
$W status "$work/mnt" | head -n 1 | grep -q ',ro$' || fail "the daemon is not read-only after mount -o remount,ro"
echo "refused" 2>/dev/null >"$work/mnt/g" && fail "a write went through a read-only mount"
mount -o remount,rw "$work/mnt" || fail "mount -o remount,rw $work/mnt failed"
echo "written again" >"$work/mnt/g" || fail "no write after mount -o remount,rw"
pid=$(getfattr --only-values -n wring.pid "$work/mnt" 2>/dev/null) || fail "no wring.pid on $work/mnt"
# systemd sends SIGTERM to a mount unit's leftover processes right after unmounting: the daemon
# of a mount(8) mount ignores it, so its final commit is not cut short.
kill -TERM "$pid"
$W status "$work/mnt" >/dev/null || fail "the daemon of a mount(8) mount died of SIGTERM"
grep -q '^State:[[:space:]]*[RSD]' "/proc/$pid/status" || fail "daemon $pid is not running after SIGTERM"
umount "$work/mnt" || fail "umount $work/mnt failed"
findmnt -n "$work/mnt" >/dev/null && fail "$work/mnt is still mounted after umount"
# umount returns before the daemon's final commit: wait for it to exit before reusing the store.
# The bound only keeps a daemon that never exits from hanging CI; it is not a speed check.
waited=0
while [ -d "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; do
  if [ "$waited" -ge 600 ]; then
    log=$(tail -n 5 "$work/store/wring.log" 2>/dev/null || true)
    kill -KILL "$pid" 2>/dev/null || true
    fail "daemon $pid of $work/mnt had not exited 60 s after umount (killed now); the end of its wring.log:"$'\n'"$log"
  fi
  sleep 0.1
  waited=$((waited + 1))
done
ok "fstab line: mount -a (twice, one mount), findmnt shows wring:$work/store as fuse.wring, SIGTERM ignored, umount"

# mount -t fuse.wring: a bad option fails with wring's words and mounts nothing; a good one mounts.
# Exit status as mount(8)'s: 32 for a mount failure (which mount passes on), 1 for usage.
rc=0
err=$(mount -t fuse.wring "$work/store" "$work/mnt" -o compress=zstdd 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "mount -t fuse.wring -o compress=zstdd succeeded"
[ "$rc" -eq 32 ] || fail "mount -t fuse.wring -o compress=zstdd exited $rc, not 32 (mount(8)'s mount failure)"
rc=0
/usr/sbin/mount.fuse.wring "$work/store" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "mount.fuse.wring with one path exited $rc, not 1 (mount(8)'s incorrect invocation)"
grep -q "mount.fuse.wring: invalid value 'zstdd' for compress" <<<"$err" || fail "bad option message: $err"
findmnt -n "$work/mnt" >/dev/null && fail "a failed mount left $work/mnt mounted"
mount -t fuse.wring "$work/store" "$work/mnt" -o compress=lz4 || fail "mount -t fuse.wring -o compress=lz4 failed"
[ "$(cat "$work/mnt/f")" = "written through fstab" ] || fail "the file written before umount reads back wrong"
umount "$work/mnt"
ok "mount -t fuse.wring: '$err' (exit 32; usage exits 1); a good option mounts and the data is there"

# Journald: priorities when stderr is $JOURNAL_STREAM, plain lines otherwise.
: >"$work/err"
JOURNAL_STREAM=$(stat -c %d:%i "$work/err") $W mount -o compress=zstd:99 /nonexistent/s /nonexistent/m 2>>"$work/err" || true
grep -q '^<4>wring_fs::options: compress: ' "$work/err" || fail "no <4> warning on a journal stderr: $(cat "$work/err")"
: >"$work/err2"
JOURNAL_STREAM=1:1 $W mount -o compress=zstd:99 /nonexistent/s /nonexistent/m 2>>"$work/err2" || true
grep -q '^<' "$work/err2" && fail "priority prefixes on a stderr that is not the journal: $(cat "$work/err2")"
grep -q 'WARN' "$work/err2" || fail "no plain warning line: $(cat "$work/err2")"
ok "log lines carry <4> on a journal stderr only"

# systemd: the unit verifies (its binary and man pages exist now).
systemd-analyze verify /usr/lib/systemd/system/wring-blk@.service 2>&1 | tee "$work/verify" >&2 || true
[ ! -s "$work/verify" ] || fail "systemd-analyze verify wring-blk@.service complained"
ok "systemd-analyze verify wring-blk@.service"

# A block device from a blk.conf section, through the installed plugin in /usr/lib/wring.
printf '[t0]\nsize = 16M\nalgorithm = lz4\nstreams = 1\n' >"$work/blk.conf"
[ "$($W blk-config show --config "$work/blk.conf")" = "[t0] wring blk start -o comp_algorithm=lz4,streams=1 --size 16M -- t0" ] ||
  fail "blk-config show: $($W blk-config show --config "$work/blk.conf")"
uri=$(WRING_BLK_DIR="$work/blk" $W blk-config start t0 --config "$work/blk.conf") || fail "blk-config start t0 failed"
nbdinfo --size "$uri" | grep -qx 16777216 || fail "nbdinfo $uri does not see 16 MiB"
WRING_BLK_DIR="$work/blk" $W blk stop t0 >/dev/null
ok "blk-config start t0 serves $uri with the packaged plugin"

# Purge: nothing of the package is left, not even the link `systemctl enable wring-blk@t0` makes.
mkdir -p "$(dirname "$wants")"
ln -s /usr/lib/systemd/system/wring-blk@.service "$wants"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/files"
dpkg --purge wring >/dev/null
installed=0
dpkg -s wring >/dev/null 2>&1 && fail "dpkg still lists wring after --purge"
while read -r f; do
  case "$f" in */) continue ;; esac
  if [ -e "$f" ] || [ -L "$f" ]; then fail "$f is left after dpkg --purge wring"; fi
done <"$work/files"
for d in /usr/lib/wring /usr/share/doc/wring; do [ ! -e "$d" ] || fail "$d is left after dpkg --purge wring"; done
left=$(pgrep -af "$work" | grep -v '^[0-9]* \[' || true)
[ -z "$left" ] || fail "processes of the test are left: $left"
if mount -t fuse.wring "$work/store" "$work/mnt" 2>/dev/null; then fail "mount -t fuse.wring still works after the purge"; fi
[ ! -L "$wants" ] || fail "dpkg --purge wring left the enable link $wants"
ok "dpkg --purge wring leaves none of its $(grep -vc '/$' "$work/files") files, nor the enable link of wring-blk@t0"

# scripts/install.sh, for other distributions, into a DESTDIR; then --uninstall.
root="$work/root"
stage="$(dirname "$(dirname "$deb")")/release/deb-stage"  # what build-deb.sh packaged
# A file install.sh did not put there is refused by name, and nothing is installed.
mkdir -p "$root/usr/local/bin"
echo "someone else's" >"$root/usr/local/bin/wring"
if err=$(STAGE="$stage" DESTDIR="$root" PREFIX=/usr/local scripts/install.sh 2>&1 >/dev/null); then
  fail "scripts/install.sh replaced $root/usr/local/bin/wring, which it did not install"
fi
grep -qF "$root/usr/local/bin/wring exists and scripts/install.sh did not put it there" <<<"$err" ||
  fail "scripts/install.sh's refusal does not name $root/usr/local/bin/wring: $err"
[ "$(cat "$root/usr/local/bin/wring")" = "someone else's" ] || fail "scripts/install.sh changed a file it refused"
left=$(find "$root" ! -type d ! -path "$root/usr/local/bin/wring")
[ -z "$left" ] || fail "a refused scripts/install.sh installed: $left"
rm "$root/usr/local/bin/wring"
ok "scripts/install.sh refuses to replace a file it did not install: $err"
STAGE="$stage" DESTDIR="$root" PREFIX=/usr/local scripts/install.sh >/dev/null
# A second run replaces its own files.
STAGE="$stage" DESTDIR="$root" PREFIX=/usr/local scripts/install.sh >/dev/null || fail "a second scripts/install.sh refused its own files"
for f in /usr/local/bin/wring /sbin/mount.fuse.wring /usr/local/lib/wring/libwring_blk_nbdkit.so \
  /usr/local/share/man/man1/wring-mount.1.gz /usr/local/share/man/man5/wring-mount-options.5.gz \
  /usr/local/share/bash-completion/completions/wring /usr/local/share/zsh/site-functions/_wring \
  /etc/systemd/system/wring-blk@.service; do
  [ -e "$root$f" ] || [ -L "$root$f" ] || fail "scripts/install.sh did not install $f"
done
[ "$(readlink "$root/sbin/mount.fuse.wring")" = /usr/local/lib/wring/wring ] || fail "mount.fuse.wring links to $(readlink "$root/sbin/mount.fuse.wring")"
grep -qx 'ExecStart=/usr/local/bin/wring blk-config start -- %i' "$root/etc/systemd/system/wring-blk@.service" ||
  fail "the installed unit does not run /usr/local/bin/wring"
"$root/usr/local/lib/wring/wring" --version >/dev/null || fail "the installed binary does not run"
DESTDIR="$root" PREFIX=/usr/local scripts/install.sh --uninstall >/dev/null
left=$(find "$root" ! -type d)
[ -z "$left" ] || fail "scripts/install.sh --uninstall left: $left"
ok "scripts/install.sh installs under PREFIX, mount.fuse.wring in /sbin, the unit in /etc; --uninstall removes it all"
