#!/usr/bin/env bash
# Every test: formatting, lints, unit/property/integration tests, the Debian package installed
# and used (scripts/test-package.sh), the C ABI and the Python package (scripts/capi.sh,
# scripts/python.sh), the shuttle model tests, the kernel compatibility tests
# (root: loop-mounted btrfs) and a short fuzz smoke run of every decoder.
#   FUZZ_SECONDS=N (default 20) sets the fuzz time per target; WRING_CORPUS=DIR picks a corpus;
#   WRING_SKIP_ROOT=1, WRING_SKIP_CORPUS=1, WRING_SKIP_ZRAM=1, WRING_SKIP_S3=1 skip (and count) the tests that
#   would otherwise fail for lack of root, the corpus or zram.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --fuzz --package
scripts/kernel-test-env.sh

step() { printf '\n== %s ==\n' "$*"; }

# Disk: with full debug info and incremental caches the test binaries took 22 GB, and a CI
# machine with less free ran out of space mid-build. Line tables keep backtraces readable at a
# fifth of the size, and a fresh build gains nothing from incremental caches.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
export CARGO_PROFILE_TEST_DEBUG=line-tables-only
disk() { df -h --output=avail,size,target "$PWD" | sed 's/^/  /'; }

# A test that cannot run here (not root, no corpus, no zram) fails, unless opted out with
# WRING_SKIP_ROOT=1, WRING_SKIP_CORPUS=1, WRING_SKIP_ZRAM=1 or WRING_SKIP_S3=1; each opted-out test appends one
# "wring-test-skipped: <test> (<why>, opted out by <VAR>=1)" line to $WRING_SKIP_LOG, and the
# summary at the end (also after a failure) counts them. Zero skips is the normal outcome.
WRING_SKIP_LOG="$(mktemp -t wring-skipped.XXXXXX)"
export WRING_SKIP_LOG
skip_summary() {
  local n
  n=$(grep -c '^wring-test-skipped: ' "$WRING_SKIP_LOG" || true)
  step "skipped tests: $n"
  if [ "$n" -gt 0 ]; then
    sed -n 's/.*opted out by \([A-Z_]*\)=1)$/\1/p' "$WRING_SKIP_LOG" | sort | uniq -c
    sed -n 's/^wring-test-skipped: /  /p' "$WRING_SKIP_LOG" | sort
  fi
  rm -f "$WRING_SKIP_LOG"
}
# FUSE over io_uring (mount option uring=1) needs the kernel's switch on; it is put back as it
# was when the tests end.
URING_SWITCH=/sys/module/fuse/parameters/enable_uring
uring_was=""
if [ "$(id -u)" -eq 0 ] && [ -w "$URING_SWITCH" ]; then
  uring_was="$(cat "$URING_SWITCH")"
  echo Y > "$URING_SWITCH"
fi
on_exit() {
  step "disk at the end"
  disk
  skip_summary
  if [ -n "$uring_was" ]; then echo "$uring_was" > "$URING_SWITCH"; fi
}
trap on_exit EXIT

step "disk at the start"
disk
step "format"
cargo fmt --all -- --check
step "clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p wring-engine --features shuttle --tests -- -D warnings
cargo clippy -p wring-blk --features shuttle --tests -- -D warnings
cargo clippy -p wring-fs --features shuttle --lib --tests -- -D warnings
# crates/python is outside the workspace (maturin builds it) and cannot inherit its lints:
# its [lints.*] tables must say what the root's [workspace.lints.*] say, then the same run.
lint_tables() { # FILE PREFIX: FILE's [PREFIXlints.*] tables, PREFIX cut, no blank or comment lines
  awk -v p="$2" '/^\[/ { on = index($0, "[" p "lints.") == 1; if (on) print "[" substr($0, length(p) + 2); next }
    on && NF && !/^#/' "$1"
}
if ! diff <(lint_tables Cargo.toml workspace.) <(lint_tables crates/python/Cargo.toml ""); then
  echo "clippy: crates/python/Cargo.toml's [lints] differ from Cargo.toml's [workspace.lints] (above)" >&2
  exit 1
fi
CARGO_TARGET_DIR="$PWD/target/python" cargo clippy --manifest-path crates/python/Cargo.toml \
  --all-targets --features extension-module -- -D warnings
# fuzz/ is its own workspace (cargo-fuzz): the same rules apply to it.
(cd fuzz && cargo fmt -- --check && cargo clippy --all-targets -- -D warnings)

# A slice of the shared Silesia-like corpus, when this checkout sits beside ../shared.
if [ -z "${WRING_CORPUS:-}" ] && [ -x ../shared/corpus/build.sh ]; then
  step "corpus"
  ../shared/corpus/build.sh "$PWD/target/corpus" >/dev/null
  export WRING_CORPUS="$PWD/target/corpus"
fi

step "tests"
# Every filesystem mount through /dev/fuse (uring=0): the default, uring=auto, would take the
# ring here, with the kernel's switch on.
WRING_TEST_MOUNT_OPTIONS=uring=0 cargo test --workspace
# The filesystem's mount tests again, every mount served through FUSE over io_uring (uring=1);
# the S3 tests are left to the run above.
step "filesystem tests over FUSE over io_uring"
if [ "$(id -u)" -ne 0 ] && [ "${WRING_SKIP_ROOT:-}" = 1 ]; then
  echo "wring-test-skipped: the fs tests with uring=1 (need root for FUSE over io_uring, opted out by WRING_SKIP_ROOT=1)" | tee -a "$WRING_SKIP_LOG"
else
  fs_tests=()
  for t in crates/fs/tests/*.rs; do
    case "$(basename "$t" .rs)" in s3) ;; *) fs_tests+=(--test "$(basename "$t" .rs)") ;; esac
  done
  WRING_TEST_MOUNT_OPTIONS=uring=1 cargo test -p wring-fs "${fs_tests[@]}"
  # umount(8) then `wring mount` / `mount -t fuse.wring` at once, through the ring too.
  WRING_TEST_MOUNT_OPTIONS=uring=1 cargo test -p wring --test cli_umount_mount
fi
# The Debian package of the binaries the tests just built: dpkg -i, then man, completion, fstab
# mount -a/umount/findmnt, mount -t fuse.wring, systemd-analyze verify with the installed files;
# dpkg --purge and nothing left behind (scripts/test-package.sh).
step "package"
if [ "$(id -u)" -ne 0 ] && [ "${WRING_SKIP_ROOT:-}" = 1 ]; then
  echo "wring-test-skipped: scripts/test-package.sh (needs root for dpkg and mount, opted out by WRING_SKIP_ROOT=1)" | tee -a "$WRING_SKIP_LOG"
else
  scripts/test-package.sh --from-tests
fi
# The C ABI: wring.h from cbindgen, libwring.so and libwring.a installed under target/capi, and
# a C program compiled against them, linked both ways and run (scripts/capi.sh).
step "C ABI"
scripts/capi.sh --test
# The Python package: a maturin wheel in a fresh venv, pytest against python-zstandard, zlib,
# numpy and the kernel's btrfs, and the abi3 wheel imported by every other CPython 3.9+ here.
step "Python package"
scripts/python.sh --test
step "model checking (shuttle)"
cargo test -p wring-engine --features shuttle --test model
cargo test -p wring-blk --features shuttle --test model
cargo test -p wring-fs --features shuttle --lib model
step "fuzz smoke"
scripts/fuzz-smoke.sh
