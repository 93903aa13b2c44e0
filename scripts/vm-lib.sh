# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# Sourced by the scripts that run suites in the project's VM (tests/vm/run):
# test-rdma.sh, test-powercut.sh, test-pmem.sh, bench-rdma.sh.
#   vm_ready NAME   returns 0 when the VM can boot here. With RPMEM_SKIP_VM=1
#                   it says NAME was skipped (and adds a line to
#                   $RPMEM_SKIP_REPORT, which scripts/test.sh prints at its
#                   end) and returns 1: the caller then exits 0. When the VM
#                   cannot boot (no QEMU, no kernel image) it says what to
#                   install and exits 1: a suite that cannot run has failed.
vm="$top/tests/vm/run"
vm_ready() {
  if [ "${RPMEM_SKIP_VM:-0}" = 1 ]; then
    echo "$1: SKIPPED (RPMEM_SKIP_VM=1): nothing of it ran"
    [ -n "${RPMEM_SKIP_REPORT:-}" ] && echo "$1" >>"$RPMEM_SKIP_REPORT"
    return 1
  fi
  if ! "$vm" --check; then
    echo "$1: FAILED: the VM cannot boot here (above: what is missing; scripts/deps.sh installs it)."
    echo "$1: RPMEM_SKIP_VM=1 skips the VM suites on purpose."
    exit 1
  fi
}
# vm_verbs_build NAME BUILD: a build without the verbs provider cannot run
# the verbs suites: a failure, not a skip.
vm_verbs_build() {
  # Not `ldd | grep -q`: under pipefail, grep's early exit can fail the pipe.
  case $(ldd "$2/rpmemd" 2>/dev/null) in
    *librdmacm*) return 0 ;;
  esac
  echo "$1: FAILED: $2 was built without the verbs provider (libibverbs-dev and librdmacm-dev; RPMEM_WITH_VERBS)"
  exit 1
}
# vm_tmp NAME: tmp, a new directory /tmp/rpmem-NAME.XXXXXX, removed on exit.
vm_tmp() {
  # shellcheck disable=SC2034 # used by the scripts that source this file
  tmp=$(mktemp -d "/tmp/rpmem-$1.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
}
# vm_start NAME BUILD_DIR: build, the physical path of BUILD_DIR; vm_ready
# (exits 0 when it says no), vm_verbs_build; and vm_tmp.
vm_start() {
  build=$(cd "$2" && pwd -P)
  vm_ready "$1" || exit 0
  vm_verbs_build "$1" "$build"
  vm_tmp "$1"
}
# The integration tests whose subject is the pool's medium (the data path,
# the pool files, the daemon's persist): what runs again with the pools on
# another medium. The others (the service, its TLS policy, the private
# sshd, the caps) test the control channel, the same on every medium.
# shellcheck disable=SC2034 # used by the scripts that source this file
vm_media_tests='^(Replication|Errno|Faults|Loss|Soak|Words|Apm|FullFs|HostileClient|HostileLane|SshDeath|Durability)\.'
