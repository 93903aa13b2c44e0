#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages, end to end, on this machine:
#   tests/packaging/test-packages.sh WORK_DIR
# copies the source tree to WORK_DIR/rpmem (dpkg-buildpackage writes the
# packages to the parent of the tree, so everything stays in WORK_DIR);
# checks the Build-Depends with apt-get build-dep; builds librpmem1,
# librpmem-dev and rpmemd (+ -dbgsym) with `dpkg-buildpackage -us -uc -b`;
# fails on any lintian error or warning; installs the packages with apt;
# checks the installed files, the conffile, the units (installed, not
# enabled), the rpmemd system user, the ldconfig trigger and the symbols
# file; compiles hello.c with `pkg-config --cflags --libs librpmem` and with
# a CMake project that uses find_package(librpmem); runs both against the
# installed /usr/bin/rpmemd (through tools/local-ssh) and checks the bytes in
# the part file; runs systemd-analyze verify on the installed units; purges
# the packages and checks that none of their files is left. The rpmemd user
# stays after the purge (Debian does not remove system users: files they own
# may remain); the test removes it if it created it. Needs root or
# password-less sudo; skips (exit 0) when it has neither, or when these
# packages are already installed (it does not touch a machine's own
# installation).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 WORK_DIR" >&2; exit 2; }
work=$(realpath -m "$1")
packages=(rpmemd librpmem-dev librpmem1)
start=$SECONDS

say() { echo "=== packaging: $*"; }
skip() { echo "=== packaging: SKIPPED: $*"; exit 0; }
die() { echo "=== packaging: $*" >&2; exit 1; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null || skip "needs root or password-less sudo"
  sudo="sudo -n"
fi
for p in "${packages[@]}"; do
  if grep -q "ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)"; then
    skip "$p is already installed on this machine"
  fi
done
if [ -e /etc/rpmemd/rpmemd.conf ]; then
  skip "/etc/rpmemd/rpmemd.conf exists and belongs to no package of ours"
fi
for tool in dpkg-buildpackage dh lintian; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh installs it)"
done

