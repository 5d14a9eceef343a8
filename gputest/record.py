"""exit_code, eager.*, wheel.record, threads_streams.*, fork_after_init, sigkill, sigterm, hang, profiler.beside:
gpurr record itself: launches and their Python lines, cuBLAS, the wheel, threads and streams,
fork, signals, hangs and the program's own profiler beside gpurr."""
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from harness import (CBID_LAUNCH_KERNEL_EX, CUBLAS_NAME, Fail, ROOT, Run, Skip, WL, at_line, check, frame_at,
                     last_json, mark_line, tail, test, truthy)


@test("exit_code")
def t_exit_code(h):
    script = WL / "exit_code.py"
    bare = h.sh([h.py, script, "7"], 120, log="exit_code.bare")
    check(bare.rc == 7, f"bare workload exited {bare.rc} ({bare.why()}), want 7")
    if h.bare_only:
        raise Skip("bare run ok (exit 7)")
    d = h.new_recdir("exit_code")
    rec = h.sh(h.record_argv(d, [h.py, script, "7"]), 120, log="exit_code.rec")
    h.save_info("exit_code", d)
    check(rec.rc == 7, f"gpurr record exited {rec.rc}, the program 7 ({rec.why()})")
    line = mark_line(script, "exit-add")
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(n >= 1, f"no launch recorded at exit_code.py:{line}")
    procs = h.query(d, "SELECT complete FROM processes")
    check(procs and all(truthy(p.get("complete")) for p in procs), f"exited normally, yet complete: {procs}")
    h.recordings.append(d)
    return f"exit 7 passed through; {n} launch(es) at the marked line"


@test("eager.python_line")
def t_eager_line(h):
    want, d = h.py_workload("eager")
    script, line = WL / "eager.py", mark_line(WL / "eager.py", "eager-add")
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE python_line LIKE '%eager.py:{line} run_adds'")
    if n == 0:
        seen = h.sample(d, "python_line", where="python_line LIKE '%eager.py%'")
        raise Fail(f"no launch with python_line 'eager.py:{line} run_adds'; seen: {seen}")
    check(n % want["adds"] == 0, f"{n} launches at eager.py:{line}, not a multiple of {want['adds']} calls")
    return f"{n} launches at eager.py:{line} run_adds ({want['adds']} calls)"


@test("wheel.record")
def t_wheel_record(h):
    """The wheel pip installs (make wheel) records a PyTorch program: installed into a venv over
    the Python that has torch, its own gpurr (and agent) record eager.py, and the Python reader
    reads the launches back."""
    wheels = sorted((ROOT / "dist").glob("gpurr-*.whl"))
    if not wheels:
        raise Skip("no wheel in dist/ (make wheel builds one; carry dist)")
    venv = h.tmp / "wheel-venv"
    shutil.rmtree(venv, ignore_errors=True)
    r = h.sh([h.py, "-m", "venv", venv], 120, log="wheel.venv")
    check(r.rc == 0, f"venv: {r.why()}")
    # h.py is itself a venv's, whose packages --system-site-packages would not reach: a .pth
    # file puts torch's site-packages behind the new venv's own, as if gpurr were installed
    # into the user's torch environment.
    r = h.sh([h.py, "-c", "import site; print('\\n'.join(site.getsitepackages()))"], 60, log="wheel.site")
    own = h.sh([venv / "bin" / "python", "-c", "import site; print(site.getsitepackages()[0])"], 60, log="wheel.ownsite")
    check(r.rc == 0 and own.rc == 0, f"site-packages: {r.why()} {own.why()}")
    (Path(own.out.strip()) / "torch-env.pth").write_text(r.out)
    r = h.sh([venv / "bin" / "pip", "install", "--quiet", "--no-index", "--no-deps", wheels[-1]], 120, log="wheel.pip")
    check(r.rc == 0, f"pip install {wheels[-1].name}: {r.why()}")
    d = h.new_recdir("wheel")
    r = h.sh([venv / "bin" / "gpurr", "record", "-o", d, "--", venv / "bin" / "python", WL / "eager.py"], 240, log="wheel.record")
    check(r.rc == 0, f"the wheel's gpurr record: {r.why()}")
    code = f"import gpurr; print(gpurr.open({str(d)!r}).rows('SELECT count(*) AS n FROM launches')[0]['n'])"
    r = h.sh([venv / "bin" / "python", "-c", code], 120, log="wheel.reader")
    check(r.rc == 0 and int(r.out.strip() or 0) > 0, f"the Python reader: {r.why()} {r.out[-200:]}")
    return f"{wheels[-1].name}: recorded eager.py, {r.out.strip()} launches read back from Python"


