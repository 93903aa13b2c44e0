#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the libFuzzer targets with clang under ASan+UBSan (build-fuzz) and
# runs each for a bounded time, starting from the committed corpus in
# tests/fuzz/corpus/<target>/ (new inputs go to build-fuzz/corpus/, so the
# committed corpus stays small). Fails on any crash, leak or UBSan report.
#   scripts/fuzz.sh [seconds-per-target]     (default 20)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
dir="$top/build-fuzz"
targets=(control data poolset config target pool_hdr sealed)

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found" >&2; exit 1; }
echo "=== build $(basename "$dir") (clang, fuzzer + address,undefined)"
CC=clang CXX=clang++ cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRPMEM_BUILD_FUZZERS=ON "-DRPMEM_SANITIZE=address,undefined,fuzzer-no-link" >/dev/null
cmake --build "$dir" -j2 --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
mkdir -p "$dir/artifacts"
# Two targets at a time (each runs on one CPU): the same time for each, half
# the wall time.
fuzz_one() {  # target: its log, and its status in $dir/status_<target>
  local t=$1 work="$dir/corpus/$1" rc=0
  mkdir -p "$work"
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
    "$work" "$top/tests/fuzz/corpus/$t" >"$dir/fuzz_$t.log" 2>&1 || rc=$?
  echo $rc >"$dir/status_$t"
}
rm -f "$dir"/status_*
running=()
for t in "${targets[@]}"; do
  echo "=== fuzz_$t for ${secs}s"
  fuzz_one "$t" &
  running+=($!)
  if [ ${#running[@]} -ge 2 ]; then
    wait "${running[0]}"
    running=("${running[@]:1}")
  fi
done
wait
failed=()
for t in "${targets[@]}"; do
  if [ "$(cat "$dir/status_$t")" != 0 ]; then
    failed+=("$t")
    tail -n 40 "$dir/fuzz_$t.log"
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added)|^#[0-9]+ *DONE' "$dir/fuzz_$t.log" \
    | sed "s/^/  $t: /" || true
  echo "  $t: corpus $(ls "$dir/corpus/$t" | wc -l) inputs"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failures in: ${failed[*]} (artifacts in $dir/artifacts)" >&2
  exit 1
fi
echo "fuzz.sh: no crashes, no leaks"
