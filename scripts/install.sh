#!/usr/bin/env bash
# Installs wring where there is no Debian package (other distributions): the same files the
# .deb holds, under PREFIX (default /usr/local), with mount(8)'s helper where mount looks for
# it and the systemd unit where systemd finds local units. A list of what was installed is
# kept, and --uninstall removes exactly that.
#   usage: [PREFIX=/usr/local] [DESTDIR=] [STAGE=DIR] scripts/install.sh [--from-tests]
#          [PREFIX=…] [DESTDIR=] scripts/install.sh --uninstall
# Needs at run time: fuse3 (fusermount3), and nbdkit for `wring blk`. DESTDIR stages the
# installation into a directory (for packagers), as make install does. STAGE names a directory
# packaging/stage.sh made already (its last line) instead of building one.
# It never replaces a file it did not install: a destination that exists and is not in the
# list of an earlier run is refused, by name, before anything is written. The list grows as
# each file goes in, so --uninstall after a failed run removes what that run put there.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
# mount(8) runs /sbin/mount.TYPE; systemd reads units from /etc/systemd/system.
SBIN=${SBIN:-/sbin}
UNITDIR=${UNITDIR:-/etc/systemd/system}
manifest="$PREFIX/lib/wring/installed-files"

if [ "${1:-}" = "--uninstall" ]; then
  [ -f "$DESTDIR$manifest" ] || { echo "install: nothing to uninstall: $DESTDIR$manifest is missing" >&2; exit 1; }
  while read -r f; do rm -f "$DESTDIR$f"; done <"$DESTDIR$manifest"
  rm -f "$DESTDIR$manifest"
  for d in lib/wring share/doc/wring/examples share/doc/wring; do rmdir "$DESTDIR$PREFIX/$d" 2>/dev/null || true; done
  if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
  echo "install: removed wring from $DESTDIR$PREFIX"
  exit 0
fi

stage=${STAGE:-$(packaging/stage.sh "$@" | tail -n 1)}
[ -x "$stage/wring" ] || { echo "install: $stage holds no staged wring binary (packaging/stage.sh makes one)" >&2; exit 1; }
unit=$(mktemp)
trap 'rm -f "$unit"' EXIT
sed "s|/usr/bin/wring|$PREFIX/bin/wring|g" "packaging/wring-blk@.service" >"$unit"

# The plan: how (a mode, or "link"), source (or link target) and destination of each file.
hows=() srcs=() dests=()
plan() { hows+=("$1"); srcs+=("$2"); dests+=("$3"); }
plan 755 "$stage/wring" "$PREFIX/lib/wring/wring"
plan 644 "$stage/libwring_blk_nbdkit.so" "$PREFIX/lib/wring/libwring_blk_nbdkit.so"
plan link "$PREFIX/lib/wring/wring" "$PREFIX/bin/wring"
plan link "$PREFIX/lib/wring/wring" "$SBIN/mount.fuse.wring"
for page in "$stage"/man/*.gz; do
  name=$(basename "$page")
  section=${name%.gz}
  section=${section##*.}
  plan 644 "$page" "$PREFIX/share/man/man$section/$name"
done
plan 644 "$stage/completions/wring" "$PREFIX/share/bash-completion/completions/wring"
plan 644 "$stage/completions/_wring" "$PREFIX/share/zsh/site-functions/_wring"
plan 644 "$stage/completions/wring.fish" "$PREFIX/share/fish/vendor_completions.d/wring.fish"
plan 644 "$unit" "$UNITDIR/wring-blk@.service"
plan 644 packaging/blk.conf "$PREFIX/share/doc/wring/examples/blk.conf"

# What an earlier run installed (and may replace); anything else in the way is refused.
declare -A ours=()
if [ -f "$DESTDIR$manifest" ]; then
  while read -r f; do ours["$f"]=1; done <"$DESTDIR$manifest"
fi
for dest in "${dests[@]}"; do
  if { [ -e "$DESTDIR$dest" ] || [ -L "$DESTDIR$dest" ]; } && [ -z "${ours[$dest]:-}" ]; then
    echo "install: $DESTDIR$dest exists and scripts/install.sh did not put it there" \
      "(it is not in $DESTDIR$manifest): it may be another package's; move or remove it" \
      "yourself, then run scripts/install.sh again. Nothing was installed." >&2
    exit 1
  fi
done

# The list first (with itself in it), then each file added to it as it goes in.
mkdir -p "$(dirname "$DESTDIR$manifest")"
[ -n "${ours[$manifest]:-}" ] || echo "$manifest" >>"$DESTDIR$manifest"
ours["$manifest"]=1
n=0
for i in "${!dests[@]}"; do
  how=${hows[$i]} src=${srcs[$i]} dest=${dests[$i]}
  # Listed before it is written: a run stopped half-way leaves nothing --uninstall misses.
  [ -n "${ours[$dest]:-}" ] || echo "$dest" >>"$DESTDIR$manifest"
  ours["$dest"]=1
  if [ "$how" = link ]; then
    mkdir -p "$(dirname "$DESTDIR$dest")"
    ln -sfn "$src" "$DESTDIR$dest"
  else
    install -D -m "$how" "$src" "$DESTDIR$dest"
  fi
  n=$((n + 1))
done
if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
echo "install: wring in $DESTDIR$PREFIX ($n files; scripts/install.sh --uninstall removes them)"
