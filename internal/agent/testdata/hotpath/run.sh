#!/usr/bin/env bash
# run.sh - build the hot-path harness (hotpath.c) with the agent's C files
# and benchmark the CUPTI launch callbacks on the CPU (no GPU, CUPTI or
# libcuda needed).
#
# Usage: ./run.sh [--callgrind] [--base REV]
#        ./run.sh --scenario FILE
#   Prints ns per launch (ENTER+EXIT) for each mode, with the Python of
#   $PYTHON (default: pyenv's 3.12.1, else python3).
#
#   --base REV also builds the agent of git revision REV (one that has this
#   folder), benchmarks it and checks that both produce byte-identical
#   records for a scenario covering every launch API (host_ns and tid
#   masked, Python callstacks on).
#
#   --callgrind adds deterministic counts from valgrind's callgrind: machine
#   instructions per launch (hot loop) and, with its cache simulator, L1 data
#   and 2 MiB-LL misses per launch when 2 MiB of other data is written
#   between launches ("cold"), which is what a real framework loop does;
#   "py+steps" is python with the default GPU timing by steps (an untimed step).
#
#   --scenario FILE writes the scenario's records, callstacks off, to FILE
#   with a C-only build (no Python needed): agent_cpu_test.go compares them
#   with scenario.golden.
#
#   --memory-scenario FILE writes, the same way, the hash jobs of a scenario
#   of hash mode's write sets on a fake driver (memory_scenario.golden).
#
#   --digest-scenario FILE writes, the same way, the jobs of step digests
#   (--memory digest, --step-every) and of --hash-steps, with an allocation
#   made from a library named libnccl*, which digests leave out
#   (digest_scenario.golden).
#
#   --snapshot-scenario FILE writes, the same way, the jobs of snapshots
#   with a staging ring smaller than a region, which is taken in pieces
#   (snapshot_scenario.golden).
#
#   --memory-bench prints hash mode's host cost per launch and per
#   allocation+free with 100, 1000 and 10000 live allocations (PyTorch under
#   cudaMallocAsync: each tensor its own allocation), and with 1000 when 2 MiB
#   of other data is written between rounds ("cold"); then the same two with
#   launches of 80 parameter words on 6 allocations, as a compiled GPT-2
#   step's are ("wide"); with --callgrind also
#   a launch's instructions and cache misses, hot and cold.
#
#   --timing-check prints a verdict line per check ("ok NAME" or "FAIL NAME: why") of when
#   kernel activity is turned on: after the first launch, in sampled timing's windows, or at
#   once for the hang watch.
#
#   --client-check prints a verdict line per check of a profiler inside the program that links
#   CUPTI (fake_cupti.c) beside the agent: its subscription, callbacks and activity records.
#
#   --alloc-check checks hash mode's allocation table against a plain list
#   over 200,000 random allocations, frees and lookups; prints "ok: ...".
#
# The C flags are cgo's for the real build (go build -x shows them): -fPIC
# -O2 -std=gnu11 -fvisibility=hidden, plus the #cgo CFLAGS of agent.go.
set -u
callgrind=0 base="" scenario="" memory="" membench=0 alloccheck=0 timingcheck=0 clientcheck=0
while [ $# -gt 0 ]; do
    case "$1" in
    --callgrind) callgrind=1 ;;
    --base) base=${2:?--base needs a revision}; shift ;;
    --scenario) scenario=${2:?--scenario needs a file}; shift ;;
    --memory-scenario) scenario=${2:?--memory-scenario needs a file} memory=memory; shift ;;
    --digest-scenario) scenario=${2:?--digest-scenario needs a file} memory=digest; shift ;;
    --snapshot-scenario) scenario=${2:?--snapshot-scenario needs a file} memory=snapshot; shift ;;
    --memory-bench) membench=1 ;;
    --alloc-check) alloccheck=1 ;;
    --timing-check) timingcheck=1 ;;
    --client-check) clientcheck=1 ;;
    *) sed -n '2,30p' "$0" >&2; exit 2 ;;
    esac
    shift
