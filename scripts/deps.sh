#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian 12 packages rpmem needs to build and test (as root,
# or through sudo). Does nothing when they are all there.
set -euo pipefail
packages=(
  build-essential cmake pkg-config clang-format
  libpmem-dev libboost-dev libboost-program-options-dev
  libibverbs-dev librdmacm-dev libssl-dev libgcrypt20-dev libxxhash-dev libsystemd-dev
  libgtest-dev libgmock-dev
  libpmemobj-dev libpmempool-dev pmdk-tools
  openssh-client openssh-server util-linux iproute2 iptables libcap2-bin
  clang libclang-rt-14-dev
  systemd dpkg-dev file
  qemu-system-x86 busybox-static cpio xz-utils ibverbs-providers ibverbs-utils
  rdmacm-utils perftest linux-image-amd64 ndctl daxctl e2fsprogs
  debhelper lintian
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
