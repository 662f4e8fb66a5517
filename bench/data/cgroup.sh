# Sourced by the streaming benchmarks (stream.sh, stream_xmc.sh): make_cgroup NAME MIB makes a memory
# cgroup capped at MIB MiB, the page cache included (cgroup v1 memory.limit_in_bytes, or v2
# memory.max), sets CG to it and removes it when the script exits; cgroup_peak prints the most it
# held (bytes; 0 where the kernel does not say). Needs root.
make_cgroup() {
  if [ -d /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/$1-$$
    mkdir -p "$CG"
    echo $(($2 * 1048576)) > "$CG/memory.limit_in_bytes"
  else
    CG=/sys/fs/cgroup/$1-$$
    mkdir -p "$CG"
    echo $(($2 * 1048576)) > "$CG/memory.max"
  fi
  trap 'rmdir "$CG" 2>/dev/null || true' EXIT
}
cgroup_peak() { cat "$CG/memory.max_usage_in_bytes" 2>/dev/null || cat "$CG/memory.peak" 2>/dev/null || echo 0; }
