#!/usr/bin/env bash
# Galaxy's subnet administration on an ibsim subnet, judged by infiniband-diags' saquery and by
# OpenSM's own SA on the same subnet:
#   * OpenSM brings the subnet up and answers PathRecords (saquery --src-to-dst) between CAs and
#     from a CA to a switch; killed, Galaxy's SM takes the subnet over at another node (the
#     LIDs kept) and its SA answers every one of those queries byte for byte as OpenSM's did;
#   * the path a PathRecord names is the one the switches' tables carry (ibtracert arrives);
#   * a GID no port holds is refused with IBA's SA_ERR_REQ_INVALID_GID, and the SA goes on;
#   * ClassPortInfo, NodeRecord by LID and the IsSM PortInfoRecords (saquery -c, NR, -s);
#   * LinkRecords from a CA and from a switch (saquery LR) byte for byte as OpenSM's; a service
#     `galaxy service register` registers at OpenSM's SA and then at Galaxy's reads the same
#     (saquery SR), and once deleted is gone (a second delete is refused);
#   * `galaxy subscribe` at another node subscribes to every trap (InformInfo, listed by
#     saquery -I); a cable on the path unlinked at ibsim's console: the switch's trap reaches the
#     subscriber as a Report naming the switch, the light sweep sees the change, the heavy sweep
#     re-routes, and the SA's PathRecord (and ibtracert) go around it.
# Usage: ibsim_sa.sh <galaxy binary>. Exit 77 (skipped) without ibsim, OpenSM or the diags.
set -euo pipefail
galaxy=$(realpath "$1")
# shellcheck source=tests/ib/ibsim_lib.sh
. "$(dirname "$0")/ibsim_lib.sh"
sim_test_init opensm saquery ibaddr ibtracert jq
logs="gsm.out gsm.err osm.out sub.out sub.err svc.err"
# saquery from nic00017, whichever SM is master; the records without saquery's banner.
sa() {
  sim nic00017 saquery "$@" 2>"$dir/sa.err" | grep -v "dump:$"
}
lid_of() {  # the LID of a CA's port, as the port holds it
  sim "$1" ibaddr | sed -n 's/.*LID start 0x\([0-9a-f]*\) .*/\1/p' | awk "$hex"' { print hex($1) }'
}

"$galaxy" fabric --fabric sim:fattree:k=8,levels=2 --no-chips --write "$dir/ft8.net" >/dev/null
start_sim "$dir/ft8.net" nic00000

# OpenSM at nic00005 brings the subnet up.
start_opensm nic00005 10
grep -q "Entering MASTER state" "$dir/osm.out" || fail "OpenSM did not become master"
wait_for_line "$dir/osm.out" "SUBNET UP" 100 || true
for _ in $(seq 1 100); do
  sim nic00017 smpquery -D portinfo 0 2>/dev/null | grep -Eq "^LinkState:\.+Active" && break
  sleep 0.1
done
a=$(lid_of nic00002)
b=$(lid_of nic00029)
c=$(lid_of nic00017)
[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] || fail "no LIDs: '$a' '$b' '$c'"
# A switch's LID: the leaf nic00029 hangs from.
sw=$(sim nic00017 ibtracert "$c" "$b" | grep -- "-> switch" | tail -1 |
  sed -n 's/.* lid \([0-9]*\)-.*/\1/p')
[ -n "$sw" ] || fail "no switch LID on the path"
pairs="$a:$b $b:$a $c:$a $a:$sw $c:$c"
for p in $pairs; do
  sa --src-to-dst "$p" >"$dir/osm.$p" || fail "saquery $p against OpenSM"
  grep -q "dlid" "$dir/osm.$p" || fail "OpenSM's SA gave no PathRecord for $p"
done
# LinkRecords from a CA (its one link) and from a switch (each of its links).
for q in "$a" "$sw"; do
  sa LR "$q" >"$dir/osm.lr.$q" || fail "saquery LR $q against OpenSM"
  grep -q "FromLID" "$dir/osm.lr.$q" || fail "OpenSM's SA gave no LinkRecord from $q"
