#!/usr/bin/env bash
# The CLI as a client of the management daemon (`galaxy --server URL ...`, docs/api.md "The CLI
# as a client"): against `galaxy nmd` on a small simulated fat tree, the commands answer what the
# daemon's session holds (a register read, a path trace, a scan, an out-of-band temperature, an
# injected link fault that then shows in the fault list), a write without the token is refused,
# a command that does not run against a daemon is refused by name, and a server that does not
# answer is named in the error. Argument: the galaxy binary.
set -euo pipefail
galaxy=$1
source "$(dirname "$0")/cli_common.sh"
work=$(mktemp -d)
token=cli-$$-$RANDOM
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
GALAXY_NMD_TOKEN=$token "$galaxy" nmd --fabric sim:fattree:k=4 --listen 127.0.0.1:0 \
  --db "$work/events.db" --ready-file "$work/ready.json" >"$work/nmd.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -s "$work/ready.json" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/nmd.log"; fail "the daemon exited"; }
  sleep 0.1
done
[ -s "$work/ready.json" ] || fail "the daemon was not ready in 60 s"
url=$(sed -E 's/.*"url":"([^"]+)".*/\1/' "$work/ready.json")
g() { timeout 60 "$galaxy" --server "$url" "$@"; }
out=$(g reg read --chip 3 --addr CHIP_ID --json) || fail "reg read: $out"
grep -q '"value": 65539' <<<"$out" || fail "reg read of CHIP_ID: $out"
out=$(g trace nic:0 nic:15 --json) || fail "trace: $out"
grep -q '"reachable": true' <<<"$out" || fail "trace: $out"
out=$(GALAXY_NMD_TOKEN=$token g scan --json) || fail "scan: $out"
grep -q '"requests"' <<<"$out" || fail "scan summary: $out"
out=$(GALAXY_NMD_TOKEN=$token g oob temperature --chip 3 --json) || fail "oob: $out"
grep -Eq '"temperature_c": (2[6-9]|[3-7][0-9])' <<<"$out" || fail "oob temperature: $out"
expect_refused "401\|token" --server "$url" --token wrong inject link-down 0:2
GALAXY_NMD_TOKEN=$token g inject link-down 0:2 >/dev/null || fail "inject link-down"
for _ in $(seq 1 50); do
  out=$(g faults --json) || fail "faults: $out"
  grep -q 'link' <<<"$out" && break
  sleep 0.1
done
grep -q 'link' <<<"$out" || fail "the injected link-down never reached the fault list: $out"
expect_refused "E9507 \`galaxy bringup\` does not run against a daemon" --server "$url" bringup --fabric sim:line:n=3
expect_refused "127.0.0.1:1" --server http://127.0.0.1:1 reg read --chip 3 --addr SCRATCH
echo "ok: the CLI as a client: reads, trace, scan, out-of-band, injection, refusals"
