#!/usr/bin/env bash
# Bounded libFuzzer run of the comm decoders (frame header + payload check, sparse/dense codec).
#   bash bench/comm/fuzz.sh [SECONDS_PER_TARGET]      (default 60)
# Builds the targets with clang (-fsanitize=fuzzer,address,undefined) straight from the sources
# they need, runs each for the given time, and leaves corpora and any crash-* inputs in
# .bench/fuzz/<target>/. A crashing input is a bug: fix it and add it to tests/comm/test_codec.cpp.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-60}
OUT=.bench/fuzz
mkdir -p "$OUT"
CXX=${CXX_FUZZ:-clang++}
FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)
SRC=(comm/frame.cpp comm/crc32c.cpp comm/codec.cpp core/check.cpp)
status=0
for target in fuzz_frame fuzz_codec; do
  echo "==> building $target"
  "$CXX" "${FLAGS[@]}" "tests/comm/fuzz/$target.cpp" "${SRC[@]}" -lfmt -o "$OUT/$target"
  mkdir -p "$OUT/$target.corpus" "$OUT/$target.crashes"
  echo "==> fuzzing $target for ${SECS}s"
  if ! "$OUT/$target" -max_total_time="$SECS" -max_len=4096 -print_final_stats=1 \
      -artifact_prefix="$OUT/$target.crashes/" "$OUT/$target.corpus" 2>"$OUT/$target.log"; then
    echo "!! $target found a crash: see $OUT/$target.crashes/ and $OUT/$target.log"
    status=1
  fi
  grep -E "stat::number_of_executed_units|cov:" "$OUT/$target.log" | tail -2 || true
done
exit $status
