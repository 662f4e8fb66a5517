#!/usr/bin/env bash
# Builds libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) from the sources
# tests/fuzz/meson.build lists and runs each for FUZZ_SECONDS (default 30) on a copy of its seed
# corpus (tests/fuzz/corpus/<target>/). A crash, a sanitizer report, an uncaught exception or a
# timeout fails the test; the input is left in OUT/findings/<target>/. Exit 77 (skipped) when
# clang++ or libFuzzer is missing (Debian: clang, libclang-rt-14-dev; apps/dev.sh installs them).
# FUZZ_RUNS=N runs each target for N executions instead (no time limit; bench/fuzz/run.sh's
# campaigns). Each target's numbers are appended to OUT/results.tsv (target, result, executions,
# exec/s, wall seconds, coverage edges, features, corpus inputs, findings of this run).
# FUZZ_JOBS (default: the CPU count) targets are built and run at a time.
#   run_fuzzers.sh SOURCE_ROOT OUT TARGET=SRC,SRC,... [TARGET=...]
set -euo pipefail
SRC=$1
OUT=$2
shift 2
SECS=${FUZZ_SECONDS:-30}
RUNS=${FUZZ_RUNS:-}
if [ -n "$RUNS" ]; then LIMIT=(-runs="$RUNS"); SPAN="$RUNS runs"; else LIMIT=(-max_total_time="$SECS"); SPAN="$SECS s"; fi
CXX_FUZZ=${CXX_FUZZ:-clang++}
FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$SRC")
mkdir -p "$OUT"

echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$OUT/probe.cpp"
if ! command -v "$CXX_FUZZ" > /dev/null || ! "$CXX_FUZZ" "${FLAGS[@]}" "$OUT/probe.cpp" -o "$OUT/probe" \
    > "$OUT/probe.log" 2>&1; then
  echo "SKIP: no $CXX_FUZZ with libFuzzer: $(head -c 300 "$OUT/probe.log" 2>/dev/null)"
  exit 77
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# One target: build it when needed, run it, append its numbers to OUT/results.tsv. Returns non-zero
# when it failed to build or had a finding.
fuzz_one() {
  local spec=$1 t rel sources exe start corpus log result wall execs rate cov ft findings inputs
  t=${spec%%=*}
  IFS=, read -r -a rel <<< "${spec#*=}"
  sources=("${rel[@]/#/$SRC/}")
  exe="$OUT/$t"
  # Rebuilt when a source or any header of the tree is newer than the executable.
  if [ ! -x "$exe" ] || [ -n "$(find "${sources[@]}" "$SRC/core" "$SRC/comm" "$SRC/layers" -name '*.h' -newer "$exe" -o \
      -name '*.cpp' -newer "$exe" 2>/dev/null | head -1)" ]; then
    start=$(date +%s)
    "$CXX_FUZZ" "${FLAGS[@]}" "${sources[@]}" -lfmt -lz -o "$exe" > "$OUT/$t.build.log" 2>&1 ||
      { cat "$OUT/$t.build.log"; echo "$t: build failed"; return 1; }
    echo "$t: built in $(( $(date +%s) - start )) s"
  fi
  corpus="$OUT/corpus/$t"
  mkdir -p "$corpus" "$OUT/findings/$t"
  cp -n "$SRC/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  log="$OUT/$t.log"
  touch "$OUT/$t.start"  # findings of this run: the artifacts newer than this
  start=$(date +%s.%N)
  if "$exe" "${LIMIT[@]}" -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$OUT/findings/$t/" "$corpus" > "$log" 2>&1; then
    result=ok
  else
    result=FAILED
  fi
  wall=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
  # A crash prints the final stats twice (at the crash and at exit): the last ones count.
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  # Over the wall time (corpus loading included), not libFuzzer's average_exec_per_sec, which divides
  # by whole seconds (20000 executions in 1.5 s read 20000/s).
  rate=$(echo "$execs $wall" | awk '$1 ~ /^[0-9]+$/ && $2 > 0 {printf "%.0f", $1 / $2; next} {print "?"}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  findings=$(find "$OUT/findings/$t" -type f -newer "$OUT/$t.start" \( -name 'crash-*' -o -name 'leak-*' -o \
    -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  inputs=$(ls "$corpus" | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$result" "$execs" "$rate" "$wall" "$cov" "$ft" "$inputs" \
    "$findings" >> "$OUT/results.tsv"
  echo "$t: $result, $execs executions in $wall s ($SPAN asked; $rate exec/s), $cov coverage edges, $ft features," \
    "corpus $inputs inputs, $findings findings"
  if [ $result = FAILED ]; then
    grep -E "ERROR|SUMMARY|uncaught|what\(\)|deadly" "$log" | head -20
    echo "  the input: $(ls -t "$OUT/findings/$t" | head -1 | sed "s|^|$OUT/findings/$t/|")"
    return 1
  fi
}

# FUZZ_JOBS targets at a time (default: one per CPU): each fuzzer is single-threaded, so on 2 cores
# the test's 30 s per target take half the wall time. Each job leaves its status in OUT/<target>.rc.
JOBS=${FUZZ_JOBS:-$(nproc)}
targets=()
for spec in "$@"; do
  t=${spec%%=*}
  targets+=("$t")
  rm -f "$OUT/$t.rc"
  ( rc=0; fuzz_one "$spec" || rc=$?; echo "$rc" > "$OUT/$t.rc" ) &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
wait
status=0
for t in "${targets[@]}"; do
  [ "$(cat "$OUT/$t.rc" 2> /dev/null)" = 0 ] || status=1
done
exit $status