# The source tree, without build directories or anything git ignores.
src="$work/rpmem"
say "copy the source tree to $src"
mkdir -p "$work"
rm -rf "$src"
rm -f "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo
mkdir "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$top" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$src"
else
  (cd "$top" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -xf - -C "$src"
fi
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

say "apt-get build-dep ./ (Build-Depends)"
(cd "$src" && DEBIAN_FRONTEND=noninteractive $sudo apt-get build-dep -y -qq ./ >/dev/null)
(cd "$src" && dpkg-checkbuilddeps)

say "dpkg-buildpackage -us -uc -b ($version, log: $work/build.log)"
t0=$SECONDS
if ! (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2" \
      dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1); then
  tail -40 "$work/build.log" >&2
  die "dpkg-buildpackage failed"
fi
echo "built in $((SECONDS - t0)) s"
changes="$work/rpmem_${version}_${arch}.changes"
[ -f "$changes" ] || die "no $changes"
debs=()
for p in librpmem1 librpmem-dev rpmemd; do
  d="$work/${p}_${version}_${arch}.deb"
  [ -f "$d" ] || die "missing package: $d"
  debs+=("$d")
  echo "$(basename "$d"): Depends: $(dpkg-deb -f "$d" Depends)"
done
for p in librpmem1 rpmemd; do
  d="$work/${p}-dbgsym_${version}_${arch}.deb"
  [ -f "$d" ] || die "missing package: $d"
  grep -q '/usr/lib/debug/\.build-id/.*\.debug$' <<<"$(dpkg-deb -c "$d")" || die "$d has no debug symbols"
done
n=$(find "$work" -maxdepth 1 -name '*.deb' | wc -l)
[ "$n" -eq 5 ] || die "expected 5 .deb files, got $n"
# The shared library's control files: symbols (12 functions at
# LIBRPMEM_1.0) and the ldconfig trigger.
ctl=$(mktemp -d /tmp/rpmem-pkgctl.XXXXXX)
dpkg-deb -e "${debs[0]}" "$ctl"
nsym=$(grep -c '^ rpmem_[a-z_]*@LIBRPMEM_1.0 ' "$ctl/symbols" || true)
grep -q '^activate-noawait ldconfig$' "$ctl/triggers" || { rm -rf "$ctl"; die "librpmem1: no ldconfig trigger"; }
rm -rf "$ctl"
[ "$nsym" -eq 12 ] || die "librpmem1's symbols file lists $nsym functions, want 12"
grep -q ' \./usr/share/man/man1/rpmemd\.1\.gz$' <<<"$(dpkg-deb -c "${debs[2]}")" \
  || die "rpmemd(1) is not compressed"

say "lintian -I --pedantic (no error, no warning)"
t0=$SECONDS
lint_rc=0
lintian -I --pedantic --fail-on error,warning "$changes" >"$work/lintian.log" 2>&1 || lint_rc=$?
grep -v '^running with root privileges is not recommended!$' "$work/lintian.log" || true
[ "$lint_rc" -eq 0 ] || die "lintian reports errors or warnings (exit $lint_rc)"
echo "lintian: no error, no warning ($((SECONDS - t0)) s)"

tmp=$(mktemp -d /tmp/rpmem-pkgtest.XXXXXX)
chmod 755 "$tmp"
user_existed=0
getent passwd rpmemd >/dev/null && user_existed=1
installed=0
cleanup() {
  local rc=$?
  if [ $installed -eq 1 ]; then
    say "apt-get purge"
    # Everything the packages install (files and symbolic links).
    local files
    files=$(for d in "${debs[@]}"; do dpkg-deb -c "$d"; done |
            awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }')
    DEBIAN_FRONTEND=noninteractive $sudo apt-get purge -y -qq "${packages[@]}" >/dev/null || rc=1
    for p in "${packages[@]}"; do
      if ! grep -q "not-installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || echo not-installed)"; then
        echo "still known to dpkg after purge: $p ($(dpkg-query -W -f='${Status}' "$p"))" >&2
        rc=1
      fi
    done
    local f
    for f in $files /etc/rpmemd; do
      [ ! -e "$f" ] && [ ! -L "$f" ] || { echo "left behind: $f" >&2; rc=1; }
    done
    if [ -n "$(find /var/lib/systemd/deb-systemd-helper-enabled /etc/systemd/system \
               -name 'rpmemd*' 2>/dev/null)" ]; then
      echo "left behind: systemd state of rpmemd units" >&2
      rc=1
    fi
    if [ $user_existed -eq 0 ] && getent passwd rpmemd >/dev/null; then
      # Debian leaves system users in place on purge; so does
      # dh_installsysusers. Remove the one this test created.
      echo "user rpmemd stays after purge (Debian policy); removing it"
      $sudo userdel rpmemd >/dev/null 2>&1 || true
      getent group rpmemd >/dev/null && { $sudo groupdel rpmemd >/dev/null 2>&1 || true; }
    fi
  fi
  rm -rf "$tmp"
  if [ $rc -eq 0 ]; then say "PASSED in $((SECONDS - start)) s"; else say "FAILED"; fi
  exit $rc
}
trap cleanup EXIT

say "apt-get install ./*.deb"
installed=1
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] || die "$p is not installed"
  [ "$(dpkg-query -W -f='${Version}' "$p")" = "$version" ] || die "$p: wrong version"
done
libdir=$(pkg-config --variable=libdir librpmem)
[ "$libdir" = "/usr/lib/$multiarch" ] || die "librpmem.pc: libdir is $libdir"
for f in /usr/bin/rpmemd /usr/include/librpmem.h "$libdir/librpmem.so.1" "$libdir/librpmem.so" \
         "$libdir/cmake/librpmem/librpmemConfig.cmake" /etc/rpmemd/rpmemd.conf \
         /lib/systemd/system/rpmemd.service /lib/systemd/system/rpmemd.socket \
         /usr/lib/sysusers.d/rpmemd.conf /usr/share/doc/rpmemd/copyright; do
  [ -e "$f" ] || die "missing after install: $f"
done
dpkg-query -W -f='${Conffiles}\n' rpmemd | grep -q '^ /etc/rpmemd/rpmemd.conf [0-9a-f]\{32\}$' \
  || die "/etc/rpmemd/rpmemd.conf is not a conffile"
# (/lib is /usr/lib on Debian 12: ldconfig may list either.)
grep -Eq "librpmem\.so\.1 .*=> (/usr)?/lib/$multiarch/librpmem\.so\.1$" <<<"$(ldconfig -p)" \
  || die "librpmem.so.1 is not in the ld.so cache"
# The user, from the sysusers.d entry (systemd-sysusers in the postinst).
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd rpmemd) || die "no user rpmemd after install"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/rpmemd ] || die "rpmemd: uid $uid, home $home"
echo "user rpmemd: uid $uid, home $home, shell $shell"
getent group rpmemd >/dev/null || die "no group rpmemd after install"
# Units: installed, not enabled.
for u in rpmemd.service rpmemd.socket; do
  state=$(systemctl is-enabled "$u" 2>/dev/null || true)
  [ "$state" = disabled ] || die "$u is '$state' after install, want disabled"
