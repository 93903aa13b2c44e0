#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rpmem-bench against a real rpmemd (through tools/rpmem-bench/run-local.sh):
# every case it was asked for comes out, without an error, with its raw TCP
# equivalents (raw-rr, which waits as the transport does, and raw-rr-block),
# CPU per call of the client and the daemon, encrypted lanes against the
# machine's limit (--data-tls),
# persist on one lane of a pool with more lanes open (--wide-lanes) against
# one-lane persist, and the lane-scaling summary; and librpmem makes no
# allocation in any data-path call (the benchmark counts them; sanitized
# builds cannot).
# Figures are not checked: this is not a timed test.
#   usage: bench_test.sh BUILD_DIR SANITIZE
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
sanitize=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RPMEM_BENCH_DIR=$work RPMEM_BENCH_POOL=16M
fail() { echo "FAIL: $*" >&2; exit 1; }

ops=persist,relaxed,deep,flush,read
common=(-o "$ops" -b 64,4K,1M -l 1,2 -n 40 -w 0 -S 12M --wide-lanes 8 --no-progress)
"$top/tools/rpmem-bench/run-local.sh" "$build" "${common[@]}" -f csv >"$work/out.csv" \
  2>"$work/err" || { cat "$work/err" >&2; fail "rpmem-bench (csv) failed"; }
"$top/tools/rpmem-bench/run-local.sh" "$build" "${common[@]}" >"$work/out.txt" \
  2>"$work/err" || { cat "$work/err" >&2; fail "rpmem-bench (table) failed"; }

head -1 "$work/out.csv" | grep -q '^case,size,lanes,p50_us,' || fail "no CSV header"
rows=$(($(wc -l <"$work/out.csv") - 1))
# 5 operations and 3 raw cases, 3 sizes, 2 lane counts; persist-wide, 3 sizes
[ "$rows" -eq 51 ] || fail "$rows CSV rows, expected 51"
for size in 64 4096 1048576; do
  awk -F, -v size="$size" '$1 == "persist-wide" && $2 == size && $3 == 1 && $16 > 0 { ok = 1 }
    END { exit !ok }' "$work/out.csv" ||
    fail "no persist-wide row for $size B compared with 1-lane persist"
done
for op in persist persist-relaxed deep-persist flush+drain read raw-rr raw-rr-block raw-stream; do
  for size in 64 4096 1048576; do
    for lanes in 1 2; do
      grep -q "^$op,$size,$lanes," "$work/out.csv" || fail "no row for $op $size B $lanes lanes"
    done
  done
done
awk -F, -v sanitize="$sanitize" 'NR > 1 {
    if ($14 != "") { print "FAIL: " $1 " " $2 " B " $3 " lanes: " $14; bad = 1 }
    if ($7 <= 0) { print "FAIL: " $1 " " $2 " B " $3 " lanes: " $7 " calls/s"; bad = 1 }
    if ($1 == "persist" && $2 < 65536 && !($11 > 0 && $15 > 0)) {
      print "FAIL: " $1 " " $2 " B " $3 " lanes: not compared with raw-rr and raw-rr-block"; bad = 1
    }
    if ($1 ~ /^(persist|read)$/ && !($17 > 0 && $18 > 0)) {
      print "FAIL: " $1 " " $2 " B " $3 " lanes: no CPU per call of the client and the daemon"; bad = 1
    }
    if ($1 !~ /^raw/ && sanitize == "" && $10 != "0.000") {
      print "FAIL: " $1 " " $2 " B " $3 " lanes: " $10 " allocations per call"; bad = 1
    }
  }
  END { exit bad }' "$work/out.csv" >&2 || fail "bad CSV rows"

grep -q '^lane scaling: calls/s' "$work/out.txt" || fail "no lane-scaling summary"
grep -q '^CPU per call (us)' "$work/out.txt" || fail "no CPU-per-call summary"
# --data-tls: the encrypted lanes from 64 KiB are set against the limit of
# the machine (cleartext's CPU per call and raw-seal's, over the CPUs).
"$top/tools/rpmem-bench/run-local.sh" "$build" -o persist,read -b 1M -l 1 -n 20 -w 0 -S 12M \
  --data-tls --no-progress -f csv >"$work/tls.csv" 2>"$work/err" ||
  { cat "$work/err" >&2; fail "rpmem-bench --data-tls failed"; }
for op in persist-sealed read-sealed persist-tls read-tls; do
  awk -F, -v op="$op" '$1 == op && $19 > 0 { ok = 1 } END { exit !ok }' "$work/tls.csv" ||
    fail "$op 1 MiB is not set against the limit"
done
grep -Eq '^persist +1 MiB +[0-9]+ +[0-9]+ [0-9]+\.[0-9]{2} \[[01]/1\]$' "$work/out.txt" \
  || fail "no scaling row for persist 1 MiB"
grep -Eq '^persist +64 B +1 .* raw rr p50 [0-9.]+ us +[0-9.]+x p50$' "$work/out.txt" \
  || fail "persist 64 B is not compared with raw rr"
grep -Eq '^persist-wide +64 B +1 .* persist 1-lane p50 [0-9.]+ us +[0-9.]+x p50$' "$work/out.txt" \
  || fail "persist-wide 64 B is not compared with 1-lane persist"
grep -Eq '^# wide +127\.0\.0\.1:bench-wide\.set, created, 8 lanes asked, [1-8] granted;' \
  "$work/out.txt" || fail "no line on the wide pool's lanes"
# --start-at: the first case measures from that wall-clock time on (its
# warm-up lasts until then), and fails when it is ready only later.
raw=(-o persist -b 64 -d 0.2 -w 0 --raw-only -f csv --no-progress)
t0=$(date +%s.%N)
"$build/tools/rpmem-bench" "${raw[@]}" --start-at "$(awk -v t="$t0" 'BEGIN { printf "%.3f", t + 1.5 }')" \
  >"$work/at.csv" 2>"$work/err" || { cat "$work/err" >&2; fail "rpmem-bench --start-at failed"; }
awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { exit !(t1 - t0 >= 1.5) }' ||
  fail "--start-at 1.5 s ahead: the run did not wait for it"
awk -F, 'NR == 2 && $1 == "raw-rr" && $14 == "" && $7 > 0 { ok = 1 } END { exit !ok }' "$work/at.csv" ||
  fail "--start-at 1.5 s ahead: no measured raw-rr row"
"$build/tools/rpmem-bench" "${raw[@]}" --start-at "$(awk -v t="$t0" 'BEGIN { printf "%.3f", t - 1 }')" \
  >"$work/late.csv" 2>"$work/err" || true
grep -q '^raw-rr,64,1,.*ready after --start-at' "$work/late.csv" ||
  fail "--start-at in the past: raw-rr did not fail as ready too late"
echo "PASS: $rows cases, no allocation per call${sanitize:+ (not counted under $sanitize)}; --start-at"
