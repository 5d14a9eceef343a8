#!/bin/sh
# Writes host.so: a shared library whose .nv_fatbin section holds the two containers of
# internal/fatbin/testdata/two.fatbin (PTX of gpurr_fixture_add for sm_80, then for sm_100),
# as nvcc puts a program's fat binary in its host object. Needs a C compiler and objcopy.
set -eu
cd "$(dirname "$0")"
echo 'int gpurr_fixture_host;' > host.c
cc -shared -nostdlib -o host.so host.c
objcopy --add-section .nv_fatbin=../../../fatbin/testdata/two.fatbin --set-section-flags .nv_fatbin=alloc,readonly host.so
rm host.c
