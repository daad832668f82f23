# Shell helpers of the CLI tests (sourced): `galaxy` must be set to the binary.
fail() { echo "FAILED: $*" >&2; exit 1; }
# galaxy "$@" must be refused (a non-zero exit that is no timeout) with `want` in its output.
expect_refused() {
  local want=$1 rc
  shift
  set +e
  out=$(timeout 60 "$galaxy" "$@" 2>&1)
  rc=$?
  set -e
  [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] || fail "galaxy $*: exit $rc, expected a refusal: $out"
  grep -q -- "$want" <<<"$out" || fail "galaxy $*: '$want' not in: $out"
}
