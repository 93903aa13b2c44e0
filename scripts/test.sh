#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite: install what the build needs, build with warnings as
# errors, run every test (unit, ABI, loopback integration with real rpmemd
# processes and a private sshd), then the same under ASan+UBSan and TSan.
#   scripts/test.sh            everything
#   scripts/test.sh --quick    the developer build only
# The suites that need a kernel of their own (verbs on soft-RoCE,
# persistent memory, power cuts) boot the project's VM (tests/vm/run); when it
# cannot boot they fail. RPMEM_SKIP_VM=1 skips them on purpose, and the last
# line then says which were skipped.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

"$top/scripts/deps.sh"
export RPMEM_SKIP_REPORT
RPMEM_SKIP_REPORT=$(mktemp /tmp/rpmem-skipped.XXXXXX)
trap 'rm -f "$RPMEM_SKIP_REPORT"' EXIT

part() {  # runs a part of the suite and says how long it took
  local t0=$SECONDS
  "$@"
  echo "=== $(basename "$1") took $((SECONDS - t0)) s (at $((SECONDS / 60)) min)"
}

run_suite() {  # name, cmake options...
  local dir="$top/build-$1"
  shift
  echo "=== build $(basename "$dir") $*"
  cmake -S "$top" -B "$dir" -DRPMEM_DEVELOPER_MODE=ON "$@" >/dev/null
  cmake --build "$dir" -j2
  echo "=== test $(basename "$dir")"
  # shellcheck disable=SC2086 # CTEST_ARGS: words
  ctest --test-dir "$dir" --output-on-failure -j2 --timeout 300 ${CTEST_ARGS:-}
  echo "=== $(basename "$dir"): built and tested at $((SECONDS / 60)) min"
}

run_suite dev -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ $quick -eq 0 ]; then
  if [ "${RPMEM_SKIP_VM:-0}" = 1 ]; then
    echo "vm-selftest: SKIPPED (RPMEM_SKIP_VM=1)"
    echo vm-selftest >>"$RPMEM_SKIP_REPORT"
  else
    # The VM harness itself: the cases that no suite below boots a VM for
    # (the power cut, the NVDIMM's fsdax and devdax and CXL's are the
    # suites' own; tests/vm/selftest runs them all).
    part "$top/tests/vm/selftest" status-output timeout share pmem-raw cxl-raw
  fi
  part "$top/scripts/test-rdma.sh" "$top/build-dev"  # verbs on soft-RoCE in a VM
  part "$top/scripts/test-pmem.sh" "$top/build-dev"  # pools on emulated NVDIMMs: fsdax, devdax
  part "$top/scripts/test-powercut.sh" "$top/build-dev"  # power cuts of a VM target, tcp and verbs
  # Figures, not assertions: persists/s and p99 over a lossy link (netem in a
  # VM: 2 % lost, 1 ms, 5 % reordered) and the same link without loss.
  RPMEM_LOSSY_ROUNDS=1 part "$top/scripts/bench-lossy.sh" "$top/build-dev"
  part "$top/tests/packaging/test-packages.sh" "$top/build-pkg"
  # Under the sanitizers the integration suite runs once, with cleartext
  # lanes (its TLS- and sealed-lane tests, tls_lanes_test.cc and the
  # service's, are in it); the whole suite over TLS lanes (-L tls-lanes) and
  # over sealed lanes (-L sealed-lanes) runs in the dev build, as does the
  # pass of visible pools (-L visible). So do the
  # outages that are mostly a wait (a create during one, 20 s of one
  # thread's connect timeout; the 10 s ones: the 4 s outage and the resets
  # take the same code paths here) and the
  # benchmarks' smoke runs. Line tables (-g1) are all a sanitizer's report
  # needs, and build faster.
  san_args="-LE tls-lanes|sealed-lanes|visible -E Blip\.(ACreateDuringAnOutage|TenSeconds)|^bench\."
  CTEST_ARGS=$san_args ASAN_OPTIONS=detect_leaks=1 run_suite asan \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 \
    "-DRPMEM_SANITIZE=address,undefined"
  CTEST_ARGS=$san_args TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    run_suite tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 \
    -DRPMEM_SANITIZE=thread
  part "$top/scripts/fuzz.sh" "${RPMEM_FUZZ_SECONDS:-6}"
fi
if [ -s "$RPMEM_SKIP_REPORT" ]; then
  echo "scripts/test.sh: SKIPPED on purpose (RPMEM_SKIP_VM=1), so NOT tested: $(tr '\n' ' ' <"$RPMEM_SKIP_REPORT")"
fi
