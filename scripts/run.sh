#!/usr/bin/env bash
# The main job: set up, build in release mode, and run `wring bench levels` — ratio, compression
# and decompression MB/s and workspace memory for every algorithm and level on the default corpus
# (a deterministic sample of files every Linux machine has), writing bench-out/bench-levels.png beside the
# markdown table. Every figure is the median of several passes with its spread (±), so that two
# runs agree (two quiet runs: compression within 1.5%, decompression within 5%); about five
# minutes on 2 cores (303 s). Extra arguments go to `wring bench levels` (e.g. --corpus DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p wring
./target/release/wring bench levels "$@"
