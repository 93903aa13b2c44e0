# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# Sourced by the scripts that boot ../shared/tools/rdma-vm (test-rdma.sh,
# test-powercut.sh). use_tcg_if_kvm_fails VM TMP NAME: where /dev/kvm exists
# but cannot run the guest (nested virtualisation refusing an MSR), boot with
# TCG: the tool picks KVM whenever /dev/kvm is writable, so hand it a qemu
# (written into TMP) that swaps the accelerator, through RDMA_VM_QEMU.
use_tcg_if_kvm_fails() {
  local vm=$1 tmp=$2 name=$3
  if [ -z "${RDMA_VM_QEMU:-}" ] && [ -w /dev/kvm ]; then
    if ! bash "$vm" --timeout 120 --rdma none -- true >"$tmp/probe.log" 2>&1; then
      echo "$name: the VM does not boot with KVM here; using TCG"
      cat >"$tmp/qemu-tcg" <<'QEMU'
#!/usr/bin/env bash
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -accel) if [ "${2%%,*}" = kvm ]; then args+=(-accel tcg,thread=multi); shift 2; continue; fi ;;
    -cpu) if [ "$2" = host ]; then args+=(-cpu max); shift 2; continue; fi ;;
  esac
  args+=("$1"); shift
done
exec qemu-system-x86_64 "${args[@]}"
QEMU
      chmod +x "$tmp/qemu-tcg"
      export RDMA_VM_QEMU="$tmp/qemu-tcg"
    fi
  fi
}
