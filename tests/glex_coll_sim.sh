#!/usr/bin/env bash
# Galaxy's side of `galaxy bench coll-live` (bench/peers/glex_coll) on a simulated fabric served by
# `galaxy simd` on a private socket: 2 and 5 processes, offloaded and host-driven (GLEX_COLL_P2P),
# barrier, 8-byte broadcast, 8-byte allreduce and the CPU-time test. The program checks every
# broadcast's data and every allreduce's sum itself and exits non-zero on a wrong value; here every
# process must exit 0 and rank 0's JSON line must carry every test with a positive latency.
# Arguments: the galaxy binary, the glex_coll binary.
set -euo pipefail
galaxy=$1
prog=$2
fail() { echo "FAILED: $*" >&2; exit 1; }

fabric=sim:fattree:k=4,levels=2
work=$(mktemp -d /tmp/galaxy-glex-coll-sim.XXXXXX)
export GLEX_SIM_SOCKET=$work/sim.sock
export GLEX_BOOTSTRAP_TIMEOUT_MS=10000
simd_pid=
cleanup() {
  if [ -n "$simd_pid" ]; then
    kill "$simd_pid" 2>/dev/null || true
    wait "$simd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$galaxy" simd --fabric "$fabric" >"$work/simd.out" 2>&1 &
simd_pid=$!
for _ in $(seq 200); do
  grep -q '"event":"ready"' "$work/simd.out" && break
  kill -0 "$simd_pid" 2>/dev/null || fail "galaxy simd exited: $(cat "$work/simd.out")"
  sleep 0.1
done
grep -q '"event":"ready"' "$work/simd.out" || fail "galaxy simd not ready in 20 s"

# run <processes> <program options...>: every rank must exit 0; prints rank 0's output.
run() {
  local n=$1 job r rc=0
  shift
  job=$(mktemp -d "$work/job.XXXXXX")
  local pids=()
  for ((r = 0; r < n; r++)); do
    GLEX_FABRIC=$fabric GLEX_RANK=$r GLEX_SIZE=$n GLEX_RENDEZVOUS=$job \
      timeout 60 "$prog" "$@" >"$job/out.$r" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}" || { rc=$?; echo "rank $r exited $rc: $(cat "$job/out.$r")" >&2; }
  done
  [ "$rc" -eq 0 ] || fail "$n processes of glex_coll $*: a rank failed"
  cat "$job/out.0"
}

positive='(0\.[0-9]*[1-9][0-9]*|[1-9][0-9]*\.[0-9]+)'
for n in 2 5; do
  for mode in offloaded host-driven; do
    flag=()
    [ "$mode" = host-driven ] && flag=(--p2p)
    out=$(run "$n" --iters 30 --warmup 5 --cpu-iters 20 --tests barrier,bcast,allreduce,cpu \
      "${flag[@]}")
    grep -q "^{\"impl\":\"galaxy\",\"mode\":\"$mode\",\"np\":$n," <<<"$out" ||
      fail "$n processes, $mode: not the result line expected: $out"
    for t in barrier bcast allreduce; do
      grep -Eq "\"$t\":\\{\"iters\":30,\"us\":$positive," <<<"$out" ||
        fail "$n processes, $mode: no positive $t latency over 30 iterations: $out"
    done
    grep -q '"bcast":{[^}]*"bytes":8' <<<"$out" || fail "$mode: broadcast not 8 bytes: $out"
    grep -q '"allreduce":{[^}]*"bytes":8,"type":"int64"' <<<"$out" ||
      fail "$mode: allreduce not one int64: $out"
    grep -Eq "\"cpu\":\\{\"how\":\"[^\"]+\",\"iters\":20,\"wall_us\":$positive,\"cpu_us\":$positive," \
      <<<"$out" || fail "$n processes, $mode: no CPU-time figures: $out"
    echo "ok: $n processes, $mode: barrier, bcast, allreduce checked and timed"
  done
done

set +e
err=$("$prog" --tests barrier,gather 2>&1)
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -q "E9681 --tests: 'gather' is not a test" <<<"$err"; then
  fail "glex_coll --tests barrier,gather: exit $rc: $err"
fi
echo "ok: an unknown test is refused before anything starts"
