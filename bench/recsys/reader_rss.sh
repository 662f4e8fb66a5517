#!/usr/bin/env bash
# The Criteo-format reader in bounded memory: generates LINES (default 10M) lines with
# `frugal data synth-ctr` in a scratch folder under /tmp, reads them with `frugal data stats`
# (CtrReader streaming the file, the statistics counting ids per field), and reports the peak RSS
# (/usr/bin/time -v) next to the same for a tenth of the lines: the reader's memory does not grow
# with the file; the statistics' grows with the distinct ids, which synth-ctr's vocabularies cap
# (~326k ids at --vocab-scale 1).
# Usage: bash bench/recsys/reader_rss.sh [BUILD_DIR]; LINES=2000000 for a shorter run. Needs ~3 GB
# of /tmp for 10M lines (removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
LINES=${LINES:-10000000}
FRUGAL="$BUILD/apps/frugal"
TMP=$(mktemp -d /tmp/frugal-reader-rss-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
echo "== commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

measure() {  # measure LABEL FILE: prints seconds and peak RSS of `frugal data stats FILE`
  /usr/bin/time -v "$FRUGAL" data stats "$2" > "$TMP/stats.txt" 2> "$TMP/time.txt"
  local rss secs
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$TMP/time.txt")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$TMP/time.txt")
  printf '%-28s %12s lines  %8s MiB file  peak RSS %7.1f MiB  wall %s\n' "$1" "$(head -2 "$TMP/stats.txt" | \
    awk '/samples/ {print $2}')" "$(( $(stat -c %s "$2") >> 20 ))" "$(echo "$rss / 1024" | bc -l)" "$secs"
}

small=$((LINES / 10))
for n in "$small" "$LINES"; do
  start=$(date +%s.%N)
  "$FRUGAL" data synth-ctr --train "$n" --test 1000 --seed 1 --out "$TMP/d$n" > "$TMP/synth.txt"
  printf 'synth-ctr --train %s: %.1f s\n' "$n" "$(echo "$(date +%s.%N) - $start" | bc -l)"
  measure "stats $n lines" "$TMP/d$n/train.tsv"
  [ "$n" = "$LINES" ] || rm -rf "$TMP/d$n"
done
