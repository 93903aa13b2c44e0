#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Persists to a pool on CXL persistent memory against the same on an
# NVDIMM of the same size and in RAM, in one boot of the project's VM
# (tests/vm/run): two emulated NVDIMMs, one fsdax (ext4 -o dax) and one
# devdax, CXL memory as devdax, then, in the same boot, its namespace made
# fsdax again; tools/rpmem-bench through librpmem over tcp and over verbs
# (soft-RoCE), GPSPM. The last lines are each medium's p50 over tmpfs's
# with the same transport and size. Under TCG, with QEMU serving CXL
# through its device model and the NVDIMM as guest RAM, only ratios of one
# boot mean anything, and they measure QEMU's emulation (docs/cxl.md).
#   scripts/bench-cxl.sh [BUILD_DIR] [rpmem-bench options]   default: build-dev
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/vm-lib.sh"
vm_start bench-cxl "${1:-$top/build-dev}"
shift || true
opts=${*:--b 64,4K,1M -l 1 -d 1 -r 3 -o persist}

cat >"$tmp/guest.sh" <<GUEST
set -u
export RPMEM_SSH=$top/tools/local-ssh RPMEM_BENCH_POOL=160M
bench() {  # bench MEDIUM DIR PART: over tcp, then verbs
  local t
  for t in tcp verbs; do
    echo "== \$1 \$t"
    if [ \$t = verbs ]; then
      env RPMEM_ENABLE_SOCKETS=0 FAKE_SSH_CONNECTION="\$RPMEM_VM_IP 50000 \$RPMEM_VM_IP 22" \\
        RPMEM_BENCH_DIR=\$2 RPMEM_BENCH_PART="\$3" \\
        $top/tools/rpmem-bench/run-local.sh $build -S 128M --remove --no-progress --no-raw $opts
    else
      env RPMEM_ENABLE_VERBS=0 RPMEM_BENCH_DIR=\$2 RPMEM_BENCH_PART="\$3" \\
        $top/tools/rpmem-bench/run-local.sh $build -S 128M --remove --no-progress --no-raw $opts
    fi
  done
}
bench tmpfs /dev/shm ""
bench nvdimm-fsdax \$RPMEM_VM_PMEM_DIR ""
bench nvdimm-devdax /tmp "AUTO \$RPMEM_VM_PMEM1"
bench cxl-devdax /tmp "AUTO \$RPMEM_VM_CXL"
# The CXL namespace again, as fsdax: ext4 -o dax on it.
ns=\$(ndctl list -r \$RPMEM_VM_CXL_REGION -N | sed -n 's/.*"dev":"\(namespace[0-9.]*\)".*/\1/p' | head -n1)
blk=\$(ndctl create-namespace -f -e "\$ns" -m fsdax | sed -n 's/.*"blockdev":"\(pmem[0-9]*\)".*/\1/p')
[ -n "\$blk" ] && mkfs.ext4 -q -F -b 4096 /dev/\$blk && mkdir -p /mnt/cxl && mount -o dax /dev/\$blk /mnt/cxl ||
  { echo "bench-cxl: the CXL namespace \$ns did not become fsdax"; exit 1; }
grep " /mnt/cxl " /proc/mounts
bench cxl-fsdax /mnt/cxl ""
GUEST
echo "bench-cxl: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$("${RPMEM_VM_QEMU:-qemu-system-x86_64}" --version | head -n1)"
"$vm" --timeout 2400 --mem 3072 --pmem 256 --pmem-mode fsdax --pmem 256 --pmem-mode devdax \
  --cxl 256 --cxl-mode devdax --share "$tmp" -- bash "$tmp/guest.sh" | tee "$tmp/out.log"
# p50 of persist per medium, transport and size, over tmpfs's.
echo "== p50 over tmpfs's p50, same transport and size"
awk '/^== / { m = $2; t = $3; cpu = 0; next }
  /^CPU per call/ { cpu = 1 }
  !cpu && $1 == "persist" && ($3 == "B" || $3 == "KiB" || $3 == "MiB") {
    k = t " " $2 " " $3; p[m, k] = $5; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    if (!(m in ms)) { ms[m] = 1; order[++nm] = m } }
  END {
    printf "%-10s %-8s", "transport", "size"
    for (i = 2; i <= nm; i++) printf " %14s", order[i]
    printf "\n"
    for (j = 1; j <= nk; j++) {
      split(keys[j], f, " "); printf "%-10s %-8s", f[1], f[2] " " f[3]
      for (i = 2; i <= nm; i++) {
        b = p[order[1], keys[j]]; v = p[order[i], keys[j]]
        if (b > 0 && v > 0) printf " %13.2fx", v / b; else printf " %14s", "-"
      }
      printf "\n"
    } }' "$tmp/out.log"
