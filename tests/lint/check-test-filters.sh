#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# No pass of the suite names tests that do not exist: each positive pattern
# of every gtest_discover_tests TEST_FILTER (tests/CMakeLists.txt's
# rpmem_discover_tests records them) must match at least one test of its
# binary. A pattern that matches nothing (a suite renamed, a parameterized
# suite's prefix forgotten: "Restart.*" for "Signals/Restart.*") would make
# a pass run less than it says, silently.
#   tests/lint/check-test-filters.sh BINARY FILTER [BINARY FILTER ...]
set -uo pipefail
bad=0
checked=0
while [ $# -ge 2 ]; do
  binary=$1 filter=$2
  shift 2
  positive=${filter%%-*}  # gtest: the patterns before the first '-'
  IFS=: read -r -a patterns <<<"$positive"
  for p in "${patterns[@]}"; do
    [ -n "$p" ] || continue
    checked=$((checked + 1))
    n=$("$binary" --gtest_list_tests --gtest_filter="$p" 2>/dev/null | grep -c '^  ')
    if [ "${n:-0}" -eq 0 ]; then
      echo "check-test-filters: '$p' (in the filter '$filter' of $(basename "$binary")) matches no test"
      bad=1
    fi
  done
done
[ $bad = 0 ] && echo "check-test-filters: $checked patterns, each matches a test"
exit $bad
