#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs rpmem-bench against an rpmemd on this machine, with the pool on tmpfs.
#
# usage: tools/rpmem-bench/run-local.sh BUILD_DIR [rpmem-bench options]
#
# Sets up a pool set directory under $RPMEM_BENCH_DIR (default /dev/shm)
# with bench.set, bench-wide.set (for --wide-lanes) and bench-tls.set (for
# --data-tls, as large as bench.set),
# reaches rpmemd through tools/local-ssh (as scripts/demo.sh does), runs
# BUILD_DIR/tools/rpmem-bench with the given options, prints rpmemd's
# resident memory before and after, and removes everything it created.
# RPMEM_BENCH_POOL sets the pool set size (default 256M; -S must fit in it).
# RPMEM_BENCH_PART replaces bench.set's part line (e.g. "AUTO /dev/dax0.0").
# RPMEM_BENCH_DAEMON_CONF adds lines to rpmemd.conf (e.g. "max-lanes = 1024").
# RPMEM_BENCH_DAEMON_WRAP is put before rpmemd's command (e.g. "taskset -c 1").
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n 4,12p "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift

work=$(mktemp -d "${RPMEM_BENCH_DIR:-/dev/shm}/rpmem-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/poolsets"
cat >"$work/poolsets/bench.set" <<SET
PMEMPOOLSET
${RPMEM_BENCH_PART:-${RPMEM_BENCH_POOL:-256M} $work/bench.part0}
SET
# The pool of --data-tls: its lanes inside TLS.
cat >"$work/poolsets/bench-tls.set" <<SET
PMEMPOOLSET
${RPMEM_BENCH_POOL:-256M} $work/bench-tls.part0
SET
# ... and the one with sealed lanes.
cat >"$work/poolsets/bench-sealed.set" <<SET
PMEMPOOLSET
${RPMEM_BENCH_POOL:-256M} $work/bench-sealed.part0
SET
# The pool of --wide-lanes (8 MiB used).
cat >"$work/poolsets/bench-wide.set" <<SET
PMEMPOOLSET
16M $work/bench-wide.part0
SET
cat >"$work/rpmemd.conf" <<CONF
poolset-dir = $work/poolsets
log-file = $work/rpmemd.log
log-level = notice
${RPMEM_BENCH_DAEMON_CONF:-}
CONF
export RPMEM_SSH="$top/tools/local-ssh"
export RPMEM_CMD="${RPMEM_BENCH_DAEMON_WRAP:+$RPMEM_BENCH_DAEMON_WRAP }$build/rpmemd -c $work/rpmemd.conf"

# rpmemd's memory (the oldest rpmemd: the one serving bench.set), sampled
# while the benchmark runs: VmHWM is the peak of the resident set, RssAnon
# the part that is not the mapped pool.
watch_rpmemd() {
  local pid="" first=""
  while kill -0 "$1" 2>/dev/null; do
    if [ -z "$pid" ]; then
      pid=$(pgrep -o -f -x "$build/rpmemd -c $work/rpmemd.conf" || true)
    elif [ -r "/proc/$pid/status" ]; then
      local now
      now=$(awk '/^(VmHWM|RssAnon|RssShmem|RssFile):/ {printf "%s %s kB  ", $1, $2}' \
            "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$now" ] && { [ -n "$first" ] || first=$now; last=$now; }
    fi
    sleep 0.5
  done
  [ -n "$first" ] && echo "rpmemd memory: first sample: $first" >&2
  [ -n "${last:-}" ] && echo "rpmemd memory: last sample:  $last" >&2
  return 0
}

"$build/tools/rpmem-bench" -P bench.set "$@" &
bench=$!
watch_rpmemd "$bench" &
watcher=$!
rc=0
wait "$bench" || rc=$?
wait "$watcher" || true
exit $rc
