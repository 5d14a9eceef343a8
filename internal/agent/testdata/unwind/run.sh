#!/usr/bin/env bash
# run.sh - build and run the native unwinder's checks (test.c) and benchmark
# (bench.c) against unwind.c, with gcc only: no GPU, no Go.
#
# Usage: ./run.sh [test|bench]   (both when not told)
#   test   prints "ok NAME" / "FAIL NAME: why" / "skip NAME: why" per check;
#          exit 1 on a failure. The artifact check runs gp_unwind from the
#          built agent, $LIBGPURR (default bin/libgpurr.so), when it exists.
#   bench  prints ns per walk of 24 frames: gp_unwind with its rule cache
#          warm (steady state) and empty (first time), and glibc's
#          backtrace() on the same stack
#
# unwind.c gets cgo's flags of the real build (go build -x shows them):
# -fPIC -O2 -std=gnu11 -fvisibility=hidden, plus agent.go's #cgo CFLAGS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
what=${1:-all}
case "$what" in test | bench | all) ;; *) echo "usage: $0 [test|bench]" >&2; exit 2 ;; esac
out=$(mktemp -d "${TMPDIR:-/tmp}/unwind.XXXXXX")
trap 'rm -rf "$out"' EXIT
cflags="-fPIC -pthread -O2 -std=gnu11 -Wall -Wextra -Wno-unused-function -fvisibility=hidden"

gcc -fPIC -O2 -Wall -Wextra -shared -fomit-frame-pointer -DCHAIN_KIND=nofp "$here/chain.c" -o "$out/libchain_nofp.so" &&
    gcc -fPIC -O2 -Wall -Wextra -shared -fno-omit-frame-pointer -DCHAIN_KIND=fp "$here/chain.c" -o "$out/libchain_fp.so" ||
    exit 1
gcc $cflags -c "$src/unwind.c" -o "$out/unwind.o" || exit 1
link="$out/unwind.o -L$out -lchain_nofp -lchain_fp -Wl,-rpath,$out -ldl"
status=0
if [ "$what" != bench ]; then
    gcc $cflags -I"$src" "$here/test.c" -o "$out/test" $link || exit 1
    "$out/test" || status=1
    lib=${LIBGPURR:-$src/../../bin/libgpurr.so}
    if [ -f "$lib" ]; then
        offsets=$(nm "$lib" | awk '$3 == "gp_unwind_init" { i = $1 } $3 == "gp_unwind" { u = $1 } END { print i, u }')
        gcc -O2 -Wall -Wextra "$here/artifact.c" -o "$out/artifact" -ldl || exit 1
        "$out/artifact" "$lib" $offsets || status=1
    else
        echo "skip artifact: $lib is not built (make builds it)"
    fi
fi
if [ "$what" != test ]; then
    gcc $cflags -I"$src" "$here/bench.c" -o "$out/bench" $link || exit 1
    "$out/bench" || status=1
fi
exit $status
