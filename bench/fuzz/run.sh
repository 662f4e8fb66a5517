#!/usr/bin/env bash
# A libFuzzer campaign over the targets of tests/fuzz/ (the test `fuzz` runs each for 30 s), for
# bench/REPORT.md:
#   bash bench/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]         (default 600 s; all targets)
#   FUZZ_RUNS=10000000 bash bench/fuzz/run.sh [TARGET...]           a fixed number of executions each
# The targets and their sources are those of tests/fuzz/meson.build (`fuzz_sources`); they are built
# by tests/fuzz/run_fuzzers.sh (clang, -fsanitize=fuzzer,address,undefined) in OUT (default
# .bench/fuzz; FUZZ_OUT overrides), which keeps each target's growing corpus between campaigns.
# Prints per target executions, exec/s, wall seconds, coverage (edges, features) and findings, and
# writes the table as markdown to OUT/summary.md. A finding (crash, sanitizer report, an exception
# other than frugal::Error, a 10 s input, an allocation over 2 GB) lands in OUT/findings/<target>/
# and is a bug: fix it, add the input to tests/fuzz/corpus/<target>/ and a unit test where one fits.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=600
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then SECS=$1; shift; fi
OUT=${FUZZ_OUT:-$PWD/.bench/fuzz}
mkdir -p "$OUT"

# TARGET=SRC,SRC,... for each target of fuzz_sources (all, or those named).
mapfile -t specs < <(python3 - "$@" <<'PY'
import re, sys
text = open("tests/fuzz/meson.build").read()
block = text[text.index("fuzz_sources = {"):]
block = block[:block.index("\n}")]
targets = {m.group(1): re.findall(r"'([^']+)'", m.group(2))
           for m in re.finditer(r"'(fuzz_\w+)'\s*:\s*\[(.*?)\]", block, re.S)}
wanted = sys.argv[1:] or list(targets)
for t in wanted:
    if t not in targets:
        sys.exit(f"bench/fuzz/run.sh: no target {t} in tests/fuzz/meson.build (there are {', '.join(targets)})")
    print(t + "=" + ",".join(targets[t]))
PY
)

rm -f "$OUT/results.tsv"
status=0
FUZZ_SECONDS=$SECS bash tests/fuzz/run_fuzzers.sh "$PWD" "$OUT" "${specs[@]}" || status=$?
[ $status -eq 77 ] && exit 77  # no clang with libFuzzer here

if [ -n "${FUZZ_RUNS:-}" ]; then span="$FUZZ_RUNS executions"; else span="$SECS s"; fi
{
  echo "Fuzzing campaign, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
    "$span per target, $(nproc) CPUs, ${FUZZ_JOBS:-$(nproc)} target(s) at a time" \
    "(clang $(${CXX_FUZZ:-clang++} -dumpversion), ASan + UBSan):"
  echo
  echo "| target | result | executions | exec/s | wall s | coverage edges | features | corpus | findings |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '{printf "| `%s` | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}' \
    "$OUT/results.tsv"
  awk -F'\t' '{e += $3; f += $9; w += $5} END {printf "\nIn all: %d executions, %d findings, %.0f s.\n", e, f, w}' \
    "$OUT/results.tsv"
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
echo "(written to $OUT/summary.md)"
exit $status
