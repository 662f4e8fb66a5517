#!/usr/bin/env bash
# `frugal launch --hostfile`: ranks started over ssh on other hosts. The hosts are network
# namespaces on a bridge (10.77.0.0/24), each running its own sshd with a throwaway host key and
# a throwaway client key; the launcher runs in a namespace of its own and reaches them only over
# that network, through the same ssh code path a real cluster uses. Checked:
#  1. placement (slots fill in order), the variables each rank gets (FRUGAL_LOCAL_SIZE per host, the
#     coordinator on the first host, the cluster key path, --comm-timeout, --env, the launcher's own
#     FRUGAL_* variables), the working directory, arguments with blanks and quotes arriving intact,
#     and [rank] prefixes;
#  2. a 2-host `frugal train` equals a local `frugal launch -n 2` (every epoch's loss and P@k);
#  3. a rank that fails stops the other host's rank, and the launch exits with its status;
#  4. a launcher given SIGTERM stops the remote ranks before it exits 143;
#  5. a launcher killed with SIGKILL still stops the remote ranks (their ssh connections close).
# Before the root part: the hostfile and flag errors. Needs root, iproute2 and openssh-server
# (sshd, ssh-keygen), else exits 77 (meson: skipped).
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
FRUGAL=$(realpath "$1")  # the ranks run it from another working directory
TMP=$(mktemp -d)
chmod 755 "$TMP"  # the rank commands run as root anyway; sshd only needs to read the keys
P="fh$$"          # namespace prefix
NAMESPACES=()
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for ns in "${NAMESPACES[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
fails_with() {  # fails_with TEXT CMD...: CMD fails and says TEXT
  local text=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "succeeded, expected a failure saying '$text': $*"
  grep -qF -- "$text" <<<"$out" || fail "'$*' does not say '$text': $out"
}

# --- Errors (no privileges needed) ---
printf '# two hosts\nalpha slots=2\n\n  beta   # one slot\n' > "$TMP/hosts"
fails_with "-n 4: --hostfile $TMP/hosts has 3 slot(s) on 2 host(s)" "$FRUGAL" launch --hostfile "$TMP/hosts" -n 4 -- true
printf 'alpha\nbeta slots=x\n' > "$TMP/bad-slots"
fails_with "--hostfile $TMP/bad-slots line 2 slots 'x': expected an integer, at least 1" \
  "$FRUGAL" launch --hostfile "$TMP/bad-slots" -n 1 -- true
printf 'alpha cpus=2\n' > "$TMP/bad-option"
fails_with "--hostfile $TMP/bad-option line 1: 'alpha cpus=2': expected \`host\` or \`host slots=K\`" \
  "$FRUGAL" launch --hostfile "$TMP/bad-option" -n 1 -- true
printf '# nothing\n\n' > "$TMP/empty"
fails_with "--hostfile $TMP/empty: no host in the file" "$FRUGAL" launch --hostfile "$TMP/empty" -n 1 -- true
# A host is an argument of the ssh command: an option (-oProxyCommand runs a command) or shell
# syntax in its place is refused before anything starts (issue 62).
for host in "-oProxyCommand=touch $TMP/pwned" '$(touch '"$TMP"'/pwned)' '`touch '"$TMP"'/pwned`' "a;touch" "a|b"; do
  printf '%s\n' "$host" > "$TMP/hostile"
  fails_with "--hostfile $TMP/hostile line 1: '" "$FRUGAL" launch --hostfile "$TMP/hostile" --ssh true -n 1 -- true
  [ ! -e "$TMP/pwned" ] || fail "host '$host' ran a command"
done
fails_with "--max-restarts does not work with --hostfile" \
  "$FRUGAL" launch --hostfile "$TMP/hosts" -n 2 --max-restarts 1 -- true
fails_with "--ssh needs --hostfile" "$FRUGAL" launch --ssh "ssh -p 2" -n 2 -- true
fails_with "--ssh 'ssh -i 'x': a quote is not closed" "$FRUGAL" launch --hostfile "$TMP/hosts" --ssh "ssh -i 'x" -n 2 -- true
fails_with "--env 'NO_SUCH_VARIABLE_$$'" "$FRUGAL" launch -x "NO_SUCH_VARIABLE_$$" -n 1 -- true
echo "ok: hostfile and flag errors"

# --- Hosts as network namespaces ---
if [ "$(id -u)" != 0 ]; then echo "skip: needs root (network namespaces)"; exit 77; fi
for tool in ip sshd ssh ssh-keygen; do
  command -v $tool >/dev/null || { echo "skip: '$tool' is not installed (iproute2, openssh-server)"; exit 77; }
done
if ! err=$(ip netns add "${P}probe" 2>&1); then echo "skip: network namespaces unavailable: $err"; exit 77; fi
ip netns del "${P}probe"

