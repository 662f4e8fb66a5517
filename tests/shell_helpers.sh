# Helpers the shell tests source (after setting TMP, their scratch folder):
#   run CMD...               run CMD quietly; on failure print its output and exit 1
#   fails_with TEXT CMD...   CMD must fail and its output contain TEXT (a literal string)
#   free_port                prints a free TCP port on 127.0.0.1 below the ephemeral range (comm/local_port.h)
#   memory_cgroup MIB        makes a memory cgroup capped at MIB MiB, page cache included (v1 or v2, where
#                            root may make one: else returns 1), in CG; removed when the test exits
#   capped CMD...            runs CMD inside that cgroup
#   fails_capped LOG CMD...  CMD must fail inside it (a run that holds what does not fit), output in LOG
run() { echo "+ $*"; "$@" > "$TMP/last.log" 2>&1 || { cat "$TMP/last.log"; exit 1; }; }
fails_with() {
  local text=$1; shift
  echo "+ $* (must fail: $text)"
  if "$@" > "$TMP/fail.log" 2>&1; then cat "$TMP/fail.log"; echo "succeeded, expected a failure"; exit 1; fi
  grep -qF -- "$text" "$TMP/fail.log" || { cat "$TMP/fail.log"; echo "the error does not say '$text'"; exit 1; }
}

# A coordinator port: free now, below the kernel's ephemeral range, so that no process's outgoing
# connection takes it before the rank that binds it (comm/local_port.h).
free_port() {
  python3 -c '
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(64):
    p = random.randrange(10000, max(10001, lo))
    try:
        s = socket.socket(); s.bind(("127.0.0.1", p)); s.close(); print(p); break
    except OSError:
        pass
else:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

memory_cgroup() {
  local limit_file
  CG=""
  if [ -w /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/frugal-test-$$; limit_file=memory.limit_in_bytes
  elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    CG=/sys/fs/cgroup/frugal-test-$$; limit_file=memory.max
  fi
  [ -n "$CG" ] && mkdir "$CG" 2> /dev/null || { CG=""; return 1; }
  trap 'rmdir "$CG" 2> /dev/null || true; rm -rf "$TMP"' EXIT
  echo $(($1 * 1048576)) > "$CG/$limit_file"
}
capped() { bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$CG" "$@"; }
fails_capped() {
  local log=$1; shift
  if capped "$@" > "$log" 2>&1; then
    cat "$log"; echo "the set held in memory fit under the cap: the test proves nothing"; exit 1
  fi
  echo "held in memory under the same cap it fails (as it should): $(tail -c 200 "$log" | tr '\n' ' ')"
}
