# Sourced by bench/mixed/run.sh and tests/distributed/test_slice_weights_auto.sh: one cgroup per slow
# rank (1 .. N-1) under MIXED_CGROUP, with a CPU quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us)
# that bench/mixed/throttle.sh puts the rank's process in. Needs root.
#   mixed_cgroups_make N    make them (returns 1 when cgroups cannot be written here)
#   mixed_quota PERCENT     every slow rank at PERCENT% of a core (100 or more: no quota)
#   mixed_cgroups_remove    remove them
mixed_cgroups_make() {
  local n=$1 r
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    MIXED_CGROUP=/sys/fs/cgroup/frugal-mixed-$$
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
      echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || return 1
    mkdir -p "$MIXED_CGROUP" 2>/dev/null || return 1
    echo +cpu > "$MIXED_CGROUP/cgroup.subtree_control" 2>/dev/null || return 1
  else
    MIXED_CGROUP=/sys/fs/cgroup/cpu/frugal-mixed-$$
    mkdir -p "$MIXED_CGROUP" 2>/dev/null || return 1
  fi
  MIXED_RANKS_MADE=$n
  for r in $(seq 1 $((n - 1))); do mkdir -p "$MIXED_CGROUP/rank$r" || return 1; done
  export MIXED_CGROUP
}
mixed_quota() {
  # The shortest period that holds a quota of at least 1 ms (the kernel's minimum), and at least
  # 4 ms: the finer the period, the more the rank behaves like a slower CPU rather than one that
  # stops for most of each period (25%: 1 ms in 4; 2%: 1 ms in 50).
  local q=$1 r d period
  period=$(( 100000 / (q > 0 ? q : 1) ))
  [ "$period" -ge 4000 ] || period=4000
  for r in $(seq 1 $((MIXED_RANKS_MADE - 1))); do
    d=$MIXED_CGROUP/rank$r
    if [ -f "$d/cpu.max" ]; then
      if [ "$q" -ge 100 ]; then echo "max 100000" > "$d/cpu.max"; else echo "$((period * q / 100)) $period" > "$d/cpu.max"; fi
    else
      echo -1 > "$d/cpu.cfs_quota_us"
      echo "$period" > "$d/cpu.cfs_period_us"
      [ "$q" -ge 100 ] || echo $((period * q / 100)) > "$d/cpu.cfs_quota_us"
    fi
  done
}
mixed_cgroups_remove() {
  local r
  [ -n "${MIXED_CGROUP:-}" ] || return 0
  for r in $(seq 1 $((MIXED_RANKS_MADE - 1))); do rmdir "$MIXED_CGROUP/rank$r" 2>/dev/null || true; done
  rmdir "$MIXED_CGROUP" 2>/dev/null || true
}
