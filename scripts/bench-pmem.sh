#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Persists to pools on persistent memory against pools in RAM, side by side
# in one boot of the project's VM (tests/vm/run) with two emulated NVDIMMs,
# one fsdax (ext4 -o dax) and one devdax: tools/rpmem-bench through librpmem
# over tcp and over verbs (soft-RoCE), GPSPM, and APM where it runs
# (--persist-apm), and over verbs the lane windows (verbs-landing = windows)
# against the direct path on tmpfs. Under TCG only ratios of one boot mean
# anything (docs/performance.md).
#   scripts/bench-pmem.sh [BUILD_DIR] [rpmem-bench options]   default: build-dev
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/vm-lib.sh"
vm_start bench-pmem "${1:-$top/build-dev}"
shift || true
opts=${*:--b 64,4K,1M -l 1 -d 1 -r 3 -o persist,relaxed}

cat >"$tmp/guest.sh" <<GUEST
set -u
export RPMEM_SSH=$top/tools/local-ssh RPMEM_BENCH_POOL=160M
bench() {  # bench NAME TRANSPORT DIR PART DAEMON_CONF [first]
  echo "== \$1"
  local raw=--no-raw
  [ "\${6:-}" = first ] && raw=
  if [ "\$2" = verbs ]; then
    env RPMEM_ENABLE_SOCKETS=0 FAKE_SSH_CONNECTION="\$RPMEM_VM_IP 50000 \$RPMEM_VM_IP 22" \\
      RPMEM_BENCH_DIR=\$3 RPMEM_BENCH_PART="\$4" RPMEM_BENCH_DAEMON_CONF="\$5" \\
      $top/tools/rpmem-bench/run-local.sh $build -S 128M --remove --no-progress \$raw $opts
  else
    env RPMEM_ENABLE_VERBS=0 RPMEM_BENCH_DIR=\$3 RPMEM_BENCH_PART="\$4" RPMEM_BENCH_DAEMON_CONF="\$5" \\
      $top/tools/rpmem-bench/run-local.sh $build -S 128M --remove --no-progress \$raw $opts
  fi
}
dax="AUTO \$RPMEM_VM_PMEM1"
bench "tmpfs tcp" tcp /dev/shm "" "" first
bench "tmpfs verbs (direct)" verbs /dev/shm "" "" first
bench "tmpfs verbs (lane windows)" verbs /dev/shm "" "verbs-landing = windows"
bench "fsdax tcp GPSPM" tcp \$RPMEM_VM_PMEM_DIR "" ""
bench "fsdax tcp APM" tcp \$RPMEM_VM_PMEM_DIR "" "persist-apm = yes"
bench "fsdax verbs GPSPM (lane windows)" verbs \$RPMEM_VM_PMEM_DIR "" ""
bench "devdax tcp GPSPM" tcp /tmp "\$dax" ""
bench "devdax tcp APM" tcp /tmp "\$dax" "persist-apm = yes"
bench "devdax verbs GPSPM" verbs /tmp "\$dax" ""
bench "devdax verbs APM" verbs /tmp "\$dax" "persist-apm = yes"
GUEST
"$vm" --timeout 2400 --mem 3072 --pmem 1024 --pmem-mode fsdax --pmem 1024 --pmem-mode devdax \
  --share "$tmp" -- bash "$tmp/guest.sh"
