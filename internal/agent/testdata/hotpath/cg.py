# cg.py - deterministic counts for run.sh --callgrind: run under
# valgrind --tool=callgrind --toggle-collect=on_cupti_callback, so only the
# agent's callbacks (and what they call) are counted.
# Usage: python3 cg.py LIB.so MODE COLD [STEPS]   (MODE: 0 off, 2 python; COLD 0/1; STEPS 1:
# GPU timing by steps, the default, as hp_set_timing_steps makes it)
import ctypes
import sys

LIB = ctypes.CDLL(sys.argv[1])
LIB.hp_bench.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
LIB.hp_bench_cold.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_long, ctypes.POINTER(ctypes.c_double)]
LIB.hp_setup(int(sys.argv[2]))
if len(sys.argv) > 4 and sys.argv[4] == "1" and hasattr(LIB, "hp_set_timing_steps"):
    LIB.hp_set_timing_steps(1)
out = (ctypes.c_double * 10)()


def launches():
    if sys.argv[3] == "1":
        LIB.hp_bench_cold(200, 10, 2 << 20, out)  # 2000 launches
    else:
        LIB.hp_bench(2000, 10, out)  # 20000 launches


launches()
