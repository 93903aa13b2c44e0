#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The loopback and rdma tests over the verbs provider, for real, on soft-RoCE
# (rdma_rxe) in the project's VM (tests/vm/run), with tcp disabled so that
# nothing silently falls back to it.
#   scripts/test-rdma.sh [BUILD_DIR]     default: build-dev
# RPMEM_RDMA_POOLS: where the daemon's pools live in the guest, one or more
# of tmpfs, disk (ext4 on a virtio disk: the page cache, the bounded landing
# path) and fsdax (ext4 -o dax on an emulated NVDIMM: the bounded path on
# pmem); default all three, one boot each. On tmpfs every test runs; on
# the others those whose subject is the medium (vm_media_tests).
# Fails when the VM cannot boot or BUILD_DIR has no verbs provider;
# RPMEM_SKIP_VM=1 skips it on purpose.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/vm-lib.sh"
vm_start test-rdma "${1:-$top/build-dev}"

# Not run over verbs, and why:
#  HostileDaemon.*: fake daemons written for the tcp provider offer only tcp,
#    so with tcp disabled every case ends in ENOMEDIUM before the fault.
#  Stranger.*: a raw TCP stranger on the data port; over verbs there is no
#    TCP data port (tests/rdma covers strangers on rdma_cm).
#  NetCut.*, Blip.*: a veth pair into a network namespace; rxe only works in
#    the VM's initial namespace, so rpmemd cannot listen there. Outages of
#    verbs lanes are VerbsCut.* (tests/rdma): two rxe devices on a veth wire
#    in the initial namespace (tests/rdma/wire-pair.sh), cut by iptables.
#  Service.ARestartWithSixtyFourOpenPools*: a crowd (64 pools, a restart
#    within 2 s), like ServiceWith* below. Service.ARestartDuringWhich
#    AnotherProcessTakesThePool*: its subject is the session token on the
#    control channel. Restart.* and Service.ARestartPastTheBound* run over
#    verbs.
#  SealedLanes.ALaneThatComes*, TlsLanes.ALaneThatComes*, SealedLanes.AReplayed*:
#    raw tcp peers (a recorded verbs connect request is VerbsLoop's).
#  Reopen.*: the session token across faults, on the control channel.
#  Behind.*: rpmemd's mark of a pool behind its master, with raw requests
#    that offer tcp (the subject is the control channel). RunAheadCut.*
#    runs: over verbs its link is the wire of VerbsCut.*.
#  TlsPolicy.*: the TLS policy of the service's control channel (protocol
#    versions, ciphers, names, CRLs), which no data transport touches; the
#    service's sessions over verbs run in Service.*. For the same reason the
#    service's refusals before any lane (no certificate, another CA's on
#    either side, no pool set directory).
#  ServiceCrowd.*, ServiceAtSoftLimit.*, ServiceFlood.*, ServiceWith*: crowds on the
#    service's TCP control port and on tcp data ports, hundreds of pools:
#    they test what the tcp side spends, and would not fit the guest's RAM
#    and TCG's time.
#  The service's dealings with systemd (readiness, its status line, socket
#    activation, a notification socket nobody reads), its status channel's
#    bad requests and refusal counts, metrics over HTTP, a remove through
#    ssh and mutated create requests: their subject is the control channel,
#    the same whatever carries the lanes (ServiceStatus.ShowsWhatEachClient
#    DidAndTheMetricsCountIt, the lanes' counters, runs).
exclude='HostileDaemon\.|Stranger\.|NetCut\.|Blip\.|Service\.ARestart(WithSixtyFour|DuringWhichAnother)|ALaneThatComesBack|SealedLanes\.AReplayed|Reopen\.|Behind\.|TlsPolicy\.|ServiceCrowd\.|ServiceAtSoftLimit\.|ServiceFlood\.|ServiceWith'
exclude+='|Service\.(ClientWithoutCertificate|ClientCertificateFromAnotherCa|ServiceCertificateFromAnotherCa|ClientWithoutAPoolSetDirectory)'
exclude+='|Service\.(ReportsReadiness|TellsSystemd|TakesTheListeningSocket|ANotificationSocket)|ServiceStatus\.(BadRequests|CountsRefusals|TellsSystemd)|ServiceMetricsTcp\.|ServiceUnderSystemd\.|ServiceStatusGroup\.|RealSsh\.RemoveRuns|HostileClient\.RandomlyMutated'
failed=()
for pools in ${RPMEM_RDMA_POOLS:-tmpfs disk fsdax}; do
  args=() dir=/tmp setup="" select=() medium=""
  case $pools in
    tmpfs) ;;
    disk)
      truncate -s 2G "$tmp/disk.img"
      mkfs.ext4 -q -F "$tmp/disk.img"
      args+=(--disk "$tmp/disk.img")
      setup="mount /dev/vda /mnt && mkdir -p /mnt/pools &&" dir=/mnt/pools
      select=(-R "$vm_media_tests") ;;
    fsdax)
      args+=(--pmem 1536 --pmem-mode fsdax) dir=/mnt/pmem medium=pmem
      select=(-R "$vm_media_tests") ;;
    *) echo "test-rdma: RPMEM_RDMA_POOLS: unknown '$pools' (tmpfs, disk, fsdax)"; exit 2 ;;
  esac
  echo "=== test rdma (verbs on soft-RoCE in a VM; tcp disabled; pools on $pools)"
  rc=0
  "$vm" --timeout "${RPMEM_RDMA_VM_TIMEOUT:-1500}" --mem 3072 "${args[@]}" \
    --env RPMEM_TEST_TRANSPORT=verbs --env RPMEM_ENABLE_SOCKETS=0 --env RPMEM_TEST_DIR="$dir" \
    --env RPMEM_TEST_MEDIUM="$medium" \
    -- sh -c "$setup exec ctest --test-dir '$build' --output-on-failure --timeout 300 --no-tests=error -L 'loopback|rdma' -E '$exclude' ${select[*]:+${select[0]} '${select[1]}'}" ||
    rc=$?
  rm -f "$tmp/disk.img"
  [ $rc = 0 ] || failed+=("$pools (status $rc)")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-rdma: FAILED with pools on: ${failed[*]}"
  exit 1
fi
