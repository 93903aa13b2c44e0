#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# PMDK integration tests (ctest label "pmdk"): Debian's stock libpmemobj,
# libpmempool and pmempool (PMDK 1.12.1) replicate through our
# librpmem.so.1 (first on LD_LIBRARY_PATH, dlopen'ed by them) to our rpmemd
# (RPMEM_CMD, reached through tools/local-ssh). Nothing here talks to
# librpmem directly; the objects are written and checked by obj_remote.
#
#   pmdk_test.sh SCENARIO      (environment: RPMEM_LIB_DIR RPMEMD LOCAL_SSH
#                               OBJ_REMOTE, set by tests/pmdk/CMakeLists.txt)
# Scenarios: obj singlehdr pmempool two_remotes sds_off evil_replica blip run_ahead restart
# RPMEM_PMDK_TARGET_DIR: where the targets keep their parts (default: with
# the client's, under /tmp).
set -euo pipefail

scenario=${1:?scenario}
: "${RPMEM_LIB_DIR:?}" "${RPMEMD:?}" "${LOCAL_SSH:?}" "${OBJ_REMOTE:?}"
[ -e "$RPMEM_LIB_DIR/librpmem.so.1" ] || { echo "no librpmem.so.1 in $RPMEM_LIB_DIR"; exit 1; }

W=$(mktemp -d /tmp/rpmem-pmdk.XXXXXX)
chmod 755 "$W"
# The targets' pool set directories and parts: under $W, or on the medium
# RPMEM_PMDK_TARGET_DIR names (scripts/test-pmem.sh: fsdax pmem).
T=$W
[ -n "${RPMEM_PMDK_TARGET_DIR:-}" ] && T=$(mktemp -d "$RPMEM_PMDK_TARGET_DIR/rpmem-pmdk.XXXXXX")
trap 'rm -rf "$W" "$T"' EXIT
mkdir -p "$W/client"

die() { echo "FAIL ($scenario): $*" >&2; for l in "$T"/t*/rpmemd.log; do [ -f "$l" ] && tail -20 "$l" >&2; done; exit 1; }
say() { echo "--- $*"; }
# created LOG SET: rpmemd's log (PMDK's layout) shows a create request for
# pool set SET answered with status 0.
created() {
  awk -v d="    pool descriptor: '$2'" '
    /^create request:$/ { c = 1; next }
    c { m = ($0 == d); c = 0; next }
    m && /^create request response: \(status = 0\)$/ { f = 1 }
    /^(create|open) request response:/ { m = 0 }
    END { exit !f }' "$1"
}
# Client side: Debian's libraries, our librpmem.so.1 first, our rpmemd.
client() {
  echo "+ $*"
  LD_LIBRARY_PATH="$RPMEM_LIB_DIR" RPMEM_SSH="$LOCAL_SSH" RPMEM_CMD="$CMD" timeout 120 "$@" ||
    die "client command failed: $*"
}
client_fails() {
  echo "+ ! $*"
  if LD_LIBRARY_PATH="$RPMEM_LIB_DIR" RPMEM_SSH="$LOCAL_SSH" RPMEM_CMD="$CMD" timeout 120 "$@"; then
    die "client command should have failed: $*"
  fi
}
# Target side: Debian's stock tools only, no librpmem, no rpmemd.
target() { echo "+ $*"; env -u LD_LIBRARY_PATH -u RPMEM_CMD timeout 120 "$@" || die "target command failed: $*"; }

# new_target N: a pool set directory and rpmemd config under $T/tN.
new_target() {
  local t="$T/t$1"
  mkdir -p "$t/poolsets" "$t/parts"
  printf 'poolset-dir = %s\nlog-file = %s\nlog-level = info\n' "$t/poolsets" "$t/rpmemd.log" \
    > "$t/rpmemd.conf"
}
rpmemd_cmd() { echo "$RPMEMD -c $T/t$1/rpmemd.conf"; }
# poolset FILE [OPTION-LINE] PART... (PART = "SIZE PATH" or "REPLICA ...")
poolset() {
  local f=$1; shift
  mkdir -p "$(dirname "$f")"
  { echo PMEMPOOLSET; for l in "$@"; do echo "$l"; done; } > "$f"
}
hdr_field() {  # hdr_field FILE-OR-SET "Field name" [pmempool info options]
  local f=$1 name=$2; shift 2
  env -u LD_LIBRARY_PATH pmempool info "$@" "$f" | sed -n "s/^$name *: //p" | head -1
}