done
# A service of nic00022's port, registered at OpenSM's SA.
service() {
  sim nic00022 "$galaxy" service "$@" --fabric ib: 2>>"$dir/svc.err"
}
service register --id 0x1000000000000042 --name galaxy-test >/dev/null ||
  fail "galaxy service register at OpenSM's SA"
sa SR >"$dir/osm.sr" || fail "saquery SR against OpenSM"
grep -q "ServiceName.*galaxy-test" "$dir/osm.sr" || { cat "$dir/osm.sr" >&2; fail "OpenSM's SA lists no service"; }

# OpenSM killed; Galaxy takes the subnet over (LIDs kept) and serves the SA. At another node:
# ibsim hands the next request for a node to a dead process's client until a write to it fails.
kill -9 "$osm_pid"
wait "$osm_pid" 2>/dev/null || true
osm_pid=""
SIM_HOST=nic00000 LD_PRELOAD="$sim_so" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
  "$galaxy" sm --fabric ib: --json --sweep-interval 1 >"$dir/gsm.out" 2>"$dir/gsm.err" &
gsm_pid=$!
pids="$pids $gsm_pid"
wait_for_line "$dir/gsm.out" '"subnet_up":true' 150 || fail "Galaxy did not bring the subnet up"
for p in $pairs; do
  sa --src-to-dst "$p" >"$dir/gal.$p" || { cat "$dir/sa.err" >&2; fail "saquery $p against Galaxy"; }
  diff "$dir/osm.$p" "$dir/gal.$p" >&2 || fail "Galaxy's PathRecord $p differs from OpenSM's"
done
grep -q "slid\.*$a$" "$dir/gal.$a:$b" && grep -q "dlid\.*$b$" "$dir/gal.$a:$b" ||
  fail "the PathRecord's LIDs"
sim nic00002 ibtracert "$a" "$b" >"$dir/trace" 2>&1 && grep -q "^To ca" "$dir/trace" ||
  fail "no path along the tables for the PathRecord $a:$b"

for q in "$a" "$sw"; do
  sa LR "$q" >"$dir/gal.lr.$q" || fail "saquery LR $q against Galaxy"
  diff "$dir/osm.lr.$q" "$dir/gal.lr.$q" >&2 || fail "Galaxy's LinkRecords from $q differ from OpenSM's"
done
# The same service registered at Galaxy's SA (OpenSM's registrations died with it).
service register --id 0x1000000000000042 --name galaxy-test --json >"$dir/svc.json" ||
  fail "galaxy service register at Galaxy's SA"
jq -e '.registered and .name == "galaxy-test" and .lease_s == null' "$dir/svc.json" >/dev/null ||
  fail "the registration's answer"
sa SR >"$dir/gal.sr" || fail "saquery SR against Galaxy"
diff "$dir/osm.sr" "$dir/gal.sr" >&2 || fail "Galaxy's ServiceRecord differs from OpenSM's"
service delete --id 0x1000000000000042 >/dev/null || fail "galaxy service delete"
sa SR >"$dir/gal.sr2" 2>/dev/null || true
if grep -q "ServiceName" "$dir/gal.sr2"; then fail "the deleted service is still listed"; fi
if service delete --id 0x1000000000000042 >/dev/null; then fail "a second delete succeeded"; fi
grep -q "E7175.*ERR_NO_RECORDS" "$dir/svc.err" || { cat "$dir/svc.err" >&2; fail "the second delete's error"; }

# A GID no port of the subnet holds: IBA's status, and the SA answers the next query.
if sa --sgid-to-dgid "fe80::10:1-fe80::dead:beef" >/dev/null; then fail "an unknown GID answered"; fi
grep -q "SA_ERR_REQ_INVALID_GID" "$dir/sa.err" || { cat "$dir/sa.err" >&2; fail "not INVALID_GID"; }
sa --src-to-dst "$a:$b" | cmp -s - "$dir/gal.$a:$b" || fail "the SA after a bad query"

