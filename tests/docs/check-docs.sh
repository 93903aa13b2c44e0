#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The docs stay readable: README.md within 200 lines, docs/performance.md
# within 300, and every relative link of README.md and docs/*.md resolves.
#   tests/docs/check-docs.sh [TOP]
set -uo pipefail
top=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
bad=0
limit() {  # limit FILE LINES
  local n
  n=$(wc -l <"$top/$1")
  if [ "$n" -gt "$2" ]; then
    echo "check-docs: $1 has $n lines, more than $2"
    bad=1
  fi
}
limit README.md 200
limit docs/performance.md 300
for f in "$top/README.md" "$top"/docs/*.md; do
  # Inline links [text](target): relative targets, without their #anchor.
  while IFS= read -r target; do
    case $target in http://* | https://* | mailto:* | '#'*) continue ;; esac
    path=${target%%#*}
    if [ ! -e "$(dirname "$f")/$path" ]; then
      echo "check-docs: ${f#"$top"/}: the link '$target' leads nowhere"
      bad=1
    fi
  done < <(grep -o '\]([^)]*)' "$f" | sed 's/^](//; s/)$//')
done
[ $bad = 0 ] && echo "check-docs: README.md, docs/: lengths and links ok"
exit $bad
