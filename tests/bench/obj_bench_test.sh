#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rpmem-obj-bench against a real rpmemd (through
# tools/rpmem-obj-bench/run-local.sh): every case comes out for both pool
# sets with figures above zero; the replica's transactions went through
# librpmem (counted by the counting librpmem.so.1) and the local-only pool's
# did not; the target's part file, opened alone, is a consistent libpmemobj
# pool whose hash maps hold the values they should.
# Figures are not checked: this is not a timed test.
#   usage: obj_bench_test.sh BUILD_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
# On tmpfs, as run-local.sh's default: on a disk libpmemobj's msync per
# persist would be all the test measures.
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
work=$(mktemp -d "$shm/rpmem-obj-bench-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
export RPMEM_OBJ_BENCH_DIR=$work RPMEM_OBJ_BENCH_POOL=32M
fail() { echo "FAIL: $*" >&2; exit 1; }

common=(-t 1,2 -s 64,4K -k 32 -d 0.3 -w 0.05)
"$top/tools/rpmem-obj-bench/run-local.sh" "$build" "${common[@]}" -f csv >"$work/out.csv" \
  2>"$work/err" || { cat "$work/err" >&2; fail "rpmem-obj-bench (csv) failed"; }
cat "$work/out.csv"
head -1 "$work/out.csv" | grep -q '^op,size,threads,config,tx_per_s,p50_us,p99_us,' ||
  fail "no CSV header"
rows=$(($(wc -l <"$work/out.csv") - 1))
[ "$rows" -eq 16 ] || fail "$rows CSV rows, expected 16"  # 2 ops, 2 sizes, 2 thread counts, 2 sets
for op in insert update; do
  for size in 64 4096; do
    for threads in 1 2; do
      for config in local-only replica; do
        grep -q "^$op,$size,$threads,$config," "$work/out.csv" ||
          fail "no row for $op $size B $threads threads $config"
      done
    done
  done
done
awk -F, 'NR > 1 {
    what = $1 " " $2 " B " $3 " threads " $4 ": "
    if ($11 != "") { print "FAIL: " what $11; bad = 1 }
    if (!($5 > 0) || !($6 > 0) || !($7 >= $6) || !($9 > 0)) {
      print "FAIL: " what "tx/s " $5 ", p50 " $6 ", p99 " $7 ", " $9 " transactions"; bad = 1
    }
    if ($4 == "replica") {
      if (!($8 > 0)) { print "FAIL: " what "no replica/local ratio"; bad = 1 }
      # every transaction persists to the replica
      if ($10 !~ /persist[a-z-]* [0-9.]+ \(<=/) { print "FAIL: " what "rpmem calls: " $10; bad = 1 }
    } else if ($10 != "none" || $8 != "") {
      print "FAIL: " what "a local-only pool made rpmem calls: " $10 " / " $8; bad = 1
    }
  }
  END { exit bad }' "$work/out.csv" >&2 || fail "bad CSV rows"

grep -Eq "^target part: [0-9]+ bytes, signature 'PMEMOBJ', pmempool check: consistent" \
  "$work/err" || { cat "$work/err" >&2; fail "the target's part file is not a consistent pool"; }
# 2 maps with 32 keys of each of the 2 sizes, and as many again inserted
entries=$(sed -n 's/^verified .*: 2 maps, \([0-9]*\) entries, 0 bad$/\1/p' "$work/err")
[ -n "$entries" ] && [ "$entries" -ge 128 ] ||
  { cat "$work/err" >&2; fail "the target's pool does not hold the maps"; }

"$top/tools/rpmem-obj-bench/run-local.sh" "$build" -t 1 -s 256 -o update -k 8 -d 0.2 -w 0 \
  >"$work/out.txt" 2>"$work/err" || { cat "$work/err" >&2; fail "rpmem-obj-bench (table) failed"; }
cat "$work/out.txt"
grep -Eq '^# librpmem .*librpmem\.so\.1 \(counted\); libpmemobj asked for [0-9]+ lanes, granted [0-9]+$' \
  "$work/out.txt" || fail "no lane line"
grep -Eq '^update +256 B +1 local-only +[0-9]+ ' "$work/out.txt" || fail "no local-only row"
grep -Eq '^update +256 B +1 replica +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x  persist' "$work/out.txt" ||
  fail "no replica row with its ratio and rpmem calls"
echo "PASS: $rows cases, the replica's transactions counted in librpmem, $entries entries verified on the target"
