# bench.py - drive the hot-path harness (libhotpath.so) from Python, the way
# PyTorch does: ctypes.CDLL releases the GIL around the call, and the call is
# made 4 Python frames deep (<module>, main, median_ns, launches), so the
# agent's Python stack walk is measured.
#
# Batches are timed with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID), so
# time the thread spends descheduled (other load, more threads than CPUs)
# does not count; each mode's number is the lowest of ROUNDS medians, the
# rounds interleaved across modes, to keep a noisy shared machine out of it.
# Usage: python3 bench.py LIB.so [--scenario PATH]
import ctypes
import statistics
import sys
import threading

LIB = ctypes.CDLL(sys.argv[1])
LIB.hp_setup.argtypes = [ctypes.c_int]
LIB.hp_set_mode.argtypes = [ctypes.c_int]
LIB.hp_cpu_clock.argtypes = [ctypes.c_int]
LIB.hp_bench.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
LIB.hp_bench_cold.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_long, ctypes.POINTER(ctypes.c_double)]
LIB.hp_scenario.argtypes = [ctypes.c_char_p]
LIB.hp_stream_id_calls.restype = ctypes.c_uint64
LIB.hp_stacks_new.restype = ctypes.c_uint64

N, BATCHES, ROUNDS, THREADS = 1000, 200, 5, 8
LINES, DEPTH = 3000, 24  # a generated function as long as Inductor's call(), launching from each line
EVICT = 2 << 20  # bytes the "cold" runs write between two launches
MODES = {"off": 0, "auto": 1, "python": 2}


def launches(n, batches):
    out = (ctypes.c_double * batches)()
    LIB.hp_bench(n, batches, out)
    return list(out)


def launches_cold(n, batches):
    out = (ctypes.c_double * batches)()
    LIB.hp_bench_cold(n, batches, EVICT, out)
    return list(out)


def median_cold_ns(n=N // 10, batches=BATCHES // 4):
    launches_cold(n, 2)
    return statistics.median(launches_cold(n, batches))


def median_ns(n=N, batches=BATCHES):
    launches(n, 10)  # warm up: first-launch work, caches, scratch allocation
    return statistics.median(launches(n, batches))


_generation = [0]


def new_stacks_ns():
    """Launches from each line of a LINES-line generated function, DEPTH frames deep, as a
    torch.compile'd model's wrapper makes them: a pass with callstacks off (what timing one
    launch at a time costs here: the CPU clock's reads), then with Python stacks: the first
    meets a stack the agent has not seen at every launch (every frame decoded, the stack's
    record pushed), the second the same stacks again. Returns the median ns per launch of
    the two Python passes, each less the pass without stacks."""
    _generation[0] += 1  # a new code object each round: its stacks are new to the agent
    src = "def body(launch, out, got):\n" + "".join(
        "    launch(1, 1, out); got.append(out[0])\n" for _ in range(LINES))
    env = {}
    exec(compile(src, "<generated %d>" % _generation[0], "exec"), env)
    body = env["body"]

    def deep(k, got):
        return deep(k - 1, got) if k > 1 else body(LIB.hp_bench, (ctypes.c_double * 1)(), got)

    medians = []
    for mode, want_new in (("off", 0), ("python", LINES), ("python", 0)):
        LIB.hp_set_mode(MODES[mode])
        got, before = [], LIB.hp_stacks_new()
        deep(DEPTH - 4, got)  # the caller's own frames make up the rest
        medians.append(statistics.median(got))
        counted = LIB.hp_stacks_new() - before
        assert counted == want_new, "the agent counted %d new stacks, want %d" % (counted, want_new)
    return medians[1] - medians[0], medians[2] - medians[0]


def threaded(nthreads):
    results = [None] * nthreads
    start = threading.Barrier(nthreads)

    def worker(i):
        start.wait()
        results[i] = median_ns(N, BATCHES // 4)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return statistics.median(results)


def main():
    py = LIB.hp_setup(2)
    if len(sys.argv) > 3 and sys.argv[2] == "--scenario":
        LIB.hp_scenario(sys.argv[3].encode())
        return
    assert py == 1, "pystack found no supported CPython"
    LIB.hp_cpu_clock(1)
    names = ["off", "python", "auto", "python, %d threads" % THREADS, "off, cold", "python, cold"]
    best = {name: float("inf") for name in names}
    unseen = {"python, new stacks": float("inf"), "python, the same again": float("inf")}
    for _ in range(ROUNDS):
        first, again = new_stacks_ns()
        unseen["python, new stacks"] = min(unseen["python, new stacks"], first)
        unseen["python, the same again"] = min(unseen["python, the same again"], again)
        for name in names:
            LIB.hp_set_mode(MODES[name.split(",")[0]])
            if "threads" in name:
                ns = threaded(THREADS)
            elif "cold" in name:
                ns = median_cold_ns()
            else:
                ns = median_ns()
            best[name] = min(best[name], ns)
    for name in names:
        label = name if "thread" in name else name + ", 1 thread"
        print("%-28s %8.1f ns/launch" % (label, best[name]))
    for name, ns in unseen.items():
        print("%-28s %8.1f ns/launch over callstacks off (%d lines, %d frames deep)" % (name, ns, LINES, DEPTH))
    print("(stream-id lookups made: %d)" % LIB.hp_stream_id_calls())


if __name__ == "__main__":
    main()
