#!/usr/bin/env bash
# Installs wring where there is no Debian package (other distributions): the same files the
# .deb holds, under PREFIX (default /usr/local), with mount(8)'s helper where mount looks for
# it and the systemd unit where systemd finds local units. A list of what was installed is
# kept, and --uninstall removes exactly that.
#   usage: [PREFIX=/usr/local] [DESTDIR=] scripts/install.sh [--from-tests]
#          [PREFIX=…] [DESTDIR=] scripts/install.sh --uninstall
# Needs at run time: fuse3 (fusermount3), and nbdkit for `wring blk`. DESTDIR stages the
# installation into a directory (for packagers), as make install does.
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

stage=$(packaging/stage.sh "$@" | tail -n 1)
installed=()
put() { # MODE SOURCE DEST
  install -D -m "$1" "$2" "$DESTDIR$3"
  installed+=("$3")
}
link() { # TARGET LINK
  mkdir -p "$(dirname "$DESTDIR$2")"
  ln -sfn "$1" "$DESTDIR$2"
  installed+=("$2")
}

put 755 "$stage/wring" "$PREFIX/lib/wring/wring"
put 644 "$stage/libwring_blk_nbdkit.so" "$PREFIX/lib/wring/libwring_blk_nbdkit.so"
link "$PREFIX/lib/wring/wring" "$PREFIX/bin/wring"
link "$PREFIX/lib/wring/wring" "$SBIN/mount.fuse.wring"
for page in "$stage"/man/*.gz; do
  name=$(basename "$page")
  section=${name%.gz}
  section=${section##*.}
  put 644 "$page" "$PREFIX/share/man/man$section/$name"
done
put 644 "$stage/completions/wring" "$PREFIX/share/bash-completion/completions/wring"
put 644 "$stage/completions/_wring" "$PREFIX/share/zsh/site-functions/_wring"
put 644 "$stage/completions/wring.fish" "$PREFIX/share/fish/vendor_completions.d/wring.fish"
unit=$(mktemp)
sed "s|/usr/bin/wring|$PREFIX/bin/wring|g" "packaging/wring-blk@.service" >"$unit"
put 644 "$unit" "$UNITDIR/wring-blk@.service"
rm -f "$unit"
put 644 packaging/blk.conf "$PREFIX/share/doc/wring/examples/blk.conf"

mkdir -p "$(dirname "$DESTDIR$manifest")"
printf '%s\n' "${installed[@]}" "$manifest" >"$DESTDIR$manifest"
if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
echo "install: wring in $DESTDIR$PREFIX (${#installed[@]} files; scripts/install.sh --uninstall removes them)"
