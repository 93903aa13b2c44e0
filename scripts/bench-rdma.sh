#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Software overhead of the verbs provider, on soft-RoCE in the project's VM
# (tests/vm/run):
# perftest's ib_write_lat / ib_send_lat / ib_read_lat (the device alone),
# then tools/rpmem-bench through librpmem over verbs (tcp disabled) and over
# tcp (verbs disabled), in the same boot. Figures under TCG emulation are
# only meaningful as ratios (docs/performance.md).
#   scripts/bench-rdma.sh [BUILD_DIR] [rpmem-bench options]   default: build-dev
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/vm-lib.sh"
vm_start bench-rdma "${1:-$top/build-dev}"
shift || true
opts=${*:--b 64,4K,64K,1M -l 1,2 -d 2 -r 3 -o persist,relaxed,flush,read}

cat >"$tmp/guest.sh" <<GUEST
#!/bin/bash
set -u
DEV=\$RPMEM_VM_DEV IP=\$RPMEM_VM_IP
lat() {  # tool size: perftest prints half the round trip
  \$1 -d \$DEV -n 2000 -F -s \$2 >/dev/null 2>&1 & srv=\$!
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 1
    out=\$(\$1 -d \$DEV -n 2000 -F -s \$2 \$IP 2>&1) && break
  done
  echo "\$out" | awk -v t=\$1 -v s=\$2 '/^ *[0-9]+ +[0-9]+ / {print t, s " B: t_typical " \$5 " us, t_99% " \$8 " us"}'
  wait \$srv
}
echo "== perftest (one RC QP, busy polling)"
for s in 64 4096 65536; do for t in ib_write_lat ib_send_lat ib_read_lat; do lat \$t \$s; done; done
export RPMEM_SSH=$top/tools/local-ssh FAKE_SSH_CONNECTION="\$IP 50000 \$IP 22" RPMEM_BENCH_DIR=/tmp
export RPMEM_BENCH_POOL=160M
echo "== rpmem-bench over verbs (RPMEM_ENABLE_SOCKETS=0)"
RPMEM_ENABLE_SOCKETS=0 $top/tools/rpmem-bench/run-local.sh $build -S 128M --remove $opts
echo "== rpmem-bench over tcp (RPMEM_ENABLE_VERBS=0)"
env -u FAKE_SSH_CONNECTION RPMEM_ENABLE_VERBS=0 $top/tools/rpmem-bench/run-local.sh $build -S 128M --remove --no-raw $opts
GUEST
chmod +x "$tmp/guest.sh"
"$vm" --timeout 1500 --mem 2048 --share "$tmp" -- "$tmp/guest.sh"
