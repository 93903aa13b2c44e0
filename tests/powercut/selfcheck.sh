#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The power-cut test's client and verifier without a VM or a cut: the client
# runs a short schedule against a local rpmemd (through the ssh stand-in,
# over tcp) and closes the pool; the verifier must find every byte, and must
# find the bytes that are then zeroed in a copy of a part.
#   selfcheck.sh CLIENT VERIFY RPMEMD LOCAL_SSH
set -euo pipefail
client=$1 verify=$2 rpmemd=$3 ssh=$4
d=$(mktemp -d /tmp/rpmem-powercut-selfcheck.XXXXXX)
trap 'rm -rf "$d"' EXIT
mkdir "$d/sets"
printf 'PMEMPOOLSET\n2097152 %s/a.part\n2097152 %s/b.part\n' "$d" "$d" >"$d/sets/pc.set"
printf 'poolset-dir = %s/sets\nlog-file = %s/rpmemd.log\nlog-level = info\n' "$d" "$d" \
  >"$d/rpmemd.conf"
RPMEM_SSH=$ssh RPMEM_CMD="exec $rpmemd -c $d/rpmemd.conf" RPMEM_ENABLE_VERBS=0 \
  "$client" 127.0.0.1 pc.set 7 4 150 >"$d/out.log" || { tail "$d/out.log" "$d/rpmemd.log"; exit 1; }
grep -qx 'done' "$d/out.log"
"$verify" "$d/out.log" "$d/a.part" "$d/b.part"
# 64 zero bytes at part 1's offset 4096 + 1 MiB: inside lane 2's region.
cp "$d/b.part" "$d/b2.part"
dd if=/dev/zero of="$d/b2.part" bs=64 count=1 seek=$(((4096 + 1048576) / 64)) conv=notrunc 2>/dev/null
rc=0
"$verify" "$d/out.log" "$d/a.part" "$d/b2.part" >"$d/lost.log" || rc=$?
cat "$d/lost.log"
[ $rc = 1 ] && grep -q "lost [1-9]" "$d/lost.log" || exit 1
# A visible pool, every 4th step persistent: after the close every byte is
# there, the visible ones checked as persistent (a bound of 0 ms).
rm -f "$d"/a.part "$d"/b.part
RPMEM_SSH=$ssh RPMEM_CMD="exec $rpmemd -c $d/rpmemd.conf" RPMEM_ENABLE_VERBS=0 \
  RPMEM_DURABILITY=visible "$client" 127.0.0.1 pc.set 8 4 150 4 >"$d/vis.log" ||
  { tail "$d/vis.log" "$d/rpmemd.log"; exit 1; }
grep -q '^ack [0-9]* [0-9]* v ' "$d/vis.log" && grep -q '^ack [0-9]* [0-9]* p ' "$d/vis.log"
"$verify" "$d/vis.log" "$d/a.part" "$d/b.part" 0 | tee "$d/vis-verify.log"
grep -q "visible acknowledgements: [1-9]" "$d/vis-verify.log"
