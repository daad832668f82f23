#!/usr/bin/env bash
# `galaxy bringup` and `galaxy bench scale` as a user runs them: fat trees of switches wider
# than TH-2's 24 ports deliver every one of 2,000 MPs; a mesh whose far chips are beyond a source
# route's 31 hops from the management server fails with the chips named (E5031) and the way out
# (--server-nic), and brought up from its middle it routes every pair; a dragonfly's non-minimal
# ways deliver every MP and spread an adversarial shift; the growth benchmark
# measures every size of a family. Argument: the galaxy binary.
set -euo pipefail
galaxy=$1
fail() { echo "FAILED: $*" >&2; exit 1; }

for spec in fattree:k=26,levels=2 fattree:k=32,levels=2; do
  out=$("$galaxy" bringup --fabric "sim:$spec" --mps 2000 --json) || fail "$spec: exit $?"
  grep -q '"mp_delivered": 2000,' <<<"$out" || fail "$spec: not every MP delivered: $out"
  grep -q '"mp_sent": 2000,' <<<"$out" || fail "$spec: not every MP sent: $out"
  grep -q '"verified": true' <<<"$out" || fail "$spec: not verified: $out"
  echo "ok: $spec, 2000 of 2000 MPs"
done

# A dragonfly with the non-minimal ways of the dragonfly engine: every MP delivered, routes
# verified deadlock free; under the adversarial shift (each group's NICs to the next group's, all
# over one global link when minimal) the packet-level simulation delivers more with them.
out=$("$galaxy" bringup --fabric sim:dragonfly:a=8,p=4,h=4 --engine dragonfly:nonminimal=1 \
  --mps 2000 --json) || fail "dragonfly nonminimal: exit $?"
grep -q '"mp_delivered": 2000,' <<<"$out" || fail "dragonfly nonminimal: not every MP: $out"
grep -q '"deadlock_free": true' <<<"$out" || fail "dragonfly nonminimal: not deadlock free: $out"
echo "ok: dragonfly:a=8,p=4,h=4 with non-minimal ways, 2000 of 2000 MPs"
delivered() {
  "$galaxy" bench sim --fabric sim:dragonfly:a=4,p=2,h=2 --engine "$1" --pattern shift --shift 8 \
    --time-us 20 --load 0.5 --json | grep -o '"data_packets_received": [0-9]*' | grep -o '[0-9]*$'
}
minimal=$(delivered dragonfly) || fail "bench sim shift, minimal: exit $?"
nonminimal=$(delivered dragonfly:nonminimal=1) || fail "bench sim shift, nonminimal: exit $?"
[ "$nonminimal" -gt $((minimal * 3 / 2)) ] ||
  fail "shift on a dragonfly: $nonminimal packets with non-minimal ways, $minimal without"
echo "ok: shift on dragonfly:a=4,p=2,h=2 delivers $nonminimal packets with non-minimal ways, $minimal without"

set +e
out=$("$galaxy" bringup --fabric sim:mesh:24x24 --engine dor 2>&1)
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "mesh 24x24 from a corner: exit $rc, expected 1: $out"
grep -q 'E5031 chip .* is not managed: its route from the server NIC or back needs more than 31 NRC hops' <<<"$out" ||
  fail "mesh 24x24 from a corner: the unmanaged chips are not named: $out"
grep -q -- '--server-nic' <<<"$out" || fail "mesh 24x24 from a corner: no hint: $out"
grep -q 'FAILED' <<<"$out" || fail "mesh 24x24 from a corner: not reported as failed: $out"
echo "ok: mesh 24x24 from a corner fails and names the chips beyond reach"

out=$("$galaxy" bringup --fabric sim:mesh:24x24 --engine dor --server-nic 300) ||
  fail "mesh 24x24 from the middle: exit $?: $out"
grep -q '^dor: 331200/331200 NIC pairs routed' <<<"$out" || fail "mesh 24x24 from the middle: $out"
grep -q '64 of 64 MPs delivered.*verified' <<<"$out" || fail "mesh 24x24 from the middle: $out"
echo "ok: mesh 24x24 from the middle routes every pair"

# `galaxy bench scale`: every size of a family brought up in a process of its own, and the fitted
# growth exponents (3-D meshes from a corner: each size verified, growth close to linear).
out=$("$galaxy" bench scale --family mesh --json 2>/dev/null) || fail "bench scale: exit $?"
[ "$(grep -c '"verified": true' <<<"$out")" -eq 4 ] || fail "bench scale: not 4 verified sizes: $out"
grep -q '"wall_exponent": ' <<<"$out" || fail "bench scale: no wall exponent: $out"
grep -q '"memory_exponent": ' <<<"$out" || fail "bench scale: no memory exponent: $out"
set +e
err=$("$galaxy" bench scale --family bogus 2>&1)
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "E9638 .*--family = 'bogus'" <<<"$err" ||
  fail "bench scale --family bogus: exit $rc: $err"
echo "ok: bench scale measures every size and refuses an unknown family"

# `galaxy bench via`: MyVIA's programs on a private live fabric, one host and two (no peers:
# their figures are the benchmark's, not the test's).
out=$("$galaxy" bench via --quick --peers none --lat-sizes 8 4096 --bw-sizes 65536 --json 2>/dev/null) ||
  fail "bench via: exit $?: $out"
[ "$(grep -c '"ours": ' <<<"$out")" -eq 8 ] || fail "bench via: not 8 measured rows: $out"
[ "$(grep -c '"test": "bw_mix"' <<<"$out")" -eq 2 ] || fail "bench via: no mix row per placement: $out"
grep -q '"error"' <<<"$out" && fail "bench via: a row failed: $out"
echo "ok: bench via runs via_pingpong, via_bw and MyVIA's size mix on one host and across two"

# `galaxy bench pingpong --cross-host`: the two processes' NICs on two hosts of a private fabric.
out=$("$galaxy" bench pingpong --cross-host --quick --peers none --json 2>/dev/null) ||
  fail "bench pingpong --cross-host: exit $?: $out"
[ "$(grep -c '"ours": ' <<<"$out")" -eq 3 ] || fail "bench pingpong --cross-host: not 3 rows: $out"
grep -q '"cross_host": true' <<<"$out" || fail "bench pingpong --cross-host: not cross-host: $out"
hosts=$(tr -d ' \n' <<<"$out" | grep -o '"hosts":\["[^"]*","[^"]*"\]')
[ -n "$hosts" ] && [ "$(cut -d'"' -f4 <<<"$hosts")" != "$(cut -d'"' -f6 <<<"$hosts")" ] ||
  fail "bench pingpong --cross-host: the NICs are not on two hosts: $hosts"
echo "ok: bench pingpong --cross-host measures between NICs of two hosts"

# `galaxy bench rdma --cross-host`: a put's source is read by the daemon after glex_rdma returns,
# so the put ping-pong must not rewrite it before the put is read (it once waited for ever).
out=$("$galaxy" bench rdma --cross-host --quick --peers none --json 2>/dev/null) ||
  fail "bench rdma --cross-host: exit $?: $out"
[ "$(grep -c '"ours": [0-9]' <<<"$out")" -eq 2 ] || fail "bench rdma --cross-host: not 2 figures: $out"
grep -q '"error"' <<<"$out" && fail "bench rdma --cross-host: a row failed: $out"
echo "ok: bench rdma --cross-host measures put and get latency between NICs of two hosts"
