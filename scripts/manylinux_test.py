#!/usr/bin/env python3
"""Tests of what makes the wheel's binaries run on old glibc, on a small C program built the way
the Makefile builds gpurr (scripts/glibc-stubs, cmd/gpurr/start.c), and of scripts/check-wheel,
which must refuse the same program built plainly. Needs cc; skips, saying so, without it or
where the C library is older than 2.34 (nothing to pin there). (scripts/test-wheel; make test.)

    python3 scripts/manylinux_test.py"""
import os
import runpy
import shutil
import subprocess
import tempfile
import unittest
import zipfile
from pathlib import Path

import manylinux  # scripts/manylinux.py

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
check_wheel = runpy.run_path(str(SCRIPTS / "check-wheel"))

# Calls functions glibc 2.34 moved into libc, and counts its constructors' runs.
PROGRAM = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
static int constructed, preinited;
__attribute__((constructor)) static void construct(void) { constructed++; }
static void preinit(void) { preinited++; }
__attribute__((section(".preinit_array"), used)) static void (*preinit_entry)(void) = preinit;
static void *run(void *arg) { return arg; }
int main(void) {
	pthread_t t;
	pthread_key_t key;
	if (pthread_create(&t, NULL, run, NULL) != 0 || pthread_key_create(&key, NULL) != 0) return 2;
	void *libc = dlopen("libc.so.6", RTLD_NOW);
	if (libc == NULL || dlsym(libc, "getpid") == NULL) return 3;
	printf("constructed %d, preinit %d\n", constructed, preinited);
	return 0;
}
"""


def glibc():
    name, _, ver = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    return tuple(int(x) for x in ver.split(".")[:2]) if name == "glibc" else None


@unittest.skipUnless(shutil.which("cc"), "no cc to build the test program")
@unittest.skipUnless((glibc() or (0, 0)) >= (2, 34), f"glibc {glibc()}: older than 2.34, nothing to pin")
class OldGlibc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = Path(tempfile.mkdtemp())
        src = cls.dir / "prog.c"
        src.write_text(PROGRAM)
        subprocess.run([SCRIPTS / "glibc-stubs", "cc", cls.dir / "stubs"], check=True)
        # As the Makefile links gpurr: the stand-ins ahead of libc, and start.c.
        cls.portable = cls.dir / "portable"
        subprocess.run(["cc", "-O2", "-pthread", "-o", cls.portable, src, ROOT / "cmd" / "gpurr" / "start.c",
                        f"-L{cls.dir / 'stubs'}", "-Wl,--push-state,--no-as-needed", "-lpthread", "-ldl",
                        "-Wl,--pop-state"], check=True)
        cls.plain = cls.dir / "plain"
        subprocess.run(["cc", "-O2", "-pthread", "-o", cls.plain, src, "-ldl"], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def elf(self, path):
        return manylinux.ELF(path.read_bytes())

    def test_plain_build_needs_new_glibc(self):
        elf = self.elf(self.plain)
        self.assertGreaterEqual(elf.newest_glibc(), (2, 34))
        self.assertIn("pthread_create", elf.glibc[(2, 34)])

    def test_portable_build_needs_first_versions_from_old_libraries(self):
        elf = self.elf(self.portable)
        self.assertLessEqual(elf.newest_glibc(), (2, 17), elf.glibc)
        first = "GLIBC_2.17" if elf.arch == "aarch64" else "GLIBC_2.2.5"
        self.assertEqual(elf.versions["pthread_create"], ("libpthread.so.0", first))
        self.assertEqual(elf.versions["pthread_key_create"], ("libpthread.so.0", first))
        self.assertEqual(elf.versions["dlopen"], ("libdl.so.2", first))
        self.assertEqual(elf.versions["__libc_start_main"], ("libc.so.6", first))
        self.assertEqual(elf.needed[:2], ["libpthread.so.0", "libdl.so.2"])

    def test_portable_build_runs_constructors_once(self):
        out = subprocess.run([self.portable], capture_output=True, text=True, check=True).stdout
        self.assertEqual(out, "constructed 1, preinit 1\n")

    def wheel(self, binary, tag):
        path = self.dir / f"gpurr-0.0.0-py3-none-{tag}.whl"
        with zipfile.ZipFile(path, "w") as z:
            tags = "".join(f"Tag: py3-none-{t}\n" for t in tag.split("."))
            z.writestr("gpurr-0.0.0.dist-info/WHEEL", f"Wheel-Version: 1.0\n{tags}")
            z.writestr("gpurr/bin/prog", binary.read_bytes())
        return path

    def test_check_wheel(self):
        arch = self.elf(self.plain).arch
        problems, _ = check_wheel["check"](self.wheel(self.portable, f"manylinux_2_17_{arch}.manylinux2014_{arch}"))
        self.assertEqual(problems, [])
        problems, _ = check_wheel["check"](self.wheel(self.plain, f"manylinux_2_17_{arch}"))
        self.assertTrue(any("gpurr/bin/prog needs GLIBC_2.34 for" in p and "pthread_create" in p for p in problems),
                        problems)
        problems, _ = check_wheel["check"](self.wheel(self.portable, f"manylinux_2_34_{arch}"))
        self.assertTrue(any("tag py3-none-manylinux_2_34" in p for p in problems), problems)
        other = "aarch64" if arch == "x86_64" else "x86_64"
        problems, _ = check_wheel["check"](self.wheel(self.portable, f"manylinux_2_17_{other}"))
        self.assertTrue(any(f"is for {arch}, the tag says {other}" in p for p in problems), problems)


if __name__ == "__main__":
    unittest.main(verbosity=2)
