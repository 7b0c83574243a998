#!/usr/bin/env bash
# The main job: set up, build in release mode, and print wring's level table
# (workspace memory per algorithm and level, with the managers' statistics after a self-run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p wring
./target/release/wring levels --stats "$@"
