#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Aggregate persists/s of many clients on one rpmemd --service: for each
# client count, that many rpmem-bench processes (one pool and one lane each,
# persist of SIZE bytes) run at once against one service on 127.0.0.1 over
# mutual TLS; their calls/s are summed.
#
# usage: tools/rpmem-bench/service-scaling.sh BUILD_DIR [COUNTS [SIZE [SECONDS]]]
#   COUNTS   client counts, comma-separated (default 8,32,64,128)
#   SIZE     persist size (default 64)
#   SECONDS  measured time (default 4). Every client measures the same
#            window of wall-clock time (rpmem-bench --start-at), which
#            starts once all of them have had time to connect and warm up
#            (3 s plus 80 ms per client); a client ready only later counts
#            as failed. Summing rates of windows that do not overlap would
#            count the calls a client makes while others are not running.
#
# RPMEM_SCALING_DAEMON_CONF: more lines for the service's configuration
# file (e.g. "nthreads = 1": a lane server of its own for each session).
# Pools live in /dev/shm. Prints one line per count: clients, the sum of
# calls/s, calls/s per client (min/median/max), failed clients, rpmemd's
# threads and RSS at the end of the count, and the CPU time per call inside
# the window (its first and last half second left out) of rpmemd and of all
# the rest of the machine (the clients, and the kernel work they cause):
# the clients share the CPUs with the service they measure.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:?usage: $0 BUILD_DIR [COUNTS [SIZE [SECONDS]]]}")
counts=${2:-8,32,64,128}
size=${3:-64}
secs=${4:-4}
max=$(tr ',' '\n' <<<"$counts" | sort -n | tail -1)

work=$(mktemp -d /dev/shm/rpmem-scaling.XXXXXX)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then
    kill "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
  fi
  [ -n "${RPMEM_SCALING_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

cd "$work"
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
{
  openssl req -x509 $key -keyout ca.key -out ca.crt -subj /CN=ca -days 2
  openssl req $key -keyout server.key -out server.csr -subj /CN=localhost
  printf 'subjectAltName=IP:127.0.0.1\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out server.crt -days 2 -extfile server.ext
  openssl req $key -keyout client.key -out client.csr -subj /CN=bench
  printf 'extendedKeyUsage=clientAuth\n' >client.ext
  openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out client.crt -days 2 -extfile client.ext
} >openssl.log 2>&1
mkdir -p poolsets/bench
for i in $(seq 1 "$max"); do
  printf 'PMEMPOOLSET\n8M %s/p%d.part\n' "$work" "$i" >"poolsets/bench/p$i.set"
done

port=$(( 20000 + RANDOM % 20000 ))
cat >service.conf <<CONF
poolset-dir = $work/poolsets
log-file = $work/service.log
log-level = notice
service-listen = 127.0.0.1:$port
tls-ca = $work/ca.crt
tls-cert = $work/server.crt
tls-key = $work/server.key
max-sessions-per-client = $max
max-per-address = $(( max + 8 ))
${RPMEM_SCALING_DAEMON_CONF:-}
CONF
"$build/rpmemd" --service -c "$work/service.conf" &
daemon=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.05
done

export RPMEM_TLS_CA=$work/ca.crt RPMEM_TLS_CERT=$work/client.crt RPMEM_TLS_KEY=$work/client.key
echo "# rpmemd --service on 127.0.0.1:$port, persist $size B, 1 lane per client, ${secs} s measured"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(date -u '+%F %T') UTC"
printf '%8s %12s %10s %10s %10s %7s %8s %9s %8s %8s\n' clients "calls/s" min/client median max failed \
  threads "RSS MiB" "rpmemd" "rest"
printf '%8s %12s %10s %10s %10s %7s %8s %9s %8s %8s\n' "" "" "" "" "" "" "" "" "us/call" "us/call"
# rpmemd's CPU ticks and the machine's busy ticks (USER_HZ).
sample() {
  local t
  t=$(awk '{ print $14 + $15 }' "/proc/$daemon/stat")
  awk -v t="$t" '/^cpu / { print t, $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}
for n in ${counts//,/ }; do
  rm -f out.*
  pids=()
  start_at=$(awk -v n="$n" -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f", now + 3 + 0.08 * n }')
  for i in $(seq 1 "$n"); do
    "$build/tools/rpmem-bench" -t "rpmems://127.0.0.1:$port" -P "p$i.set" -S 4M \
      -o persist -b "$size" -l 1 --start-at "$start_at" -d "$secs" --no-raw -f csv --no-progress \
      >"out.$i" 2>"err.$i" &
    pids+=($!)
  done
  (
    sleep "$(awk -v at="$start_at" -v now="$(date +%s.%N)" 'BEGIN { d = at + 0.5 - now; print (d > 0 ? d : 0) }')"
    sample >cpu.0
    sleep "$(awk -v s="$secs" 'BEGIN { print s - 1 }')"
    sample >cpu.1
  ) &
  sampler=$!
  failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  wait "$sampler" || true
  read -r d0 b0 <cpu.0
  read -r d1 b1 <cpu.1
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$daemon/status")
  rss=$(awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$daemon/status")
  # The CSV's ops_per_s column, by name, of every client's persist row
  # that has no error.
  cat out.* | awk -F, '
    /^case,/ { for (i = 1; i <= NF; i++) { if ($i == "ops_per_s") col = i; if ($i == "error") ecol = i }; next }
    $1 == "persist" && col && ecol && $ecol == "" { print $col }' | sort -n >rates
  k=$(wc -l <rates)
  awk -v n="$n" -v k="$k" -v failed="$failed" -v threads="$threads" -v rss="$rss" \
    -v dt="$((d1 - d0))" -v bt="$((b1 - b0))" -v hz="$(getconf CLK_TCK)" -v secs="$secs" '
    { v[NR] = $1; sum += $1 }
    END {
      calls = sum * (secs - 1)
      printf "%8d %12.0f %10.0f %10.0f %10.0f %7d %8s %9s %8.2f %8.2f\n", n, sum, v[1],
        v[int((k + 1) / 2)], v[k], failed + (n - k), threads, rss,
        calls ? dt / hz / calls * 1e6 : 0, calls ? (bt - dt) / hz / calls * 1e6 : 0
    }' rates
done
