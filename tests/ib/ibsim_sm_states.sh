#!/usr/bin/env bash
# IBA 14.4.1's SMInfo controls on Galaxy's standby SM, sent by infiniband-diags' sminfo (its
# modifier is the SMInfo Set's AttributeModifier) beside an OpenSM master on ibsim:
#   * DISCOVER (5): the standby sweeps at once and stands by again;
#   * DISABLE (3): NOT ACTIVE, as sminfo then reads it; OpenSM killed (-9), a disabled SM does
#     not poll and does not take the subnet over;
#   * STANDBY (4): standby again, it polls the master, finds it gone and takes the subnet over:
#     sminfo reads it as master;
#   * a control that is no transition of the state (STANDBY to a standby) is refused.
# Galaxy runs with SM_Key 0: sminfo's Sets carry none.
# Usage: ibsim_sm_states.sh <galaxy binary>. Exit 77 (skipped) without ibsim, OpenSM or sminfo.
set -euo pipefail
galaxy=$(realpath "$1")
# shellcheck source=tests/ib/ibsim_lib.sh
. "$(dirname "$0")/ibsim_lib.sh"
sim_test_init opensm sminfo ibaddr jq
logs="gsm.out gsm.err osm.out sminfo.txt"
# Galaxy's SMInfo as sminfo reads it at its LID ($glid), or a Set of control $1.
sm_state() { sim nic00007 sminfo "$glid" 2>&1 | tee "$dir/sminfo.txt" | sed -n 's/.* state \([0-9]\) .*/\1/p'; }
control() { sim nic00007 sminfo "$glid" "$1" >"$dir/sminfo.txt" 2>&1; }

"$galaxy" fabric --fabric sim:fattree:k=4,levels=2 --no-chips --write "$dir/ft4.net" >/dev/null
start_sim "$dir/ft4.net" nic00000
start_opensm nic00005 10
grep -q "Entering MASTER state" "$dir/osm.out" || fail "OpenSM did not become master"

SIM_HOST=nic00000 LD_PRELOAD="$sim_so" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
  "$galaxy" sm --fabric ib: --json --sm-key 0 --priority 5 --poll-interval-ms 200 \
  --poll-retries 3 --timeout-ms 100 --retries 1 >"$dir/gsm.out" 2>"$dir/gsm.err" &
gsm_pid=$!
pids="$pids $gsm_pid"
wait_for_line "$dir/gsm.out" '"role":"standby"' 100 || fail "Galaxy did not start standby"
glid=$(sim nic00000 ibaddr | sed -n 's/.*LID start 0x\([0-9a-f]*\) .*/\1/p' | awk "$hex"' { print hex($1) }')
[ "$(sm_state)" = 2 ] || fail "sminfo does not read Galaxy as standby"

# DISCOVER: one more sweep, standby again.
sweeps=$(grep -c '"master":{' "$dir/gsm.out")
control 5 || fail "sminfo DISCOVER"
for _ in $(seq 1 50); do
  [ "$(grep -c '"master":{' "$dir/gsm.out")" -gt "$sweeps" ] && break
  sleep 0.1
done
[ "$(grep -c '"master":{' "$dir/gsm.out")" -gt "$sweeps" ] || fail "no sweep on DISCOVER"
[ "$(sm_state)" = 2 ] || fail "not standby after DISCOVER"

# STANDBY to a standby: no transition, refused (sminfo fails on the answer's status).
if control 4; then fail "STANDBY to a standby was taken"; fi
[ "$(sm_state)" = 2 ] || fail "a refused STANDBY changed the state"

# DISABLE: NOT ACTIVE; the master killed, a disabled SM stays out.
control 3 || fail "sminfo DISABLE"
wait_for_line "$dir/gsm.out" '"role":"not active"' 50 || fail "not NOT ACTIVE after DISABLE"
[ "$(sm_state)" = 0 ] || fail "sminfo does not read Galaxy as not active"
kill -9 "$osm_pid"
wait "$osm_pid" 2>/dev/null || true
osm_pid=""
sleep 2  # 200 ms polls x 3 retries, three times over
[ "$(sm_state)" = 0 ] || fail "a disabled SM left NOT ACTIVE without being told"
grep -q '"subnet_up"' <(sed -n '/"role":"not active"/,$p' "$dir/gsm.out") &&
  fail "a disabled SM swept"

# STANDBY: it polls again, the master is gone, it takes the subnet over.
control 4 || fail "sminfo STANDBY"
wait_for_line "$dir/gsm.out" '"subnet_up":true' 100 || fail "Galaxy did not take over after STANDBY"
for _ in $(seq 1 30); do [ "$(sm_state)" = 3 ] && break; sleep 0.1; done
[ "$(sm_state)" = 3 ] || fail "sminfo does not read Galaxy as master"
echo "ok: DISCOVER, DISABLE (no takeover while NOT ACTIVE), STANDBY (takeover) by sminfo"