# ClassPortInfo, NodeRecord by LID, the SM's port by IsSM.
sa -c | grep -q "Class version............2" || fail "saquery -c"
sa NR "$c" | grep -q "NodeDescription.........nic00017" || fail "saquery NR $c"
g_lid=$(tail -1 "$dir/gsm.out" | jq .sm_lid)
sa -s | grep -q "EndPortLid\.*$g_lid$" || fail "saquery -s does not list Galaxy's port"

# A subscriber to every trap at nic00020. Its port says IsSM under ibsim (ibsim hands requests
# only to such clients), which is a capability change the SM sweeps for: let that settle.
sim nic00020 "$galaxy" subscribe --fabric ib: --json --count 1 --timeout 30 \
  >"$dir/sub.out" 2>"$dir/sub.err" &
sub_pid=$!
pids="$pids $sub_pid"
wait_for_line "$dir/sub.out" '"subscribed":true' 100 || { cat "$dir/sub.err" >&2; fail "no subscription"; }
sa -I | grep -q "SubscriberGID\.*$(sim nic00020 ibaddr | sed -n 's/^GID \([^ ]*\) .*/\1/p')$" ||
  fail "saquery -I does not list the subscription"
sweeps=-1
while [ "$sweeps" != "$(grep -c '"subnet_up"' "$dir/gsm.out")" ]; do
  sweeps=$(grep -c '"subnet_up"' "$dir/gsm.out")
  sleep 1.5
done

# The path's first cable between switches unlinked: the switch's trap is forwarded to the
# subscriber, the light sweep sees the port state change, the heavy sweep re-routes, the SA's
# answer follows the new tables.
sim nic00002 ibtracert "$a" "$b" >"$dir/trace" 2>&1
leaf=$(sed -n '2s/.*"\(.*\)"$/\1/p' "$dir/trace")
up_port=$(sed -n '3s/^\[\([0-9]*\)\].*/\1/p' "$dir/trace")
[ -n "$leaf" ] && [ -n "$up_port" ] || { cat "$dir/trace" >&2; fail "no uplink on the path"; }
ends=" $(sed -n '2,3s/.* lid \([0-9]*\)-.*/\1/p' "$dir/trace" | tr '\n' ' ')"
sim_console "Unlink \"$leaf\"[$up_port]"
wait "$sub_pid" || { cat "$dir/sub.err" >&2; fail "the subscriber got no Report"; }
issuer=$(grep '"trap":128' "$dir/sub.out" | head -1 | jq .issuer_lid)
case "$ends" in
  *" $issuer "*) ;;
  *) cat "$dir/sub.out" >&2; fail "the Report's issuer '$issuer' is not a switch of the link ($ends)" ;;
esac
for _ in $(seq 1 100); do
  [ "$(grep -c '"subnet_up"' "$dir/gsm.out")" -gt "$sweeps" ] && break
  sleep 0.1
done
[ "$(grep -c '"subnet_up"' "$dir/gsm.out")" -gt "$sweeps" ] || fail "no sweep after the unlink"
tail -1 "$dir/gsm.out" | jq -e '.subnet_up == true and .unreachable_routes == 0' >/dev/null ||
  fail "the sweep after the unlink"
# The SA's counts as the sweep reports them: the queries answered, the bad one refused, the
# Report sent, nothing malformed.
tail -1 "$dir/gsm.out" | jq -e '.sa.answered >= 10 and .sa.refused >= 1 and .sa.reports >= 1 and
  .sa.traps >= 1 and .malformed_requests == 0' >/dev/null || fail "the SA's counts"
sa --src-to-dst "$a:$b" | grep -q "dlid\.*$b$" || fail "no PathRecord after the re-route"
sim nic00002 ibtracert "$a" "$b" >"$dir/trace2" 2>&1 && grep -q "^To ca" "$dir/trace2" ||
  fail "ibtracert after the re-route"
if sed -n 3p "$dir/trace2" | grep -q "^\[$up_port\]"; then
  cat "$dir/trace2" >&2
  fail "the path still leaves $leaf by port $up_port"
fi
echo "ok: Galaxy's SA answers saquery as OpenSM's does (PathRecords ${pairs// /, }, LinkRecords, a ServiceRecord), forwards a trap to a subscriber, follows a re-route"