# check_replica T SET N SEED PARTS...: the replica on target T is a valid
# PMDK pool (pmempool check/info accept it), carries the features the client
# asked for, links to the client's replica, and can take over: a pool set of
# its parts plus a new replica, pmempool sync, pmemobj_open reads every object.
check_replica() {
  local t=$1 set=$2 n=$3 seed=$4; shift 4
  local opt="" size=0 p
  local parts=("$@")
  say "target t$t: $set is a PMDK pool"
  [ "${#parts[@]}" -eq 1 ] && target pmempool check -v "$T/t$t/poolsets/$set"
  target pmempool info -f obj "$T/t$t/poolsets/$set" > "$W/info.txt"
  grep -q "^Signature *: PMEMOBJ" "$W/info.txt" || die "remote signature"
  grep -q "^Layout *: rpmem-pmdk-test" "$W/info.txt" || die "remote layout"
  grep -q "^Checksum .*\[OK\]" "$W/info.txt" || die "remote checksums"
  local local0=$W/client/local.part0
  for f in "Signature" "Major" "Mandatory features" "Not mandatory features" "Pool set UUID"; do
    [ "$(hdr_field "${parts[0]}" "$f")" = "$(hdr_field "$local0" "$f")" ] ||
      die "remote '$f' differs: $(hdr_field "${parts[0]}" "$f") vs $(hdr_field "$local0" "$f")"
  done
  [ "$(hdr_field "${parts[0]}" "Previous replica UUID")" = "$(hdr_field "$local0" "UUID")" ] ||
    [ "$(hdr_field "${parts[0]}" "Next replica UUID")" = "$(hdr_field "$local0" "UUID")" ] ||
    die "remote replica is not linked to the client's replica"
  grep -q "^OPTION SINGLEHDR" "$T/t$t/poolsets/$set" && opt="OPTION SINGLEHDR"
  if [ -n "$opt" ]; then  # later parts have no header
    target pmempool info "${parts[0]}" > /dev/null
  else
    for p in "${parts[@]}"; do target pmempool info "$p" > /dev/null; done
  fi

  say "target t$t: take over $set"
  local old=() new
  for p in "${parts[@]}"; do
    old+=("$(stat -c %s "$p") $p")
    size=$((size + $(stat -c %s "$p")))
  done
  new="$size $T/t$t/parts/takeover.part0"
  poolset "$T/t$t/takeover.set" ${opt:+"$opt"} "${old[@]}" "REPLICA" "$new"
  target pmempool sync -v "$T/t$t/takeover.set"
  target "$OBJ_REMOTE" verify "$T/t$t/takeover.set" "$n" "$seed"
  target pmempool check -v "$T/t$t/takeover.set"
  target pmempool info "$T/t$t/takeover.set" > /dev/null
  # The copy that sync made, as the master replica, holds every object too.
  poolset "$T/t$t/swapped.set" ${opt:+"$opt"} "$new" "REPLICA" "${old[@]}"
  target "$OBJ_REMOTE" verify "$T/t$t/swapped.set" "$n" "$seed"
}

features() {  # features FILE -> "compat/incompat"
  echo "$(hdr_field "$1" "Not mandatory features")/$(hdr_field "$1" "Mandatory features" | cut -d' ' -f1)"
}

# churn_start WHAT: transactions on the client's pool set (200 objects,
# seeds from 11 on) in the background until churn_end, librpmem logging its
# notices to $W/client/librpmem.log.
churn_start() {
  say "$1"
  echo "+ $OBJ_REMOTE churn $W/client/pool.set 200 11 STOP &"
  LD_LIBRARY_PATH="$RPMEM_LIB_DIR" RPMEM_SSH="$LOCAL_SSH" RPMEM_CMD="$CMD" \
    RPMEM_LOG_LEVEL=3 RPMEM_LOG_FILE="$W/client/librpmem.log" \
    timeout 120 "$OBJ_REMOTE" churn "$W/client/pool.set" 200 11 "$W/stop" > "$W/last" &
  churn=$!
}
# churn_end DURING MARK: stops them; every transaction must have committed
# (libpmemobj aborts on a failed remote persist), librpmem's log must show
# MARK, and the client's pool holds the last round ($last).
churn_end() {
  touch "$W/stop"
  wait "$churn" || die "libpmemobj's transactions failed $1 (exit $?): $(tail -5 "$W/client/librpmem.log")"
  last=$(cat "$W/last")
  [ "$last" -gt 11 ] || die "no round of transactions completed ($last)"
  grep -q "$2" "$W/client/librpmem.log" ||
    die "librpmem's log has no '$2': $(tail -5 "$W/client/librpmem.log")"
  say "$((last - 10)) rounds of 200 transactions; librpmem's log:"
  grep "$2" "$W/client/librpmem.log" | sed 's/^/    /' | head -5
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 200 "$last"
}

