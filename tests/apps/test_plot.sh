#!/usr/bin/env bash
# `frugal plot METRICS.jsonl... --out DIR` (issue 48): two XMC runs and a DLRM run on one set of charts;
# every chart a PNG (its magic, more than a blank image's bytes), the quality chart with P@k and AUC
# curves; a log without epoch lines and a missing file fail naming the file.
# Usage: test_plot.sh FRUGAL
set -euo pipefail
F=$(realpath "$1")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../shell_helpers.sh"
cd "$TMP"
command -v gnuplot > /dev/null || { echo "no gnuplot: skipped"; exit 77; }
run "$F" data synth-xmc --features 300 --labels 30 --train 800 --test 100 --seed 1 --out d
run "$F" train --train d/train.txt --test d/test.txt --epochs 3 --quiet --threads 1 --metrics hidden64.jsonl --hidden 64
run "$F" train --train d/train.txt --test d/test.txt --epochs 2 --quiet --threads 1 --metrics hidden16.jsonl --hidden 16
run "$F" data synth-ctr --train 800 --test 100 --out c
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 2 --quiet --threads 1 --metrics dlrm.jsonl
run "$F" plot hidden64.jsonl hidden16.jsonl dlrm.jsonl --out plots
for chart in loss quality samples_per_s bytes_per_sample; do
  grep -q "wrote plots/$chart.png" last.log || { cat last.log; echo "plot did not say it wrote $chart.png"; exit 1; }
  [ "$(head -c 4 "plots/$chart.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ] || { echo "plots/$chart.png is no PNG"; exit 1; }
  [ "$(stat -c %s "plots/$chart.png")" -gt 5000 ] || { ls -l plots; echo "plots/$chart.png is nearly empty"; exit 1; }
done
grep -q '"hidden64 P@1"' plots/plot.gp && grep -q '"hidden16 P@5"' plots/plot.gp && grep -q '"dlrm AUC"' plots/plot.gp ||
  { cat plots/plot.gp; echo "the quality chart lacks a run's curve"; exit 1; }
[ "$(grep -vc '^#' plots/plot-data/run0.dat)" = 3 ] || { cat plots/plot-data/run0.dat; echo "run0 should have 3 epochs"; exit 1; }
# Hostile names (issue 62): metrics files and --out folders whose names hold a newline followed by
# gnuplot commands, quotes, $(), backquotes, a leading '!' or '-', '@' macros: the charts are drawn
# and nothing runs (no shell and no gnuplot command is reached by a user string).
n=0
for name in $'nl\nsystem "touch PWNED"\n!touch PWNED' 'q"uo'"'"'te\' '$(touch PWNED)' '`touch PWNED`' '!touch PWNED' \
            '-dash' '@macro' $'tab\tcr\r'; do
  n=$((n + 1))
  cp hidden16.jsonl "./$name.jsonl"
  run "$F" plot "./$name.jsonl" --out "./out$n $name"
  [ ! -e PWNED ] && [ ! -e "out$n $name/PWNED" ] || { echo "a hostile name ran a command: $name"; exit 1; }
  [ "$(head -c 4 "out$n $name/loss.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ] || { echo "no chart for '$name'"; exit 1; }
  # Every line of the script is one of this command's own: set, unset, plot or a plot's continuation.
  if grep -nvE '^(set |unset |plot "plot-data/|     "plot-data/|$)' "out$n $name/plot.gp"; then
    echo "the script holds a line of the user's for '$name'"; exit 1
  fi
done
printf '{"event":"epoch","epoch":"x","rank":0}\n' > badepoch.jsonl
fails_with "badepoch.jsonl:1: an epoch line without a whole epoch number" "$F" plot badepoch.jsonl --out plots4
printf '{"event":7,"rank":"r"}\n{"event":"epoch","rank":"0","epoch":1}\n' > oddtypes.jsonl
fails_with "oddtypes.jsonl: no epoch lines" "$F" plot oddtypes.jsonl --out plots5
mkfifo fifo.jsonl
fails_with "fifo.jsonl: a FIFO" timeout 10 "$F" plot fifo.jsonl --out plots6
touch notadir
fails_with "--out 'notadir/x': cannot create the folder" "$F" plot hidden16.jsonl --out notadir/x
grep -v '"event":"epoch"' hidden64.jsonl > noepochs.jsonl
fails_with "noepochs.jsonl: no epoch lines" "$F" plot noepochs.jsonl --out plots2
fails_with "cannot read the metrics file missing.jsonl" "$F" plot missing.jsonl --out plots3
echo "OK: frugal plot drew loss, quality, samples/s and bytes/sample of 3 runs as PNG"