BR=${P}br CL=${P}cl
NAMESPACES+=("$BR") && ip netns add "$BR" || fail "ip netns add $BR"
ip -n "$BR" link add br0 type bridge && ip -n "$BR" link set br0 up || fail "bridge"
add_host() {  # add_host NAMESPACE ADDRESS PORT
  NAMESPACES+=("$1")
  ip netns add "$1" &&
    ip -n "$BR" link add "$3" type veth peer name eth0 netns "$1" &&
    ip -n "$BR" link set "$3" master br0 up &&
    ip -n "$1" link set lo up &&
    ip -n "$1" addr add "$2/24" dev eth0 &&
    ip -n "$1" link set eth0 up || fail "cannot make host $1 ($2)"
}
add_host "${P}h0" 10.77.0.1 v0
add_host "${P}h1" 10.77.0.2 v1
add_host "$CL" 10.77.0.254 vc

mkdir -p /run/sshd  # sshd's privilege separation directory
ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key" || fail "ssh-keygen (host key)"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/client_key" || fail "ssh-keygen (client key)"
cp "$TMP/client_key.pub" "$TMP/authorized_keys"
for h in 0 1; do
  ip netns exec "${P}h$h" "$(command -v sshd)" -D -e -f /dev/null -h "$TMP/host_key" \
    -o ListenAddress=10.77.0.$((h + 1)) -o Port=22 -o PidFile=none -o AuthorizedKeysFile="$TMP/authorized_keys" \
    -o StrictModes=no -o PermitRootLogin=prohibit-password -o UsePAM=no -o PasswordAuthentication=no \
    -o KbdInteractiveAuthentication=no -o MaxStartups=100 > "$TMP/sshd$h.log" 2>&1 &
  PIDS+=($!)
done
SSH="ssh -i $TMP/client_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
for h in 1 2; do
  for i in $(seq 50); do
    ip netns exec "$CL" $SSH -o BatchMode=yes 10.77.0.$h true 2>/dev/null && break
    [ "$i" -lt 50 ] || fail "sshd on 10.77.0.$h does not answer"
    sleep 0.2
  done
done
echo "ok: 2 hosts (10.77.0.1, 10.77.0.2) with an sshd each; the launcher runs in a third namespace"
client() { ip netns exec "$CL" "$@"; }  # run on the launcher's host
"$FRUGAL" keygen "$TMP/cluster.key" > /dev/null || fail "keygen"

# 1. Placement, variables, directory, quoting, prefixes.
printf '10.77.0.1 slots=2  # two ranks here\n10.77.0.2\n' > "$TMP/hostfile"
mkdir -p "$TMP/work"
(cd "$TMP/work" && FRUGAL_RENDEZVOUS_TIMEOUT=33 client "$FRUGAL" launch --hostfile "$TMP/hostfile" --ssh "$SSH" -n 3 \
  --cluster-key "$TMP/cluster.key" --comm-timeout 7 -x GREETING="hi there" -- \
  sh -c 'echo "rank=$FRUGAL_RANK size=$FRUGAL_SIZE local=$FRUGAL_LOCAL_SIZE coordinator=$FRUGAL_COORDINATOR" \
    "key=$FRUGAL_CLUSTER_KEY timeout=$FRUGAL_COMM_TIMEOUT rendezvous=$FRUGAL_RENDEZVOUS_TIMEOUT" \
    "greeting=$GREETING dir=$(pwd) on=$(ip -o -4 addr show dev eth0 | awk "{print \$4}")"; printf "<%s>" "$@"; echo' \
  sh "a b" "it's" '$HOME' '*' > "$TMP/env.log" 2>&1) || fail "the environment launch failed"
for r in 0 1 2; do
  host=10.77.0.1 local=2
  [ $r = 2 ] && host=10.77.0.2 local=1
  want="[$r] rank=$r size=3 local=$local coordinator=10.77.0.1:29500 key=$TMP/cluster.key timeout=7 rendezvous=33 greeting=hi there dir=$TMP/work on=$host/24"
  grep -qxF -- "$want" "$TMP/env.log" || fail "rank $r: expected the line '$want'"
  grep -qxF -- "[$r] <a b><it's><\$HOME><*>" "$TMP/env.log" || fail "rank $r: arguments changed on the way"
done
echo "ok: 3 ranks on 2 hosts (slots=2 filled first): variables, directory, quoting and prefixes as expected"

# 2. frugal train on the two hosts equals a local 2-rank launch.
"$FRUGAL" data synth-xmc --features 2000 --labels 300 --train 1500 --test 200 --nnz 15 --labels-per-point 3 \
  --seed 6 --out "$TMP/data" > /dev/null || fail "synth-xmc"
TRAIN=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 2 --threads 1 --quiet
       --sampler exact --hidden 16 --batch 64 --seed 7)
