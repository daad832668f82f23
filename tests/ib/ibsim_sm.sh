#!/usr/bin/env bash
# Galaxy's subnet manager alone on ibsim fabrics (no OpenSM), judged by infiniband-diags:
#   ibnetdiscover  every node found, every CA port with the LID Galaxy gave it (guid2lid file);
#   ibroute        a leaf switch's LFT sends each of its CAs' LIDs out of the port it is cabled to;
#   ibtracert      CA to CA by LID, through the tables Galaxy programmed, and `galaxy trace`
#                  the same way (then, across a link unplugged in ibsim, says where and why);
#   iblinkinfo     every linked port ACTIVE;
#   smpquery       PortInfo of a CA: its LID, the SM's LID, ACTIVE;
#   perfquery      the counter `galaxy scan` reads, set in ibsim's console.
# Fabrics: ibsim's example nets (the SM on a switch; two-port HCAs), a 2-level fat tree of
# 36-port switches and a 3-level fat tree of 1,024 hosts, written by `galaxy fabric --write`.
# Usage: ibsim_sm.sh <galaxy binary>. Exit 77 (skipped) without ibsim or infiniband-diags.
set -euo pipefail
galaxy=$1
# shellcheck source=tests/ib/ibsim_lib.sh
. "$(dirname "$0")/ibsim_lib.sh"
examples=/usr/share/doc/ibsim-utils/net-examples
for tool in ibsim ibnetdiscover ibroute ibtracert iblinkinfo smpquery perfquery; do
  command -v "$tool" >/dev/null || { echo "skip: $tool not installed"; exit 77; }
done
[ -f "$sim_so" ] || { echo "skip: $sim_so missing"; exit 77; }

dir=$(mktemp -d)
gsm_pid=""
trap '[ -n "$gsm_pid" ] && kill "$gsm_pid" 2>/dev/null; stop_sim; rm -rf "$dir"' EXIT
fail() {
  echo "FAIL [$net_name]: $*" >&2
  for f in sm.json sm.err ibsim.log; do
    [ -s "$dir/$f" ] && { echo "--- $f" >&2; tail -40 "$dir/$f" >&2; }
  done
  exit 1
}

