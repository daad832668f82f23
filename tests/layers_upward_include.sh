#!/usr/bin/env bash
# The layers' rule enforced by the build (src/CMakeLists.txt, docs/architecture.md): each layer
# compiles against a view of src/ holding its own directory and those below it, so a header of a
# higher layer is not found. For every layer: one of its own headers compiles in its view, and a
# header of the layer above it does not.
# Arguments: the C++ compiler, the build directory, the source directory.
set -euo pipefail
cxx=$1 build=$2 src=$3
fail() { echo "FAILED: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# target | a header of its own layer | a header of a layer above it
cases=(
  "galaxy_base|base/status.h|wire/flit.h"
  "galaxy_wire|wire/flit.h|chip/nic.h"
  "galaxy_ib|ib/umad_port.h|nm/ib_sm.h"
  "galaxy_ib|ib/umad_port.h|chip/nic.h"
  "galaxy_fabric|fabric/topology.h|chip/nic.h"
  "galaxy_chip|chip/nic.h|engine/sim/sim_fabric.h"
  "galaxy_sim|engine/sim/sim_fabric.h|glex/device.h"
  "galaxy_sim|engine/sim/sim_fabric.h|engine/live/segment.h"
  "galaxy_live|engine/live/segment.h|engine/sim/sim_fabric.h"
  "galaxy_glex_core|glex/device.h|nm/fault_ledger.h"
  "galaxy_nm|nm/fault_ledger.h|nmd/daemon.h"
  "galaxy_via_objs|via/via_internal.h|glex/device.h"
  "galaxy_fi_objs|fi/fi_internal.h|glex/device.h"
)
compiles() {  # view header
  printf '#include "%s"\n' "$2" >"$tmp/t.cc"
  "$cxx" -std=c++20 -fsyntax-only -I"$build/layers/$1" -I"$src/include" "$tmp/t.cc" \
    >"$tmp/out" 2>&1
}
for c in "${cases[@]}"; do
  IFS='|' read -r target own above <<<"$c"
  [ -d "$build/layers/$target" ] || fail "no view for $target in $build/layers"
  [ -f "$src/src/$above" ] || fail "$above is not a header of the tree"
  compiles "$target" "$own" || { cat "$tmp/out" >&2; fail "$target: its own $own does not compile"; }
  if compiles "$target" "$above"; then fail "$target: $above (a layer above) compiled"; fi
  grep -qE "No such file|file not found" "$tmp/out" || { cat "$tmp/out" >&2; fail "$target: $above failed otherwise"; }
done
echo "layers: ${#cases[@]} upward includes refused, every layer's own header compiles"
