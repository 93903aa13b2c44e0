#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two soft-RoCE devices joined by a wire in this network namespace, so that
# verbs traffic between them crosses the IP stack (and iptables, tc) as it
# would between two machines; run as root in the project's VM.
#   wire-pair.sh up     rpmwA 10.1.0.1 with rxeA (the client) and rpmwB
#                       10.1.0.2 with rxeB (the target); nothing when they
#                       are up already
#   wire-pair.sh down   removes them. Not while a process has them open:
#                       removing an rxe device waits for its users, and
#                       librdmacm opens every device in a process that uses
#                       it (so tests leave the pair up).
# Between two addresses of one namespace the kernel would loop the packets
# inside (and rxe, seeing its own MAC, would not even send them). So the
# addresses are taken out of the local table: a packet to 10.1.0.2 leaves
# through vethA and comes in on vethB, where a rule makes it local again
# (the same for 10.1.0.1 through vethB).
set -euo pipefail
a=rpmwA b=rpmwB ia=10.1.0.1 ib=10.1.0.2
case ${1:-} in
  up)
    if ! [ -e /sys/class/infiniband/rxeA ] || ! [ -e /sys/class/infiniband/rxeB ]; then
    "$0" down 2>/dev/null || true
    modprobe -a veth rdma_rxe
    ip link add $a type veth peer name $b
    ip addr add $ia/32 dev $a
    ip addr add $ib/32 dev $b
    for d in all $a $b; do
      sysctl -qw net.ipv4.conf.$d.rp_filter=0 net.ipv4.conf.$d.accept_local=1
    done
    ip link set $a up
    ip link set $b up
    ip route add $ib/32 dev $a src $ia  # (a source must still be local here)
    ip route add $ia/32 dev $b src $ib
    ip route add local $ia dev $a table 201
    ip route add local $ib dev $b table 202
    ip rule add iif $a lookup 201 pref 201
    ip rule add iif $b lookup 202 pref 202
    ip route del local $ia table local
    ip route del local $ib table local
    # Each end knows the other's MAC: no ARP to lose on a wire just up.
    ip neigh replace $ib lladdr "$(cat /sys/class/net/$b/address)" dev $a nud permanent
    ip neigh replace $ia lladdr "$(cat /sys/class/net/$a/address)" dev $b nud permanent
    rdma link add rxeA type rxe netdev $a
    rdma link add rxeB type rxe netdev $b
    fi
    # Ready when both ports are active with their addresses' GIDs.
    for i in $(seq 100); do
      ok=1
      for d in rxeA:$ia rxeB:$ib; do
        dev=${d%%:*} ip=${d#*:}
        gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${ip//./ })
        grep -q ACTIVE /sys/class/infiniband/$dev/ports/1/state 2>/dev/null &&
          grep -qx "$gid" /sys/class/infiniband/$dev/ports/1/gids/* 2>/dev/null || ok=0
      done
      [ $ok = 1 ] && exit 0
      sleep 0.1
    done
    echo "wire-pair: rxeA and rxeB did not come up" >&2
    exit 1 ;;
  down)
    rdma link delete rxeA 2>/dev/null || true
    rdma link delete rxeB 2>/dev/null || true
    ip rule del pref 201 2>/dev/null || true
    ip rule del pref 202 2>/dev/null || true
    ip route flush table 201 2>/dev/null || true
    ip route flush table 202 2>/dev/null || true
    ip link del $a 2>/dev/null || true ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
