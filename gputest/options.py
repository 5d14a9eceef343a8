"""options.*, steps.*: gpurr record's flags (kernel filter, callstack modes, GPU timing, bad
flags), mostly on eager.py with one bare run shared by all, and the numbering of steps."""
import re

from harness import CBID_LAUNCH_KERNEL_EX, Skip, WL, at_line, check, info_of, mark_line, tail, test


# --- gpurr record's options, on eager.py (one bare run shared by all) ----------------------
def eager_with(h, name, flags, **process):
    """Record eager.py with gpurr record's flags; the recording names its own options:
    each keyword is a column of the processes table and the value it must hold."""
    want, d = h.py_workload(name, script="eager.py", flags=flags)
    for col, value in process.items():
        got = h.one(d, f"SELECT {col} FROM processes").get(col)
        check(got == value, f"processes.{col} = {got!r}, want {value!r}")
    return want, d


def want_none(h, d, what, sql):
    """sql counts, as n, what must not be in the recording."""
    n = h.n(d, sql)
    check(n == 0, f"{n} {what}, want none")


@test("options.kernels_filter")
def t_opt_kernels(h):
    pattern = "nvjet|gemm"
    want, d = eager_with(h, "eager_kernels", ["--kernels", pattern], kernel_filter=pattern)
    rows = h.query(d, "SELECT name, api, python_line FROM launches")
    check(rows, "no launch recorded; the filter should keep cuBLAS's")
    other = [r["name"] for r in rows if not re.search(pattern, r.get("name") or "")]
    check(not other, f"{len(other)} of {len(rows)} launches do not match {pattern!r}: {other[:3]}")
    script = WL / "eager.py"
    mm_lines = [mark_line(script, tag) for tag in ("eager-mm", "eager-mm-bf16")]
    cublas = [r for r in rows if r.get("api") == CBID_LAUNCH_KERNEL_EX
              and any(re.search(rf"eager\.py:{l}\b", r.get("python_line") or "") for l in mm_lines)]
    check(cublas, f"no cuBLAS launch (api 652) at eager.py:{mm_lines}; kept: "
                  f"{[((r.get('name') or '')[:40], r.get('api'), r.get('python_line')) for r in rows[:4]]}")
    filtered = h.n(d, "SELECT sum(launches_filtered) AS n FROM stats")
    check(filtered >= want["adds"], f"stats.launches_filtered = {filtered}, want >= the {want['adds']} add_ launches")
    out = info_of(h, "eager_kernels", d)
    check(pattern in out and "filtered" in out, f"gpurr info does not mention the filter: {tail(out, 12)}")
    return f"{len(rows)} launches all match {pattern!r} ({len(cublas)} cuBLAS at the mm lines), {filtered} filtered"


@test("options.callstack_native")
def t_opt_native(h):
    want, d = eager_with(h, "eager_native", ["--callstack", "native"], callstack_mode="native")
    sources = h.query(d, "SELECT source, count(*) AS n FROM callstacks GROUP BY source")
    check(sources, "no callstack recorded")
    check([r["source"] for r in sources] == ["native"], f"callstack sources {sources}, want only native")
    want_none(h, d, "frames that are not native", "SELECT count(*) AS n FROM frames WHERE kind != 'native'")
    want_none(h, d, "launches with a python_line (no Python frame was taken)",
              "SELECT count(python_line) AS n FROM launches")
    ours = h.n(d, """SELECT count(DISTINCT callstack_id) AS n FROM frames WHERE kind = 'native'
                     AND (file LIKE '%libtorch%' OR file LIKE '%libc10%' OR file LIKE '%python%')""")
    check(ours >= 1, f"no callstack has a native frame in libtorch, libc10 or python; objects seen: "
                     f"{h.sample(d, 'file', 'frames')}")
    total = sum(r["n"] for r in sources)
    return f"{total} native callstacks, {ours} through libtorch/libc10/python"


@test("options.callstack_off")
def t_opt_off(h):
    want, d = eager_with(h, "eager_nostack", ["--callstack", "off"], callstack_mode="off")
    launches = h.n(d, "SELECT count(*) AS n FROM launches")
    check(launches >= want["adds"], f"{launches} launches, want >= the {want['adds']} add_ calls")
    want_none(h, d, f"of {launches} launches name a callstack",
              "SELECT count(*) AS n FROM launches WHERE callstack_id IS NOT NULL AND callstack_id != 0")
    want_none(h, d, "rows in callstacks", "SELECT count(*) AS n FROM callstacks")
    want_none(h, d, "rows in frames", "SELECT count(*) AS n FROM frames")
    want_none(h, d, "callstacks_failed (off is not a failure)", "SELECT sum(callstacks_failed) AS n FROM stats")
    return f"{launches} launches, no callstack taken or stored"