# netns_target: target 1's rpmemd in a network namespace of its own behind a
# veth pair (netns.h's way, a /24 of its own), its data lanes across the
# link, $CMD reaching it; the client's pool set (16 MiB, 200 objects
# created) has its replica there.
netns_target() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root for a network namespace"; exit 77; }
  command -v iptables-legacy > /dev/null || die "iptables-legacy is missing (scripts/deps.sh)"
  id=$$; ns=rpmemo$id; hif=rpmo$id; nif=rpmp$id; net=10.$((200 + id / 250 % 50)).$((id % 250))
  ip netns add "$ns" || { echo "SKIP: network namespaces not permitted"; exit 77; }
  trap 'ip link del "$hif" 2>/dev/null || true; ip netns del "$ns" || true; rm -rf "$W" "$T"' EXIT
  ip link add "$hif" type veth peer name "$nif"
  ip link set "$nif" netns "$ns"
  ip addr add "$net.1/24" dev "$hif"
  ip link set "$hif" up
  ip netns exec "$ns" ip addr add "$net.2/24" dev "$nif"
  ip netns exec "$ns" ip link set "$nif" up
  ip netns exec "$ns" ip link set lo up
  for _ in $(seq 50); do  # until both ends have carrier
    ip link show dev "$hif" | grep -q LOWER_UP &&
      ip netns exec "$ns" ip link show dev "$nif" | grep -q LOWER_UP && break
    sleep 0.1
  done
  new_target 1
  CMD="ip netns exec $ns $(rpmemd_cmd 1)"
  export FAKE_SSH_CONNECTION="$net.1 50000 $net.2 22"
  poolset "$T/t1/poolsets/remote.set" "20M $T/t1/parts/remote.part0"
  poolset "$W/client/pool.set" "16M $W/client/local.part0" "REPLICA $net.2 remote.set"
  client "$OBJ_REMOTE" create "$W/client/pool.set" 200 10
}
# cut_link SECONDS [STATE_DIR]: nothing crosses the link for that long;
# with STATE_DIR, a pool's record must be there by the end (it ran ahead).
cut_link() {
  local fw="ip netns exec $ns iptables-legacy -w"
  $fw -I OUTPUT -o "$nif" -j DROP
  $fw -I INPUT -i "$nif" -j DROP
  sleep "$1"
  if [ -n "${2:-}" ]; then
    compgen -G "$2/*.pool" > /dev/null || die "no record in $2 after ${1} s without the link"
  fi
  $fw -F OUTPUT
  $fw -F INPUT
}

case $scenario in
obj)
  # pmemobj_create / transactions / close / open / transactions / verify on
  # a pool set with one local part and one remote replica; then the target.
  new_target 1
  CMD=$(rpmemd_cmd 1)
  poolset "$T/t1/poolsets/remote.set" "20M $T/t1/parts/remote.part0"
  poolset "$W/client/pool.set" "16M $W/client/local.part0" "REPLICA 127.0.0.1 remote.set"
  client "$OBJ_REMOTE" create "$W/client/pool.set" 200 1
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 200 1
  client "$OBJ_REMOTE" rewrite "$W/client/pool.set" 200 2
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 200 2
  created "$T/t1/rpmemd.log" remote.set || die "rpmemd did not create the pool"
  # Debian's libpmemobj defaults: CHECK_BAD_BLOCKS (compat 0x1), CKSUM_2K and
  # SHUTDOWN_STATE (incompat 0x2|0x4) -- all accepted by rpmemd.
  [ "$(features "$T/t1/parts/remote.part0")" = "0x1/0x6" ] ||
    die "remote features $(features "$T/t1/parts/remote.part0"), expected 0x1/0x6"
  check_replica 1 remote.set 200 2 "$T/t1/parts/remote.part0"
  ;;