@test("eager.callstack")
def t_eager_callstack(h):
    want, d = h.py_workload("eager")
    script, line = WL / "eager.py", mark_line(WL / "eager.py", "eager-add")
    at = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(at > 0, f"no launch at eager.py:{line}")
    n = h.n(d, f"""SELECT count(DISTINCT l.seq) AS n FROM launches l JOIN frames f
                   ON f.process = l.process AND f.callstack_id = l.callstack_id
                   WHERE {frame_at('f', script, line)} AND f.function = 'run_adds'""")
    if n != at:
        seen = h.sample(d, "file || ':' || line || ' ' || function", "frames", "file LIKE '%eager.py'")
        raise Fail(f"{n} of the {at} launches at eager.py:{line} have that frame (run_adds) in their "
                   f"callstack; eager.py frames seen: {seen}")
    return f"all {n} launches carry frame eager.py:{line} run_adds"


@test("eager.cublas")
def t_eager_cublas(h):
    want, d = h.py_workload("eager")
    script = WL / "eager.py"
    found = []
    for tag in ("eager-mm", "eager-mm-bf16"):
        line = mark_line(script, tag)
        rows = h.query(d, f"SELECT name, api FROM launches WHERE {at_line('python_line', script, line)}")
        ok = [r for r in rows if CUBLAS_NAME.search(r.get("name") or "")
              and (r.get("api") == CBID_LAUNCH_KERNEL_EX or "652" in str(r.get("api"))
                   or "LaunchKernelEx" in str(r.get("api")))]
        check(ok, f"{tag}: no cuBLAS-named launch via cuLaunchKernelEx (652) at eager.py:{line}; got "
                  f"{[((r.get('name') or '')[:60], r.get('api')) for r in rows][:4]}")
        found.append(ok[0]["name"][:50])
    return f"cuBLAS kernels via api 652: {found}"


