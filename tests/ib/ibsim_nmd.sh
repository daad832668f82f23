#!/usr/bin/env bash
# `galaxy nmd` serving an InfiniBand subnet (nmd/ib_fabric.h) on ibsim, Galaxy its only SM,
# judged by infiniband-diags and by the API's own answers:
#   start         the daemon sweeps the subnet up: iblinkinfo shows every linked port ACTIVE;
#   GET /api/...  status, chips and the trace (the same switches ibtracert walks), a switch's
#                 forwarding table (what ibroute dumps), a CA's PortCounters read now;
#   scans         a counter set in ibsim's console rises between two scans: a port_errors fault;
#   routing       PUT /api/config routing_engine re-sweeps with the engine; ibroute agrees;
#   sweeps        a link unplugged in ibsim's console: the next sweep raises a critical link_down
#                 alarm on that port and the console shows the link down;
#   refusals      Galaxy-only operations (registers, inject, fault_mask) answer 409 with E8407;
#   CLI           `galaxy --server ... trace` prints the IB trace from the daemon;
#   other SMs     OpenSM beside the daemon stands by (SMInfo), then is handed the subnet.
# Usage: ibsim_nmd.sh <galaxy binary>. Exit 77 (skipped) without ibsim, infiniband-diags, curl
# or jq.
set -euo pipefail
galaxy=$1
# shellcheck source=tests/ib/ibsim_lib.sh
. "$(dirname "$0")/ibsim_lib.sh"
for tool in ibsim opensm ibroute ibtracert iblinkinfo curl jq; do
  command -v "$tool" >/dev/null || { echo "skip: $tool not installed"; exit 77; }
done
[ -f "$sim_so" ] || { echo "skip: $sim_so missing"; exit 77; }

dir=$(mktemp -d)
nmd_pid=""
osm_pid=""
cleanup() {
  for p in $nmd_pid $osm_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  stop_sim
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in nmd.err osm.out ibsim.log; do
    [ -s "$dir/$f" ] && { echo "--- $f" >&2; tail -30 "$dir/$f" >&2; }
  done
  exit 1
}

# A 2-level fat tree of 8-port switches: 8 leaves, 4 spines, 32 hosts.
"$galaxy" fabric --fabric sim:fattree:k=8,levels=2 --no-chips --write "$dir/ft8.net" >/dev/null
start_sim "$dir/ft8.net" nic00000

# The daemon, attached at host nic00000; scans and sweeps on request only.
echo "ibsim-nmd-test-token" >"$dir/token"
SIM_HOST=nic00000 LD_PRELOAD="$sim_so" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
  "$galaxy" nmd --fabric ib: --listen 127.0.0.1:0 --db "$dir/events.db" \
  --token-file "$dir/token" --ready-file "$dir/ready.json" --scan-interval-s 0 \
  --sweep-interval-s 0 >"$dir/nmd.out" 2>"$dir/nmd.err" &
nmd_pid=$!
for _ in $(seq 1 300); do
  [ -s "$dir/ready.json" ] && break
  kill -0 "$nmd_pid" 2>/dev/null || fail "galaxy nmd exited"
  sleep 0.1
done
[ -s "$dir/ready.json" ] || fail "galaxy nmd did not become ready"
url=$(jq -r .url "$dir/ready.json")
url=${url%/}
auth="Authorization: Bearer ibsim-nmd-test-token"
get() { curl -sf "$url$1" || fail "GET $1"; }
send() {  # <method> <path> [body] -> the body; the HTTP status in $dir/code
  curl -s -o "$dir/body" -w '%{http_code}' -X "$1" -H "$auth" -H 'Content-Type: application/json' \
    ${3:+-d "$3"} "$url$2" >"$dir/code" || fail "$1 $2"
  cat "$dir/body"
}

get /api/status >"$dir/status.json"
jq -e '.kind == "ib" and .chips == 44 and .nics == 32 and .nrcs == 12 and .links == 64 and
       .links_down == 0 and .routing_engine == "fattree"' "$dir/status.json" >/dev/null ||
  { cat "$dir/status.json" >&2; fail "status"; }
get /api/routes | jq -e '.subnet_up == true and .unreachable_routes == 0' >/dev/null ||
  fail "routes: subnet not up"
