#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Power cuts: is what rpmem_persist(), rpmem_deep_persist() and
# rpmem_flush() + rpmem_drain() acknowledged on the target's disk after the
# target loses its power? For each transport and each cut: a VM
# (tests/vm/run) with a fresh ext4 disk image runs rpmemd (through
# the ssh stand-in) and tests/powercut/powercut_client, whose pool's two part
# files live on that disk; the host watches the client's acknowledgements in
# its output and, after a random few hundred of them, kills qemu with
# SIGKILL (the guest's page cache is lost; what it wrote to its disk stays in
# the image). Then, from a copy of the image alone (e2fsck -fy replays the
# journal, debugfs dumps the parts, nothing is mounted), powercut_verify
# checks that every acknowledged byte is there.
#   scripts/test-powercut.sh [BUILD_DIR]     default: build-dev
# Once per transport (RPMEM_POWERCUT_PMEM_CUTS, default 1) the pool is on
# persistent memory instead, fsdax (ext4 -o dax): CXL memory (--cxl 256
# --cxl-mode fsdax; docs/cxl.md), or with RPMEM_POWERCUT_PMEM_DEVICE=nvdimm
# an emulated NVDIMM. Its backing file stands in for the media: from a copy
# of the device's bytes in that file (the guest says where: "pmem-fs OFFSET
# SIZE"), the same check. With share=on every store of the guest reaches
# the file at once, so a missing cache flush (pmem_persist) cannot show
# there; what this cut proves is the path (the fsdax medium, CXL's
# persister, the bounded landing path over verbs), the pool header and the
# layout of the parts after a cut.
# The last cut on the disk of each transport is at the visible level
# (RPMEM_DURABILITY=visible; a lane's first step and its deep persists
# persistent, the rest visible, so that a persistent call, which writes the
# whole pool back, seldom covers them; rpmemd's visible-writeback 1000 ms):
# persistent acknowledgements, and visible ones older than 1000 ms at the
# cut, must all be on the disk; the verifier counts what survived of the
# younger ones. RPMEM_POWERCUT_NEGATIVE=1 adds
# its negative control: the same with a write-back bound of 600 s, where
# the check at 1000 ms must fail.
# Environment: RPMEM_POWERCUT_CUTS (cuts per transport, default 3),
# RPMEM_POWERCUT_TRANSPORTS (default "tcp verbs"), RPMEM_POWERCUT_PMEM_CUTS
# and RPMEM_POWERCUT_PMEM_DEVICE (cxl, the default, or nvdimm; above),
# RPMEM_POWERCUT_SEED (the first cut's seed; later cuts add 1),
# RPMEM_POWERCUT_ACKS (acknowledgements before the cut; default random in
# 200..799).
# One more cut on the disk (RPMEM_POWERCUT_CRASH_TRANSPORTS, default tcp;
# its subject is the persister, not the lanes) is a crash first: a visible
# pool (visible-writeback 600 s, the guest's own writeback off), rpmemd
# killed with SIGKILL after a few hundred acknowledgements, the pool opened
# again by a new rpmemd and one block made persistent, then the power cut:
# every acknowledgement before the crash, visible ones too, must be on the
# disk. RPMEM_POWERCUT_RPMEMD runs another rpmemd there (an older build: the
# negative control, which loses them).
# One more boot (RPMEM_POWERCUT_IOERRORS=0 leaves it out) runs the
# WriteBackError tests: a disk that fails the writeback of a visible pool's
# pages (a device-mapper error target under the part's blocks) fails the
# next persistent call, every later call and the close.
# Fails when the VM cannot boot, the e2fsprogs tools are missing or (for
# verbs) BUILD_DIR has no verbs provider; RPMEM_SKIP_VM=1 skips it on
# purpose. A failed cut keeps its output and dumped parts in
# BUILD_DIR/powercut-failed/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build-dev}" && pwd -P)
. "$top/scripts/vm-lib.sh"
cuts=${RPMEM_POWERCUT_CUTS:-3}
transports=${RPMEM_POWERCUT_TRANSPORTS:-tcp verbs}
pmem_device=${RPMEM_POWERCUT_PMEM_DEVICE:-cxl}
case $pmem_device in
  cxl | nvdimm) ;;
  *) echo "test-powercut: RPMEM_POWERCUT_PMEM_DEVICE: cxl or nvdimm, not '$pmem_device'"; exit 2 ;;
