#!/usr/bin/env bash
# DCT time to accuracy at 100 Mbit (issue 15's third target): does a compressed run reach the
# uncompressed run's final P@1 (accuracy on Fashion-MNIST) in less wall time?
#
#   sudo bash bench/dct/time_to_accuracy.sh            # root: network namespaces and tc; ~15 min on 2 cores
#   python3 bench/dct/time_to_accuracy.py .bench/dct-tta   # the table (the script ends with it)
#
# Every case runs the uncompressed configuration for its usual epochs and the compressed one (the
# defaults of `frugal train` plus --mp-keep / --dp-keep alone) for more epochs, both through
# `frugal launch --bandwidth RATE` (one network namespace per rank, tc tbf on every link), seed 1,
# 2 ranks, --threads 1 per rank. The summary gives, from the metrics logs, the wall time (training
# plus evaluation, cumulative over epochs) at which each run first reaches the uncompressed run's
# final P@1.
#   mp cases (real runs throughout): Fashion-MNIST 784-1024-1024-10 (--grid 1x2; 3 epochs against
#     --mp-keep 0.1 for 6) and the synthetic XMC network with hidden 512 (--grid 1x2; 8 against
#     --mp-keep 0.1 for 10).
#   dp cases (FRUGAL_BENCH_TTA_CASES="mp dp"): an uncompressed data-parallel epoch of
#     Fashion-MNIST moves ~7 GB per rank (~5 min at 100 Mbit), so the dp cases time
#     FRUGAL_BENCH_TTA_STEPS steps through the link and take P@1 per epoch from a loopback run of the
#     same seed (P@1 does not depend on the link: the arithmetic is the same); the summary
#     scales the per-step time to whole epochs and says so.
# Environment: FRUGAL_BENCH_OUT (.bench/dct-tta), FRUGAL_BENCH_BANDWIDTH (100mbit),
#   FRUGAL_BENCH_TTA_CASES ("mp"), FRUGAL_BENCH_TTA_STEPS (60), FRUGAL_BENCH_FRUGAL (build/apps/frugal).
# A rerun skips runs whose metrics are complete (delete OUT to start over).
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL_BENCH_FRUGAL:-build/apps/frugal}
OUT=${FRUGAL_BENCH_OUT:-.bench/dct-tta}
BW=${FRUGAL_BENCH_BANDWIDTH:-100mbit}
CASES=${FRUGAL_BENCH_TTA_CASES:-mp}
STEPS=${FRUGAL_BENCH_TTA_STEPS:-60}
source bench/dct/sets.sh
run() { printf '+ %s\n' "$*"; "$@"; }
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
[ "$(id -u)" -eq 0 ] || { echo "bench/dct/time_to_accuracy.sh needs root (network namespaces and tc for --bandwidth)" >&2; exit 1; }
[ -x "$FRUGAL" ] || { echo "missing $FRUGAL (build it first: bash apps/dev.sh build)" >&2; exit 1; }
mkdir -p "$OUT"
echo "$(date -u +%FT%TZ) start: commit $(git rev-parse --short HEAD) (worktree $(git status --porcelain | wc -l) changed files), $(nproc) cores, $BW, cases: $CASES; $(uptime)" >> "$OUT/env.txt"
dct_data

# one SET NAME EPOCHS LINK FLAGS...: a 2-rank run through LINK (a rate, or "loopback").
one() {
  local set=$1 name=$2 ep=$3 link=$4
  shift 4
  if [ -f "$OUT/$set-$name.done" ]; then echo "(have $set-$name)"; return; fi
  local bw=()
  [ "$link" = loopback ] || bw=(--bandwidth "$link")
  # shellcheck disable=SC2046
  run "$FRUGAL" launch -n 2 "${bw[@]}" -- "$FRUGAL" train $(args "$set") --epochs "$ep" --threads 1 --quiet --seed 1 \
    --metrics "$OUT/$set-$name.jsonl" "$@" > "$OUT/$set-$name.log" 2>&1
  touch "$OUT/$set-$name.done"
}

case " $CASES " in *" mp "*)
  say "DCT-MP at $BW: uncompressed vs --mp-keep 0.1 (2 ranks, --grid 1x2)"
  one fmnist mp-ref 3 "$BW" --grid 1x2 --mp-keep 1
  one fmnist mp-dct 6 "$BW" --grid 1x2 --mp-keep 0.1
  one xmc512 mp-ref 8 "$BW" --grid 1x2 --mp-keep 1
  one xmc512 mp-dct 10 "$BW" --grid 1x2 --mp-keep 0.1 ;;
esac
case " $CASES " in *" dp "*)
  say "DCT-DP at $BW: uncompressed vs --dp-keep 0.02 (2 ranks, --grid 2x1): $STEPS timed steps, P@1 from loopback"
  one fmnist dp-ref-time 1 "$BW" --grid 2x1 --compress off --max-steps "$STEPS"
  one fmnist dp-dct-time 1 "$BW" --grid 2x1 --dp-keep 0.02 --max-steps "$STEPS"
  one fmnist dp-ref 3 loopback --grid 2x1
  one fmnist dp-dct 6 loopback --grid 2x1 --dp-keep 0.02 ;;
esac
echo "$(date -u +%FT%TZ) end: $(uptime)" >> "$OUT/env.txt"
/usr/bin/python3 bench/dct/time_to_accuracy.py "$OUT" | tee "$OUT/summary.md"
