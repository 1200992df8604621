#!/usr/bin/env bash
# Fuzzes the Caffe decoders, seeded with every real Caffe file of the
# repository's tests/fixtures. Usage: fuzz/run.sh [seconds] (default 600).
set -euo pipefail
cd "$(dirname "$0")"
corpus=corpus/decode
mkdir -p "$corpus"
find ../tests/fixtures -type f \( -name '*.caffemodel' -o -name '*.binaryproto' -o -name '*.solverstate' \) \
    -size -2M -exec cp {} "$corpus/" \;
cargo +nightly fuzz run decode "$corpus" -- -max_total_time="${1:-600}" -rss_limit_mb=4096 -print_final_stats=1
