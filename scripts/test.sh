#!/usr/bin/env bash
# Every test: formatting, lints, unit/property/integration tests, the shuttle model tests, the
# kernel compatibility tests (root: loop-mounted btrfs) and a short fuzz smoke run of every decoder.
#   FUZZ_SECONDS=N (default 20) sets the fuzz time per target; WRING_CORPUS=DIR picks a corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --fuzz
scripts/kernel-test-env.sh

step() { printf '\n== %s ==\n' "$*"; }

step "format"
cargo fmt --all -- --check
step "clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p wring-engine --features shuttle --tests -- -D warnings

# A slice of the shared Silesia-like corpus, when this checkout sits beside ../shared.
if [ -z "${WRING_CORPUS:-}" ] && [ -x ../shared/corpus/build.sh ]; then
  step "corpus"
  ../shared/corpus/build.sh "$PWD/target/corpus" >/dev/null
  export WRING_CORPUS="$PWD/target/corpus"
fi

step "tests"
cargo test --workspace
step "model checking (shuttle)"
cargo test -p wring-engine --features shuttle --test model
step "fuzz smoke"
scripts/fuzz-smoke.sh