singlehdr)
  # OPTION SINGLEHDR (incompat 0x1) with several parts on both sides (every
  # part >= 8 MiB: pmempool sync refuses smaller local parts).
  new_target 1
  CMD=$(rpmemd_cmd 1)
  poolset "$T/t1/poolsets/sub/remote.set" "OPTION SINGLEHDR" \
    "8M $T/t1/parts/remote.part0" "8M $T/t1/parts/remote.part1" "8M $T/t1/parts/remote.part2"
  poolset "$W/client/pool.set" "OPTION SINGLEHDR" "10M $W/client/local.part0" \
    "8M $W/client/local.part1" "REPLICA 127.0.0.1 sub/remote.set"
  client "$OBJ_REMOTE" create "$W/client/pool.set" 300 3
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 300 3
  [ "$(features "$T/t1/parts/remote.part0")" = "0x1/0x7" ] ||
    die "remote features $(features "$T/t1/parts/remote.part0"), expected 0x1/0x7"
  check_replica 1 sub/remote.set 300 3 \
    "$T/t1/parts/remote.part0" "$T/t1/parts/remote.part1" "$T/t1/parts/remote.part2"
  ;;
sds_off)
  # The client does not ask for SHUTDOWN_STATE (PMEMOBJ_CONF), with two
  # remote parts that carry a header each.
  new_target 1
  CMD=$(rpmemd_cmd 1)
  poolset "$T/t1/poolsets/remote.set" "8M $T/t1/parts/remote.part0" "10M $T/t1/parts/remote.part1"
  poolset "$W/client/pool.set" "16M $W/client/local.part0" "REPLICA 127.0.0.1 remote.set"
  PMEMOBJ_CONF="sds.at_create=0" client "$OBJ_REMOTE" create "$W/client/pool.set" 100 4
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 100 4
  [ "$(features "$T/t1/parts/remote.part0")" = "0x1/0x2" ] ||
    die "remote features $(features "$T/t1/parts/remote.part0"), expected 0x1/0x2"
  check_replica 1 remote.set 100 4 "$T/t1/parts/remote.part0" "$T/t1/parts/remote.part1"
  ;;
pmempool)
  # pmempool create/info/check/sync/rm on the client side.
  new_target 1
  CMD=$(rpmemd_cmd 1)
  poolset "$T/t1/poolsets/remote.set" "20M $T/t1/parts/remote.part0"
  poolset "$W/client/pool.set" "16M $W/client/local.part0" "REPLICA 127.0.0.1 remote.set"
  client pmempool create obj --layout rpmem-pmdk-test "$W/client/pool.set"
  client pmempool info "$W/client/pool.set" > "$W/info.txt"
  grep -q "^Number of replicas *: 2" "$W/info.txt" || die "pmempool info: replicas"
  grep -q "^node *: 127.0.0.1" "$W/info.txt" || die "pmempool info: remote node"
  grep -q "^Layout *: rpmem-pmdk-test" "$W/info.txt" || die "pmempool info: layout"
  client "$OBJ_REMOTE" populate "$W/client/pool.set" 150 5
  # libpmempool's check refuses pool sets with remote replicas (PMDK 1.12:
  # "poolsets with remote replicas are not supported"); the local replica
  # is checked on its own, the remote one on the target (check_replica).
  client pmempool check -v "$W/client/local.part0"
  say "lose the local part; pmempool sync rebuilds it through rpmem_read"
  rm "$W/client/local.part0"
  client pmempool sync -v "$W/client/pool.set"
  [ -f "$W/client/local.part0" ] || die "sync did not recreate the local part"
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 150 5
  client pmempool info "$W/client/pool.set" > /dev/null
  client pmempool check -v "$W/client/local.part0"
  say "a damaged local header is repaired from the remote replica"
  printf 'garbage!' | dd of="$W/client/local.part0" bs=1 seek=0 conv=notrunc status=none
  client pmempool sync -v "$W/client/pool.set"
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 150 5
  check_replica 1 remote.set 150 5 "$T/t1/parts/remote.part0"
  say "pmempool rm: parts on both sides, the remote pool set file stays"
  client pmempool rm -v "$W/client/pool.set"
  [ ! -e "$W/client/local.part0" ] && [ ! -e "$T/t1/parts/remote.part0" ] || die "rm left parts"
  [ -f "$T/t1/poolsets/remote.set" ] || die "rm removed the remote pool set file"
  client_fails pmempool rm "$W/client/pool.set"   # rpmemd --remove: missing part
  client pmempool rm -f "$W/client/pool.set"      # rpmemd --remove --force
  [ -f "$T/t1/poolsets/remote.set" ] || die "rm -f removed the remote pool set file"
  client pmempool create obj --layout rpmem-pmdk-test "$W/client/pool.set"
  client pmempool rm -r "$W/client/pool.set"      # rpmemd --remove --pool-set
  [ ! -e "$T/t1/poolsets/remote.set" ] && [ ! -e "$T/t1/parts/remote.part0" ] ||
    die "rm -r left the remote pool"
  [ -f "$W/client/pool.set" ] || die "rm -r removed the local pool set file"
  ;;
