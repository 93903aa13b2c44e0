#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_exports.sh <librpmem.so> -- the soname is librpmem.so.1, and the
# dynamic symbols it defines are exactly PMDK's 12 rpmem_* functions at the
# default version LIBRPMEM_1.0, plus that version node.
set -eu
lib=$1
fail=0

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ "$soname" != librpmem.so.1 ]; then
	echo "soname is '$soname', expected 'librpmem.so.1'" >&2
	fail=1
fi

expected=$(mktemp)
actual=$(mktemp)
trap 'rm -f "$expected" "$actual"' EXIT
{
	echo "A LIBRPMEM_1.0"
	for f in create open set_attr close remove flush drain persist \
		deep_persist read check_version errormsg; do
		echo "T rpmem_$f@@LIBRPMEM_1.0"
	done
} | LC_ALL=C sort >"$expected"
nm -D --defined-only --with-symbol-versions "$lib" 2>/dev/null |
	awk '{ print $(NF-1), $NF }' | LC_ALL=C sort >"$actual"
if ! diff -u "$expected" "$actual" >&2; then
	echo "exported symbols differ (- expected, + actual)" >&2
	fail=1
fi

# One version definition besides the base: LIBRPMEM_1.0.
defs=$(readelf -V "$lib" | sed -n '/\.gnu\.version_d/,/\.gnu\.version_r/p' |
	grep -v 'Flags: BASE' | sed -n 's/.*Name: \([^ ]*\).*/\1/p' | sort -u)
if [ "$defs" != LIBRPMEM_1.0 ]; then
	echo "version definitions: '$defs', expected 'LIBRPMEM_1.0'" >&2
	fail=1
fi

[ $fail -eq 0 ] && echo "librpmem exports: OK"
exit $fail
