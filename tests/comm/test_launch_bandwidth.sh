#!/usr/bin/env bash
# `frugal launch --bandwidth`: ranks in their own network namespaces talk through tbf-capped links,
# and no namespace, veth or bridge survives the launch: not after success, not when a rank fails,
# not when the launcher gets SIGTERM, and not (after --cleanup-stale) when it gets SIGKILL.
# Needs root and working network namespaces; otherwise says why and exits 77 (meson: skipped).
# Environment: FRUGAL_EXE (the frugal binary), BANDWIDTH_PROBE (tests/comm/bandwidth_probe).
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
FRUGAL=${FRUGAL_EXE:?FRUGAL_EXE is not set}
PROBE=${BANDWIDTH_PROBE:?BANDWIDTH_PROBE is not set}
TMP=$(mktemp -d)
LAUNCHERS=()
LOOKALIKES=()  # namespaces, links and records this test made to look like a launcher's
cleanup() {
  # Only this shell's own jobs that have not been waited for: a pid already reaped may be another
  # process's by now, and is never signalled.
  for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  for p in "${LAUNCHERS[@]}"; do
    for ns in $(ls /run/netns 2>/dev/null | grep "^frugal-$p-"); do ip netns del "$ns" 2>/dev/null; done
    rm -f /run/frugal-netns/frugal-"$p"-*
  done
  for f in "${LOOKALIKES[@]}"; do  # what `ip netns del` does: unmount (not a link), remove
    case $f in /run/netns/*) [ -L "$f" ] || umount "$f" 2>/dev/null ;; esac
    rm -f "$f"
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

# Validation needs no privileges: check it before deciding whether to skip the rest.
out=$("$FRUGAL" launch -n 2 --bandwidth 100mbps -- true 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "bytes per second" <<<"$out" || fail "100mbps accepted or unclear (rc $rc): $out"
out=$("$FRUGAL" launch -n 2 --bandwidth fast -- true 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "e.g. 100mbit" <<<"$out" || fail "'fast' accepted or unclear (rc $rc): $out"

if [ "$(id -u)" != 0 ]; then echo "skip: needs root (network namespaces and tc)"; exit 77; fi
for tool in ip tc; do
  command -v $tool >/dev/null || { echo "skip: '$tool' (iproute2) is not installed"; exit 77; }
done
if ! err=$(ip netns add "frugaltest-$$" 2>&1); then
  echo "skip: network namespaces unavailable: $err"; exit 77
fi
ip netns del "frugaltest-$$"

# A non-root user gets the clear message (when an unprivileged user can run the binary at all).
if command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups "$FRUGAL" --help >/dev/null 2>&1; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$FRUGAL" launch -n 2 --bandwidth 100mbit -- true 2>&1)
  grep -q -- "--bandwidth needs root" <<<"$out" || fail "non-root launch: $out"
  echo "ok: non-root launch says: $out"
else
  echo "note: non-root message not checked (no setpriv, or nobody cannot run $FRUGAL)"
fi

# The namespace of launcher $1 for role $2 (r0, r1, br): frugal-<pid>-<token>-<role>.
ns_of() { ls /run/netns 2>/dev/null | grep -x "frugal-$1-[0-9a-f]\{8\}-$2"; }
links_now() { ip -o link show | awk -F': ' '{print $2}' | sort; }
LINKS_BEFORE=$(links_now)
# Everything launcher $1 made is gone: its namespaces, and nothing new in the host's namespace.
assert_clean() {
  local left
  left=$(ls /run/netns 2>/dev/null | grep "^frugal-$1-")
  [ -z "$left" ] || fail "namespaces left behind by launcher $1: $left"
  [ "$(links_now)" = "$LINKS_BEFORE" ] || fail "host links changed: $(diff <(echo "$LINKS_BEFORE") <(links_now))"
}
wait_for() {  # wait_for FILE PATTERN COUNT SECONDS
  local deadline=$((SECONDS + $4))
  while [ "$(grep -c "$2" "$1" 2>/dev/null)" -lt "$3" ]; do
    [ $SECONDS -lt $deadline ] || fail "timed out waiting for $3 x '$2' in $1"
    sleep 0.1
  done
}

MY_NETNS=$(readlink /proc/self/ns/net)
# run_rate N RATE MB ITERS NAME: a capped launch that must succeed; sets RATE_MBIT to the slowest
# rank's rate.
run_rate() {
  local n=$1 log="$TMP/$5.log"
  "$FRUGAL" launch -n "$n" --bandwidth "$2" -- "$PROBE" rate "$3" "$4" >"$log" 2>&1 &
  local pid=$!; LAUNCHERS+=("$pid")
  wait $pid || fail "$5: launch exited $?"
  assert_clean $pid
  grep -q "capped at $2 in each direction" "$log" || fail "$5: no topology printed"
  for r in $(seq 0 $((n - 1))); do
    grep -q "^\[$r\] rank $r bind=10.213.0.$((r + 1)) " "$log" || fail "$5: rank $r not on 10.213.0.$((r + 1))"
  done
  local spaces
  spaces=$(grep -o "netns=net:\[[0-9]*\]" "$log" | sort -u)
  [ "$(wc -l <<<"$spaces")" -eq "$n" ] || fail "$5: ranks share a network namespace: $spaces"
  grep -qF "netns=$MY_NETNS" "$log" && fail "$5: a rank ran in the host's network namespace"
  [ "$(grep -c "rate_mbit=" "$log")" -eq "$n" ] || fail "$5: not every rank reported a rate"
  RATE_MBIT=$(grep -o "rate_mbit=[0-9.]*" "$log" | cut -d= -f2 | sort -g | head -1)
}

# (a) the ranks communicate (each all-reduce result is checked by the probe), (b) through links
# capped at 100 Mbit/s: a loopback run of the same program moves gigabits. Generous bounds only.
for n in 2 3; do
  run_rate $n 100mbit 4 2 "rate-n$n"
  r=$RATE_MBIT
  echo "ok: $n ranks at --bandwidth 100mbit: slowest rank sent ${r} Mbit/s"
  awk -v r="$r" 'BEGIN { exit !(r > 1 && r < 300) }' || fail "$n ranks: ${r} Mbit/s is not capped near 100 Mbit/s"
done
"$FRUGAL" launch -n 2 -- "$PROBE" rate 4 2 >"$TMP/loopback.log" 2>&1 || fail "loopback launch failed"
echo "for comparison, loopback without --bandwidth: $(grep -o "rate_mbit=[0-9.]*" "$TMP/loopback.log" | tr '\n' ' ')"

# (c) a rank that exits non-zero: the launch fails and still removes everything.
"$FRUGAL" launch -n 3 --bandwidth 100mbit --grace 2 -- "$PROBE" fail 1 3 >"$TMP/fail.log" 2>&1 &
pid=$!; LAUNCHERS+=("$pid")
wait $pid; rc=$?
[ $rc -eq 3 ] || fail "a rank exited 3 but the launch exited $rc"
grep -q "rank 1 exited with status 3" "$TMP/fail.log" || fail "failing rank not reported"
assert_clean $pid
echo "ok: failing rank -> launch exits $rc, nothing left behind"

# SIGTERM to the launcher mid-run: the links really are capped and up while it runs; afterwards
# the ranks are stopped, the launcher exits 128+15 and nothing is left.
"$FRUGAL" launch -n 2 --bandwidth 1gbit --grace 2 -- "$PROBE" hold >"$TMP/term.log" 2>&1 &
pid=$!; LAUNCHERS+=("$pid")
wait_for "$TMP/term.log" "ready" 2 30
[ -n "$(ns_of $pid br)" ] || fail "no namespace frugal-$pid-<token>-br: $(ls /run/netns)"
grep -c "namespace $(ns_of $pid r0)" "$TMP/term.log" > /dev/null || fail "the topology does not name $(ns_of $pid r0)"
[ -f "/run/frugal-netns/${NS_OWNER:=$(ns_of $pid br | sed 's/-br$//')}" ] || fail "no owner record for $NS_OWNER"
for r in 0 1; do
  tc -n "$(ns_of $pid r$r)" qdisc show dev eth0 | grep -c "tbf .*rate 1Gbit" > /dev/null || fail "rank $r: no tbf on eth0"
  tc -n "$(ns_of $pid br)" qdisc show dev "v$r" | grep -c "tbf .*rate 1Gbit" > /dev/null || fail "bridge port v$r: no tbf"
  ip -n "$(ns_of $pid r$r)" link show lo | grep -c "UP" > /dev/null || fail "rank $r: lo is down"
done
kill -TERM $pid
wait $pid; rc=$?
[ $rc -eq 143 ] || fail "launcher exited $rc after SIGTERM, expected 143"
assert_clean $pid
[ ! -e "/run/frugal-netns/$NS_OWNER" ] || fail "owner record $NS_OWNER left behind"
echo "ok: SIGTERM -> launcher exits 143, nothing left behind"

# SIGKILL cannot be handled: the ranks die with their launcher (parent-death signal), the
# namespaces stay until --cleanup-stale, which removes exactly those of dead launchers, and signals
# nothing but the processes their launcher started (issue 62): a process that entered one of them,
# and processes in namespaces that only look like a launcher's, survive it.
"$FRUGAL" launch -n 2 --bandwidth 100mbit -- "$PROBE" hold >"$TMP/kill.log" 2>&1 &
pid=$!; LAUNCHERS+=("$pid")
wait_for "$TMP/kill.log" "ready" 2 30
"$FRUGAL" launch -n 2 --bandwidth 100mbit -- "$PROBE" hold >"$TMP/alive.log" 2>&1 &
alive=$!; LAUNCHERS+=("$alive")
wait_for "$TMP/alive.log" "ready" 2 30
R0=$(ns_of $pid r0) R1=$(ns_of $pid r1) BRNS=$(ns_of $pid br)
OWNER=${BRNS%-br}
[ -n "$R0" ] && [ -n "$R1" ] && [ -n "$BRNS" ] || fail "launcher $pid's namespaces: $(ls /run/netns)"
rank_pids=$(ip netns pids "$R0"; ip netns pids "$R1")
[ -n "$rank_pids" ] || fail "no rank runs in $R0 or $R1"
for p in $rank_pids; do
  tr '\0' '\n' < /proc/$p/environ | grep -cx "FRUGAL_NETNS_OWNER=$OWNER" > /dev/null || fail "rank pid $p lacks FRUGAL_NETNS_OWNER=$OWNER"
done

# Look-alikes, each with a sleeping sentinel that must survive. A pid that no longer runs:
true & DEAD=$!; wait $DEAD
MY_PIDNS=$(readlink /proc/self/ns/pid)
sentinel() {  # sentinel NAMESPACE|- [VAR=VALUE]: a `sleep` in that namespace (- : this one); sets SENT
  if [ "$1" = - ]; then env ${2:+"$2"} sleep 600 & else ip netns exec "$1" env ${2:+"$2"} sleep 600 & fi
  SENT=$!; SENTINELS+=("$SENT")
}
forge_record() {  # forge_record OWNER PID TOKEN: a root-owned record as a launcher would write it
  mkdir -p /run/frugal-netns && chmod 700 /run/frugal-netns
  printf 'pid %s\nstart 1\npidns %s\ntoken %s\n' "$2" "$MY_PIDNS" "$3" > "/run/frugal-netns/$1"
  chmod 600 "/run/frugal-netns/$1"; LOOKALIKES+=("/run/frugal-netns/$1")
}
SENTINELS=()
# (a) the old naming, frugal-<dead pid>-r0, no record
OLD=frugal-$DEAD-r0
ip netns add "$OLD" && LOOKALIKES+=("/run/netns/$OLD") || fail "ip netns add $OLD"
sentinel "$OLD"
# (b) today's naming and the owner variable, but no record
NOREC=frugal-$DEAD-0badc0de-r0
ip netns add "$NOREC" && LOOKALIKES+=("/run/netns/$NOREC") || fail "ip netns add $NOREC"
sentinel "$NOREC" "FRUGAL_NETNS_OWNER=frugal-$DEAD-0badc0de"
# (c) a record, but the name is a link to another namespace
TARGET=frugaltest-$$-t
ip netns add "$TARGET" && LOOKALIKES+=("/run/netns/$TARGET") || fail "ip netns add $TARGET"
sentinel "$TARGET" "FRUGAL_NETNS_OWNER=frugal-$DEAD-0badc0df"
forge_record "frugal-$DEAD-0badc0df" "$DEAD" 0badc0df
ln -s "/run/netns/$TARGET" "/run/netns/frugal-$DEAD-0badc0df-br" && LOOKALIKES+=("/run/netns/frugal-$DEAD-0badc0df-br")
# (d) a record, but the name is this machine's own network namespace
HOSTNS=frugal-$DEAD-0badc0e0-r0
forge_record "frugal-$DEAD-0badc0e0" "$DEAD" 0badc0e0
touch "/run/netns/$HOSTNS" && LOOKALIKES+=("/run/netns/$HOSTNS") && mount --bind /proc/self/ns/net "/run/netns/$HOSTNS" ||
  fail "cannot bind this namespace to /run/netns/$HOSTNS"
sentinel - "FRUGAL_NETNS_OWNER=frugal-$DEAD-0badc0e0"

kill -KILL $pid
wait $pid 2>/dev/null
[ -e "/run/netns/$R0" ] || fail "expected the SIGKILLed launcher's namespaces to remain"
# (e) a process that is not a rank enters the dead launcher's namespace r1
sentinel "$R1"
INTRUDER=$SENT
for _ in $(seq 50); do ip netns pids "$R1" | grep -cx "$INTRUDER" > /dev/null && break; sleep 0.1; done
out=$("$FRUGAL" launch --cleanup-stale 2>&1) || fail "--cleanup-stale failed: $out"
echo "$out" > "$TMP/cleanup.log"
for s in "${SENTINELS[@]}"; do
  kill -0 "$s" 2>/dev/null || fail "--cleanup-stale killed pid $s, which is not a rank: $out"
done
grep -c "removed namespace $R0" <<<"$out" > /dev/null || fail "--cleanup-stale did not remove $R0: $out"
grep -c "removed namespace $BRNS" <<<"$out" > /dev/null || fail "--cleanup-stale did not remove $BRNS: $out"
grep -c "kept namespace $R1: pid $INTRUDER (sleep) inside, not started by its launcher" <<<"$out" > /dev/null ||
  fail "--cleanup-stale did not keep $R1 for pid $INTRUDER: $out"
grep -c "kept namespace $OLD: named as frugal launchers named" <<<"$out" > /dev/null || fail "$OLD: $out"
grep -c "kept namespace $NOREC: no owner record" <<<"$out" > /dev/null || fail "$NOREC: $out"
grep -c "kept namespace frugal-$DEAD-0badc0df-br: not a mounted network namespace" <<<"$out" > /dev/null ||
  fail "the link: $out"
grep -c "kept namespace $HOSTNS: it is this machine's own network namespace" <<<"$out" > /dev/null || fail "$HOSTNS: $out"
grep -c "frugal-$alive-" <<<"$out" > /dev/null && fail "--cleanup-stale touched a live launcher's namespace: $out"
[ -e "/run/netns/$(ns_of $alive r0)" ] || fail "live launcher's namespace is gone"
for p in $rank_pids; do
  for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && fail "rank pid $p of the killed launcher still runs"
done
[ -f "/run/frugal-netns/$OWNER" ] || fail "the owner record went while $R1 is kept"
echo "ok: --cleanup-stale stops only ranks: an intruder in a stale namespace, look-alike names (old naming," \
  "no record, a link, this machine's namespace) and their processes are left as they were"
# Once the intruder is gone, the rest goes, the record with it.
kill -KILL "$INTRUDER"; wait "$INTRUDER" 2>/dev/null
out=$("$FRUGAL" launch --cleanup-stale 2>&1) || fail "second --cleanup-stale failed: $out"
grep -c "removed namespace $R1" <<<"$out" > /dev/null || fail "second --cleanup-stale did not remove $R1: $out"
[ ! -e "/run/frugal-netns/$OWNER" ] || fail "owner record $OWNER left after its namespaces went"
kill -TERM $alive
wait $alive
assert_clean $pid
assert_clean $alive
echo "ok: SIGKILL -> --cleanup-stale removes the leftovers of dead launchers only"
echo "PASS"
