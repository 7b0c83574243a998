#!/usr/bin/env bash
# The main job: set up, build in release mode, and run `wring bench levels` — ratio, compression
# and decompression MB/s and workspace memory for every algorithm and level on the default corpus
# (a deterministic sample of files every Linux machine has), writing bench-out/bench-levels.png beside the
# markdown table. Every figure is the median of at least three passes with its spread (±), so
# that two runs agree; about five minutes on 2 cores. Extra arguments go to `wring bench levels`
# (e.g. --corpus DIR, --repeat 5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p wring
./target/release/wring bench levels "$@"
