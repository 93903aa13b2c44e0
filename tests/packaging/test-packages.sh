#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages, end to end, on this machine:
#   tests/packaging/test-packages.sh BUILD_DIR
# configures BUILD_DIR for /usr, builds, runs cpack; installs librpmem1,
# librpmem-dev and rpmemd with dpkg -i; checks the installed files; compiles
# hello.c with `pkg-config --cflags --libs librpmem` and with a CMake project
# that uses find_package(librpmem); runs both against the installed
# /usr/bin/rpmemd (through tools/local-ssh) and checks the bytes in the part
# file; runs systemd-analyze verify on the installed units; then purges the
# packages (and the rpmemd user, if it was created here). Needs root or sudo;
# skips (exit 0) when it has neither, or when these packages are already
# installed (it does not touch a machine's own installation).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(realpath -m "$1")
packages=(rpmemd librpmem-dev librpmem1)

say() { echo "=== packaging: $*"; }
skip() { echo "=== packaging: SKIPPED: $*"; exit 0; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null || skip "needs root or password-less sudo"
  sudo="sudo -n"
fi
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
    skip "$p is already installed on this machine"
  fi
done
if [ -e /etc/rpmemd/rpmemd.conf ]; then
  skip "/etc/rpmemd/rpmemd.conf exists and belongs to no package of ours"
fi

say "build and cpack in $build"
cmake -S "$top" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr -DRPMEM_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j2 >/dev/null
rm -f "$build"/packages/*.deb
(cd "$build" && cpack -G DEB >/dev/null)
debs=("$build"/packages/*.deb)
[ ${#debs[@]} -eq 3 ] || { echo "expected 3 packages, got: ${debs[*]}" >&2; exit 1; }
for d in "${debs[@]}"; do
  echo "$(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done

tmp=$(mktemp -d /tmp/rpmem-pkgtest.XXXXXX)
chmod 755 "$tmp"
user_existed=0
getent passwd rpmemd >/dev/null && user_existed=1
installed=0
cleanup() {
  local rc=$?
  if [ $installed -eq 1 ]; then
    say "purge the packages"
    $sudo dpkg -P "${packages[@]}" >/dev/null || rc=1
    for f in /usr/bin/rpmemd /usr/include/librpmem.h /etc/rpmemd/rpmemd.conf \
             /lib/systemd/system/rpmemd.service; do
      [ ! -e "$f" ] || { echo "left behind: $f" >&2; rc=1; }
    done
    if [ $user_existed -eq 0 ] && getent passwd rpmemd >/dev/null; then
      $sudo userdel rpmemd >/dev/null 2>&1 || true
      getent group rpmemd >/dev/null && { $sudo groupdel rpmemd >/dev/null 2>&1 || true; }
    fi
  fi
  rm -rf "$tmp"
  [ $rc -eq 0 ] && say "PASSED" || say "FAILED"
  exit $rc
}
trap cleanup EXIT

say "dpkg -i"
installed=1
if ! $sudo dpkg -i "${debs[@]}"; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -f install -y -qq >/dev/null
fi
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" | grep -q "install ok installed" \
    || { echo "$p is not installed" >&2; exit 1; }
done
libdir=$(pkg-config --variable=libdir librpmem)
for f in /usr/bin/rpmemd /usr/include/librpmem.h "$libdir/librpmem.so.1" "$libdir/librpmem.so" \
         "$libdir/cmake/librpmem/librpmemConfig.cmake" /etc/rpmemd/rpmemd.conf \
         /lib/systemd/system/rpmemd.service /lib/systemd/system/rpmemd.socket \
         /usr/lib/sysusers.d/rpmemd.conf; do
  [ -e "$f" ] || { echo "missing after install: $f" >&2; exit 1; }
done
dpkg-query -W -f='${Conffiles}\n' rpmemd | grep -q /etc/rpmemd/rpmemd.conf \
  || { echo "/etc/rpmemd/rpmemd.conf is not a conffile" >&2; exit 1; }
getent passwd rpmemd >/dev/null || { echo "the postinst did not create user rpmemd" >&2; exit 1; }
if command -v man >/dev/null; then
  for page in librpmem rpmem_create rpmem_open rpmem_persist rpmem_drain rpmem_errormsg rpmemd; do
    man -w "$page" >/dev/null 2>&1 || { echo "no man page for $page" >&2; exit 1; }
  done
fi
/usr/bin/rpmemd --version

say "compile hello.c with pkg-config"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/hello" "$top/tests/packaging/hello.c" \
  $(pkg-config --cflags --libs librpmem)
used=$(ldd "$tmp/hello" | awk '$1 == "librpmem.so.1" { print $3 }')
[ -n "$used" ] && [ "$(readlink -f "$used")" = "$(readlink -f "$libdir/librpmem.so.1")" ] \
  || { echo "hello does not use the installed library:" >&2; ldd "$tmp/hello" >&2; exit 1; }

say "compile hello.c with find_package(librpmem)"
mkdir "$tmp/cmake"
cat > "$tmp/cmake/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.20)
project(hello_rpmem C)
find_package(librpmem 1.0 REQUIRED)
add_executable(hello "$top/tests/packaging/hello.c")
target_link_libraries(hello PRIVATE librpmem::rpmem)
EOF
cmake -S "$tmp/cmake" -B "$tmp/cmake/build" >/dev/null
cmake --build "$tmp/cmake/build" >/dev/null

say "run both against /usr/bin/rpmemd"
mkdir "$tmp/poolsets" "$tmp/parts"
cat > "$tmp/rpmemd.conf" <<EOF
poolset-dir = $tmp/poolsets
log-file = $tmp/rpmemd.log
log-level = info
EOF
for name in hello hello-cmake; do
  printf 'PMEMPOOLSET\n8M %s/parts/%s.part0\n' "$tmp" "$name" > "$tmp/poolsets/$name.set"
done
export RPMEM_SSH="$top/tools/local-ssh"
export RPMEM_CMD="/usr/bin/rpmemd -c $tmp/rpmemd.conf"
check_part() {  # name message
  local part="$tmp/parts/$1.part0" want="$2"
  [ "$(head -c 8 "$part")" = RPMEMPKG ] || { echo "$part: no pool header" >&2; exit 1; }
  local got
  got=$(dd if="$part" bs=1 skip=4096 count=${#want} status=none)
  [ "$got" = "$want" ] || { echo "$part: '$got' at 4096, want '$want'" >&2; exit 1; }
  echo "$part: '$got' at offset 4096"
}
"$tmp/hello" localhost hello.set "Hello from the librpmem1 package"
check_part hello "Hello from the librpmem1 package"
"$tmp/cmake/build/hello" localhost hello-cmake.set "Hello through find_package"
check_part hello-cmake "Hello through find_package"

if command -v systemd-analyze >/dev/null; then
  say "systemd-analyze verify"
  out=$(systemd-analyze verify /lib/systemd/system/rpmemd.service \
        /lib/systemd/system/rpmemd.socket 2>&1) || { echo "$out" >&2; exit 1; }
  # verify exits 0 on some problems; it prints them.
  if grep -E "rpmemd\.(service|socket)" <<<"$out"; then exit 1; fi
  echo "units verified"
else
  echo "=== packaging: systemd-analyze not found; the units were not verified"
fi
