#!/usr/bin/env bash
# The main job: set up, build in release mode, and run `wring bench levels` — ratio, compression
# and decompression MB/s and workspace memory for every algorithm and level on the default corpus
# (a deterministic sample of files every Linux machine has), writing bench-out/bench-levels.png beside the
# markdown table, then the engine's time per extent beside the bare library's at 4-128 KiB. Every
# figure is the median of several passes, interleaved over the levels, with its spread (±; rows
# above 10% are marked noisy), and the header says how busy the machine was during the run;
# about six minutes on 2 cores. Extra arguments go to `wring bench levels` (e.g. --corpus DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -p wring
./target/release/wring bench levels "$@"
