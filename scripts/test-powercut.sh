#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Power cuts: is what rpmem_persist(), rpmem_deep_persist() and
# rpmem_flush() + rpmem_drain() acknowledged on the target's disk after the
# target loses its power? For each transport and each cut: a VM
# (../shared/tools/rdma-vm) with a fresh ext4 disk image runs rpmemd (through
# the ssh stand-in) and tests/powercut/powercut_client, whose pool's two part
# files live on that disk; the host watches the client's acknowledgements on
# the console and, after a random few hundred of them, kills qemu with
# SIGKILL (the guest's page cache is lost; what it wrote to its disk stays in
# the image). Then, from a copy of the image alone (e2fsck -fy replays the
# journal, debugfs dumps the parts, nothing is mounted), powercut_verify
# checks that every acknowledged byte is there.
#   scripts/test-powercut.sh [BUILD_DIR]     default: build-dev
# Environment: RPMEM_POWERCUT_CUTS (cuts per transport, default 3),
# RPMEM_POWERCUT_TRANSPORTS (default "tcp verbs"), RPMEM_POWERCUT_SEED (the
# first cut's seed; later cuts add 1), RPMEM_POWERCUT_ACKS (acknowledgements
# before the cut; default random in 200..799), RPMEM_SHARED (where shared/ is).
# Skips (exit 0, with a reason) without the VM tool or the e2fsprogs tools;
# skips verbs when BUILD_DIR has no verbs provider. A failed cut keeps its
# console log and dumped parts in BUILD_DIR/powercut-failed/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build-dev}" && pwd -P)
shared=${RPMEM_SHARED:-$top/../shared}
vm="$shared/tools/rdma-vm/run-in-rdma-vm"
cuts=${RPMEM_POWERCUT_CUTS:-3}
transports=${RPMEM_POWERCUT_TRANSPORTS:-tcp verbs}
lanes=4
max_steps=1000000     # per lane; the power goes long before
ack_limit=300         # seconds to wait for the acknowledgements of one cut
vm_timeout=420

if [ ! -f "$vm" ]; then
  echo "test-powercut: SKIPPED: no $vm (the shared/ folder beside the checkout)"
  exit 0
fi
for tool in mkfs.ext4 e2fsck debugfs; do
  if ! PATH=$PATH:/sbin:/usr/sbin command -v $tool >/dev/null; then
    echo "test-powercut: SKIPPED: no $tool (e2fsprogs)"
    exit 0
  fi
done
export PATH=$PATH:/sbin:/usr/sbin
client="$build/tests/powercut/powercut_client"
verify="$build/tests/powercut/powercut_verify"
for f in "$client" "$verify" "$build/rpmemd"; do
  [ -x "$f" ] || { echo "test-powercut: $f is missing (build $build first)"; exit 1; }
done

tmp=$(mktemp -d /tmp/rpmem-powercut.XXXXXX)
vm_job=""
cleanup() {
  if [ -n "$vm_job" ] && kill -0 "$vm_job" 2>/dev/null; then
    [ -s "$tmp/qemu.pid" ] && kill -KILL "$(cat "$tmp/qemu.pid")" 2>/dev/null
    wait "$vm_job" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$top/scripts/vm-qemu.sh"
use_tcg_if_kvm_fails "$vm" "$tmp" test-powercut

# The guest side: the ext4 disk at /mnt holds the parts; the pool set, the
# daemon's config and log live in the guest's RAM.
mkdir "$tmp/guest"
cat >"$tmp/guest/run.sh" <<'GUEST'
# run.sh TRANSPORT BUILD TOP SEED LANES MAX_STEPS
set -e
transport=$1 build=$2 top=$3
mount -t ext4 /dev/vda /mnt
mkdir -p /mnt/pool /tmp/pc/sets
printf 'PMEMPOOLSET\n2097152 /mnt/pool/a.part\n2097152 /mnt/pool/b.part\n' >/tmp/pc/sets/pc.set
printf 'poolset-dir = /tmp/pc/sets\nlog-file = /tmp/pc/rpmemd.log\nlog-level = info\n' \
  >/tmp/pc/rpmemd.conf
sync
export RPMEM_SSH="$top/tools/local-ssh"
export RPMEM_CMD="exec $build/rpmemd -c /tmp/pc/rpmemd.conf"
export RPMEM_LOG_LEVEL=2 RPMEM_LOG_FILE=/tmp/pc/client.log
case $transport in
  tcp) export RPMEM_ENABLE_VERBS=0 ;;
  verbs)
    # No tcp to fall back to; rpmemd serves its lanes on the RDMA address.
    export RPMEM_ENABLE_SOCKETS=0
    export FAKE_SSH_CONNECTION="$RDMA_VM_IP 50000 $RDMA_VM_IP 22" ;;
esac
rc=0
"$build/tests/powercut/powercut_client" 127.0.0.1 pc.set "$4" "$5" "$6" || rc=$?
echo "client exited with status $rc before the power cut"
tail -n 20 /tmp/pc/rpmemd.log /tmp/pc/client.log 2>/dev/null || true
exit 1
GUEST

