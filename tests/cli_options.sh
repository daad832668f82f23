#!/usr/bin/env bash
# Every numeric option of every `galaxy` subcommand is refused when it is not a finite number in
# its documented range (docs/cli.md), and --peers when it names something that is not a peer: the
# command stops before it runs, exits non-zero and names the option, the value and the error id.
# Argument: the galaxy binary.
set -euo pipefail
galaxy=$1
source "$(dirname "$0")/cli_common.sh"

# command line | text the error must contain
cases=(
  "bogus|E9508 galaxy: 'bogus' is not a command; the commands are: bench,"
  "bench bogus|E9508 galaxy bench: 'bogus' is not a command; the commands are: mgmt,"
  "oob boil --chip 0 --fabric sim:fattree:k=4|E5724 .*'boil' is unknown; known: status, power-on"
  "oob read --chip 0 --fabric sim:fattree:k=4|E5726 .*needs a register"
  "oob write --chip 0 --register SCRATCH --fabric sim:fattree:k=4|E5731 .*needs a value"
  "oob write --chip 0 --register CHIP_IDENT --value 1 --fabric sim:fattree:k=4|E2204 .*refused the value"
  "oob read --chip 0 --register 0x7fff --fabric sim:fattree:k=4|E2203"
  "oob temperature --chip 9999 --fabric sim:fattree:k=4|E3007"
  "sim regread --seed -1|--seed: E9703 .*-1 is outside \[0, 18446744073709551615\]"
  "sim regread --seed 18446744073709551616|--seed: E9703"
  "sim regread --count 0|--count: E9703 .*0 is outside \[1, 1000000\]"
  "sim regread --count 1x|--count: E9702 .*'1x' is not an integer"
  "sim regread --max-hops 21|--max-hops: E9703"
  "sim regread --max-hops 010|--max-hops: E9702 .*without a leading 0"
  "sim regread --server-nic -1|--server-nic: E9703"
  "bench pingpong --reps -3|--reps: E9703 .*-3 is outside \[1, 1000\]"
  "bench pingpong --iters -1|--iters: E9703"
  "bench rdma --reps 1e3|--reps: E9702"
  "bench pingpong --peers bogus|--peers: E9621 .*'bogus' is not a peer"
  "bench bw --peers ucx,ucx|--peers: E9621 .*given twice"
  "bench bw --peers none,ucx|--peers: E9621 .*none goes alone"
  "bench bw --peers ucx,|--peers: E9621"
  "bench coll-live --np 2,1|--np: E9703 .*1 is outside \[2, 64\]"
  "bench coll-live --hosts 3|--hosts: E9703"
  "bench coll-live --reps 0|--reps: E9703"
  "bench coll-live --cpu-iters 0|--cpu-iters: E9703"
  "bench coll-live --target-ms 1e3|--target-ms: E9702"
  "bench mgmt --count 0|--count: E9703"
  "bench nic --iterations 0|--iterations: E9703"
  "bench coll --sizes 0|--sizes: E9703"
  "bench coll --bytes 117|--bytes: E9703"
  "bench coll --degree 65|--degree: E9703"
  "bench scale --max-nics 0|--max-nics: E9703"
  "bench via --lat-sizes 0|--lat-sizes: E9703"
  "bench via --bw-sizes 16777217|--bw-sizes: E9703"
  "bench via --reps 0|--reps: E9703"
  "bench via --peers openmpi,bogus|--peers: E9621"
  "bench mpi --lat-sizes 0|--lat-sizes: E9703"
  "bench mpi --bw-sizes 16777217|--bw-sizes: E9703"
  "bench mpi --reps 0|--reps: E9703"
  "fabric up --spin-us 1000001|--spin-us: E9703"
  "fabric up --frame-bytes 1000|--frame-bytes: E9703 .*1000 is outside \[1200, 65457\]"
  "bench scale --timeout-s -5|--timeout-s: E9703"
  "bench daemon --seconds nan|--seconds: E9700"
  "bench daemon --clients 0|--clients: E9703"
  "bench daemon --flaps -1|--flaps: E9703"
  "bench daemon --storm-s inf|--storm-s: E9700"
  "bench daemon --io-threads 99|--io-threads: E9703"
  "bench sim --time-us inf|--time-us: E9700 .*'inf' is not a finite number"
  "bench sim --time-us 0|--time-us: E9701 .*0 is outside (0, 1000000\]"
  "bench sim --load nan|--load: E9700"
  "bench sim --load 1.5|--load: E9701"
  "bench sim --bytes 0|--bytes: E9703"
  "bench sim --seed -1|--seed: E9703"
  "bist --max-ber nan|--max-ber: E9700 .*'nan' is not a finite number"
  "bist --max-ber 2|--max-ber: E9701"
  "bist --duration-us 0|--duration-us: E9703"
  "bist --intensity 101|--intensity: E9703"
  "bist --port -1|--port: E9703"
  "fabric --server-nic -1|--server-nic: E9703"
  "fabric up --fabric live:x --op-timeout-ms 0|--op-timeout-ms: E9703"
  "fabric up --fabric live:x --timeout-s nan|--timeout-s: E9700"
  "fabricd --fabric live:x --host h --op-timeout-ms -1|--op-timeout-ms: E9703"
  "fabricd --fabric live:x --host h --spin-us 1e9|--spin-us: E9702"
  "fabricd --fabric live:x --host h --frame-bytes 70000|--frame-bytes: E9703"
  "faults --watch-us nan|--watch-us: E9700 .*'nan' is not a finite number"
  "faults --watch-us -1|--watch-us: E9701"
  "faults --mask -1|--mask: E9703"
  "inject link-down 0:2 --window-us -1|--window-us: E9703"
  "nmd --scan-interval-s inf|--scan-interval-s: E9700 .*'inf' is not a finite number"
  "nmd --scan-interval-s 1e300|--scan-interval-s: E9701 .*1e300 is outside \[0, 86400\]"
  "nmd --scan-interval-s nan|--scan-interval-s: E9700"
  "nmd --scan-interval-s -1|--scan-interval-s: E9701"
  "nmd --sweep-interval-s inf|--sweep-interval-s: E9700"
  "nmd --fault-audit-s nan|--fault-audit-s: E9700"
  "nmd --fault-audit-s -1|--fault-audit-s: E9701"
  "nmd --max-streams 0|--max-streams: E9703"
  "nmd --max-connections -5|--max-connections: E9703"
  "nmd --http-threads 0|--http-threads: E9703"
  "nmd --http-io-threads -1|--http-io-threads: E9703"
  "nmd --http-io-threads 65|--http-io-threads: E9703"
  "nmd --sm-poll-s 0|--sm-poll-s: E9701 .*0 is outside \[0.001, 86400\]"
  "nmd --sm-poll-s nan|--sm-poll-s: E9700"
  "nmd --sm-poll-retries 0|--sm-poll-retries: E9703"
  "nmd --sm-poll-retries 101|--sm-poll-retries: E9703"
  "nmd --sm-key -1|--sm-key: E9703"
  "nmd --max-body-bytes 1x|--max-body-bytes: E9702"
  "nmd --sweep-interval-s 1e300|--sweep-interval-s: E9701"
  "nmd --sweep-interval-s nan|--sweep-interval-s: E9700"
  "nmd --fault-mask 0x1ffffffffffffffff|--fault-mask: E9703"
  "eeprom read --chip 1 --addr 0 --count 0|--count: E9703"
  "eeprom read --chip 1 --addr 0 --count 257|--count: E9703"
  "route --readback -1|--readback: E9703"
  "bringup --mps -1|--mps: E9703"
  "scan --interval-ms inf|--interval-ms: E9700"
  "scan --interval-ms -1|--interval-ms: E9701"
  "scan --count 0|--count: E9703"
  "scan --noisy-links -1|--noisy-links: E9703"
  "scan --error-rate 1|--error-rate: E9701 .*1 is outside \[0, 1)"
  "scan --error-rate nan|--error-rate: E9700"
  "scan --top -1|--top: E9703"
  "simd --seed -1|--seed: E9703"
  "discover --seed -5|--seed: E9703"
  "trace nic:0 nic:1 --server-nic 1e3|--server-nic: E9702"
)
for c in "${cases[@]}"; do
  args=${c%%|*}
  want=${c#*|}
  # shellcheck disable=SC2086  # the arguments are split on purpose
  expect_refused "$want" $args
done
echo "ok: ${#cases[@]} invalid numbers and peer lists refused, each naming the option"

# Values in range are taken as given, decimal or 0x hex.
out=$("$galaxy" fabric --fabric sim:fattree:k=4 --no-chips --server-nic 10 --json) ||
  fail "fabric --server-nic 10: exit $?: $out"
grep -q '"server_nic": 10' <<<"$out" || fail "fabric --server-nic 10 is not NIC 10: $out"
out=$("$galaxy" fabric --fabric sim:fattree:k=4 --no-chips --server-nic 0xb --json) ||
  fail "fabric --server-nic 0xb: exit $?: $out"
grep -q '"server_nic": 11' <<<"$out" || fail "fabric --server-nic 0xb is not NIC 11: $out"
echo "ok: numbers in range are accepted, decimal or 0x hex"

# Topology files users give (docs/topologies.md): bad ones are refused with an error id and a
# non-zero exit, never a crash (134/139) or a hang; --json output stays JSON whatever bytes the
# input holds (Latin-1 descriptions are written as U+FFFD).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
: >"$dir/empty"
printf '#\n# comments only\n' >"$dir/comments"
mkdir "$dir/adir"
printf 'Switch\t8 "S-01\000"\n' >"$dir/nul"
printf 'x%.0s' $(seq 1 5000) >"$dir/long"
printf '\037\213\010\000gz' >"$dir/gz"
printf 'ibwarn: [7] _do_madrpc: recv failed\nSwitch\t8 "S-0000000000000001"\t# "sw\351" base port 0 lid 1 lmc 0\n[2]\t"H-0000000000000002"[2]\t# "n\366de HCA-1" lid 9 4xEDR\n[3]\t"H-0000000000000003"[1]\n\nCa\t1 "H-0000000000000003"\t# "other HCA-1"\n[1]\t"S-0000000000000001"[3]\n\nHca\t2 "H-0000000000000002"\t# "n\366de HCA-1"\n[2]\t"S-0000000000000001"[2]\t# lid 9 lmc 0 "sw\351" lid 1 4xEDR\n' >"$dir/latin1"
for c in "empty|E3954" "comments|E3915" "adir|E3957" "nul|E3956" "long|E3912" "gz|E3955" \
  "/dev/zero|E3958"; do
  f=${c%%|*}
  want=${c#*|}
  [[ $f == /* ]] || f=$dir/$f
  expect_refused "$want" fabric --fabric "file:$f" --no-chips
  expect_refused "$want" fabric --fabric "file:$f" --no-chips --json
done
out=$("$galaxy" fabric --fabric "file:$dir/latin1" --no-chips --chips --json 2>/dev/null) ||
  fail "latin1 --json: exit $?: $out"
python3 -c 'import json,sys; json.loads(sys.stdin.read())' <<<"$out" || fail "not JSON: $out"
grep -q '"description": "n.de HCA-1"' <<<"$out" || fail "latin1 description lost: $out"
err=$("$galaxy" fabric --fabric "file:$dir/latin1" --no-chips 2>&1 >/dev/null)
grep -q "E3920 .*latin1:1: not a topology line" <<<"$err" || fail "no warning for line 1: $err"
# A NIC cabled on its second port only is routed and reached; trace takes descriptions and GUIDs.
out=$("$galaxy" bringup --fabric "file:$dir/latin1" --mps 8 2>&1) || fail "bringup: $out"
grep -q "8 of 8 MPs delivered" <<<"$out" || fail "port-2 NIC not reached: $out"
for name in 1 nic:0 H-0000000000000002 0x2; do
  out=$("$galaxy" trace --fabric "file:$dir/latin1" --load-minhop 0x2 "$name" 2>&1) || true
  grep -q "E3009\|E9011" <<<"$out" && fail "trace does not take '$name': $out"
done
echo "ok: bad topology files refused with their error ids; identities and names kept"

# A standalone trace routes a simulated fabric first (its chips start with empty tables) unless
# told not to; a map saved by discover lets other commands skip discovery, and a map of another
# fabric or another server NIC, or a file that is no map, is refused with its id.
ft=sim:fattree:k=4
out=$("$galaxy" trace --fabric $ft nic:0 nic:15 2>&1) || fail "trace: exit $?: $out"
grep -q "routed first with fattree" <<<"$out" && grep -q "reached in 5 hops" <<<"$out" ||
  fail "trace did not route first: $out"
set +e
out=$("$galaxy" trace --fabric $ft --engine none nic:0 nic:15 2>&1)
rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "UNREACHABLE at hop 0" <<<"$out" || fail "trace --engine none: $rc $out"
"$galaxy" discover --fabric $ft --save-map "$dir/k4.map" >/dev/null || fail "discover --save-map"
out=$("$galaxy" reg read --fabric $ft --map "$dir/k4.map" --chip 20 --addr CHIP_ID 2>&1) ||
  fail "reg read --map: $out"
grep -q "read chip 20 (nic00010) 0x001 CHIP_ID = " <<<"$out" || fail "reg read --map: $out"
out=$("$galaxy" trace --fabric $ft --map "$dir/k4.map" --json nic:0 nic:15 2>&1) ||
  fail "trace --map: $out"
python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["reachable"] and j["routed"]["engine"]=="fattree"' <<<"$out" ||
  fail "trace --map --json: $out"
printf 'not a map\n{}' >"$dir/notmap"
for c in "sim:fattree:k=6|$dir/k4.map|E5708" "$ft --server-nic 2|$dir/k4.map|E5709" \
  "$ft|$dir/notmap|E5701" "$ft|$dir/empty|E5700" "$ft|/dev/zero|E3958" "$ft|$dir|E3957" \
  "$ft|$dir/none|E3950"; do
  IFS='|' read -r fab map want <<<"$c"
  # shellcheck disable=SC2086  # --fabric and its extra options are split on purpose
  expect_refused "$want" reg read --fabric $fab --map "$map" --chip 20 --addr SCRATCH
done
echo "ok: trace routes first; --map saved by discover and checked before use"