check_fabric() {  # <name> <net file> <SM's node> <diags' node> <switches> <CA ports>
  net_name=$1
  local net=$2 sm_host=$3 diag_host=$4 want_sw=$5 want_ca=$6
  start_sim "$net" "$sm_host"
  sim "$sm_host" "$galaxy" sm --fabric ib: --once --json --guid2lid "$dir/guid2lid" \
    >"$dir/sm.json" 2>"$dir/sm.err" || { cat "$dir/sm.json" "$dir/sm.err" >&2; fail "galaxy sm"; }
  jq -e '.subnet_up == true' "$dir/sm.json" >/dev/null || { cat "$dir/sm.json" >&2; fail "not up"; }
  [ "$(jq .switches "$dir/sm.json")" = "$want_sw" ] || fail "switches: $(jq .switches "$dir/sm.json")"
  [ "$(jq .ca_ports "$dir/sm.json")" = "$want_ca" ] || fail "CA ports: $(jq .ca_ports "$dir/sm.json")"
  local sm_lid
  sm_lid=$(jq .sm_lid "$dir/sm.json")

  # ibnetdiscover: every node, every CA port with Galaxy's LID.
  sim "$diag_host" ibnetdiscover -p >"$dir/ports.txt" 2>"$dir/disc.err" || fail "ibnetdiscover"
  local n_ca
  n_ca=$(awk '$1 == "CA"' "$dir/ports.txt" | wc -l)
  [ "$n_ca" = "$want_ca" ] || fail "ibnetdiscover lists $n_ca CA ports, want $want_ca"
  # "CA <lid> <port> <port guid> ..." against "<port guid> <lid> <lid>" (hex).
  awk "$hex"'NR == FNR { lid[tolower($1)] = hex($2); next }
       $1 == "CA" { g = tolower($4); if (!(g in lid) || lid[g] != $2) { print "port " g " lid " $2 " want " lid[g]; bad++ } }
       END { exit bad > 0 }' "$dir/guid2lid" "$dir/ports.txt" || fail "LIDs differ from Galaxy's"
  awk '$1 == "CA" && $2 == 0 { bad++ } END { exit bad > 0 }' "$dir/ports.txt" ||
    fail "a CA port without a LID"

  # ibroute: on the switch cabled to the first CA port listed, every CA cabled to that switch
  # has its LID routed out of its own cable's port. ibnetdiscover -p: CA lines carry the
  # switch's GUID in field 11 ... lines end "( 'a' - 'b' )"; take the SW lines instead.
  local leaf_guid leaf_lid
  leaf_guid=$(awk '$1 == "SW" && $8 == "CA" { print $4; exit }' "$dir/ports.txt")
  leaf_lid=$(awk -v g="$leaf_guid" '$1 == "SW" && $4 == g { print $2; exit }' "$dir/ports.txt")
  sim "$diag_host" ibroute "$leaf_lid" >"$dir/lft.txt" 2>&1 || { cat "$dir/lft.txt" >&2; fail "ibroute $leaf_lid"; }
  # SW <lid> <port> <guid> <w> <s> - CA <lid> <port> <guid> ...
  awk -v g="$leaf_guid" "$hex"'NR == FNR { if ($1 == "SW" && $4 == g && $8 == "CA") want[$9] = $3; next }
       /^0x/ { lid = hex($1); if (lid in want) { seen++; if ($2 + 0 != want[lid]) { print "LID " lid " -> port " $2 ", cabled to " want[lid]; bad++ } } }
       END { exit (bad > 0 || seen == 0) }' "$dir/ports.txt" "$dir/lft.txt" ||
    { cat "$dir/lft.txt" >&2; fail "ibroute: LFT of switch $leaf_guid (LID $leaf_lid)"; }

  # ibtracert: the first CA port to the last, by LID.
  local src dst
  src=$(awk '$1 == "CA" { print $2; exit }' "$dir/ports.txt")
  dst=$(awk '$1 == "CA" { l = $2 } END { print l }' "$dir/ports.txt")
  sim "$diag_host" ibtracert "$src" "$dst" >"$dir/trace.txt" 2>&1 || { cat "$dir/trace.txt" >&2; fail "ibtracert $src $dst"; }
  grep -q "^To ca" "$dir/trace.txt" || { cat "$dir/trace.txt" >&2; fail "ibtracert did not arrive"; }
  # galaxy trace on the same LIDs: ibtracert's switches ("[out] -> switch port {guid}[in]"),
  # each entered by the same port.
  sim "$diag_host" "$galaxy" trace --fabric ib: --json "$src" "$dst" >"$dir/gtrace.json" 2>&1 ||
    { cat "$dir/gtrace.json" >&2; fail "galaxy trace $src $dst"; }
  local want got
  want=$(awk "$hex"'/-> switch/ { match($0, /\{0x[0-9a-fA-F]+\}\[[0-9]+\]/); s = substr($0, RSTART + 1, RLENGTH - 2);
               split(s, f, /\}\[/); print hex(f[1]), f[2] }' "$dir/trace.txt")
  got=$(jq -r '.hops[] | .guid + " " + (.in_port | tostring)' "$dir/gtrace.json" |
        awk "$hex"'{ print hex($1), $2 }')
  if [ -z "$want" ] || [ "$want" != "$got" ] || ! jq -e '.reachable' "$dir/gtrace.json" >/dev/null; then
    cat "$dir/trace.txt" "$dir/gtrace.json" >&2
    fail "galaxy trace differs from ibtracert"
  fi

  # iblinkinfo: every linked port ACTIVE.
  sim "$diag_host" iblinkinfo >"$dir/links.txt" 2>&1 || fail "iblinkinfo"
  if grep -E "(Initialize|Armed|Down)/ *LinkUp" "$dir/links.txt" >&2; then fail "ports not ACTIVE"; fi
  grep -q "Active/ *LinkUp" "$dir/links.txt" || fail "iblinkinfo shows no ACTIVE link"

  # smpquery: a CA port's PortInfo, LID-routed.
  sim "$diag_host" smpquery portinfo "$dst" >"$dir/pi.txt" 2>&1 || { cat "$dir/pi.txt" >&2; fail "smpquery portinfo $dst"; }
  grep -Eq "^Lid:\.+$dst\$" "$dir/pi.txt" || { cat "$dir/pi.txt" >&2; fail "smpquery: LID"; }
  grep -Eq "^SMLid:\.+$sm_lid\$" "$dir/pi.txt" || { cat "$dir/pi.txt" >&2; fail "smpquery: SM LID"; }
  grep -Eq "^LinkState:\.+Active" "$dir/pi.txt" || { cat "$dir/pi.txt" >&2; fail "smpquery: state"; }

  # A second sweep keeps every LID and changes nothing.
  sim "$sm_host" "$galaxy" sm --fabric ib: --once --json >"$dir/sm2.json" 2>&1 || fail "second sweep"
  jq -e '.subnet_up == true and .lids_assigned == 0' "$dir/sm2.json" >/dev/null ||
    { cat "$dir/sm2.json" >&2; fail "second sweep renumbered"; }
  # An engine that refuses the subnet (dimension order on a fat tree): minimum hop instead, as
  # OpenSM falls back, and the subnet stays up. An engine that does not exist is an error.
  if sim "$sm_host" "$galaxy" sm --fabric ib: --once --routing nosuch >"$dir/sm4.txt" 2>&1; then
    fail "an unknown routing engine was accepted"
  fi
  grep -q "nosuch" "$dir/sm4.txt" || { cat "$dir/sm4.txt" >&2; fail "the error does not name the engine"; }
  if [ "$want_sw" -gt 2 ]; then
    sim "$sm_host" "$galaxy" sm --fabric ib: --once --json --routing dor >"$dir/sm3.json" 2>&1 ||
      { cat "$dir/sm3.json" >&2; fail "sweep with a refused engine"; }
    jq -e '.subnet_up == true and .engine == "minhop" and .routing_fallback.from == "dor"' \
      "$dir/sm3.json" >/dev/null || { cat "$dir/sm3.json" >&2; fail "no fallback to minhop"; }
  fi
  # galaxy scan: every linked port's PortCounters (both ends of every link); a counter set in
  # ibsim's console is read as perfquery reads it, and is the only port with errors.
  local d_desc d_port d_lid
  d_desc=$(jq -r .dst.description "$dir/gtrace.json")
  d_port=$(jq .dst.port "$dir/gtrace.json")
  d_lid=$(jq .dst.lid "$dir/gtrace.json")
  sim_console "PerformanceSet \"$d_desc\"[$d_port] PortCounters.PortRcvErrors=7"
  sim "$diag_host" "$galaxy" scan --fabric ib: --json >"$dir/scan.json" 2>"$dir/scan.err" ||
    { cat "$dir/scan.json" "$dir/scan.err" >&2; fail "galaxy scan"; }
  jq -e --arg d "$d_desc" --argjson p "$d_port" --argjson links "$(jq .links "$dir/sm.json")" \
    '.ports_read == 2 * $links and .ports_failed == 0 and .ports_with_errors == 1 and
     ([.ports[] | select(.description == $d and .port == $p) | .counters.PortRcvErrors] == [7])' \
    "$dir/scan.json" >/dev/null || { jq 'del(.ports)' "$dir/scan.json" >&2; fail "galaxy scan: counters"; }
  sim "$diag_host" perfquery "$d_lid" "$d_port" >"$dir/pq.txt" 2>&1 || fail "perfquery $d_lid $d_port"
  grep -Eq "^PortRcvErrors:\.+7\$" "$dir/pq.txt" || { cat "$dir/pq.txt" >&2; fail "perfquery: PortRcvErrors"; }

  # The link the trace leaves its first switch by, unplugged (ibsim's console): the trace stops
  # there and says why, when the destination is still reachable some other way.
  if [ "$(jq .hop_count "$dir/gtrace.json")" -gt 1 ]; then
    sim_console "Unlink \"$(jq -r .hops[0].description "$dir/gtrace.json")\"[$(jq .hops[0].out_port "$dir/gtrace.json")]"
    if sim "$diag_host" "$galaxy" trace --fabric ib: --json "$src" "$dst" >"$dir/gtrace2.json" 2>&1; then
      cat "$dir/gtrace2.json" >&2
      fail "a trace across an unplugged link arrived"
    fi
    jq -e '.reachable == false and .failure == "link_down" and .failed_hop == 0' \
      "$dir/gtrace2.json" >/dev/null || { cat "$dir/gtrace2.json" >&2; fail "trace: the unplugged link"; }
    echo "  trace across the unplugged link: $(jq -r '.failure + " at hop 0: " + .reason' "$dir/gtrace2.json")"
  fi
  echo "ok [$net_name]: $want_sw switches, $want_ca CA ports, $(jq .smps_sent "$dir/sm.json") SMPs, $(jq .total_s "$dir/sm.json") s"
  stop_sim
}