summary=()
failed=0
seed=${RPMEM_POWERCUT_SEED:-$(((RANDOM << 15) | RANDOM))}

# run_cut TRANSPORT N: one boot, one power cut, one check; 0 when nothing was lost.
run_cut() {
  local t=$1 n=$2 d="$tmp/$1-$2" rdma=none acks rc=0 cut=0 got=0 t0=$SECONDS
  acks=${RPMEM_POWERCUT_ACKS:-$((200 + RANDOM % 600))}
  [ "$t" = verbs ] && rdma=rxe
  mkdir "$d"
  truncate -s 64M "$d/disk.img"
  mkfs.ext4 -q -F "$d/disk.img"
  echo "--- $t cut $n: seed $seed, power cut after $acks acknowledgements"
  rm -f "$tmp/qemu.pid"
  : >"$d/console.log"
  # cache=writeback: the guest's writes go to the host's page cache, which
  # survives (the host does not crash), so the image holds exactly what the
  # guest had written to its disk when qemu died, and nothing it had not.
  bash "$vm" --timeout "$vm_timeout" --rdma "$rdma" --qemu-pidfile "$tmp/qemu.pid" \
    --drive "file=$d/disk.img,if=virtio,format=raw,cache=writeback" \
    --copy "$build/rpmemd" --copy "$client" --copy "$top/tools/local-ssh" \
    --copy "$tmp/guest/run.sh" \
    -- sh "$tmp/guest/run.sh" "$t" "$build" "$top" "$seed" "$lanes" "$max_steps" \
    >"$d/console.log" 2>&1 &
  vm_job=$!
  while kill -0 "$vm_job" 2>/dev/null; do
    got=$(grep -c '^ack ' "$d/console.log" || true)
    got=${got:-0}
    if [ "$got" -ge "$acks" ] && [ -s "$tmp/qemu.pid" ]; then
      kill -KILL "$(cat "$tmp/qemu.pid")" && cut=1
      break
    fi
    [ $((SECONDS - t0)) -lt "$ack_limit" ] || break
    sleep 0.05
  done
  wait "$vm_job" || rc=$?
  vm_job=""
  if [ $cut = 0 ]; then
    echo "test-powercut: $t cut $n: FAILED: no power cut (VM status $rc, $got acknowledgements seen)"
    tail -n 30 "$d/console.log" | sed 's/^/  /'
    keep "$d"
    return 1
  fi
  cp --sparse=always "$d/disk.img" "$d/copy.img"
  rm -f "$d/disk.img"
  rc=0
  e2fsck -fy "$d/copy.img" >"$d/e2fsck.log" 2>&1 || rc=$?
  if [ $rc -ge 4 ]; then
    echo "test-powercut: $t cut $n: FAILED: e2fsck -fy exit status $rc"
    sed 's/^/  /' "$d/e2fsck.log"
    keep "$d"
    return 1
  fi
  for p in a b; do
    debugfs -R "dump /pool/$p.part $d/$p.part" "$d/copy.img" >>"$d/debugfs.log" 2>&1 || true
  done
  rm -f "$d/copy.img"
  if [ ! -f "$d/a.part" ] || [ ! -f "$d/b.part" ]; then
    echo "test-powercut: $t cut $n: FAILED: the part files are not on the disk"
    sed 's/^/  /' "$d/debugfs.log"
    keep "$d"
    return 1
  fi
  rc=0
  "$verify" "$d/console.log" "$d/a.part" "$d/b.part" >"$d/verify.log" 2>&1 || rc=$?
  sed 's/^/  /' "$d/verify.log"
  summary+=("$t cut $n (seed $seed, cut after $got acks, $((SECONDS - t0)) s): $(
    sed -n 's/^powercut_verify: //p' "$d/verify.log" | head -n1)")
  if [ $rc -ne 0 ]; then
    echo "test-powercut: $t cut $n: FAILED (verifier status $rc)"
    keep "$d"
    return 1
  fi
  rm -rf "$d"
}

keep() {  # keep a failed cut's evidence (no images)
  local to
  to="$build/powercut-failed/$(basename "$1")-seed$seed"
  mkdir -p "$to"
  cp "$1"/*.log "$1"/*.part "$to/" 2>/dev/null || true
  echo "  kept in $to"
}

start=$SECONDS
for t in $transports; do
  if [ "$t" = verbs ] && ! ldd "$build/rpmemd" 2>/dev/null | grep -q librdmacm; then
    echo "test-powercut: verbs SKIPPED: $build was built without the verbs provider"
    continue
  fi
  for n in $(seq 1 "$cuts"); do
    run_cut "$t" "$n" || failed=1
    seed=$((seed + 1))
  done
done
echo "=== test-powercut summary ($((SECONDS - start)) s)"
for s in ${summary[@]+"${summary[@]}"}; do echo "  $s"; done
exit $failed