@test("threads_streams.launches")
def t_threads_launches(h):
    want, d = h.py_workload("threads_streams", flags=["--gpu-timing=all"])  # as .activity's (one recording)
    k, per = want["kernel"], want["per_thread"]
    total = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(total == want["launches_expected"],
          f"{total} launches of {k}, the program made {want['launches_expected']} {h.drops(d)}")
    corr = h.n(d, f"SELECT count(DISTINCT correlation_id) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(corr == total, f"{corr} distinct correlation ids for {total} launches")
    rows = h.query(d, f"""SELECT stream_id, count(*) AS n, count(DISTINCT tid) AS tids FROM launches
                          WHERE name LIKE '%{k}%' GROUP BY stream_id""")
    check(len(rows) == want["streams"], f"{len(rows)} distinct stream_id, want {want['streams']}: {rows}")
    check(all(r["n"] == per for r in rows), f"per-stream counts {[r['n'] for r in rows]}, want {per} each")
    check(all(r["tids"] == 1 for r in rows), f"a stream's launches came from >1 thread: {rows}")
    tids = h.n(d, f"SELECT count(DISTINCT tid) AS n FROM launches WHERE name LIKE '%{k}%'")
    check(tids >= want["threads"], f"{tids} distinct tid, want >= {want['threads']}")
    return f"{total} launches = {want['threads']} threads x {per}, {len(rows)} streams, {tids} tids"


@test("threads_streams.activity")
def t_threads_activity(h):
    # Every kernel's run is counted: timed whole, not sampled as by default (a program without
    # training steps is timed in windows from 5 s after its first launch).
    want, d = h.py_workload("threads_streams", flags=["--gpu-timing=all"])
    k = want["kernel"]
    n = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE name LIKE '%{k}%'")
    check(n == want["launches_expected"],
          f"{n} gpu_activity rows for {k}, want {want['launches_expected']} {h.drops(d)}")
    streams = h.n(d, f"SELECT count(DISTINCT stream_id) AS n FROM gpu_activity WHERE name LIKE '%{k}%'")
    check(streams == want["streams"], f"activity on {streams} streams, want {want['streams']}")
    bad = h.n(d, f"SELECT count(*) AS n FROM gpu_activity WHERE name LIKE '%{k}%' "
                 f"AND NOT (end_ns > start_ns AND duration_ns = end_ns - start_ns)")
    check(bad == 0, f"{bad} activity rows with end <= start or duration != end - start")
    joined = h.n(d, f"""SELECT count(*) AS n FROM gpu_activity a JOIN launches l
                        ON l.process = a.process AND l.correlation_id = a.correlation_id
                        WHERE a.name LIKE '%{k}%'""")
    check(joined == n, f"only {joined} of {n} activity rows join a launch by correlation_id")
    return f"{n} kernel activities on {streams} streams, each joined to its launch"


@test("fork_after_init")
def t_fork(h):
    want, d = h.py_workload("fork_after_init", timeout=180)
    script, line = WL / "fork_after_init.py", mark_line(WL / "fork_after_init.py", "after-fork")
    procs = h.n(d, "SELECT count(*) AS n FROM processes")
    check(procs == 1, f"{procs} processes recorded; the forked children and workers never touched CUDA")
    calls = want["after_fork_calls"]
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', script, line)}")
    check(n >= calls and n % calls == 0,
          f"{n} launches at fork_after_init.py:{line} after the fork, want a non-zero multiple of {calls}")
    return f"children exited 0, parent's {n} post-fork launches recorded, 1 process"


def record_and_signal(h, name, sig):
    """Record sigkill.py, wait for it to run, send its own pid sig two seconds later; returns
    (gpurr record's exit code, the program's stdout lines, the recording, the kernel's name)."""
    script = WL / "sigkill.py"
    bare = h.sh([h.py, script, "--max", "2001"], 120, log=f"{name}.bare")
    check(bare.rc == 0 and last_json(bare.out), f"bare run with --max failed: {bare.why()}")
    if h.bare_only:
        raise Skip("bare run ok")
    kernel = last_json(bare.out)["kernel"]
    d = h.new_recdir(name)
    argv = [str(a) for a in h.record_argv(d, [h.py, script])]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=h.env,
                         cwd=ROOT, start_new_session=True)
    lines, errs = queue.Queue(), []

    def read_out():
        for l in p.stdout:
            lines.put(l)
        lines.put(None)

    threading.Thread(target=read_out, daemon=True).start()
    threading.Thread(target=lambda: errs.extend(p.stderr), daemon=True).start()
    out, pid, rc = [], None, None
    try:
        deadline = time.monotonic() + 120
        while pid is None and time.monotonic() < deadline:
            try:
                l = lines.get(timeout=1)
            except queue.Empty:
                continue
            if l is None:
                break
            out.append(l)
            if l.startswith("READY "):
                pid = int(l.split()[1])
        check(pid, f"no READY line in 120 s (gpurr exit {p.poll()}): {tail(''.join(errs))}")
        time.sleep(2.0)
        os.kill(pid, sig)  # the workload's own pid, which it printed
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise Fail(f"gpurr record did not exit within 60 s after its program got signal {sig}")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)  # the session we started for gpurr record
            p.wait()
        try:
            while (l := lines.get(timeout=10)) is not None:
                out.append(l)
        except queue.Empty:
            out.append("# harness: stdout still open 10 s after gpurr exited\n")
        h.save_log(f"{name}.rec", Run(argv, rc, "".join(out), "".join(errs), time.monotonic() - t0, False))
    return rc, out, d, kernel


@test("sigkill")
def t_sigkill(h):
    rc, out, d, kernel = record_and_signal(h, "sigkill", signal.SIGKILL)
    check(rc in (128 + signal.SIGKILL, -signal.SIGKILL), f"gpurr record exited {rc}, want 137 (killed by signal 9)")
    upto = max((int(l.split()[1]) for l in out if l.startswith("UPTO ")), default=1)
    info = h.save_info("sigkill", d)
    check(info.rc in (0, 1), f"gpurr info on the killed recording: {info.why()}")
    check(re.search(r"incomplete|not complete|complete\W+(no|false)", info.out + info.err, re.I),
          f"gpurr info does not say the recording is incomplete: {tail(info.out, 6)}")
    procs = h.query(d, "SELECT complete FROM processes")
    check(procs and not any(truthy(p.get("complete")) for p in procs), f"processes.complete: {procs}")
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{kernel}'")
    check(0 < n <= upto, f"{n} launches recorded; the program had issued at most {upto}")
    h.recordings.append(d)
    return f"exit {rc}, info says incomplete, {n} of <= {upto} launches readable"


@test("sigterm")
def t_sigterm(h):
    """A scheduler stops the program with SIGTERM: the agent writes what it holds before the
    program dies, so every launch the program had finished (its last DONE line) is in the
    recording, and the log says the signal came."""
    rc, out, d, kernel = record_and_signal(h, "sigterm", signal.SIGTERM)
    check(rc in (128 + signal.SIGTERM, -signal.SIGTERM), f"gpurr record exited {rc}, want 143 (signal 15)")
    done = max((int(l.split()[1]) for l in out if l.startswith("DONE ")), default=0)
    upto = max((int(l.split()[1]) for l in out if l.startswith("UPTO ")), default=1)
    n = h.n(d, f"SELECT count(*) AS n FROM launches WHERE name = '{kernel}'")
    check(done <= n <= upto, f"{n} launches recorded; the program had finished {done} and issued at most {upto}")
    logged = h.n(d, "SELECT count(*) AS n FROM log WHERE message LIKE '%received SIGTERM%'")
    check(logged >= 1, "the recording's log does not say the program received SIGTERM")
    return f"exit {rc}, {n} launches recorded of {done} finished (<= {upto} issued), SIGTERM logged"


