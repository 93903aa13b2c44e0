#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The loopback and rdma tests over the verbs provider, for real, on soft-RoCE
# (rdma_rxe) in a throw-away VM (../shared/tools/rdma-vm), with tcp disabled
# so that nothing silently falls back to it.
#   scripts/test-rdma.sh [BUILD_DIR]     default: build-dev
# Skips (exit 0, with a reason) when BUILD_DIR has no verbs provider or the
# VM tool is not there. RPMEM_SHARED overrides where shared/ is.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build-dev}" && pwd -P)
shared=${RPMEM_SHARED:-$top/../shared}
vm="$shared/tools/rdma-vm/run-in-rdma-vm"

if [ ! -f "$vm" ]; then
  echo "test-rdma: SKIPPED: no $vm (the shared/ folder beside the checkout)"
  exit 0
fi
if ! ldd "$build/rpmemd" 2>/dev/null | grep -q librdmacm; then
  echo "test-rdma: SKIPPED: $build was built without the verbs provider (RPMEM_WITH_VERBS)"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$top/scripts/vm-qemu.sh"
use_tcg_if_kvm_fails "$vm" "$tmp" test-rdma

# Only what the tests need goes into the guest (its RAM holds the copies):
# ctest's files, the test programs, rpmemd and the ssh stand-in. The tool
# adds the shared libraries they load.
copies=(--copy "$top/tools/local-ssh" --copy "$build/rpmemd")
while IFS= read -r f; do copies+=(--copy "$f"); done < <(
  find "$build" \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) \
    -not -path '*/CMakeFiles/*')
for t in tests/integration/integration_tests tests/integration/secure_env_probe \
  tests/rdma/rdma_tests; do
  [ -x "$build/$t" ] && copies+=(--copy "$build/$t")
done

# Not run over verbs, and why:
#  HostileDaemon.*: fake daemons written for the tcp provider offer only tcp,
#    so with tcp disabled every case ends in ENOMEDIUM before the fault.
#  Stranger.*: a raw TCP stranger on the data port; over verbs there is no
#    TCP data port (tests/rdma covers strangers on rdma_cm).
#  NetCut.*: a veth pair into a network namespace; rxe only works in the
#    VM's initial namespace (the VM tool's README), so rpmemd cannot listen there.
#  Errno.UnreadablePoolSetIsEacces: runs rpmemd as 'nobody'; the VM has no
#    user database.
#  ServiceCrowd.*, ServiceAtSoftLimit.*, ServiceWith*: crowds on the
#    service's TCP control port and on tcp data ports, hundreds of pools:
#    they test what the tcp side spends, and would not fit the guest's RAM
#    and TCG's time.
exclude='HostileDaemon\.|Stranger\.|NetCut\.|Errno\.UnreadablePoolSetIsEacces|ServiceCrowd\.|ServiceAtSoftLimit\.|ServiceWith'
echo "=== test rdma (verbs on soft-RoCE in a VM; tcp disabled)"
bash "$vm" --timeout "${RPMEM_RDMA_VM_TIMEOUT:-1500}" --mem 2048 "${copies[@]}" \
  --env RPMEM_TEST_TRANSPORT=verbs --env RPMEM_ENABLE_SOCKETS=0 \
  -- ctest --test-dir "$build" --output-on-failure --timeout 300 -L 'loopback|rdma' -E "$exclude"
