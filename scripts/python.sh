#!/usr/bin/env bash
# Builds the Python package (crates/python) with maturin into a wheel, installs it into a fresh
# virtual environment, and with --test runs its pytest suite there (against python-zstandard,
# zlib, numpy and, as root, the kernel's btrfs), then imports the same abi3 wheel in every
# other CPython 3.9+ it finds. --bench builds a release wheel and prints the benchmark table
# beside python-zstandard and python-lz4 (crates/python/bench/bench.py).
#   usage: scripts/python.sh --test | --bench [bench.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
mode="${1:-}"
[ $# -gt 0 ] && shift
case "$mode" in
  --test) profile=() wheels=target/wheels ;;
  --bench) profile=(--release) wheels=target/wheels-release ;;
  *) echo "python.sh: use --test or --bench" >&2; exit 1 ;;
esac

# maturin lives in its own venv under .tools (git-ignored), like SeaweedFS's weed.
tools="$repo/.tools/maturin"
if [ ! -x "$tools/bin/maturin" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2"
fi

if [ "$mode" = --test ]; then
  # The crate is outside the main workspace (an extension module): its own fmt check here;
  # its clippy run, with the workspace's lints, is scripts/test.sh's clippy step.
  cargo fmt --manifest-path crates/python/Cargo.toml -- --check
fi
rm -rf "$wheels"
CARGO_TARGET_DIR="$repo/target/python" "$tools/bin/maturin" build -q "${profile[@]}" \
  -m crates/python/Cargo.toml -o "$wheels"
wheel="$(ls "$wheels"/wring-*-cp39-abi3-*.whl)"
echo "python: built $(basename "$wheel")"

venv="$repo/target/python-venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$wheel" pytest zstandard numpy lz4 mypy

if [ "$mode" = --bench ]; then
  corpus="${WRING_CORPUS:-$repo/target/corpus}"
  [ -f "$corpus/MANIFEST" ] || ../shared/corpus/build.sh "$corpus" >/dev/null
  exec "$venv/bin/python" crates/python/bench/bench.py "$corpus" "$@"
fi

# The tests import the installed wheel, not the sources: run them from outside the checkout.
(cd "$venv" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/crates/python/tests")
# The type stubs against the module itself.
(cd "$venv" && "$venv/bin/python" -m mypy.stubtest wring._wring)

# The same wheel in every other CPython 3.9+ on this machine (pyenv's, /usr/bin's).
for py in /usr/bin/python3.* "$HOME"/.pyenv/versions/3.*/bin/python3; do
  [ -x "$py" ] || continue
  case "$("$py" -c 'import sys; print(sys.version_info >= (3, 9))' 2>/dev/null)" in True) ;; *) continue ;; esac
  v="$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
  other="$repo/target/python-venv-$v"
  rm -rf "$other"
  "$py" -m venv "$other" && "$other/bin/pip" install -q --disable-pip-version-check "$wheel"
  (cd "$other" && "$other/bin/python" -c '
import wring
data = b"abi3 " * 1000
assert wring.decompress(wring.compress(data, "zstd:3")) == data
assert wring.Engine(streams=2).decompress_many(wring.Engine(streams=2).compress_many([data], "lz4"), "lz4", sizes=len(data)) == [data]
')
  echo "python: the wheel works in CPython $v"
  rm -rf "$other"
done
