#!/bin/sh
# Writes host.so: a shared library whose .nv_fatbin section holds the containers of
# internal/fatbin/testdata/plain.fatbin (PTX of gpurr_fixture_add for sm_80 and a stand-in
# cubin) and two.fatbin (its PTX for sm_80, then for sm_100), as nvcc puts a program's fat
# binary in its host object. Needs a C compiler and objcopy.
set -eu
cd "$(dirname "$0")"
echo 'int gpurr_fixture_host;' > host.c
cc -shared -nostdlib -o host.so host.c
cat ../../../fatbin/testdata/plain.fatbin ../../../fatbin/testdata/two.fatbin > section
objcopy --add-section .nv_fatbin=section --set-section-flags .nv_fatbin=alloc,readonly host.so
rm host.c section