sim nic00017 iblinkinfo >"$dir/links.txt" 2>&1 || fail "iblinkinfo"
if grep -E "(Initialize|Armed|Down)/ *LinkUp" "$dir/links.txt" >&2; then fail "ports not ACTIVE"; fi

# Chips by the names users give: a description, a GUID name, a LID.
get "/api/chips/nic00005" | jq -e '.kind == "nic" and .ports[0].port == 1 and
  .ports[0].link == "up" and (.lids | length) == 1' >/dev/null || fail "chip nic00005"
get "/api/chips/l1%2Fsw00000" | jq -e '.kind == "nrc" and .level == 1 and .port_count == 8 and
  ([.ports[] | select(.link == "up")] | length) == 8' >/dev/null || fail "chip l1/sw00000"
leaf_guid=$(get "/api/chips/l1%2Fsw00000" | jq -r .guid)
get "/api/chips/$(printf 'S-%016x' "$((leaf_guid))")" | jq -e '.name == "l1/sw00000"' >/dev/null ||
  fail "a switch by its GUID name"

# The trace against ibtracert: the same switches, entered by the same ports.
src_lid=$(get "/api/chips/nic00000" | jq '.lids[0]')
dst_lid=$(get "/api/chips/nic00031" | jq '.lids[0]')
trace_matches() {
  get "/api/trace?src=nic00000&dst=nic00031" >"$dir/trace.json"
  sim nic00017 ibtracert "$src_lid" "$dst_lid" >"$dir/ibtracert.txt" 2>&1 || fail "ibtracert"
  local want got
  want=$(awk "$hex"'/-> switch/ { match($0, /\{0x[0-9a-fA-F]+\}\[[0-9]+\]/); s = substr($0, RSTART + 1, RLENGTH - 2);
               split(s, f, /\}\[/); print hex(f[1]), f[2] }' "$dir/ibtracert.txt")
  got=$(jq -r '.hops[] | .guid + " " + (.in_port | tostring)' "$dir/trace.json" |
        awk "$hex"'{ print hex($1), $2 }')
  [ -n "$want" ] && [ "$want" = "$got" ] && jq -e '.reachable' "$dir/trace.json" >/dev/null ||
    { cat "$dir/ibtracert.txt" "$dir/trace.json" >&2; fail "the daemon's trace differs from ibtracert"; }
}
trace_matches

# A switch's table as the daemon shows it against ibroute's dump of the switch.
routes_match() {  # <engine>
  get "/api/chips/l1%2Fsw00000/routes" >"$dir/lft.json"
  jq -e --arg e "$1" '.engine == $e and (.ranges | length) > 0' "$dir/lft.json" >/dev/null ||
    { cat "$dir/lft.json" >&2; fail "routes of l1/sw00000 ($1)"; }
  local leaf_lid
  leaf_lid=$(jq .lid "$dir/lft.json")
  sim nic00017 ibroute "$leaf_lid" >"$dir/ibroute.txt" 2>&1 || fail "ibroute $leaf_lid"
  jq -r '.ranges[] | range(.first_lid; .last_lid + 1) as $l | "\($l) \(.port)"' "$dir/lft.json" |
    sort -n >"$dir/lft.ours"
  awk "$hex"'/^0x/ { print hex($1), $2 + 0 }' "$dir/ibroute.txt" | sort -n >"$dir/lft.theirs"
  cmp -s "$dir/lft.ours" "$dir/lft.theirs" ||
    { diff "$dir/lft.ours" "$dir/lft.theirs" | head >&2; fail "the daemon's table differs from ibroute ($1)"; }
}
routes_match fattree

# Counters: a baseline scan, a counter set in ibsim, a second scan -> one port's errors rose.
get "/api/chips/nic00003/status" | jq -e '.first_read == true and .ports[0].read == true' \
  >/dev/null || fail "chip status"
send POST /api/scans >"$dir/scan1.json"
jq -e '.fabric == "ib" and .ports_read == 128 and .ports_failed == 0' "$dir/scan1.json" >/dev/null ||
  { cat "$dir/scan1.json" >&2; fail "first scan"; }
sim_console 'PerformanceSet "nic00003"[1] PortCounters.PortRcvErrors=5'
send POST /api/scans >"$dir/scan2.json"
jq -e '.ports_errors_rose == 1 and .ports_with_errors == 1' "$dir/scan2.json" >/dev/null ||
  { cat "$dir/scan2.json" >&2; fail "second scan: the counter set in ibsim"; }
