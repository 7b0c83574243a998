#!/usr/bin/env bash
# Build libfuse's optimized pass-through example, passthrough_hp, from Debian's fuse3 source
# package into target/passthrough_hp/passthrough_hp: `wring bench meta`'s FUSE floor (the same
# FUSE round trips as wring's, with a kernel filesystem behind them). Needs root (apt) and the
# Debian archive; adds a deb-src entry for the running suite if there is none. Idempotent: an
# existing build is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/passthrough_hp
if [ -x "$out/passthrough_hp" ]; then
  echo "passthrough_hp: $out/passthrough_hp (already built)"
  exit 0
fi
apt_sources=/etc/apt/sources.list.d
if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list "$apt_sources"; then
  . /etc/os-release
  cat > "$apt_sources/wring-fuse3-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: ${VERSION_CODENAME}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq dpkg-dev meson ninja-build pkg-config g++ >/dev/null
mkdir -p "$out/src"
(cd "$out/src" && apt-get source -qq fuse3 >/dev/null 2>&1)
src=$(find "$out/src" -maxdepth 1 -type d -name 'fuse3-*' | head -n1)
[ -n "$src" ] || { echo "passthrough-hp.sh: apt-get source fuse3 gave no source tree" >&2; exit 1; }
# The example tests HAVE_UTIMENSAT, which its build never defines: without it every utime of
# an inode without an open file (tar -x of a directory, touch) fails with EOPNOTSUPP.
meson setup "$src/build" "$src" -Dexamples=true -Dutils=false -Dtests=false -Dcpp_args=-DHAVE_UTIMENSAT >/dev/null
ninja -C "$src/build" example/passthrough_hp >/dev/null
cp "$src/build/example/passthrough_hp" "$out/passthrough_hp"
echo "passthrough_hp: $out/passthrough_hp (from $(basename "$src"))"