check_fabric "ibsim net" "$examples/net" Switch1 Hca1 2 2
check_fabric "ibsim 2-port HCAs" "$examples/net.2sw2path4hca2port" Hca1 Hca2 2 4
"$galaxy" fabric --fabric sim:fattree:k=36,levels=2 --no-chips --write "$dir/ft36.net" >/dev/null
check_fabric "fat tree, 36-port switches, 2 levels" "$dir/ft36.net" nic00000 nic00017 54 648
"$galaxy" fabric --fabric sim:fattree:k=16,levels=3 --no-chips --write "$dir/ft1k.net" >/dev/null
check_fabric "fat tree, 1,024 hosts, 3 levels" "$dir/ft1k.net" nic00000 nic01000 320 1024
# Light sweeps: `galaxy sm` as a daemon sweeping every second reads only the switches'
# SwitchInfo while nothing changes (one heavy sweep in 2.5 s), and sweeps heavily once ibsim's
# console unplugs a link (a switch's PortStateChange), then is quiet again.
net_name="light sweeps"
"$galaxy" fabric --fabric sim:fattree:k=8,levels=2 --no-chips --write "$dir/ft8.net" >/dev/null
start_sim "$dir/ft8.net" nic00000
sim nic00000 "$galaxy" sm --fabric ib: --json --sweep-interval 1 >"$dir/sweeps.json" 2>"$dir/sm.err" &
gsm_pid=$!
sleep 2.5
[ "$(wc -l <"$dir/sweeps.json")" = 1 ] || { cat "$dir/sweeps.json" >&2; fail "heavy sweeps without a change"; }
sim_console 'Unlink "l1/sw00003"[8]'
for _ in $(seq 1 50); do
  [ "$(wc -l <"$dir/sweeps.json")" -ge 2 ] && break
  sleep 0.1
done
sleep 2
kill "$gsm_pid"; wait "$gsm_pid" 2>/dev/null || true
gsm_pid=""
[ "$(wc -l <"$dir/sweeps.json")" = 2 ] || { cat "$dir/sweeps.json" >&2; fail "not one heavy sweep after the unplug"; }
tail -1 "$dir/sweeps.json" | jq -e '.links == 63 and .subnet_up' >/dev/null || fail "the heavy sweep after the unplug"
echo "ok [light sweeps]: quiet while nothing changed, one heavy sweep after an unplugged link"
stop_sim
echo "all fabrics up under Galaxy's SM, confirmed by infiniband-diags"
