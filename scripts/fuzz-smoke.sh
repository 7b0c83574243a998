#!/usr/bin/env bash
# Smoke-fuzz every target of fuzz/ for FUZZ_SECONDS seconds each (default 20). Each target starts
# from a copy of its committed corpus (fuzz/corpus/TARGET, minimised with `cargo fuzz cmin`;
# roundtrip's keeps only inputs of up to 16 KiB, re-minimised, to stay small), the
# seeds that fuzz/examples/seeds.rs writes and the saved findings fuzz/regressions/TARGET-*, all
# in a temporary directory: nothing is written into the repository except crash artifacts under
# fuzz/artifacts/. Prints each target's execution count. Exits non-zero if any target finds a
# crash, a leak, a timeout or runs out of memory.
#
#   scripts/fuzz-smoke.sh                      # every target, 20 s each
#   FUZZ_SECONDS=60 scripts/fuzz-smoke.sh roundtrip decompress_zstd
#
# Needs a nightly toolchain (FUZZ_TOOLCHAIN, default nightly); installs cargo-fuzz if missing.
# Runs cargo fuzz from fuzz/, so that fuzz/.cargo/config.toml (C flags for the ASan build) applies.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${FUZZ_SECONDS:-20}"
toolchain="+${FUZZ_TOOLCHAIN:-nightly}"

if ! cargo "$toolchain" fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd "$root/fuzz"
work="$(mktemp -d "${TMPDIR:-/tmp}/wring-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "== building the fuzz targets"
cargo "$toolchain" fuzz build
echo "== writing seeds"
cargo "$toolchain" run --quiet --example seeds -- "$work/seeds"

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo "$toolchain" fuzz list)
fi

# The closing statistics of a libFuzzer log: runs, speed and coverage.
summary() {
    local done_line
    done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$1" | tail -n 1 || true)"
    if [ -n "$done_line" ]; then
        echo "$done_line" | sed -E 's/^#([0-9]+)[[:space:]]+DONE[[:space:]]+/runs: \1 /'
    else
        grep -E '^Done [0-9]+ runs' "$1" | tail -n 1 || echo "no statistics in the log"
    fi
}

# How many inputs the target ran (libFuzzer's final statistics, printed on success and failure).
executions() {
    local n
    n="$(grep -E '^stat::number_of_executed_units:' "$1" | tail -n 1 | awk '{ print $2 }' || true)"
    echo "${n:-an unknown number of}"
}

failed=()
for target in "${targets[@]}"; do
    corpus="$work/corpus/$target"
    seeds="$work/seeds/$target"
    mkdir -p "$corpus" "$seeds"
    # The committed corpus is copied: libFuzzer adds its new inputs to the first directory, which
    # must never be the repository's.
    if [ -d "corpus/$target" ]; then
        cp -R "corpus/$target/." "$corpus/"
    fi
    # Saved findings of the target (fuzz/regressions/TARGET-*) are replayed with the seeds.
    find regressions -maxdepth 1 -type f -name "$target-*" -exec cp {} "$seeds/" \;
    log="$work/$target.log"
    echo "== $target: ${seconds}s from $(find "$corpus" -type f | wc -l) corpus inputs"
    if cargo "$toolchain" fuzz run "$target" "$corpus" "$seeds" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=140000 -print_final_stats=1 \
        >"$log" 2>&1; then
        echo "   ok: $(summary "$log")"
        echo "   executions: $(executions "$log")"
    else
        failed+=("$target")
        echo "   FAILED after $(executions "$log") executions: the end of its log follows" \
            "(artifacts under fuzz/artifacts/$target/)"
        tail -n 60 "$log" | sed 's/^/   | /'
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "== crashes in: ${failed[*]}"
    exit 1
fi
echo "== all ${#targets[@]} targets ran ${seconds}s without a crash"