"$FRUGAL" launch -n 2 -- "$FRUGAL" "${TRAIN[@]}" --metrics "$TMP/local.jsonl" > "$TMP/local.log" 2>&1 ||
  fail "local launch failed"
printf '10.77.0.1\n10.77.0.2\n' > "$TMP/two"
client "$FRUGAL" launch --hostfile "$TMP/two" --ssh "$SSH" -n 2 --cluster-key "$TMP/cluster.key" -- \
  "$FRUGAL" "${TRAIN[@]}" --metrics "$TMP/hosts.jsonl" > "$TMP/train.log" 2>&1 || fail "2-host train failed"
python3 - "$TMP" <<'PY' || fail "the 2-host run differs from the local one"
import json, os, sys
d = sys.argv[1]
def epochs(name):
    return [(r["loss"], r["p@1"], r["p@5"]) for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == "epoch"]
local, hosts = epochs("local.jsonl"), epochs("hosts.jsonl")
assert len(local) == 2 and hosts == local, (hosts, local)
assert epochs("hosts.rank1.jsonl") == epochs("local.rank1.jsonl")
PY
echo "ok: frugal train on 2 hosts (CURVE key forwarded) == frugal launch -n 2 on one"

# 3. Rank 1 fails while rank 0 waits for it: the launch stops rank 0 on the other host.
start=$SECONDS
client "$FRUGAL" launch --hostfile "$TMP/two" --ssh "$SSH" -n 2 --grace 2 -- sh -c \
  'if [ "$FRUGAL_RANK" = 1 ]; then sleep 1; echo "giving up" >&2; exit 3; fi; echo $$ > "$0/rank0.pid"; exec "$@"' \
  "$TMP" "$FRUGAL" "${TRAIN[@]}" > "$TMP/fail.log" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "rank 1 exited 3 but the launch exited $rc"
[ $((SECONDS - start)) -lt 30 ] || fail "the launch took $((SECONDS - start)) s to stop"
grep -q "rank 1 exited with status 3; stopping the other ranks" "$TMP/fail.log" || fail "failure not reported"
grep -qxF "[1] giving up" "$TMP/fail.log" || fail "rank 1's stderr not prefixed"
pid=$(cat "$TMP/rank0.pid")
kill -0 "$pid" 2>/dev/null && fail "rank 0 (pid $pid on 10.77.0.1) still runs after the launch ended"
echo "ok: rank 1 failed -> rank 0 on the other host stopped, launch exited 3 after $((SECONDS - start)) s"

# 4. SIGTERM to the launcher (Ctrl-C is the same): it stops the remote ranks, waits for them and
# exits 128+15.
ip netns exec "$CL" "$FRUGAL" launch --hostfile "$TMP/two" --ssh "$SSH" -n 2 --grace 1 -- \
  sh -c 'echo $$ > "$0/term.$FRUGAL_RANK"; exec sleep 300' "$TMP" > "$TMP/term.log" 2>&1 &
launcher=$!; PIDS+=("$launcher")
for i in $(seq 100); do
  [ -s "$TMP/term.0" ] && [ -s "$TMP/term.1" ] && break
  [ "$i" -lt 100 ] || fail "the ranks to be stopped by SIGTERM did not start"
  sleep 0.1
done
kill -TERM "$launcher"
wait "$launcher"; rc=$?
[ $rc -eq 143 ] || fail "the launcher exited $rc after SIGTERM, expected 143"
for r in 0 1; do
  pid=$(cat "$TMP/term.$r")
  kill -0 "$pid" 2>/dev/null && fail "rank $r (pid $pid) still runs after its launcher exited on SIGTERM"
done
echo "ok: SIGTERM to the launcher -> remote ranks stopped before it exited 143"

# 5. SIGKILL to the launcher: the ssh clients' stdin closes and the remote wrappers stop the ranks.
# Not through client(): $! must be the launcher itself (ip netns exec execs it), not a subshell.
ip netns exec "$CL" "$FRUGAL" launch --hostfile "$TMP/two" --ssh "$SSH" -n 2 --grace 1 -- \
  sh -c 'echo $$ > "$0/hold.$FRUGAL_RANK"; exec sleep 300' "$TMP" > "$TMP/kill.log" 2>&1 &
launcher=$!; PIDS+=("$launcher")
for i in $(seq 100); do
  [ -s "$TMP/hold.0" ] && [ -s "$TMP/hold.1" ] && break
  [ "$i" -lt 100 ] || fail "the held ranks did not start"
  sleep 0.1
done
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
for r in 0 1; do
  pid=$(cat "$TMP/hold.$r")
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    [ "$i" -lt 100 ] || fail "rank $r (pid $pid) still runs 10 s after its launcher was killed"
    sleep 0.1
  done
done
echo "ok: launcher SIGKILLed -> both remote ranks stopped"
echo "PASS"
