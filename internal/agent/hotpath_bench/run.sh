#!/usr/bin/env bash
# run.sh - build the hot-path harness against agent.c and benchmark the CUPTI
# launch callbacks on the CPU (no GPU, CUPTI or libcuda needed).
#
# Usage: ./run.sh [--callgrind] [BASE_AGENT_C]
#   Prints ns per launch (ENTER+EXIT) for each mode. With BASE_AGENT_C (an
#   older agent.c, e.g. from `git show HEAD~1:internal/agent/agent.c > /tmp/a.c`)
#   it also benchmarks that one and checks that both produce byte-identical
#   records for a scenario covering every launch API (host_ns and tid masked).
#
#   --callgrind adds deterministic counts from valgrind's callgrind: machine
#   instructions per launch (hot loop) and, with its cache simulator, L1 data
#   and 2 MiB-LL misses per launch when 2 MiB of other data is written
#   between launches ("cold"), which is what a real framework loop does.
#
# The C flags are cgo's for the real build (go build -x shows them): -fPIC
# -O2 -std=gnu11 -fvisibility=hidden, plus the #cgo CFLAGS of agent.go.
set -u
callgrind=0
if [ "${1:-}" = --callgrind ]; then callgrind=1; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
py=${PYTHON:-/root/.pyenv/versions/3.12.1/bin/python3}
out=$(mktemp -d "${TMPDIR:-/tmp}/hotpath_bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
cflags="-fPIC -pthread -O2 -std=gnu11 -Wall -Wextra -Wno-unused-function -fvisibility=hidden"

build() {  # build NAME AGENT_C_DIR
    local name=$1 dir=$2
    gcc $cflags -I"$dir" -c "$dir/pystack.c" -o "$out/pystack_$name.o" || return 1
    gcc $cflags -I"$dir" -c "$dir/unwind.c" -o "$out/unwind_$name.o" || return 1
    gcc $cflags -I"$here/stub" -I"$dir" -c "$dir/memcap.c" -o "$out/memcap_$name.o" || return 1
    gcc $cflags -I"$dir" -c "$dir/autograd.c" -o "$out/autograd_$name.o" || return 1
    gcc $cflags -shared -I"$here/stub" -I"$dir" -DHP_AGENT_C="\"$dir/agent.c\"" "$here/hotpath.c" \
        "$out/pystack_$name.o" "$out/memcap_$name.o" "$out/autograd_$name.o" "$out/unwind_$name.o" \
        -o "$out/libhotpath_$name.so" -ldl -lpthread || return 1
}

echo "== build"
build current "$src" || exit 1
if [ $# -ge 1 ]; then
    mkdir -p "$out/base"
    cp "$src"/agent.h "$src"/cabi.h "$src"/pystack.h "$src"/pystack.c "$src"/memcap.h "$src"/memcap.c \
        "$src"/autograd.h "$src"/autograd.c "$src"/unwind.h "$src"/unwind.c "$out/base/"
    cp "$1" "$out/base/agent.c"
    build base "$out/base" || exit 1
fi
"$py" --version

status=0
if [ $# -ge 1 ]; then
    echo "== records: current vs base"
    "$py" "$here/bench.py" "$out/libhotpath_current.so" --scenario "$out/scenario_current.txt" &&
        "$py" "$here/bench.py" "$out/libhotpath_base.so" --scenario "$out/scenario_base.txt" || exit 1
    if cmp -s "$out/scenario_current.txt" "$out/scenario_base.txt"; then
        echo "identical ($(grep -c '^rec' "$out/scenario_current.txt") records; $(tail -1 "$out/scenario_current.txt"))"
    else
        echo "RECORDS DIFFER:"
        diff "$out/scenario_base.txt" "$out/scenario_current.txt" | head -40
        status=1
    fi
    echo "== base ($1)"
    "$py" "$here/bench.py" "$out/libhotpath_base.so" || status=1
fi
echo "== current ($src/agent.c)"
"$py" "$here/bench.py" "$out/libhotpath_current.so" || status=1

counts() {  # counts LIB
    local lib=$1
    for mode in "0 off" "2 python"; do
        set -- $mode
        for cold in 0 1; do
            local launches=$((cold ? 2000 : 20000)) f="$out/cg.$$"
            # D1 and a 2 MiB "LL" (an L2 of that size): a D1 miss that hits
            # LL costs ~5 ns, an LL miss ~20-100 ns on the H100's host.
            valgrind --tool=callgrind --toggle-collect=on_cupti_callback --cache-sim=yes \
                --D1=32768,8,64 --LL=2097152,16,64 \
                --callgrind-out-file="$f" "$py" "$here/cg.py" "$lib" "$1" $cold >/dev/null 2>&1 || return 1
            awk -v n=$launches -v m="$2" -v c=$cold '
                /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
                /^summary:/ { printf "%-7s %-5s %7.1f instr %6.2f D1 misses %6.2f LL misses per launch\n",
                    m, c ? "cold" : "hot", $col["Ir"] / n, ($col["D1mr"] + $col["D1mw"]) / n, ($col["DLmr"] + $col["DLmw"]) / n }' "$f"
            rm -f "$f"
        done
    done
}
if [ $callgrind = 1 ]; then
    if [ -f "$out/libhotpath_base.so" ]; then
        echo "== callgrind: base"
        counts "$out/libhotpath_base.so"
    fi
    echo "== callgrind: current"
    counts "$out/libhotpath_current.so"
fi
exit $status
