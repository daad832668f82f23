#!/usr/bin/env bash
# A live fabric of two hosts on loopback, as an operator runs it: `galaxy fabric up`, traffic
# between the hosts (the documented example program, one process on each host), then `kill -9`
# of host h2's `galaxy fabricd` mid-traffic. Within bounds, h1's ends of the links to h2 go down,
# the management daemon (`galaxy nmd`) stores link-down faults and raises alarms, `galaxy faults`
# lists the links found down and h2's chips not responding, and `galaxy scan` counts those chips
# as not responding. `galaxy fabric up --hosts h2` alone brings h2 back: traffic flows again and
# scans find every chip. A `fabric up` that fails (a daemon that cannot start, links that cannot
# train in time) or is interrupted leaves no daemon and no segment behind. Prints the measured
# times. Arguments: the galaxy binary, the glex_example binary. UDP ports 17470 and 17471, held by
# CTest's RESOURCE_LOCK galaxy_live_ports_17470.
set -euo pipefail
galaxy=$1
example=$2
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

name=rec$$
F=live:fattree:k=4,levels=2,name=$name,hosts=h1:127.0.0.1:17470,h2:127.0.0.1:17471
work=$(mktemp -d /tmp/galaxy-recovery-XXXXXX)
nmd_pid=
traffic_pid=
holder_pid=
cleanup() {
  for p in $traffic_pid $nmd_pid $holder_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$galaxy" fabric down --fabric "$F" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# One exchange between a process on h1 (rank 0) and one on h2 (rank 1): MPs both ways and an
# RDMA put from h1 into h2's memory. Exit 0 when both ranks succeed.
exchange() {
  local dir
  dir=$(mktemp -d "$work/job-XXXXXX")
  GLEX_FABRIC=$name GLEX_HOST=h1 GLEX_RANK=0 GLEX_SIZE=2 GLEX_RENDEZVOUS=$dir \
    timeout 20 "$example" >"$dir/r0" 2>&1 &
  local a=$!
  GLEX_FABRIC=$name GLEX_HOST=h2 GLEX_RANK=1 GLEX_SIZE=2 GLEX_RENDEZVOUS=$dir \
    timeout 20 "$example" >"$dir/r1" 2>&1 &
  local b=$!
  local ra=0 rb=0
  wait $a || ra=$?
  wait $b || rb=$?
  [ $ra -eq 0 ] && [ $rb -eq 0 ]
}

host_field() { # host field
  "$galaxy" fabric status --fabric "$F" --json | jq -r ".hosts[] | select(.host == \"$1\") | .$2"
}

# --- up, with traffic
"$galaxy" fabric up --fabric "$F" >"$work/up1" 2>&1 || fail "fabric up: $(cat "$work/up1")"
exchange || fail "no traffic between h1 and h2 after fabric up"
echo "ok: fabric up; traffic between h1 and h2"

# A drop is logged with its id, and a storm of them is rate-limited: 50 datagrams that name no
# link of h1, sent to its port.
log1=/tmp/galaxy.$name.h1.log
before=$(grep -c ' E4823 ' "$log1" || true)
for i in $(seq 50); do echo -n "not a link frame $i" >/dev/udp/127.0.0.1/17470; done
for i in $(seq 50); do
  [ "$(grep -c ' E4823 ' "$log1" || true)" -gt "$before" ] && break
  sleep 0.1
done
lines=$(($(grep -c ' E4823 ' "$log1" || true) - before))
[ "$lines" -ge 1 ] || fail "no E4823 line in h1's log after 50 foreign datagrams: $(tail -3 "$log1")"
[ "$lines" -le 10 ] || fail "$lines E4823 lines for 50 drops: not rate-limited"
grep ' E4823 ' "$log1" | head -1 | grep -q 'WARN E4823 dropped: a datagram of' ||
  fail "E4823 line: $(grep ' E4823 ' "$log1" | head -1)"
echo "ok: 50 dropped datagrams logged as E4823, $lines lines (rate-limited)"

# The management daemon on h1, scanning every second.
"$galaxy" nmd --fabric "$F" --host h1 --engine minhop --listen 127.0.0.1:0 --db "$work/nmd.db" \
  --scan-interval-s 1 --sweep-interval-s 2 --ready-file "$work/ready" >"$work/nmd.log" 2>&1 &
nmd_pid=$!
for _ in $(seq 1 200); do [ -s "$work/ready" ] && break; sleep 0.1; done
[ -s "$work/ready" ] || fail "nmd not ready: $(cat "$work/nmd.log")"
url=$(jq -r .url "$work/ready")
url=${url%/}

# Traffic runs without pause while h2's daemon dies.
(
  while [ ! -e "$work/stop" ]; do
    if exchange; then echo ok >>"$work/traffic"; else echo failed >>"$work/traffic"; fi
  done
) &
traffic_pid=$!
for _ in $(seq 1 100); do [ -s "$work/traffic" ] && break; sleep 0.1; done
grep -q ok "$work/traffic" || fail "no traffic before the kill"

# --- kill -9 of h2's daemon
victim=$(host_field h2 pid)
[ -n "$victim" ] && [ "$victim" != null ] || fail "no daemon of h2"
kill -9 "$victim"
t0=$(now_ms)
while kill -0 "$victim" 2>/dev/null; do sleep 0.01; done

# h1's ends of the links to h2 go down (silence: 2 s).
links_ms=
while [ $(($(now_ms) - t0)) -lt 10000 ]; do
  if [ "$(host_field h1 links_up)" = false ]; then
    links_ms=$(($(now_ms) - t0))
    break
  fi
  sleep 0.05
done
[ -n "$links_ms" ] || fail "h1's links to h2 still up 10 s after h2's daemon died"
echo "ok: h1's links to h2 down ${links_ms} ms after h2's daemon died"

# The management daemon: link-down faults at h1's four ends of the cables to h2, and alarms.
nmd_ms=
while [ $(($(now_ms) - t0)) -lt 15000 ]; do
  faults=$(curl -sf "$url/api/faults?limit=500" || echo '{"faults": []}')
  downs=$(jq '[.faults[] | select(.kind == "fault" and .cause == "link_down") | .location]
              | unique | length' <<<"$faults")
  alarms=$(jq '[.faults[] | select(.kind == "alarm")] | length' <<<"$faults")
  if [ "$downs" -ge 4 ] && [ "$alarms" -ge 1 ]; then
    nmd_ms=$(($(now_ms) - t0))
    break
  fi
  sleep 0.1
done
[ -n "$nmd_ms" ] || fail "nmd: not 4 link-down faults and an alarm 15 s after the kill: $faults"
echo "ok: nmd: link-down faults at $downs ports and $alarms alarms ${nmd_ms} ms after the kill"
# Its scans count h2's chips (gone from its map after a sweep) as not responding.
silent=0
while [ $(($(now_ms) - t0)) -lt 20000 ]; do
  silent=$(curl -sf "$url/api/status" | jq '.not_responding')
  [ "$silent" -ge 1 ] && break
  sleep 0.2
done
[ "$silent" -ge 1 ] || fail "nmd: no chip of h2 not responding 20 s after the kill"
echo "ok: nmd: $silent of h2's chips not responding"

touch "$work/stop"
wait "$traffic_pid" || true
traffic_pid=
grep -q failed "$work/traffic" || fail "traffic did not notice that h2's daemon died"

# `galaxy faults` from h1: the links found down and h2's chips not responding; exit 1.
set +e
"$galaxy" faults --fabric "$F" --host h1 --json >"$work/faults.json" 2>"$work/faults.err"
rc=$?
set -e
faults_ms=$(($(now_ms) - t0))
[ $rc -eq 1 ] || fail "galaxy faults: exit $rc, expected 1: $(cat "$work/faults.err")"
[ "$(jq '.links_down | length' "$work/faults.json")" -eq 4 ] ||
  fail "galaxy faults: not 4 links down: $(jq -c .links_down "$work/faults.json")"
[ "$(jq -r '[.not_responding[].name] | sort | join(",")' "$work/faults.json")" = \
  "l1/sw00002,l1/sw00003,l2/sw00005,nic00004,nic00005,nic00006,nic00007" ] ||
  fail "galaxy faults: not h2's 7 chips: $(jq -c .not_responding "$work/faults.json")"
echo "ok: galaxy faults: 4 links down, h2's 7 chips not responding (${faults_ms} ms after the kill)"

# `galaxy scan` of every chip from h1: h2's chips are not responding; exit 1.
set +e
"$galaxy" scan --fabric "$F" --host h1 --chips all --json >"$work/scan.json" 2>"$work/scan.err"
rc=$?
set -e
[ $rc -eq 1 ] || fail "galaxy scan: exit $rc, expected 1: $(cat "$work/scan.err")"
[ "$(jq '.non_responding' "$work/scan.json")" -eq 7 ] ||
  fail "galaxy scan: not 7 chips not responding: $(cat "$work/scan.json")"
echo "ok: galaxy scan: 7 chips not responding"

# --- rejoin: one command
t1=$(now_ms)
"$galaxy" fabric up --fabric "$F" --hosts h2 >"$work/up2" 2>&1 ||
  fail "fabric up --hosts h2: $(cat "$work/up2")"
rejoin_ms=$(($(now_ms) - t1))
grep -q 'MPs cross to every NIC started' "$work/up2" ||
  fail "fabric up --hosts h2: $(cat "$work/up2")"
exchange || fail "no traffic between h1 and h2 after fabric up --hosts h2"
echo "ok: fabric up --hosts h2 in ${rejoin_ms} ms; traffic flows again"

"$galaxy" scan --fabric "$F" --host h1 --chips all --json >"$work/scan2.json" ||
  fail "galaxy scan after the rejoin: $(cat "$work/scan2.json")"
[ "$(jq '.non_responding' "$work/scan2.json")" -eq 0 ] ||
  fail "scan after the rejoin: $(cat "$work/scan2.json")"
echo "ok: every chip answers the scan again"
# nmd follows: no link down, every chip answering, and no fault recorded over and over (the
# rejoined chips count their links' trainings from their power-on, h1's from theirs).
t2=$(now_ms)
while [ $(($(now_ms) - t2)) -lt 15000 ]; do
  st=$(curl -sf "$url/api/status")
  [ "$(jq '.links_down' <<<"$st")" -eq 0 ] && [ "$(jq '.not_responding' <<<"$st")" -eq 0 ] && break
  sleep 0.2
done
[ "$(jq '.links_down' <<<"$st")" -eq 0 ] && [ "$(jq '.not_responding' <<<"$st")" -eq 0 ] ||
  fail "nmd after the rejoin: $st"
sleep 2  # two scans
n1=$(curl -sf "$url/api/faults?limit=10000" | jq '.faults | length')
sleep 3  # three more scans and a sweep
n2=$(curl -sf "$url/api/faults?limit=10000" | jq '.faults | length')
[ "$n1" -eq "$n2" ] ||
  fail "nmd records faults after the rejoin: $n1 then $n2: $(curl -sf "$url/api/faults?limit=6")"
echo "ok: nmd: no link down, every chip answering, no new fault over 3 s after the rejoin"
kill "$nmd_pid" 2>/dev/null || true
wait "$nmd_pid" 2>/dev/null || true
nmd_pid=
"$galaxy" fabric down --fabric "$F" >/dev/null

# --- a failing fabric up leaves nothing running
left_behind() {
  pgrep -f "fabricd --fabric live:fattree:k=4,levels=2,name=$name," >/dev/null && echo daemons
  ls /dev/shm/galaxy."$name".* >/dev/null 2>&1 && echo segments
  true
}
# h2's port is taken, so h2's daemon cannot start: h1's daemon, started first, is stopped again.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 17471))
open(sys.argv[1], "w").close(); time.sleep(60)' "$work/held" &
holder_pid=$!
for _ in $(seq 1 200); do [ -e "$work/held" ] && break; sleep 0.05; done
[ -e "$work/held" ] || fail "could not hold h2's port 17471"
set +e
out=$("$galaxy" fabric up --fabric "$F" 2>&1)
rc=$?
set -e
kill "$holder_pid" 2>/dev/null || true
wait "$holder_pid" 2>/dev/null || true
holder_pid=
[ $rc -ne 0 ] || fail "fabric up with h2's port taken succeeded: $out"
want='E9414 .*daemon of host h2 exited (.*E4733 .*Address already in use).*stopped the daemons'
grep -q "$want started: h1" <<<"$out" || fail "fabric up with h2's port taken: $out"
[ -z "$(left_behind)" ] || fail "a failed fabric up left $(left_behind)"
echo "ok: a fabric up whose daemon cannot start stops the one it started"

# Links that cannot train in time (every frame lost): the timeout stops both daemons; progress
# is shown while waiting.
set +e
out=$("$galaxy" fabric up --fabric "$F" --impair drop=0.99999 --timeout-s 2 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "fabric up with links that cannot train succeeded: $out"
grep -q 'waiting: h1: 0 of 4 links to other hosts up' <<<"$out" || fail "no progress shown: $out"
grep -q 'E9415 .*stopped the daemons started: h1 (pid [0-9]*), h2' <<<"$out" ||
  fail "fabric up with links that cannot train: $out"
[ -z "$(left_behind)" ] || fail "a timed-out fabric up left $(left_behind)"
echo "ok: a fabric up that times out stops both daemons"

# Interrupted (Ctrl-C) while it waits: the daemons, in sessions of their own, are stopped too.
"$galaxy" fabric up --fabric "$F" --impair drop=0.99999 --timeout-s 60 >/dev/null 2>&1 &
up_pid=$!
segments() { ls /dev/shm/galaxy."$name".* 2>/dev/null | wc -l; }
for _ in $(seq 1 100); do [ "$(segments)" -eq 2 ] && break; sleep 0.05; done
[ "$(segments)" -eq 2 ] || fail "the daemons did not start"
kill -INT "$up_pid"
rc=0
wait "$up_pid" || rc=$?
[ $rc -eq 130 ] || fail "an interrupted fabric up exited $rc, expected 130"
for _ in $(seq 1 100); do [ -z "$(left_behind)" ] && break; sleep 0.05; done
[ -z "$(left_behind)" ] || fail "an interrupted fabric up left $(left_behind)"
echo "ok: an interrupted fabric up stops its daemons"

echo "measured after the kill: links down ${links_ms} ms, nmd faults and alarms ${nmd_ms} ms," \
  "galaxy faults done ${faults_ms} ms; rejoin ${rejoin_ms} ms"
