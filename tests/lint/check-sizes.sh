#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The code stays readable: no .cc file of common/, librpmem/ or rpmemd/ over
# 450 lines, no function in one over 80 lines (its signature and braces
# included), and every file opens with a comment that says what it owns.
# A function is what starts at column 0 and whose body ends with a '}' at
# column 0 (the layout .clang-format gives).
#   tests/lint/check-sizes.sh [TOP]
set -uo pipefail
top=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top" || exit 2
max_file=450
max_fn=80
bad=0
while IFS= read -r f; do
  n=$(wc -l <"$f")
  if [ "$n" -gt $max_file ]; then
    echo "check-sizes: $f has $n lines, more than $max_file"
    bad=1
  fi
  if ! sed -n 2p "$f" | grep -q '^//'; then
    echo "check-sizes: $f does not open with a comment that says what it owns"
    bad=1
  fi
  out=$(awk -v max=$max_fn -v file="$f" '
    function report() {
      if (NR - start + 1 > max) printf "check-sizes: %s:%d: a function of %d lines, more than %d\n", file, start, NR - start + 1, max
    }
    infn {
      if ($0 ~ /^}/) { report(); infn = 0 }
      next
    }
    /^(namespace|class|struct|enum|union|using|extern|template|typedef|#|\/\/|}|$|[ \t])/ {
      if (cand && $0 ~ /^[ \t]/) {
        if ($0 ~ /\{[ \t]*$/) { infn = 1; cand = 0 }
        else if ($0 ~ /;[ \t]*$/) cand = 0
      } else if ($0 !~ /^[ \t]/) cand = 0
      next
    }
    {
      start = NR; cand = 1
      if ($0 ~ /\{[ \t]*$/) { infn = 1; cand = 0 }
      else if ($0 ~ /;[ \t]*$/) cand = 0
    }' "$f")
  if [ -n "$out" ]; then
    echo "$out"
    bad=1
  fi
done < <(git ls-files 'common/*.cc' 'librpmem/*.cc' 'rpmemd/*.cc' 2>/dev/null || find common librpmem rpmemd -name '*.cc')
[ $bad = 0 ] && echo "check-sizes: common/, librpmem/, rpmemd/: files and functions within bounds"
exit $bad