esac
lanes=4
max_steps=1000000     # per lane; the power goes long before
ack_limit=300         # seconds to wait for the acknowledgements of one cut
vm_timeout=420

vm_ready test-powercut || exit 0
for tool in mkfs.ext4 e2fsck debugfs; do
  if ! PATH=$PATH:/sbin:/usr/sbin command -v $tool >/dev/null; then
    echo "test-powercut: FAILED: no $tool (apt-get install e2fsprogs)"
    exit 1
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

# The guest side: the ext4 disk at /mnt holds the parts; the pool set, the
# daemon's config and log live in the guest's RAM.
mkdir "$tmp/guest"
cat >"$tmp/guest/run.sh" <<'GUEST'
# run.sh TRANSPORT BUILD TOP SEED LANES MAX_STEPS MEDIUM [WRITEBACK_MS [CRASH_AFTER RPMEMD]]
set -e
transport=$1 build=$2 top=$3 medium=$7 writeback=${8:-} crash_after=${9:-} rpmemd=${10:-}
rpmemd=${rpmemd:-$build/rpmemd}
case $medium in
  nvdimm)
    # ext4 -o dax on /dev/pmem0, mounted by the VM at /mnt/pmem; the host
    # finds its bytes in the NVDIMM's backing file at this offset.
    root=$RPMEM_VM_PMEM_DIR
    echo "pmem-fs $RPMEM_VM_PMEM_OFFSET $(blockdev --getsize64 "$RPMEM_VM_PMEM")" ;;
  cxl)
    # The same on CXL: /dev/pmem0 of the CXL region, at /mnt/cxl.
    root=$RPMEM_VM_CXL_DIR
    echo "pmem-fs $RPMEM_VM_CXL_OFFSET $(blockdev --getsize64 "$RPMEM_VM_CXL")" ;;
  *)
    mount -t ext4 /dev/vda /mnt
    root=/mnt ;;
esac
mkdir -p $root/pool /tmp/pc/sets
printf 'PMEMPOOLSET\n2097152 %s/pool/a.part\n2097152 %s/pool/b.part\n' $root $root >/tmp/pc/sets/pc.set
printf 'poolset-dir = /tmp/pc/sets\nlog-file = /tmp/pc/rpmemd.log\nlog-level = info\n' \
  >/tmp/pc/rpmemd.conf
every=""
if [ -n "$writeback" ]; then  # the visible level, a lane's first step persistent
  echo "visible-writeback = $writeback" >>/tmp/pc/rpmemd.conf
  export RPMEM_DURABILITY=visible
  every=1000000000
fi
sync
export RPMEM_SSH="$top/tools/local-ssh"
export RPMEM_CMD="echo \$\$ >/tmp/pc/rpmemd.pid; exec $rpmemd -c /tmp/pc/rpmemd.conf"
if [ -n "$crash_after" ]; then
  # Nothing but rpmemd writes the pool back: the kernel's own writeback
  # waits longer than the test.
  sysctl -qw vm.dirty_expire_centisecs=360000 vm.dirty_writeback_centisecs=0
  export POWERCUT_CRASH_AFTER=$crash_after POWERCUT_RPMEMD_PID=/tmp/pc/rpmemd.pid
fi
export RPMEM_LOG_LEVEL=2 RPMEM_LOG_FILE=/tmp/pc/client.log
case $transport in
  tcp) export RPMEM_ENABLE_VERBS=0 ;;
  verbs)
    # No tcp to fall back to; rpmemd serves its lanes on the RDMA address.
    export RPMEM_ENABLE_SOCKETS=0
    export FAKE_SSH_CONNECTION="$RPMEM_VM_IP 50000 $RPMEM_VM_IP 22" ;;
