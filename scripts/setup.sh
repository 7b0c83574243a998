#!/usr/bin/env bash
# Installs what wring's build, tests and benchmarks need on a fresh Debian machine, idempotently:
# system packages by name (apt-get update once, only when something is missing), the Rust
# components, and cargo-fuzz for the nightly fuzz smoke run.
#   usage: scripts/setup.sh [--fuzz]
set -euo pipefail

PACKAGES=(btrfs-progs btrfs-compsize fuse3 attr acl fonts-dejavu-core cmake pkg-config build-essential util-linux e2fsprogs xxd nbdkit libnbd-bin qemu-utils)

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

if [ "${1:-}" = "--fuzz" ]; then
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
fi
