#!/usr/bin/env bash
# libglex.so as a C user meets it (docs/glex.md, "Linking and providers"): it exports the calls
# of include/glex.h and nothing else, and a C program built with `cc` against it alone links and
# needs no other Galaxy library. Arguments: the library, the C compiler, include/, and the
# sanitizer flags of an instrumented build (its runtime must come first in the program).
set -euo pipefail
lib=$1 cc=$2 include=$3 sanitize=${4:-}
sanitize=${sanitize//;/ }  # a CMake list
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exported=$(nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }')
others=$(echo "$exported" | grep -v '^glex_' || true)
if [ -n "$others" ]; then
  echo "libglex.so exports symbols outside the API:" $others >&2
  exit 1
fi
# Every function declared in glex.h is exported.
declared=$(grep -oE '\bglex_[a-z_0-9]+\(' "$include/glex.h" | tr -d '(' | sort -u)
for f in $declared; do
  # A here-string, not a pipe: with pipefail, `echo | grep -q` fails when grep's early exit
  # makes echo die of SIGPIPE.
  grep -qx "$f" <<<"$exported" || { echo "glex.h declares $f, libglex.so does not export it" >&2; exit 1; }
done
# A C program, compiled and linked by cc with -lglex alone, opens a fabric that is not there
# and reads the error libglex gives.
cat > "$work/prog.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "glex.h"
int main(void) {
  glex_device_handle_t dev;
  struct glex_device_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.fabric = "no-such-fabric";
  attr.nic = -1;
  glex_ret_t r = glex_open_device(&attr, &dev);
  printf("%d %s\n", (int)r, glex_error_string(r));
  return r == GLEX_SUCCESS ? 1 : 0;
}
C
dir=$(dirname "$lib")
"$cc" -std=c11 -Wall -Wextra -Werror $sanitize -I"$include" "$work/prog.c" -L"$dir" -lglex \
  -Wl,-rpath,"$dir" -o "$work/prog"
needed=$(readelf -d "$work/prog" | grep NEEDED || true)
# clang's UBSan runtime in the program needs the C++ library itself (the flags then name it).
unwanted='galaxy\|libstdc'
case " $sanitize " in *" -lstdc++ "*) unwanted='galaxy' ;; esac
if grep -q "$unwanted" <<<"$needed"; then
  echo "the C program needs more than libglex and libc: $needed" >&2
  exit 1
fi
out=$("$work/prog")
echo "$out"
case "$out" in
  "8 "* | "1 "*) ;;  # an unknown fabric: unreachable, or invalid
  *) echo "unexpected answer: $out" >&2; exit 1 ;;
esac