@test("hang")
def t_hang(h):
    """gpurr record --hang-timeout 5s --hang-kill on a kernel spinning on a flag nobody sets: the
    watchdog names it and the Python line that launched it on stderr, in the recording's log and
    in info, writes what it holds, and ends the program; the launches before it are recorded."""
    script = WL / "hang.py"
    line = mark_line(script, "spin")
    bare = h.sh([h.py, script, "--bare"], 120, log="hang.bare")
    if bare.rc != 0:
        raise Skip(f"the bare run cannot run here (cupy?): {bare.why()}")
    d = h.new_recdir("hang")
    r = h.sh(h.record_argv(d, [h.py, script], ["--hang-timeout", "5s", "--hang-kill"]), 120, log="hang.rec")
    check(r.rc in (128 + signal.SIGKILL, -signal.SIGKILL), f"gpurr record exited {r.rc}, want 137 (--hang-kill): {r.why()}")
    report = next((l for l in r.err.splitlines() if "has not finished on the GPU after 5s" in l), "")
    check("gpurr_hang_spin" in report, f"no hang report on stderr: {r.err[-600:]}")
    check(re.search(rf"; launched at \S*hang\.py:{line} main( via |;|$)", report),
          f"the hang report does not name hang.py:{line} main: {report}")
    logged = h.n(d, "SELECT count(*) AS n FROM log WHERE level = 'error' AND message LIKE "
                    f"'hang: launch %gpurr_hang_spin%launched at %hang.py:{line} main%'")
    check(logged == 1, "the recording's log has no hang report naming the line")
    info = h.save_info("hang", d)
    check("!! HANG at" in info.out and f"hang.py:{line} main" in info.out, f"info does not show the hang's line: {info.out[:1500]}")
    ticks = h.n(d, "SELECT count(*) AS n FROM launches WHERE name = 'gpurr_hang_tick'")
    check(ticks == 10, f"{ticks} of the 10 launches before the hang recorded")
    return report[:300]


@test("profiler.beside")
def t_profiler_beside(h):
    """torch.profiler inside a recorded program (profiler_inside.py: a schedule with 3 active
    steps of 20 adds and a matmul each): the program's own profiler sees the kernels it sees
    without gpurr (its result line, compared with the bare run's, and every add of its active
    steps), gpurr says on stderr that it shares its CUPTI subscription and info names it, and
    the recording still holds every launch of all 9 steps with each kernel's run timed."""
    want, d = h.py_workload("profiler_inside", flags=["--gpu-timing=all"])
    n = want["adds_per_step"] * want["profiled_steps"]
    check(want["cuda_events"] and want["add_kernels"] == n,
          f"the program's profiler saw {want['add_kernels']} add kernels, want {n}: {want}")
    err = (h.logs / "profiler_inside.rec.err").read_text()
    check("shares gpurr's CUPTI subscription" in err, f"record's stderr does not say the subscription is shared: {tail(err, 3)}")
    check("MULTIPLE_SUBSCRIBERS" not in err, f"the program's profiler was refused: {tail(err, 3)}")
    info = h.sh([h.gpurr, "info", d], 120, log="profiler_inside.info2")
    check("CUPTI client" in info.out, f"gpurr info names no CUPTI client: {tail(info.out, 5)}")
    line = mark_line(WL / "profiler_inside.py", "prof-add")
    adds = h.n(d, f"SELECT count(*) AS n FROM launches WHERE {at_line('python_line', WL / 'profiler_inside.py', line)}")
    runs = h.n(d, "SELECT count(*) AS n FROM gpu_activity a JOIN launches l ON l.process = a.process "
                  f"AND l.seq = a.launch_seq WHERE {at_line('l.python_line', WL / 'profiler_inside.py', line)}")
    total = want["adds_per_step"] * 9
    check(adds == total and runs == total, f"gpurr recorded {adds} adds and timed {runs}, want {total} of each")
    passed = h.n(d, "SELECT cupti_client_records AS n FROM stats")
    check(passed >= n, f"{passed} activity records passed to the program's profiler, want >= {n}")
    return f"the program's profiler saw {want['add_kernels']} adds; gpurr recorded and timed {adds}; {passed} records passed on"