@test("options.gpu_timing_serial")
def t_opt_timing_serial(h):
    """--gpu-timing=serial: CUPTI's serial kernel mode still times every kernel, each joined to
    its launch, and the recording and info say the mode."""
    want, d = eager_with(h, "eager_serial", ["--gpu-timing=serial"], gpu_timing=1, gpu_timing_serial=1)
    runs = h.n(d, "SELECT count(*) AS n FROM gpu_activity WHERE launch_seq IS NOT NULL")
    launches = h.n(d, "SELECT count(*) AS n FROM launches WHERE NOT captured")
    check(runs >= launches > 0, f"{runs} kernel runs joined to launches for {launches} launches {h.drops(d)}")
    out = info_of(h, "eager_serial", d)
    check("GPU timing serial" in out, f"gpurr info does not say serial: {tail(out, 12)}")
    return f"{runs} kernel runs timed in serial mode for {launches} launches"


@test("options.gpu_timing_sample")
def t_opt_timing_sample(h):
    """--gpu-timing=sample: over a second of launches, kernels launched in the windows are timed
    and joined to their launch, those launched between windows say untimed and have no kernel
    run, and the recording and info say the window."""
    want, d = h.py_workload("sampled", flags=["--gpu-timing=sample", "--gpu-timing-sample", "10ms/50ms"])
    got = h.one(d, "SELECT gpu_timing_sample FROM processes")["gpu_timing_sample"]
    check(got == "10ms/50ms", f"processes.gpu_timing_sample = {got!r}")
    launches = h.n(d, "SELECT count(*) AS n FROM launches WHERE NOT captured")
    untimed = h.n(d, "SELECT count(*) AS n FROM launches WHERE untimed")
    check(launches >= want["adds"] and 0.5 * launches < untimed < 0.95 * launches,
          f"{untimed} of {launches} launches untimed, want about 80% (10 ms of every 50 ms timed)")
    timed_runs = h.n(d, "SELECT count(DISTINCT a.launch_seq) AS n FROM gpu_activity a JOIN launches l "
                        "ON l.process = a.process AND l.seq = a.launch_seq WHERE NOT l.untimed")
    untimed_runs = h.n(d, "SELECT count(DISTINCT a.launch_seq) AS n FROM gpu_activity a JOIN launches l "
                          "ON l.process = a.process AND l.seq = a.launch_seq WHERE l.untimed")
    timed = launches - untimed
    check(timed_runs >= 0.9 * timed, f"{timed_runs} kernel runs for {timed} timed launches {h.drops(d)}")
    check(untimed_runs <= 0.01 * untimed, f"{untimed_runs} kernel runs for launches marked untimed")
    out = info_of(h, "sampled", d)
    check("GPU timing sampled (10ms/50ms)" in out, f"gpurr info does not say sampled: {tail(out, 12)}")
    return f"{timed} of {launches} launches timed, {timed_runs} of them with their kernel run; {untimed_runs} runs of untimed ones"


@test("options.gpu_timing_default")
def t_opt_timing_default(h):
    """The default, GPU timing by steps (3/10): over 30 torch.optim steps and a last forward,
    every launch of steps 0-2, 10, 20 and 30 is timed and has its kernel run, every launch of the
    others says untimed and has none, and info says which share was timed and scales its GPU
    time to all launches."""
    _, d = h.py_workload("timing_default", script="train_steps.py", args=["30"])
    got = h.one(d, "SELECT gpu_timing_steps, gpu_timing_sample FROM processes")
    check(got == {"gpu_timing_steps": "3/10", "gpu_timing_sample": "20ms/200ms"},
          f"processes says {got}, want timing by steps 3/10 with windows of 20ms/200ms")
    rows = h.query(d, "SELECT step, count(*) AS n, sum(CASE WHEN untimed THEN 1 ELSE 0 END) AS u "
                      "FROM launches WHERE NOT captured GROUP BY step ORDER BY step")
    check([r["step"] for r in rows] == list(range(31)), f"launches by step {rows}, want steps 0 to 30")
    want_timed = {0, 1, 2, 10, 20, 30}
    wrong = [r for r in rows if r["u"] != (0 if r["step"] in want_timed else r["n"])]
    check(not wrong, f"steps timed other than 0-2, 10, 20, 30 (u: untimed of n launches): {wrong}")
    runs = lambda untimed: h.n(d, "SELECT count(DISTINCT a.launch_seq) AS n FROM gpu_activity a JOIN launches l "
                                  f"ON l.process = a.process AND l.seq = a.launch_seq WHERE {'' if untimed else 'NOT '}l.untimed")
    timed = sum(r["n"] for r in rows if r["step"] in want_timed)
    untimed = sum(r["n"] for r in rows) - timed
    timed_runs, untimed_runs = runs(False), runs(True)
    check(timed_runs >= 0.9 * timed, f"{timed_runs} kernel runs for {timed} timed launches {h.drops(d)}")
    check(untimed_runs == 0, f"{untimed_runs} kernel runs for launches marked untimed")
    out = info_of(h, "timing_default", d)
    check("GPU timing by steps (3/10" in out and "(steps 0-2, 10, 20, 30)" in out and "scaled to all: ~" in out,
          f"gpurr info does not say the timed steps and the scaled GPU time: {tail(out, 16)}")
    return f"{timed} of {timed + untimed} launches timed in steps 0-2, 10, 20, 30, {timed_runs} with their kernel run"