get "/api/faults" | jq -e '[.faults[] | select(.cause == "port_errors" and .location ==
  "nic00003 port 1")] | length == 1' >/dev/null || fail "no port_errors fault for nic00003 port 1"
get "/api/chips/nic00003" | jq -e '.ports[0].counters.PortRcvErrors == 5' >/dev/null ||
  fail "chip view: PortRcvErrors"
get "/api/chips/nic00003/status" | jq -e '.first_read == false and
  ([.changes[] | select(.counter == "PortRcvErrors" and .delta == 5)] | length) == 1' \
  >/dev/null || fail "chip status: the change"

# Routing: another engine re-sweeps; the switch holds what the daemon shows.
send PUT /api/config '{"routing_engine": "minhop"}' >/dev/null
[ "$(cat "$dir/code")" = 200 ] || { cat "$dir/body" >&2; fail "PUT routing_engine"; }
get /api/routes | jq -e '.engine == "minhop" and .subnet_up == true' >/dev/null ||
  fail "routes after minhop"
routes_match minhop
trace_matches

# Galaxy-only operations are refused by name.
for req in "GET /api/chips/nic00003/registers/0x10" \
           "POST /api/inject {\"action\":\"link-down\",\"chip\":\"nic00003\",\"port\":1}" \
           "PUT /api/config {\"fault_mask\":1}"; do
  read -r method path body <<<"$req"
  send "$method" "$path" "$body" >/dev/null
  [ "$(cat "$dir/code")" = 409 ] && jq -e '.error.id == "E8407"' "$dir/body" >/dev/null ||
    { cat "$dir/body" >&2; fail "$method $path on InfiniBand: want 409 E8407"; }
done

# The client: the IB trace printed from the daemon.
"$galaxy" --server "$url" trace nic00000 nic00031 >"$dir/cli_trace.txt" 2>&1 ||
  { cat "$dir/cli_trace.txt" >&2; fail "galaxy --server trace"; }
grep -q "reached in 3 switches" "$dir/cli_trace.txt" || { cat "$dir/cli_trace.txt" >&2; fail "client trace"; }

# A link unplugged in ibsim: the next sweep raises a critical link_down alarm on that port.
sim_console 'Unlink "l1/sw00000"[8]'
send POST /api/discover >"$dir/sweep.json"
jq -e '.changed == true and .links == 63 and .subnet_up == true' "$dir/sweep.json" >/dev/null ||
  { cat "$dir/sweep.json" >&2; fail "sweep after the unplug"; }
get "/api/faults" | jq -e '[.faults[] | select(.cause == "link_down" and .severity == "critical"
  and .location == "l1/sw00000 port 8")] | length == 1' >/dev/null || fail "no link_down alarm"
get /api/status | jq -e '.links_down == 1' >/dev/null || fail "status: links_down"
get "/api/chips/l1%2Fsw00000" | jq -e '.ports[7].link == "down" and .ports[7].port == 8' \
  >/dev/null || fail "chip view: the unplugged port"
trace_matches

# Another SM: OpenSM (priority 5) started beside the daemon's master (priority 0) finds it by its
# SMInfo and stands by; the daemon's next sweep hands it the subnet (it outranks the daemon),
# and the daemon shows a standby alarm.
start_opensm nic00005 5
grep -q "Entering STANDBY state" "$dir/osm.out" || fail "OpenSM did not stand by under the daemon"
send POST /api/discover >"$dir/handover.json"
jq -e '.role == "standby" and (.handed_over_to | startswith("0x"))' "$dir/handover.json" \
  >/dev/null || { cat "$dir/handover.json" >&2; fail "the daemon did not hand over to OpenSM"; }
wait_for_line "$dir/osm.out" "Entering MASTER state" 50 || fail "OpenSM did not take the handover"
get /api/routes | jq -e '.role == "standby"' >/dev/null || fail "routes: role"
kill "$osm_pid"
wait "$osm_pid" 2>/dev/null || true
osm_pid=""

kill -TERM "$nmd_pid"
wait "$nmd_pid" || fail "galaxy nmd exited with $? on SIGTERM"
nmd_pid=""
echo "ok: galaxy nmd served the ibsim subnet (44 nodes, 64 links): trace, tables, counters, sweeps"
