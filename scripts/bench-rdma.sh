#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Software overhead of the verbs provider, on soft-RoCE in the rdma-vm VM:
# perftest's ib_write_lat / ib_send_lat / ib_read_lat (the device alone),
# then tools/rpmem-bench through librpmem over verbs (tcp disabled) and over
# tcp (verbs disabled), in the same boot. Figures under TCG emulation are
# only meaningful as ratios (docs/performance-verbs.md).
#   scripts/bench-rdma.sh [BUILD_DIR] [rpmem-bench options]   default: build-dev
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build-dev}" && pwd -P)
shift || true
shared=${RPMEM_SHARED:-$top/../shared}
vm="$shared/tools/rdma-vm/run-in-rdma-vm"
opts=${*:--b 64,4K,64K,1M -l 1,2 -d 2 -r 3 -o persist,relaxed,flush,read}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${RDMA_VM_QEMU:-}" ] && [ -w /dev/kvm ] && ! bash "$vm" --timeout 120 -- true >/dev/null 2>&1
then  # as in scripts/test-rdma.sh: KVM present but unable to run the guest
  printf '%s\n' '#!/usr/bin/env bash' 'args=()' 'while [ $# -gt 0 ]; do' \
    '  case "$1" in -accel) [ "${2%%,*}" = kvm ] && { args+=(-accel tcg,thread=multi); shift 2; continue; } ;;' \
    '  -cpu) [ "$2" = host ] && { args+=(-cpu max); shift 2; continue; } ;; esac' \
    '  args+=("$1"); shift' 'done' 'exec qemu-system-x86_64 "${args[@]}"' >"$tmp/qemu-tcg"
  chmod +x "$tmp/qemu-tcg"
  export RDMA_VM_QEMU="$tmp/qemu-tcg"
fi

cat >"$tmp/guest.sh" <<GUEST
#!/bin/bash
set -u
DEV=\$RDMA_VM_DEV IP=\$RDMA_VM_IP
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
bash "$vm" --timeout 1500 --mem 2048 --copy "$tmp/guest.sh" --copy "$build/rpmemd" \
  --copy "$build/tools/rpmem-bench" --copy "$top/tools/rpmem-bench/run-local.sh" \
  --copy "$top/tools/local-ssh" -- "$tmp/guest.sh"