@test("steps.optimizer")
def t_steps_optimizer(h):
    """Three torch.optim.SGD steps and a forward pass: launches.step numbers the launches by
    the optimizer steps before them (0, 1, 2, then 3 for the last forward), and info counts 3."""
    _, d = h.py_workload("train_steps")
    rows = h.query(d, "SELECT step, count(*) AS n FROM launches GROUP BY step ORDER BY step")
    steps = [r["step"] for r in rows]
    check(steps == [0, 1, 2, 3], f"launches by step {rows}, want steps 0 to 3")
    script, line = WL / "train_steps.py", mark_line(WL / "train_steps.py", "after-steps")
    last = h.n(d, f"SELECT count(*) AS n FROM launches WHERE step = 3 AND NOT {at_line('user_line', script, line)}")
    check(last == 0, f"{last} launches of step 3 are not the final forward's")
    out = info_of(h, "train_steps", d)
    check("3 training steps" in out, f"gpurr info does not count 3 steps: {tail(out, 12)}")
    return "launches per step " + ", ".join(f"{r['step']}: {r['n']}" for r in rows)


@test("steps.range")
def t_steps_range(h):
    """gpurr record --step-range numbers steps by NVTX ranges: the nvtx_ranges workload's two
    workers each run ranges "step 0" to "step 2"; the recording keeps the expression, and the
    launches made after both workers joined follow all 6 matching ranges (step 6)."""
    regex = "^step [0-9]+$"
    want, d = h.workload("nvtx_step_range", [h.py, WL / "nvtx_ranges.py"], flags=["--step-range", regex])
    got = h.one(d, "SELECT step_range FROM processes")
    check(got.get("step_range") == regex, f"processes.step_range is {got.get('step_range')!r}, want {regex!r}")
    line = mark_line(WL / "nvtx_ranges.py", "outside-ranges")
    rows = h.query(d, f"SELECT DISTINCT step FROM launches WHERE {at_line('python_line', WL / 'nvtx_ranges.py', line)}")
    ends = 2 * want["steps"]
    check([r["step"] for r in rows] == [ends], f"launches after the workers are in steps {rows}, want {ends}")
    first = h.n(d, "SELECT min(step) AS n FROM launches WHERE range LIKE 'worker % / step 0 / %'")
    check(first == 0, f"the first step range's launches are in step {first}, want 0")
    return f"stored {regex!r}; launches after the workers are step {ends}"


@test("options.gpu_timing_off")
def t_opt_no_timing(h):
    want, d = eager_with(h, "eager_notiming", ["--gpu-timing=false"], gpu_timing=0)
    want_none(h, d, "gpu_activity rows", "SELECT count(*) AS n FROM gpu_activity")
    script, line = WL / "eager.py", mark_line(WL / "eager.py", "eager-add")
    adds = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(adds >= want["adds"] and adds % want["adds"] == 0,
          f"{adds} launches at eager.py:{line}, want a non-zero multiple of {want['adds']} {h.drops(d)}")
    ex = h.n(d, f"SELECT count(*) AS n FROM launches WHERE api = {CBID_LAUNCH_KERNEL_EX}")
    check(ex >= 1, "no cuLaunchKernelEx (652) launch: cuBLAS's matmuls are missing")
    out = info_of(h, "eager_notiming", d)
    check("GPU timing off" in out, f"gpurr info does not say GPU timing is off: {tail(out, 12)}")
    return f"no activity; {adds} launches at eager.py:{line}, {ex} via cuLaunchKernelEx"


@test("options.bad_flags")
def t_opt_bad_flags(h):
    if h.bare_only:
        raise Skip("--bare-only: needs gpurr")
    said = []
    for i, (flags, names) in enumerate([(["--callstack", "bogus"], "callstack"),
                                        (["--kernels", "("], "kernels"),
                                        (["--gpu-timing=maybe"], "gpu-timing")]):
        d, ran = h.new_recdir(f"bad_flags_{i}"), h.tmp / f"bad_flags_{i}.ran"
        ran.unlink(missing_ok=True)
        r = h.sh(h.record_argv(d, ["touch", ran], flags), 30, log=f"options.bad_flags_{i}")
        check(r.rc == 2, f"{' '.join(flags)}: exit {r.rc}, want 2 ({r.why()})")
        lines = r.err.strip().splitlines()
        check(len(lines) == 1 and lines[0].startswith("gpurr: ") and names in lines[0],
              f"{' '.join(flags)}: stderr is not one 'gpurr: ...' line naming --{names}: {r.err[:300]!r}")
        check(not ran.exists(), f"{' '.join(flags)}: the program ran")
        check(not d.exists(), f"{' '.join(flags)}: {d} was created")
        said.append(lines[0][:80])
    return "exit 2, program not run: " + " | ".join(said)
