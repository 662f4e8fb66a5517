# Sourced by the bench/recsys scripts: synth_ctr_set SEED makes (once) and names the synth-ctr set of
# that seed in $OUT/data-SEED ($FRUGAL, $TRAIN and $TEST as the script set them).
synth_ctr_set() {
  local d="$OUT/data-$1"
  if [ ! -f "$d/info.json" ]; then
    "$FRUGAL" data synth-ctr --train "$TRAIN" --test "$TEST" --seed "$1" --out "$d.tmp" > /dev/null
    rm -rf "$d"; mv "$d.tmp" "$d"
  fi
  echo "$d"
}