done
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
py=${PYTHON:-/root/.pyenv/versions/3.12.1/bin/python3}
[ -x "$py" ] || py=$(command -v python3)
out=$(mktemp -d "${TMPDIR:-/tmp}/hotpath.XXXXXX")
trap 'rm -rf "$out"' EXIT
cflags="-fPIC -pthread -O2 -std=gnu11 -Wall -Wextra -Wno-unused-function -fvisibility=hidden"
# The agent's C files the hot path needs: all but fatal.c (signal handling only).
agent_c() {  # agent_c DIR
    local c
    for c in "$1"/*.c; do
        c=$(basename "$c" .c)
        [ "$c" = fatal ] || echo "$c"
    done
}

build() {  # build NAME AGENT_DIR: libhotpath_NAME.so (for Python) and hotpath_NAME (C only)
    local name=$1 dir=$2 objs="" f
    local inc="-I$dir/testdata/hotpath/stub -I$dir"
    mkdir -p "$out/$name"
    for f in $(agent_c "$dir"); do
        gcc $cflags $inc -c "$dir/$f.c" -o "$out/$name/$f.o" || return 1
        objs="$objs $out/$name/$f.o"
    done
    # A stand-in for NCCL: the digest scenario allocates through it (a library named libnccl*).
    if [ -f "$dir/testdata/hotpath/fake_nccl.c" ]; then
        gcc $cflags -shared "$dir/testdata/hotpath/fake_nccl.c" -o "$out/libnccl_fake.so" || return 1
        objs="$objs $out/libnccl_fake.so -Wl,-rpath,$out"
    fi
    gcc $cflags -shared $inc "$dir/testdata/hotpath/hotpath.c" $objs -o "$out/libhotpath_$name.so" -ldl -lpthread &&
        gcc $cflags -DHP_MAIN $inc "$dir/testdata/hotpath/hotpath.c" $objs -o "$out/hotpath_$name" -ldl -lpthread
}

echo "== build"
build current "$src" || exit 1
if [ $timingcheck = 1 ]; then
    for v in deferred sampled steps from_start; do "$out/hotpath_current" 0 0 0 timing $v || exit 1; done
    exit
fi
if [ $clientcheck = 1 ]; then
    gcc $cflags -DFAKE_CUPTI -shared -Wl,-soname,libcupti.so.13 "$here/fake_cupti.c" -o "$out/libcupti.so.13" &&
        gcc $cflags -DPROFILER -shared "$here/fake_cupti.c" "$out/libcupti.so.13" -Wl,-rpath,"$out" -o "$out/libprofclient.so" || exit 1
    "$out/hotpath_current" 0 0 0 client "$out"
    exit
fi
if [ $alloccheck = 1 ]; then
    "$out/hotpath_current" 0 200000 0 alloccheck
    exit
fi
if [ $membench = 1 ]; then
    for live in 100 1000 10000; do "$out/hotpath_current" 0 $live 200000 membench || exit 1; done
    "$out/hotpath_current" 0 1000 20000 membench $((2 << 20)) || exit 1
    "$out/hotpath_current" 0 1000 200000 membench-wide || exit 1
    "$out/hotpath_current" 0 1000 20000 membench-wide $((2 << 20)) || exit 1
    [ $callgrind = 1 ] || exit 0
    for evict in 0 $((2 << 20)); do  # the launch alone, 1000 live allocations
        f="$out/cg.$$"
        valgrind --tool=callgrind --toggle-collect=membench_launch --cache-sim=yes --D1=32768,8,64 \
            --LL=2097152,16,64 --callgrind-out-file="$f" "$out/hotpath_current" 0 1000 2000 membench $evict \
            >/dev/null 2>&1 || exit 1
        awk -v n=2000 -v c=$evict '
            /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
            /^summary:/ { printf "hash launch %-5s %7.1f instr %6.2f D1 misses %6.2f LL misses per launch\n",
                c ? "cold" : "hot", $col["Ir"] / n, ($col["D1mr"] + $col["D1mw"]) / n, ($col["DLmr"] + $col["DLmw"]) / n }' "$f"
        rm -f "$f"
    done
    exit
fi
if [ -n "$scenario" ]; then
    "$out/hotpath_current" 0 0 0 "$scenario" $memory
    exit
fi
if [ -n "$base" ]; then
    mkdir -p "$out/base_tree"
    # From the top: run in a subfolder, git archive also filters by that folder's path.
    git -C "$(git -C "$src" rev-parse --show-toplevel)" archive "$base:$(git -C "$src" rev-parse --show-prefix)" |
        tar -x -C "$out/base_tree" || exit 1
    if [ ! -f "$out/base_tree/testdata/hotpath/hotpath.c" ]; then
        echo "$base has no testdata/hotpath/hotpath.c to build it with" >&2
        exit 1
    fi
    build base "$out/base_tree" || exit 1
fi
"$py" --version

status=0
if [ -n "$base" ]; then
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
    echo "== base ($base)"
    "$py" "$here/bench.py" "$out/libhotpath_base.so" || status=1
fi
echo "== current ($src)"
"$py" "$here/bench.py" "$out/libhotpath_current.so" || status=1

counts() {  # counts LIB
    local lib=$1
    for mode in "0 off 0" "2 python 0" "2 py+steps 1"; do
        set -- $mode
        for cold in 0 1; do
            local launches=$((cold ? 2000 : 20000)) f="$out/cg.$$"
            # D1 and a 2 MiB "LL" (an L2 of that size): a D1 miss that hits
            # LL costs ~5 ns, an LL miss ~20-100 ns on the H100's host.
            PYTHONHASHSEED=0 valgrind --tool=callgrind --toggle-collect=gp_on_callback --cache-sim=yes \
                --D1=32768,8,64 --LL=2097152,16,64 \
                --callgrind-out-file="$f" "$py" "$here/cg.py" "$lib" "$1" $cold "$3" >/dev/null 2>&1 || return 1
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
