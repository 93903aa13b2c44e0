#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Persists over a lossy link, in the project's VM (tests/vm/run), whose
# kernel has netem (sch_netem): rpmemd in a network namespace behind a veth
# pair with netem on both ends (by default 2 % lost, 1 ms +- 0.5 ms, 5 %
# reordered: issue 56's link), tcp lanes, clients streaming 4 KiB persists
# into a pool in RAM (rpmem-bench, one thread per lane). Prints, for each
# round, link and build, the persists/s and p50/p99 of rpmem-bench, so that
# builds can be set side by side in one boot (the link's figures move from
# boot to boot under TCG). The figures are logged, not judged: it fails
# only when a run fails (scripts/test.sh runs one round of build-dev).
#   scripts/bench-lossy.sh BUILD [BUILD...]
# Environment:
#   RPMEM_LOSSY_ROUNDS  rounds, each every link and build in turn (default 3)
#   RPMEM_LOSSY_SECONDS measured time of each run (default 10)
#   RPMEM_LOSSY_LANES   lanes (default 4)
#   RPMEM_LOSSY_SIZE    persist size (default 4K)
#   RPMEM_LOSSY_LINKS   the links, of: lossy (the netem above), clean (the
#                       same without loss), rto (lossy, with the routes'
#                       rto_min set on both ends to RPMEM_LOSSY_RTO_MIN,
#                       default 5ms: what an operator can do); default
#                       "lossy clean"
#   RPMEM_LOSSY_NETEM   the netem parameters of the lossy link
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n 3,24p "$0" >&2; exit 2; }
builds=() shares=()
for b in "$@"; do
  if [ ! -x "$b/rpmemd" ] || [ ! -x "$b/tools/rpmem-bench" ]; then
    echo "bench-lossy: $b: no rpmemd or tools/rpmem-bench" >&2
    exit 2
  fi
  b=$(cd "$b" && pwd -P)
  builds+=("$b")
  # The guest has fresh file systems there: such a build is shared.
  case $b in /tmp/* | /var/tmp/* | /run/* | /dev/shm/*) shares+=(--share "$b") ;; esac
done
. "$top/scripts/vm-lib.sh"
vm_ready bench-lossy || exit 0
vm_tmp bench-lossy
cat >"$tmp/guest.sh" <<'GUEST'
#!/bin/bash
set -euo pipefail
top=$1
shift
netem=${RPMEM_LOSSY_NETEM:-delay 1ms 0.5ms loss 2% reorder 5%}
clean=$(echo "$netem" | sed -E 's/ ?loss [^ ]+//')
ns=rpmlossy h=lsH t=lsT hip=10.77.0.1 tip=10.77.0.2
ip netns add $ns
ip link add $h type veth peer name $t
ip link set $t netns $ns
ip addr add $hip/24 dev $h
ip link set $h up
ip netns exec $ns ip addr add $tip/24 dev $t
ip netns exec $ns ip link set $t up
ip netns exec $ns ip link set lo up
uname -r
sysctl net.ipv4.tcp_sack net.ipv4.tcp_recovery net.ipv4.tcp_early_retrans | tr '\n' ' '
echo
link() {  # lossy | clean | rto
  local p=$netem
  [ "$1" = clean ] && p=$clean
  tc qdisc replace dev $h root netem $p
  ip netns exec $ns tc qdisc replace dev $t root netem $p
  local rto=""
  [ "$1" = rto ] && rto="rto_min ${RPMEM_LOSSY_RTO_MIN:-5ms}"
  # shellcheck disable=SC2086
  ip route replace $tip/32 dev $h src $hip $rto
  # shellcheck disable=SC2086
  ip netns exec $ns ip route replace $hip/32 dev $t src $tip $rto
}
work=/tmp/lossy
mkdir -p $work/poolsets
printf 'PMEMPOOLSET\n96M %s/bench.part0\n' $work >$work/poolsets/bench.set
export RPMEM_SSH=$top/tools/local-ssh FAKE_SSH_CONNECTION="$hip 50000 $tip 22"
failed=0
for round in $(seq "${RPMEM_LOSSY_ROUNDS:-3}"); do
  for l in ${RPMEM_LOSSY_LINKS:-lossy clean}; do
    link "$l"
    for b in "$@"; do
      printf 'poolset-dir = %s/poolsets\nlog-file = %s/rpmemd.log\nlog-level = notice\n' $work $work >$work/rpmemd.conf
      export RPMEM_CMD="ip netns exec $ns $b/rpmemd -c $work/rpmemd.conf"
      rm -f $work/bench.part0 $work/rpmemd.log $work/client.log
      # The client's log at info: each lane's probes at its close.
      out=$(RPMEM_LOG_LEVEL=4 RPMEM_LOG_FILE=$work/client.log "$b/tools/rpmem-bench" -t $tip -P bench.set -S 64M -o persist \
        -b "${RPMEM_LOSSY_SIZE:-4K}" -l "${RPMEM_LOSSY_LANES:-4}" \
        -d "${RPMEM_LOSSY_SECONDS:-10}" -w 1 --no-raw -f csv --no-progress 2>$work/bench.err) || {
        echo "round $round link $l build $b: rpmem-bench failed"; cat $work/bench.err; failed=1; continue; }
      echo "$out" | awk -F, -v r="$round" -v l="$l" -v b="$b" \
        'NR > 1 && $1 == "persist" {printf "round %s link %-5s build %s: %d lanes, %s B: %.0f persists/s, p50 %.0f us, p99 %.0f us, p99.9 %.0f us\n", r, l, b, $3, $2, $7, $4, $5, $6}'
      echo "  lanes back (rpmemd's log): $(grep -c 'came back' $work/rpmemd.log || true);" \
        "probes sent (the client's log): $(awk '/probes for late replies/ {n += $(NF-4)} END {print n + 0}' $work/client.log)"
    done
  done
done
exit $failed
GUEST
chmod +x "$tmp/guest.sh"
"$vm" --rdma none --timeout "${RPMEM_LOSSY_VM_TIMEOUT:-3000}" --mem 2048 \
  --env RPMEM_LOSSY_ROUNDS="${RPMEM_LOSSY_ROUNDS:-3}" --env RPMEM_LOSSY_SECONDS="${RPMEM_LOSSY_SECONDS:-10}" \
  --env RPMEM_LOSSY_LANES="${RPMEM_LOSSY_LANES:-4}" --env RPMEM_LOSSY_SIZE="${RPMEM_LOSSY_SIZE:-4K}" \
  --env RPMEM_LOSSY_LINKS="${RPMEM_LOSSY_LINKS:-lossy clean}" \
  --env RPMEM_LOSSY_RTO_MIN="${RPMEM_LOSSY_RTO_MIN:-5ms}" \
  --env RPMEM_LOSSY_NETEM="${RPMEM_LOSSY_NETEM:-delay 1ms 0.5ms loss 2% reorder 5%}" \
  --share "$tmp" "${shares[@]}" -- "$tmp/guest.sh" "$top" "${builds[@]}"