evil_replica)
  # A pool set file written by someone else: its REPLICA node is an ssh
  # option. Debian's pmempool hands it to our librpmem with the real ssh;
  # nothing may run, rpmem_create fails with EINVAL naming the problem.
  new_target 1
  CMD=rpmemd  # a valid host name: an option-eating ssh would connect "there"
  marker="$W/client/ran"
  poolset "$T/t1/poolsets/remote.set" "20M $T/t1/parts/remote.part0"
  for node in '-oProxyCommand=touch${IFS}'"$marker" "-oProxyCommand=touch\${IFS}$marker@127.0.0.1" \
      "-F$W/client/ssh_config" "-x@127.0.0.1"; do
    printf 'Host *\n  ProxyCommand touch %s\n' "$marker" > "$W/client/ssh_config"
    poolset "$W/client/evil.set" "16M $W/client/local.part0" "REPLICA $node remote.set"
    echo "+ ! pmempool create obj evil.set   (REPLICA $node remote.set)"
    if LD_LIBRARY_PATH="$RPMEM_LIB_DIR" RPMEM_SSH=/usr/bin/ssh RPMEM_CMD="$CMD" \
        RPMEM_LOG_LEVEL=1 RPMEM_LOG_FILE="$W/client/librpmem.log" \
        timeout 120 pmempool create obj "$W/client/evil.set" > "$W/client/out.txt" 2>&1; then
      die "pmempool create obj accepted REPLICA $node"
    fi
    [ ! -e "$marker" ] || die "ssh ran the command of REPLICA $node"
    [ ! -e "$T/t1/parts/remote.part0" ] || die "a remote part was created for REPLICA $node"
    grep -q "begins with '-'" "$W/client/librpmem.log" ||
      die "librpmem did not say why: $(cat "$W/client/librpmem.log" "$W/client/out.txt")"
    rm -f "$W/client/local.part0" "$W/client/librpmem.log"
  done
  ;;
two_remotes)
  # Two REPLICA lines, two targets, RPMEM_CMD with '|' (round robin).
  new_target 1
  new_target 2
  CMD="$(rpmemd_cmd 1)|$(rpmemd_cmd 2)"
  poolset "$T/t1/poolsets/r1.set" "16M $T/t1/parts/r1.part0"
  poolset "$T/t2/poolsets/r2.set" "17M $T/t2/parts/r2.part0"
  poolset "$W/client/pool.set" "16M $W/client/local.part0" \
    "REPLICA 127.0.0.1 r1.set" "REPLICA 127.0.0.1 r2.set"
  client "$OBJ_REMOTE" create "$W/client/pool.set" 120 6
  client "$OBJ_REMOTE" rewrite "$W/client/pool.set" 120 7
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 120 7
  created "$T/t1/rpmemd.log" r1.set || die "t1 did not create r1.set"
  created "$T/t2/rpmemd.log" r2.set || die "t2 did not create r2.set"
  for t in 1 2; do
    target pmempool check -v "$T/t$t/poolsets/r$t.set"
    target pmempool info -f obj "$T/t$t/poolsets/r$t.set" > /dev/null
    [ "$(features "$T/t$t/parts/r$t.part0")" = "0x1/0x6" ] || die "t$t features"
  done
  # The ring local -> r1 -> r2 -> local is in the headers.
  [ "$(hdr_field "$T/t1/parts/r1.part0" "Next replica UUID")" = \
    "$(hdr_field "$T/t2/parts/r2.part0" "UUID")" ] || die "r1 -> r2 link"
  [ "$(hdr_field "$T/t2/parts/r2.part0" "Next replica UUID")" = \
    "$(hdr_field "$W/client/local.part0" "UUID")" ] || die "r2 -> local link"
  say "lose the local part; pmempool sync rebuilds it from a remote replica"
  rm "$W/client/local.part0"
  client pmempool sync -v "$W/client/pool.set"
  client "$OBJ_REMOTE" verify "$W/client/pool.set" 120 7
  client pmempool rm -r "$W/client/pool.set"
  for t in 1 2; do
    [ ! -e "$T/t$t/poolsets/r$t.set" ] && [ ! -e "$T/t$t/parts/r$t.part0" ] || die "t$t not removed"
  done
  ;;
