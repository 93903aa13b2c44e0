#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job, start to finish: install what the build needs, build
# librpmem.so.1 and rpmemd, set up a target (a pool set directory and an
# rpmemd config in a temporary folder), replicate a pool to it through the
# local ssh stand-in, and show what landed in the remote part file.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}

"$top/scripts/deps.sh"
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target rpmem rpmemd rpmem-demo >/dev/null
echo "built: $(readlink -f "$build/librpmem.so.1") and $build/rpmemd"

work=$(mktemp -d /tmp/rpmem-demo.XXXXXX)
mkdir -p "$work/poolsets"
cat >"$work/poolsets/demo.set" <<SET
PMEMPOOLSET
# one 8 MiB part; the first 4 KiB hold the pool header
8M $work/demo.part0
SET
cat >"$work/rpmemd.conf" <<CONF
poolset-dir = $work/poolsets
log-file = $work/rpmemd.log
log-level = info
CONF

# What ssh would do on the target node: run rpmemd with this config.
export RPMEM_SSH="$top/tools/local-ssh"
export RPMEM_CMD="$build/rpmemd -c $work/rpmemd.conf"
echo
echo "== replicating to 127.0.0.1:demo.set (pool set directory $work/poolsets)"
"$build/tools/rpmem-demo" 127.0.0.1 demo.set "$work/local.img"

echo
echo "== the remote part file $work/demo.part0"
echo "pool header (first 64 bytes):"
od -A d -t x1z -N 64 "$work/demo.part0"
echo "message at offset 4096:"
od -A d -c -j 4096 -N 48 "$work/demo.part0"
if cmp -s <(tail -c +4097 "$work/local.img") <(tail -c +4097 "$work/demo.part0"); then
  echo "bytes 4096..8 MiB of the part file are identical to the local pool"
else
  echo "the part file DIFFERS from the local pool" >&2
  exit 1
fi
echo
echo "== rpmemd's log"
cat "$work/rpmemd.log"
echo
echo "(everything is in $work; remove it with: rm -rf $work)"
