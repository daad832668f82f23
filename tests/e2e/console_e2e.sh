#!/usr/bin/env bash
# Browser end-to-end test of the web console (issue: management console): a daemon on a small
# simulated fat tree, then web/e2e/console.e2e.mjs in headless Debian Chromium (playwright-core):
# the topology view renders, an injected link fault reaches the fault view within 2 s over the
# event stream, a path trace is drawn, a port's history plot has points and labelled axes. With --th2 the same daemon serves the full TH-2 fabric and
# the test measures the topology view's load time (limit 3 s; the median of 3 loads is printed).
# Screenshots: $GALAXY_E2E_SCREENSHOTS (default build/release/e2e-screenshots).
# Exit 77 (ctest: skipped) when Node, Chromium or web/node_modules are missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${GALAXY_BIN:-$root/build/release/bin/galaxy}
mode=small
[ "${1:-}" = "--th2" ] && mode=th2
chromium=${CHROMIUM:-/usr/bin/chromium}
for need in node "$chromium"; do
  command -v "$need" >/dev/null || { echo "SKIP: $need not installed (scripts/setup installs it)"; exit 77; }
done
[ -d "$root/web/node_modules/playwright-core" ] ||
  { echo "SKIP: web/node_modules missing (scripts/setup runs npm ci in web/)"; exit 77; }

work=$(mktemp -d)
shots=${GALAXY_E2E_SCREENSHOTS:-$root/build/release/e2e-screenshots}/$mode
mkdir -p "$shots"
token=e2e-$$-$RANDOM
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fabric=sim:fattree:k=4
load=uniform  # the history check plots a port's utilisation under it
[ "$mode" = th2 ] && fabric=sim:th2 && load=none
GALAXY_NMD_TOKEN=$token "$bin" nmd --fabric "$fabric" --load "$load" --listen 127.0.0.1:0 --db "$work/events.db" \
  --ready-file "$work/ready.json" --scan-interval-s 5 >"$work/nmd.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -s "$work/ready.json" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "daemon exited:"; cat "$work/nmd.log"; exit 1; }
  sleep 0.1
done
[ -s "$work/ready.json" ] || { echo "daemon not ready in 60 s"; cat "$work/nmd.log"; exit 1; }
url=$(sed -E 's/.*"url":"([^"]+)".*/\1/' "$work/ready.json")
echo "daemon $fabric at $url"
cd "$root/web"
env GALAXY_NMD_URL="$url" GALAXY_NMD_TOKEN="$token" GALAXY_E2E_SCREENSHOTS="$shots" \
  CHROMIUM="$chromium" node e2e/console.e2e.mjs $([ "$mode" = th2 ] && echo --th2-load)
echo "screenshots: $shots"