esac
rc=0
"$build/tests/powercut/powercut_client" 127.0.0.1 pc.set "$4" "$5" "$6" $every || rc=$?
echo "client exited with status $rc before the power cut"
tail -n 20 /tmp/pc/rpmemd.log /tmp/pc/client.log 2>/dev/null || true
exit 1
GUEST

summary=()
failed=0
seed=${RPMEM_POWERCUT_SEED:-$(((RANDOM << 15) | RANDOM))}

# run_cut TRANSPORT N MEDIUM [LEVEL]: one boot, one power cut, one check; 0
# when nothing was lost. MEDIUM: disk (an ext4 disk image), nvdimm or cxl
# (fsdax on the device). LEVEL: persistent (default), visible, negative
# (visible with a bound of 600 s checked at 1000 ms: 0 when the check
# fails), or crash (visible with a bound of 600 s, rpmemd killed and the
# pool opened again before the cut: every acknowledgement checked).
run_cut() {
  local t=$1 n=$2 medium=$3 level=${4:-persistent} d="$tmp/$1-$3-$2" rdma=none acks rc=0 cut=0
  local got=0 t0=$SECONDS store=() writeback="" bound=() crash=()
  acks=${RPMEM_POWERCUT_ACKS:-$((200 + RANDOM % 600))}
  case $level in
    visible) writeback=1000 bound=(1000) ;;
    negative) writeback=600000 bound=(1000) ;;
    crash)
      writeback=600000 bound=(0)
      crash=("$acks" "${RPMEM_POWERCUT_RPMEMD:-}")
      d="$d-crash" ;;
  esac
  [ "$t" = verbs ] && rdma=rxe
  mkdir "$d"
  if [ "$medium" = nvdimm ]; then
    truncate -s 256M "$d/pmem.img"
    store=(--pmem "256:$d/pmem.img" --pmem-mode fsdax)
  elif [ "$medium" = cxl ]; then
    truncate -s 256M "$d/pmem.img"
    store=(--cxl "256:$d/pmem.img" --cxl-mode fsdax)
  else
    truncate -s 64M "$d/disk.img"
    mkfs.ext4 -q -F "$d/disk.img"
    store=(--disk "$d/disk.img")
  fi
  echo "--- $t cut $n, pool on $medium, $level: seed $seed, power cut after $acks acknowledgements"
  rm -f "$tmp/qemu.pid"
  : >"$d/console.log"
  # cache=writeback: the guest's writes go to the host's page cache, which
  # survives (the host does not crash), so the image holds exactly what the
  # guest had written to its disk when qemu died, and nothing it had not.
  "$vm" --timeout "$vm_timeout" --rdma "$rdma" --qemu-pidfile "$tmp/qemu.pid" \
    "${store[@]}" --share "$tmp/guest" \
    -- sh "$tmp/guest/run.sh" "$t" "$build" "$top" "$seed" "$lanes" "$max_steps" "$medium" $writeback \
    "${crash[@]}" >"$d/console.log" 2>&1 &
  vm_job=$!
  while kill -0 "$vm_job" 2>/dev/null; do
    got=$(grep -c '^ack ' "$d/console.log" || true)
    got=${got:-0}
    local ready=0
    if [ "$level" = crash ]; then
      grep -q '^cut-now' "$d/console.log" && ready=1
    elif [ "$got" -ge "$acks" ]; then
      ready=1
    fi
    if [ $ready = 1 ] && [ -s "$tmp/qemu.pid" ]; then
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
  if [ "$medium" != disk ]; then
    # The fsdax device's bytes, as the NVDIMM or CXL memory held them at
    # the cut.
    local off size
    read -r off size < <(sed -n 's/^pmem-fs \([0-9]*\) \([0-9]*\)$/\1 \2/p' "$d/console.log")
    if [ -z "${off:-}" ] || [ -z "${size:-}" ]; then
      echo "test-powercut: $t cut $n on $medium: FAILED: the guest did not say where its device is"
      keep "$d"
      return 1
    fi
    dd if="$d/pmem.img" of="$d/copy.img" bs=1M iflag=skip_bytes,count_bytes skip="$off" \
      count="$size" conv=sparse status=none
    rm -f "$d/pmem.img"
  else
    cp --sparse=always "$d/disk.img" "$d/copy.img"
    rm -f "$d/disk.img"
  fi
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
  "$verify" "$d/console.log" "$d/a.part" "$d/b.part" "${bound[@]}" >"$d/verify.log" 2>&1 || rc=$?
  sed 's/^/  /' "$d/verify.log"
  summary+=("$t cut $n, $medium, $level (seed $seed, cut after $got acks, $((SECONDS - t0)) s): $(
    sed -n 's/^powercut_verify: //p' "$d/verify.log" | head -n1)")
  if [ "$level" = negative ]; then  # the check must have failed
    if [ $rc -ne 1 ]; then
      echo "test-powercut: $t negative control: FAILED: nothing was lost with a bound of 600 s"
      keep "$d"
      return 1
    fi
    rm -rf "$d"
    return 0
  fi
  if [ $rc -ne 0 ]; then
    echo "test-powercut: $t cut $n: FAILED (verifier status $rc)"
    keep "$d"
    return 1
  fi
  rm -rf "$d"
}

