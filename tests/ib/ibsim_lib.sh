# Shared by the ibsim tests (sourced): the preload that puts a program on ibsim's subnet, ibsim
# itself with its console on a FIFO, and hexadecimal in awk. The sourcing script defines $dir
# (a scratch directory) and fail(), or has sim_test_init make them.
sim_so=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
sim_pid=""

# Hexadecimal in any awk (Debian's default awk, mawk, has no strtonum).
hex='function hex(s,  i, v) { s = tolower(s); sub(/^0x/, "", s); v = 0;
  for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1;
  return v }'

# Under ibsim: the preload, attached at node $1 (ibsim's node id). ASan's runtime must come
# first in a sanitized build's preload list; it is told not to insist.
sim() {
  local host=$1; shift
  SIM_HOST="$host" LD_PRELOAD="$sim_so" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    timeout 120 "$@"
}

stop_sim() {
  exec 9>&-
  if [ -n "$sim_pid" ]; then
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=""
  fi
}

start_sim() {  # <net file> <a node to probe from>
  stop_sim
  # ibsim's tables hold 256 switches by default: sized from the file. Its console reads a FIFO
  # the script holds open on fd 9 (sim_console writes a command to it).
  local sizes
  sizes=$(awk '$1 == "Switch" { s++ } $1 == "Switch" || $1 == "Hca" { n++; p += $2 + 1 }
               END { printf "-S %d -N %d -P %d", s + 16, n + 16, p + 64 }' "$1")
  rm -f "$dir/console"
  mkfifo "$dir/console"
  # shellcheck disable=SC2086
  ibsim $sizes -s "$1" <"$dir/console" >"$dir/ibsim.log" 2>&1 &
  sim_pid=$!
  exec 9>"$dir/console"
  for _ in $(seq 1 100); do
    if sim "$2" ibstat >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  cat "$dir/ibsim.log" >&2
  fail "ibsim did not come up"
}

# One command to ibsim's console ("Unlink \"node\"[port]"), given time to be read.
sim_console() {
  echo "$1" >&9
  sleep 0.3
}

# OpenSM attached at node $1 with priority $2, polling a master every second (3 retries) and
# light-sweeping every second, its output in $dir/osm.out; sets osm_pid. Then waits until it
# has taken a role (STANDBY or MASTER). A master stalled for half a second on a loaded machine
# (ctest -j2 on two cores; polls of 300 ms with 2 retries took Galaxy's master for dead so) is
# not taken for dead, and one killed is replaced within about four seconds.
start_opensm() {
  printf 'sminfo_polling_timeout 1000\npolling_retry_number 3\nsweep_interval 1\n' >"$dir/osm.conf"
  SIM_HOST="$1" LD_PRELOAD="$sim_so" opensm -p "$2" -F "$dir/osm.conf" -f "$dir/osm.log" \
    >"$dir/osm.out" 2>&1 &
  osm_pid=$!
  pids="${pids:-} $osm_pid"
  wait_for_line "$dir/osm.out" "Entering \(STANDBY\|MASTER\) state" 100 || true
}

# Waits up to $3 tenths of a second for a line of file $1 matching $2 (grep); false when none
# came.
wait_for_line() {
  for _ in $(seq 1 "$3"); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  grep -q -- "$2" "$1" 2>/dev/null
}

# A test's set-up: skipped (exit 77) unless the tools named are installed and the preload is
# there; $dir made and, on exit, the processes whose ids are in $pids and ibsim stopped and $dir
# removed; fail() prints its message and the tails of $dir's files named in $logs, and exits 1.
# The working directory becomes $dir: libumad2sim writes each client's sysfs image there.
pids=""
logs=""
sim_test_init() {
  local tool
  for tool in ibsim "$@"; do
    command -v "$tool" >/dev/null || { echo "skip: $tool not installed"; exit 77; }
  done
  [ -f "$sim_so" ] || { echo "skip: $sim_so missing"; exit 77; }
  dir=$(mktemp -d)
  trap sim_test_cleanup EXIT
  cd "$dir"
}
sim_test_cleanup() {
  local p
  for p in $pids; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  stop_sim
  rm -rf "$dir"
}
fail() {
  local f
  echo "FAIL: $*" >&2
  for f in $logs ibsim.log; do
    [ -s "$dir/$f" ] && { echo "--- $f" >&2; tail -30 "$dir/$f" >&2; }
  done
  exit 1
}