blip)
  # A 10 s network outage in the middle of transactions: the target in a
  # network namespace behind a veth pair whose packets its firewall drops
  # (the data lanes cross the link; the stand-in ssh's pipes do not).
  # libpmemobj must not abort (it does on a failed remote persist), and
  # every committed transaction must be in the replica.
  netns_target
  churn_start "transactions, and 2 s into them nothing crosses the link for 10 s"
  sleep 2
  cut_link 10
  sleep 3
  churn_end "during the outage" "connected again"
  check_replica 1 remote.set 200 "$last" "$T/t1/parts/remote.part0"
  ;;
run_ahead)
  # A partition past the bound (RPMEM_TIMEOUT=2) in the middle of
  # transactions, with RPMEM_ON_LOSS=continue: libpmemobj must not abort,
  # the pool runs ahead (its record in RPMEM_STATE_DIR), catches up by
  # itself once the link is back (the record goes), and the replica is a
  # PMDK pool with every committed object. RPMEM_PMDK_CUT_SECONDS: how long
  # (8 by default).
  netns_target
  export RPMEM_ON_LOSS=continue RPMEM_TIMEOUT=2 RPMEM_STATE_DIR=$W/state
  churn_start "transactions, and 2 s into them nothing crosses the link for ${RPMEM_PMDK_CUT_SECONDS:-8} s"
  sleep 2
  cut_link "${RPMEM_PMDK_CUT_SECONDS:-8}" "$W/state"
  for _ in $(seq 300); do  # until the catch-up is over (30 s at most)
    compgen -G "$W/state/*.pool" > /dev/null || break
    sleep 0.1
  done
  compgen -G "$W/state/*.pool" > /dev/null && die "the pool did not catch up within 30 s"
  churn_end "behind its target" "in sync again after"
  check_replica 1 remote.set 200 "$last" "$T/t1/parts/remote.part0"
  ;;
restart)
  # The replica on an rpmemd --service that is stopped (SIGTERM) and
  # started again in the middle of transactions, as systemctl restart
  # does: libpmemobj must not abort, and every committed transaction must
  # be in the replica.
  command -v openssl > /dev/null || die "openssl is missing"
  new_target 1
  t=$T/t1
  key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  (
    cd "$t"
    # shellcheck disable=SC2086
    openssl req -x509 $key -keyout ca.key -out ca.crt -subj /CN=ca -days 2
    for n in server alice; do
      # shellcheck disable=SC2086
      openssl req $key -keyout $n.key -out $n.csr -subj "/CN=$n"
      if [ $n = server ]; then echo "subjectAltName=IP:127.0.0.1"; else echo "extendedKeyUsage=clientAuth"; fi > $n.ext
      openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $n.crt -days 2 -extfile $n.ext
    done
  ) > "$t/openssl.log" 2>&1 || die "certificates: $(tail -3 "$t/openssl.log")"
  mkdir -p "$t/poolsets/alice"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'service = yes\nservice-listen = 127.0.0.1:%s\ntls-ca = %s\ntls-cert = %s\ntls-key = %s\n' \
    "$port" "$t/ca.crt" "$t/server.crt" "$t/server.key" >> "$t/rpmemd.conf"
  start_service() {
    "$RPMEMD" -c "$t/rpmemd.conf" &
    service=$!
    for _ in $(seq 100); do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
      sleep 0.05
    done
    die "the service did not start"
  }
  start_service
  trap 'kill "$service" 2>/dev/null || true; rm -rf "$W" "$T"' EXIT
  export RPMEM_TLS_CA=$t/ca.crt RPMEM_TLS_CERT=$t/alice.crt RPMEM_TLS_KEY=$t/alice.key
  poolset "$t/poolsets/alice/remote.set" "20M $t/parts/remote.part0"
  poolset "$W/client/pool.set" "16M $W/client/local.part0" "REPLICA rpmems://127.0.0.1:$port remote.set"
  CMD=unused
  client "$OBJ_REMOTE" create "$W/client/pool.set" 200 10
  churn_start "transactions, and 2 s into them the service stops and starts again"
  sleep 2
  kill -TERM "$service"
  wait "$service" || die "the service did not stop cleanly"
  sleep 1
  start_service
  sleep 3
  churn_end "across the restart" "reopened after"
  kill -TERM "$service"
  wait "$service" || true
  check_replica 1 alice/remote.set 200 "$last" "$t/parts/remote.part0"
  ;;
*)
  echo "unknown scenario $scenario" >&2
  exit 2
  ;;
esac
say "PASS $scenario"
