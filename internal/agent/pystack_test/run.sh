#!/usr/bin/env bash
# run.sh - build pystack.c into a test library and check it against every
# supported CPython installed under pyenv. Usage: ./run.sh
# Prints one RESULT line per version and BENCH lines with timings; exits
# non-zero when any check fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/pystack_test.XXXXXX")
trap 'rm -rf "$out"' EXIT
pyenv_root=${PYENV_ROOT:-/root/.pyenv}
versions="3.10.13 3.11.7 3.12.1 3.13.0"
status=0
cflags="-std=c11 -O2 -Wall -Wextra -Werror"

echo "== build"
# pystack.c alone, with extra warnings, no Python headers anywhere.
gcc $cflags -Wpedantic -Wshadow -Wconversion -fPIC -c "$src/pystack.c" -o "$out/pystack.o" || exit 1
gcc $cflags -fPIC -shared -I"$src" "$here/testlib.c" -o "$out/libpystack_test.so" -lpthread -ldl || exit 1
gcc $cflags -I"$src" "$here/nopy.c" "$out/pystack.o" -o "$out/nopy" -lpthread -ldl || exit 1
echo "ok"

echo "== no python"
"$out/nopy" || status=1

summary=""
for v in $versions; do
    py="$pyenv_root/versions/$v/bin/python3"
    echo "== CPython $v"
    if [ ! -x "$py" ]; then
        echo "SKIP $v: $py not found"
        summary="$summary
SKIP $v (no interpreter)"
        continue
    fi
    inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    offs="$out/offsets_$v.txt"
    if ! gcc -Wall -Wextra -I"$inc" "$here/offsets.c" -o "$out/offsets_$v" || ! "$out/offsets_$v" > "$offs"; then
        echo "offsets.c failed for $v"
        offs=""
    fi
    log="$out/test_$v.log"
    "$py" "$here/test_pystack.py" "$out/libpystack_test.so" $offs 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && status=1
    summary="$summary
$(grep -E '^(RESULT|  BENCH)' "$log" || echo "RESULT $v: crashed (rc=$rc)")"
done

# An interpreter we do not support must be detected and refused cleanly.
for v in 3.9.18; do
    py="$pyenv_root/versions/$v/bin/python3"
    [ -x "$py" ] || continue
    echo "== unsupported CPython $v"
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
    case "$line" in PASS*) ;; *) status=1 ;; esac
    summary="$summary
UNSUPPORTED $v: $line"
done

echo
echo "== summary"
echo "${summary#?}"
[ $status -eq 0 ] && echo "ALL PASSED" || echo "SOME CHECKS FAILED"
exit $status
