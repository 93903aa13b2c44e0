#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs rpmem-obj-bench with Debian's libpmemobj on two pool sets on tmpfs: one
# with a remote replica served by an rpmemd on this machine, one without.
#
# usage: tools/rpmem-obj-bench/run-local.sh BUILD_DIR [rpmem-obj-bench options]
#
# The pool sets live under $RPMEM_OBJ_BENCH_DIR (default /dev/shm); each part
# is $RPMEM_OBJ_BENCH_POOL (default 128M). libpmemobj reaches rpmemd through
# tools/local-ssh (RPMEM_SSH, RPMEM_CMD) and loads BUILD_DIR's librpmem.so.1
# through the counting one (BUILD_DIR/tools/rpmem-count, first on
# LD_LIBRARY_PATH), unless RPMEM_OBJ_BENCH_COUNT=0. Afterwards it checks the
# target's copy of the pool (pmempool check, rpmem-obj-bench --verify), and
# removes everything it created (RPMEM_OBJ_BENCH_KEEP=1 keeps it).
# RPMEM_BENCH_DAEMON_CONF adds lines to rpmemd.conf (e.g. "max-lanes = 1024").
# RPMEM_BENCH_DAEMON_WRAP is put before rpmemd's command (e.g. "taskset -c 1").
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n 4,14p "$0" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
for f in "$build/tools/rpmem-obj-bench" "$build/librpmem.so.1" "$build/rpmemd"; do
  [ -e "$f" ] || { echo "run-local.sh: no $f (build it first)" >&2; exit 1; }
done

work=$(mktemp -d "${RPMEM_OBJ_BENCH_DIR:-/dev/shm}/rpmem-obj-bench.XXXXXX")
trap '[ -n "${RPMEM_OBJ_BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT
mkdir -p "$work/target/poolsets" "$work/client"
size=${RPMEM_OBJ_BENCH_POOL:-128M}
printf 'PMEMPOOLSET\n%s %s\n' "$size" "$work/target/remote.part0" >"$work/target/poolsets/remote.set"
printf 'PMEMPOOLSET\n%s %s\n' "$size" "$work/client/local.part0" >"$work/client/local.set"
printf 'PMEMPOOLSET\n%s %s\nREPLICA 127.0.0.1 remote.set\n' "$size" "$work/client/replica.part0" \
  >"$work/client/replica.set"
cat >"$work/target/rpmemd.conf" <<CONF
poolset-dir = $work/target/poolsets
log-file = $work/target/rpmemd.log
log-level = notice
${RPMEM_BENCH_DAEMON_CONF:-}
CONF

libs=$build
if [ "${RPMEM_OBJ_BENCH_COUNT:-1}" != 0 ]; then
  [ -e "$build/tools/rpmem-count/librpmem.so.1" ] ||
    { echo "run-local.sh: no $build/tools/rpmem-count/librpmem.so.1" >&2; exit 1; }
  libs=$build/tools/rpmem-count:$build
fi
rc=0
LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  RPMEM_COUNT_REAL_LIB="$build/librpmem.so.1" \
  RPMEM_SSH="$top/tools/local-ssh" \
  RPMEM_CMD="${RPMEM_BENCH_DAEMON_WRAP:+$RPMEM_BENCH_DAEMON_WRAP }$build/rpmemd -c $work/target/rpmemd.conf" \
  "$build/tools/rpmem-obj-bench" -L "$work/client/local.set" -R "$work/client/replica.set" "$@" ||
  rc=$?

# libpmemobj has closed the pool: the target's part is a consistent
# libpmemobj pool (Debian's pmempool, no librpmem), and its maps hold the
# values they should -- read by libpmemobj from the target's part as the
# master replica of a pool set whose second replica is the client's part (its
# header links to the client's replica, so it does not open alone).
part=$work/target/remote.part0
if [ -f "$part" ]; then
  check=consistent
  env -u LD_LIBRARY_PATH pmempool check "$work/target/poolsets/remote.set" >/dev/null 2>&1 ||
    { check=failed; [ "$rc" -ne 0 ] || rc=1; }
  echo "target part: $(stat -c %s "$part") bytes, signature" \
    "'$(head -c 7 "$part" | tr -cd '[:print:]')', pmempool check: $check" >&2
  printf 'PMEMPOOLSET\n%s %s\nREPLICA\n%s %s\n' "$size" "$part" "$size" \
    "$work/client/replica.part0" >"$work/verify.set"
  env -u LD_LIBRARY_PATH "$build/tools/rpmem-obj-bench" --verify "$work/verify.set" >&2 ||
    { [ "$rc" -ne 0 ] || rc=1; }
else
  echo "target part: none" >&2
  [ "$rc" -ne 0 ] || rc=1
fi
[ "$rc" -eq 0 ] || { echo "run-local.sh: rpmem-obj-bench failed ($rc); rpmemd log:" >&2;
  tail -20 "$work/target/rpmemd.log" >&2 2>/dev/null || true; }
exit $rc
