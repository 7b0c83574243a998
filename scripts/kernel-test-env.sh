#!/usr/bin/env bash
# Prepares a machine for wring's kernel tests (crates/btrfs/tests/kernel_compat.rs), which make
# btrfs images on loop devices and use encoded I/O: they need root, a kernel with btrfs and loop
# devices, and the programs mkfs.btrfs (btrfs-progs), losetup/mount/umount (mount) and sync
# (coreutils). Installs whatever is missing; idempotent. Prints what it found.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
command -v mkfs.btrfs >/dev/null 2>&1 || missing+=(btrfs-progs)
command -v losetup >/dev/null 2>&1 || missing+=(mount)
command -v sync >/dev/null 2>&1 || missing+=(coreutils)

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "kernel-test-env: missing ${missing[*]}, and not root to install them" >&2
        exit 1
    fi
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "$(id -u)" -eq 0 ]; then
    # Built-in on most kernels; modprobe only helps where they are modules.
    grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || true
    [ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true
fi

grep -qw btrfs /proc/filesystems || echo "kernel-test-env: warning: this kernel has no btrfs" >&2
[ -e /dev/loop-control ] || echo "kernel-test-env: warning: no /dev/loop-control (loop devices)" >&2
echo "kernel-test-env: kernel $(uname -r), $(mkfs.btrfs --version 2>&1 | head -1), losetup $(losetup --version | awk '{print $NF}')"
