#!/usr/bin/env bash
# run.sh - build pystack.c as the agent builds it, link the checks with it
# and run them against CPython interpreters. No GPU, no Go.
#
# Usage: ./run.sh [PYTHON...]
#   Checks each PYTHON given, or else every supported version installed
#   under pyenv ($PYENV_ROOT, default /root/.pyenv): 3.10.13, 3.11.7, 3.12.1,
#   3.13.0, and that 3.9.18 is refused cleanly. Prints the checks' own lines,
#   BENCH lines with timings, then one verdict line per interpreter,
#   "ok NAME", "FAIL NAME: why" or "skip NAME: why" (agent_cpu_test.go turns
#   them into subtests); exits 1 when any check fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/pystack.XXXXXX")
trap 'rm -rf "$out"' EXIT
pyenv_root=${PYENV_ROOT:-/root/.pyenv}
cflags="-std=c11 -O2 -Wall -Wextra -Werror"
status=0
verdicts=""
verdict() { # verdict ok|FAIL|skip NAME [WHY]
    verdicts="$verdicts
$1 $2${3:+: $3}"
    [ "$1" = FAIL ] && status=1
}

echo "== build"
# pystack.c alone, with extra warnings, no Python headers anywhere.
if gcc $cflags -Wpedantic -Wshadow -Wconversion -fPIC -c "$src/pystack.c" -o "$out/pystack.o" &&
    gcc $cflags -fPIC -shared -I"$src" "$here/testlib.c" "$out/pystack.o" -o "$out/libpystack_test.so" -lpthread -ldl &&
    gcc $cflags -I"$src" "$here/nopy.c" "$out/pystack.o" -o "$out/nopy" -lpthread -ldl; then
    verdict ok build
else
    echo "FAIL build"
    exit 1
fi

echo "== no python"
if line=$("$out/nopy"); then verdict ok no-python; else verdict FAIL no-python "$line"; fi
echo "$line"

check() { # check PYTHON NAME
    local py=$1 name=$2
    echo "== $name ($py)"
    local inc offs="$out/offsets_$name.txt"
    inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
    if [ ! -f "$inc/Python.h" ] || ! gcc -Wall -Wextra -I"$inc" "$here/offsets.c" -o "$out/offsets_$name" 2>"$out/offsets_$name.log" ||
        ! "$out/offsets_$name" >"$offs"; then
        echo "no headers for $name: the layout is not compared with them"
        offs=""
    fi
    local log="$out/test_$name.log"
    "$py" "$here/test_pystack.py" "$out/libpystack_test.so" $offs 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]} result
    result=$(grep -m1 '^RESULT' "$log")
    if [ "$rc" -eq 0 ]; then
        verdict ok "$name" "${result#RESULT * }"
    else
        verdict FAIL "$name" "${result:-crashed (exit $rc)}"
    fi
}

# An interpreter we do not support must be detected and refused cleanly.
refused() { # refused PYTHON NAME
    local py=$1 name=$2 line
    echo "== unsupported $name ($py)"
    line=$("$py" -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.t_describe.restype = ctypes.c_char_p
buf = ctypes.create_string_buffer(1024); gil = ctypes.c_int(-1)
lib.t_walk_text.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
r = (lib.t_init(), lib.t_walk_text(buf, 1024, 64, ctypes.byref(gil)), lib.t_describe().decode())
print(("PASS" if r[:2] == (0, 0) and "unsupported" in r[2] else "FAIL"), "init=%d walk=%d describe=%r" % r)
' "$out/libpystack_test.so" 2>&1)
    echo "$line"
    case "$line" in PASS*) verdict ok "$name-refused" "${line#PASS }" ;; *) verdict FAIL "$name-refused" "$line" ;; esac
}

if [ $# -gt 0 ]; then
    for py in "$@"; do
        v=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || {
            verdict FAIL "$py" "cannot run it"
            continue
        }
        case "$v" in
        3.1[0-3].*) check "$py" "cpython-$v" ;;
        *) refused "$py" "cpython-$v" ;;
        esac
    done
else
    for v in 3.10.13 3.11.7 3.12.1 3.13.0; do
        py="$pyenv_root/versions/$v/bin/python3"
        if [ -x "$py" ]; then check "$py" "cpython-$v"; else verdict skip "cpython-$v" "$py not found"; fi
    done
    py="$pyenv_root/versions/3.9.18/bin/python3"
    if [ -x "$py" ]; then refused "$py" cpython-3.9.18; else verdict skip cpython-3.9.18-refused "$py not found"; fi
fi

echo
echo "== summary"
echo "${verdicts#?}"
exit $status
