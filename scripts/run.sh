#!/usr/bin/env bash
# The main job: set up, build in release mode, and run `wring bench levels` — ratio, compression
# and decompression MB/s and workspace memory for every algorithm and level on the default corpus
# (a deterministic sample of files every Linux machine has), writing bench-out/bench-levels.png beside the
# markdown table. Extra arguments go to `wring bench levels` (e.g. --corpus DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p wring
./target/release/wring bench levels "$@"