# run_io_errors: one boot, the WriteBackError tests (RPMEM_TEST_DM=1: they
# set up their failing disk themselves); 0 when they passed.
run_io_errors() {
  local rc=0 t0=$SECONDS log="$tmp/io-errors.log"
  echo "--- a disk that fails its writes: WriteBackError.* (device-mapper)"
  "$vm" --timeout "$vm_timeout" --env RPMEM_TEST_DM=1 --env RPMEM_ENABLE_VERBS=0 \
    -- ctest --test-dir "$build" --output-on-failure --no-tests=error -R '^WriteBackError\.' \
    >"$log" 2>&1 || rc=$?
  sed -n 's/^\(.*tests passed.*\)$/  \1/p' "$log"
  summary+=("writeback errors ($((SECONDS - t0)) s): $(grep -c ' Passed ' "$log" || true) passed")
  if [ $rc -ne 0 ] || grep -q 'Not Run\|Skipped' "$log"; then
    echo "test-powercut: writeback errors: FAILED (VM status $rc)"
    tail -n 60 "$log" | sed 's/^/  /'
    return 1
  fi
}

keep() {  # keep a failed cut's evidence (no images)
  local to
  to="$build/powercut-failed/$(basename "$1")-seed$seed"
  mkdir -p "$to"
  cp "$1"/*.log "$1"/*.part "$to/" 2>/dev/null || true
  echo "  kept in $to"
}

start=$SECONDS
if [ "${RPMEM_POWERCUT_IOERRORS:-1}" = 1 ]; then
  run_io_errors || failed=1
fi
for t in $transports; do
  [ "$t" = verbs ] && vm_verbs_build test-powercut "$build"
  for n in $(seq 1 "$cuts"); do
    level=persistent
    [ "$n" = "$cuts" ] && level=visible
    run_cut "$t" "$n" disk $level || failed=1
    seed=$((seed + 1))
  done
  if [ "${RPMEM_POWERCUT_NEGATIVE:-0}" = 1 ]; then
    run_cut "$t" 0 disk negative || failed=1
    seed=$((seed + 1))
  fi
  case " ${RPMEM_POWERCUT_CRASH_TRANSPORTS-tcp} " in
    *" $t "*)
      run_cut "$t" 1 disk crash || failed=1
      seed=$((seed + 1)) ;;
  esac
  for n in $(seq 1 "${RPMEM_POWERCUT_PMEM_CUTS:-1}"); do
    run_cut "$t" "$n" "$pmem_device" || failed=1
    seed=$((seed + 1))
  done
done
echo "=== test-powercut summary ($((SECONDS - start)) s)"
for s in ${summary[@]+"${summary[@]}"}; do echo "  $s"; done
exit $failed