done
if [ -n "$(find /etc/systemd/system -name 'rpmemd*' 2>/dev/null)" ]; then
  die "a unit of rpmemd is enabled after install"
fi
echo "units: rpmemd.service, rpmemd.socket installed, disabled"
if command -v man >/dev/null; then
  for page in librpmem rpmem_create rpmem_open rpmem_persist rpmem_drain rpmem_errormsg rpmemd; do
    man -w "$page" >/dev/null 2>&1 || die "no man page for $page"
  done
fi
/usr/bin/rpmemd --version

say "compile hello.c with pkg-config"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/hello" "$top/tests/packaging/hello.c" \
  $(pkg-config --cflags --libs librpmem)
used=$(ldd "$tmp/hello" | awk '$1 == "librpmem.so.1" { print $3 }')
[ -n "$used" ] && [ "$(readlink -f "$used")" = "$(readlink -f "$libdir/librpmem.so.1")" ] \
  || { ldd "$tmp/hello" >&2; die "hello does not use the installed library"; }
# A package of this program would depend on librpmem1 through the symbols file.
mkdir -p "$tmp/shlibdeps/debian"
printf 'Source: hello\n\nPackage: hello\nArchitecture: any\n' >"$tmp/shlibdeps/debian/control"
deps=$(cd "$tmp/shlibdeps" && dpkg-shlibdeps -O "$tmp/hello" 2>/dev/null)
echo "dpkg-shlibdeps hello: $deps"
grep -q "librpmem1 (>= 1.13.0+rpmem" <<<"$deps" || die "dpkg-shlibdeps does not use librpmem1's symbols"

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
  [ "$(head -c 8 "$part")" = RPMEMPKG ] || die "$part: no pool header"
  local got
  got=$(dd if="$part" bs=1 skip=4096 count=${#want} status=none)
  [ "$got" = "$want" ] || die "$part: '$got' at 4096, want '$want'"
  echo "$part: '$got' at offset 4096"
}
"$tmp/hello" localhost hello.set "Hello from the librpmem1 package"
check_part hello "Hello from the librpmem1 package"
"$tmp/cmake/build/hello" localhost hello-cmake.set "Hello through find_package"
check_part hello-cmake "Hello through find_package"

say "the service unit, without systemctl"
unit=/lib/systemd/system/rpmemd.service
for line in Type=notify WatchdogSec=30s RuntimeDirectory=rpmemd User=rpmemd; do
  grep -qx "$line" "$unit" || die "$unit: no '$line'"
done
out=$(/usr/bin/rpmemd status --socket "$tmp/no-such.sock" 2>&1) && die "rpmemd status: exit 0 with no daemon"
grep -q "cannot connect to $tmp/no-such.sock" <<<"$out" || die "rpmemd status: '$out'"
echo "unit: Type=notify, WatchdogSec, RuntimeDirectory; rpmemd status: '$out'"

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
