#!/usr/bin/env bash
# A longer libFuzzer campaign over the targets of tests/fuzz/ (the test `fuzz` runs each for 30 s):
#   bash bench/comm/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 600 s; all targets)
# Builds them in .bench/fuzz-build (clang, ASan + UBSan, -Dfuzzers=enabled), keeps each target's
# growing corpus there between runs and prints executions and coverage per target; crashing inputs
# land in .bench/fuzz-build/findings/<target>/. A crash is a bug: fix it and add the input to
# tests/fuzz/corpus/<target>/ (and a unit test where one fits).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-600}
shift || true
mkdir -p .bench
FUZZ_SECONDS=$SECS exec bash tests/fuzz/run_fuzzers.sh "$PWD" "$PWD/.bench/fuzz-build" "$@"
